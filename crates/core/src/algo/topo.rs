//! oneCCL's `topo` all-reduce for device buffers on more than one node: a scale-up phase among
//! the members of each node, a scale-out phase among one member per node, and the scale-up
//! phase undone (oneCCL developer guide, "Collective Algorithms Selection": for GPU buffers the
//! default algorithm is `topo`, "a hierarchical algorithm composed of an optimized scale-up
//! phase ... and a scaleout phase"; `CCL_ALLREDUCE_SCALEOUT` picks the second).
//!
//! As scen runs it: a ring reduce-scatter among the node's members leaves each member one
//! chunk reduced over its node; the members with the same place on every node all-reduce that
//! chunk (recursive halving then doubling, "rabenseifner", when the node count is a power of
//! two, else a ring); a ring all-gather among the node's members spreads the result. A member
//! sends `2 (ppn - 1) + 2 log2(nodes)` messages instead of the flat ring's `2 (n - 1)`.
//! oneCCL's scale-up phase moves data through GPU IPC and copy engines; scen models it as the
//! ring's messages on the intra-node link class, so one node's group runs exactly the ring.

use super::ring::{all_gather_chunks, reduce_scatter_chunks};
use super::{chunks, recv, send, Link, LinkError, K_AG, K_RS, R};
use crate::dtype::DType;
use crate::payload::Payload;
use crate::reduce::ReduceOp;
use crate::tensor::Tensor;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

/// Where a group's members run: the group ranks on each node, nodes ordered by their lowest
/// member. Only for groups on more than one node with the same number of members on each
/// (the shape of every data-parallel or world group of a job with a fixed `nproc_per_node`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLayout {
    nodes: Vec<Vec<usize>>,
}

/// Layouts a thread made last, with the member nodes each was made from: every member of a
/// group asks for the same layout at each all-reduce (O(W) to make; W^2 a call in a W-rank
/// world group, issue 31), so the thread's ranks share one.
const MADE_KEPT: usize = 8;

type Made = Vec<(Vec<usize>, Option<Arc<NodeLayout>>)>;

thread_local! {
    static MADE: RefCell<Made> = const { RefCell::new(Vec::new()) };
}

impl NodeLayout {
    /// From each member's node id, by group rank; `None` when the group is on one node or its
    /// nodes host different numbers of its members (scen then runs the flat ring).
    pub fn of(node_of_member: &[usize]) -> Option<NodeLayout> {
        let mut index: BTreeMap<usize, usize> = BTreeMap::new();
        let mut nodes: Vec<Vec<usize>> = Vec::new();
        // Members come node by node: most repeat the previous member's node.
        let mut last: Option<(usize, usize)> = None;
        for (g, node) in node_of_member.iter().enumerate() {
            let i = match last {
                Some((n, i)) if n == *node => i,
                _ => *index.entry(*node).or_insert_with(|| {
                    nodes.push(Vec::new());
                    nodes.len() - 1
                }),
            };
            last = Some((*node, i));
            nodes[i].push(g);
        }
        let ppn = nodes.first()?.len();
        (nodes.len() > 1 && nodes.iter().all(|m| m.len() == ppn)).then_some(NodeLayout { nodes })
    }

    /// [`NodeLayout::of`], the same allocation as the thread's last call with equal nodes.
    pub fn shared(node_of_member: &[usize]) -> Option<Arc<NodeLayout>> {
        MADE.with_borrow_mut(|made| {
            if let Some((_, hit)) = made.iter().find(|(n, _)| n[..] == *node_of_member) {
                return hit.clone();
            }
            let layout = NodeLayout::of(node_of_member).map(Arc::new);
            if made.len() >= MADE_KEPT {
                made.remove(0);
            }
            made.push((node_of_member.to_vec(), layout.clone()));
            layout
        })
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Group rank `g`'s node (index into `nodes`) and place among that node's members.
    fn place(&self, g: usize) -> (usize, usize) {
        self.nodes
            .iter()
            .enumerate()
            .find_map(|(i, m)| m.iter().position(|x| *x == g).map(|j| (i, j)))
            .expect("every member is on a node")
    }
}

/// The scale-out phase's algorithm (`CCL_ALLREDUCE_SCALEOUT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleOut {
    /// Recursive halving then doubling; on a node count that is not a power of two scen runs
    /// the ring instead.
    Rabenseifner,
    Ring,
}

impl ScaleOut {
    /// scen's default: rabenseifner where it applies (a power-of-two node count), else the ring.
    pub fn default_for(nodes: usize) -> ScaleOut {
        if nodes.is_power_of_two() {
            ScaleOut::Rabenseifner
        } else {
            ScaleOut::Ring
        }
    }
}

/// Hierarchical all-reduce in place (see the module comment).
pub async fn all_reduce_topo<L: Link, D: Payload>(
    l: &L,
    t: &mut Tensor<D>,
    op: ReduceOp,
    layout: &NodeLayout,
    scale_out: ScaleOut,
) -> R<()> {
    let (node, j) = layout.place(l.rank());
    let local = &layout.nodes[node];
    let peers: Vec<usize> = layout.nodes.iter().map(|m| m[j]).collect();
    let ppn = local.len();
    let cs = chunks(t.numel(), ppn, t.dtype.size_bytes());
    let intra = Members::new(l, local, j);
    reduce_scatter_chunks(&intra, &mut t.data, &cs, t.dtype, op).await?;
    let mine = cs[(j + 1) % ppn].clone();
    let across = Members::new(l, &peers, node);
    if scale_out == ScaleOut::Rabenseifner && peers.len().is_power_of_two() {
        halving_doubling(&across, &mut t.data, mine, t.dtype, op).await?;
    } else {
        let cs = sub_chunks(mine, peers.len(), t.dtype);
        reduce_scatter_chunks(&across, &mut t.data, &cs, t.dtype, op).await?;
        all_gather_chunks(&across, &mut t.data, &cs).await?;
    }
    all_gather_chunks(&intra, &mut t.data, &cs).await?;
    if op == ReduceOp::Avg {
        t.data.finish_avg(t.dtype, l.size());
    }
    Ok(())
}

/// Byte range `r` split into `parts` chunks of whole elements.
fn sub_chunks(r: Range<usize>, parts: usize, dtype: DType) -> Vec<Range<usize>> {
    let w = dtype.size_bytes();
    chunks(r.len() / w, parts, w)
        .into_iter()
        .map(|c| c.start + r.start..c.end + r.start)
        .collect()
}

/// All-reduce of bytes `r` of `data` among a power-of-two number of members: a reduce-scatter
/// by recursive halving (each round a member keeps the half of its blocks holding its own,
/// sends the other half to the member `mask` away and reduces what it receives), then an
/// all-gather by recursive doubling. `2 log2(p)` messages per member.
async fn halving_doubling<L: Link, D: Payload>(
    l: &L,
    data: &mut D,
    r: Range<usize>,
    dtype: DType,
    op: ReduceOp,
) -> R<()> {
    let (p, me) = (l.size(), l.rank());
    let cs = sub_chunks(r, p, dtype);
    let span = |(lo, hi): (usize, usize)| cs[lo].start..cs[hi - 1].end;
    let (mut lo, mut hi) = (0, p);
    let mut mask = p / 2;
    while mask > 0 {
        let mid = lo + (hi - lo) / 2;
        let (keep, give) = if me & mask == 0 {
            ((lo, mid), (mid, hi))
        } else {
            ((mid, hi), (lo, mid))
        };
        send(l, me ^ mask, K_RS, data, span(give)).await?;
        let got: D = recv(l, me ^ mask, K_RS, span(keep).len()).await?;
        data.reduce_in(span(keep), &got, dtype, op);
        (lo, hi) = keep;
        mask >>= 1;
    }
    let mut mask = 1;
    while mask < p {
        let size = hi - lo;
        let theirs = if me & mask == 0 {
            (hi, hi + size)
        } else {
            (lo - size, lo)
        };
        send(l, me ^ mask, K_AG, data, span((lo, hi))).await?;
        let got: D = recv(l, me ^ mask, K_AG, span(theirs).len()).await?;
        data.copy_in(span(theirs), &got);
        (lo, hi) = (lo.min(theirs.0), hi.max(theirs.1));
        mask <<= 1;
    }
    Ok(())
}

/// Some of a group's members seen as a group of their own: a node's members, or one member
/// per node. Messages go through the whole group's link, so waits and errors name real ranks.
struct Members<'a, L> {
    l: &'a L,
    members: &'a [usize],
    me: usize,
}

impl<'a, L: Link> Members<'a, L> {
    fn new(l: &'a L, members: &'a [usize], me: usize) -> Self {
        Members { l, members, me }
    }
}

impl<L: Link> Link for Members<'_, L> {
    fn rank(&self) -> usize {
        self.me
    }
    fn size(&self) -> usize {
        self.members.len()
    }
    async fn send(&self, to: usize, data: Vec<u8>, bytes: usize) -> Result<(), LinkError> {
        self.l.send(self.members[to], data, bytes).await
    }
    async fn recv(&self, from: usize) -> Result<Vec<u8>, LinkError> {
        self.l.recv(self.members[from]).await
    }
    fn group_rank(&self, r: usize) -> usize {
        self.l.group_rank(self.members[r])
    }
    fn takes_short_broadcast(&self) -> bool {
        self.l.takes_short_broadcast()
    }
}

#[cfg(test)]
mod tests {
    use super::super::ring::all_reduce;
    use super::super::testlink::run_world;
    use super::*;
    use crate::dtype::DType;

    fn input(me: usize, numel: usize) -> Tensor {
        Tensor::from_fn(DType::F32, vec![numel], move |i| {
            ((me * 13 + i * 7) % 23) as f64
        })
    }

    /// Node of each member: `nodes` nodes of `ppn` members, members dealt round-robin when
    /// `interleaved` (group ranks need not be contiguous per node).
    fn node_of(nodes: usize, ppn: usize, interleaved: bool) -> Vec<usize> {
        (0..nodes * ppn)
            .map(|g| if interleaved { g % nodes } else { g / ppn })
            .collect()
    }

    #[test]
    fn layout_needs_several_nodes_with_equal_members() {
        assert!(NodeLayout::of(&[0, 0, 0]).is_none());
        assert!(NodeLayout::of(&[0, 0, 1]).is_none());
        assert!(NodeLayout::of(&[]).is_none());
        let l = NodeLayout::of(&[3, 1, 3, 1]).expect("two nodes of two");
        assert_eq!(l.nodes, vec![vec![0, 2], vec![1, 3]]);
        assert_eq!(l.place(3), (1, 1));
    }

    #[test]
    fn topo_equals_the_ring_on_every_layout() {
        for (nodes, ppn) in [(2, 1), (2, 4), (3, 2), (4, 3), (8, 2), (5, 1)] {
            for interleaved in [false, true] {
                for scale_out in [ScaleOut::Rabenseifner, ScaleOut::Ring] {
                    for (op, numel) in
                        [(ReduceOp::Sum, 37), (ReduceOp::Max, 5), (ReduceOp::Avg, 64)]
                    {
                        let n = nodes * ppn;
                        let layout =
                            NodeLayout::of(&node_of(nodes, ppn, interleaved)).expect("layout");
                        let want = run_world(n, move |l| async move {
                            let mut t = input(l.rank(), numel);
                            all_reduce(&l, &mut t, op).await.map(|_| t.to_f64_vec())
                        });
                        let got = run_world(n, move |l| {
                            let layout = layout.clone();
                            async move {
                                let mut t = input(l.rank(), numel);
                                all_reduce_topo(&l, &mut t, op, &layout, scale_out)
                                    .await
                                    .map(|_| t.to_f64_vec())
                            }
                        });
                        for (me, (g, w)) in got.into_iter().zip(want).enumerate() {
                            let (g, w) = (g.expect("topo"), w.expect("ring"));
                            for (a, b) in g.iter().zip(&w) {
                                assert!(
                                    (a - b).abs() <= 1e-4 * b.abs().max(1.0),
                                    "{nodes}x{ppn} interleaved={interleaved} {scale_out:?} {op:?} rank {me}: {g:?} vs {w:?}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_member_sends_log_messages_across_nodes() {
        // 8 nodes x 4: 2 * 3 intra + 2 * 3 scale-out messages per member, not 2 * 31.
        let layout = NodeLayout::of(&node_of(8, 4, false)).expect("layout");
        let sent = run_world(32, move |l| {
            let layout = layout.clone();
            async move {
                let counted = Counting {
                    l: &l,
                    sent: Default::default(),
                };
                let mut t = input(l.rank(), 96);
                all_reduce_topo(
                    &counted,
                    &mut t,
                    ReduceOp::Sum,
                    &layout,
                    ScaleOut::Rabenseifner,
                )
                .await
                .expect("topo");
                counted.sent.get()
            }
        });
        assert!(sent.iter().all(|s| *s == 12), "{sent:?}");
    }

    #[test]
    fn a_mismatch_names_the_peer_by_its_group_rank() {
        // Group rank 5 (node 1, place 1) runs the flat ring: its node neighbour 4 receives a
        // ring chunk of another length and names rank 5, not its place on the node.
        let layout = NodeLayout::of(&node_of(2, 4, false)).expect("layout");
        let got = run_world(8, move |l| {
            let layout = layout.clone();
            async move {
                let mut t = input(l.rank(), 64);
                if l.rank() == 5 {
                    all_reduce(&l, &mut t, ReduceOp::Sum).await
                } else {
                    all_reduce_topo(&l, &mut t, ReduceOp::Sum, &layout, ScaleOut::Rabenseifner)
                        .await
                }
            }
        });
        let e = got[6]
            .clone()
            .expect_err("rank 6 receives rank 5's ring chunk");
        assert!(e.to_string().contains("group rank 5 sent"), "{e}");
    }

    #[test]
    fn symbolic_results_are_one_segment_and_one_digest_whatever_the_algorithm() {
        // Every chunk of a reduction is a window of one reduced base, so the ring's chunks and
        // topo's chunks of chunks merge back into one segment with the same digest.
        use crate::payload::Symbolic;
        let layout = NodeLayout::of(&node_of(4, 2, false)).expect("layout");
        let run = |topo: bool| {
            let layout = layout.clone();
            run_world(8, move |l| {
                let layout = layout.clone();
                async move {
                    let mut t = Tensor {
                        dtype: DType::F32,
                        shape: vec![40],
                        data: Symbolic::leaf(160, 100 + l.rank() as u64),
                    };
                    let r = if topo {
                        all_reduce_topo(&l, &mut t, ReduceOp::Sum, &layout, ScaleOut::Rabenseifner)
                            .await
                    } else {
                        all_reduce(&l, &mut t, ReduceOp::Sum).await
                    };
                    r.map(|_| t.data)
                }
            })
        };
        let (ring, topo) = (run(false), run(true));
        let first = ring[0].clone().expect("ring");
        for (a, b) in ring.into_iter().zip(topo) {
            let (a, b) = (a.expect("ring"), b.expect("topo"));
            assert_eq!(a.segments(), 1);
            assert_eq!(a, b);
            assert_eq!(a, first);
        }
    }

    /// Counts the messages a member sends.
    struct Counting<'a, L> {
        l: &'a L,
        sent: std::cell::Cell<usize>,
    }

    impl<L: Link> Link for Counting<'_, L> {
        fn rank(&self) -> usize {
            self.l.rank()
        }
        fn size(&self) -> usize {
            self.l.size()
        }
        async fn send(&self, to: usize, data: Vec<u8>, bytes: usize) -> Result<(), LinkError> {
            self.sent.set(self.sent.get() + 1);
            self.l.send(to, data, bytes).await
        }
        async fn recv(&self, from: usize) -> Result<Vec<u8>, LinkError> {
            self.l.recv(from).await
        }
    }
}
