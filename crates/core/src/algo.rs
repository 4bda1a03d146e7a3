//! Collective algorithms, written once over a transport trait and computing real results.
//!
//! The simulator runs them over turmoil sockets, the hardware mode's gloo-like CPU groups over
//! OS sockets. Ring all-reduce (reduce-scatter then all-gather), binomial-tree broadcast, ring
//! all-gather. Every message carries a small header (algorithm, byte count) so a peer that is
//! running a different collective is detected instead of silently mis-read.

use crate::reduce::{finish_avg, reduce_into, ReduceOp};
use crate::tensor::Tensor;

/// A member's view of one collective call: ordered byte messages to other members, by group rank.
#[allow(async_fn_in_trait)]
pub trait Link {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    async fn send(&self, to: usize, data: Vec<u8>) -> Result<(), LinkError>;
    async fn recv(&self, from: usize) -> Result<Vec<u8>, LinkError>;
}

/// The transport's error text, passed through unchanged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinkError {
    #[error("{0}")]
    Failed(String),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CollectiveError {
    #[error(transparent)]
    Link(#[from] LinkError),
    /// A peer's message does not fit this call (it runs another collective or another size).
    #[error("{0}")]
    Mismatch(String),
}

type R<T> = Result<T, CollectiveError>;

const K_RS: u8 = 1;
const K_AG: u8 = 2;
const K_BCAST: u8 = 3;
const K_GATHER: u8 = 4;
const K_BARRIER: u8 = 5;
const K_A2A: u8 = 6;

fn kind_name(k: u8) -> &'static str {
    match k {
        K_RS => "all_reduce",
        K_AG => "all_reduce/all_gather",
        K_BCAST => "broadcast",
        K_GATHER => "all_gather",
        K_BARRIER => "barrier",
        K_A2A => "all_to_all",
        _ => "unknown",
    }
}

async fn send<L: Link>(l: &L, to: usize, kind: u8, body: &[u8]) -> R<()> {
    let mut m = Vec::with_capacity(body.len() + 9);
    m.push(kind);
    m.extend_from_slice(&(body.len() as u64).to_le_bytes());
    m.extend_from_slice(body);
    Ok(l.send(to, m).await?)
}

async fn recv<L: Link>(l: &L, from: usize, kind: u8, len: usize) -> R<Vec<u8>> {
    let m = l.recv(from).await?;
    if m.len() < 9 {
        return Err(CollectiveError::Mismatch(format!(
            "rank {from} sent a malformed message"
        )));
    }
    let got_len = u64::from_le_bytes(m[1..9].try_into().expect("8 bytes")) as usize;
    if m[0] != kind || got_len != len || m.len() != 9 + len {
        return Err(CollectiveError::Mismatch(format!(
            "group rank {from} sent {} bytes of {} while this rank expects {len} bytes of {}",
            got_len,
            kind_name(m[0]),
            kind_name(kind)
        )));
    }
    Ok(m[9..].to_vec())
}

/// Byte ranges of `n` elements split into `parts` nearly equal chunks.
fn chunks(n: usize, parts: usize, w: usize) -> Vec<std::ops::Range<usize>> {
    let base = n / parts;
    let extra = n % parts;
    let mut start = 0;
    (0..parts)
        .map(|i| {
            let len = base + usize::from(i < extra);
            let r = start * w..(start + len) * w;
            start += len;
            r
        })
        .collect()
}

/// Ring all-reduce in place: reduce-scatter, then all-gather of the reduced chunks.
pub async fn all_reduce<L: Link>(l: &L, t: &mut Tensor, op: ReduceOp) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    if n > 1 {
        let w = t.dtype.size_bytes();
        let cs = chunks(t.numel(), n, w);
        let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
        for s in 0..n - 1 {
            let send_c = (me + n - s) % n;
            let recv_c = (me + n - s - 1) % n;
            send(l, next, K_RS, &t.data[cs[send_c].clone()]).await?;
            let got = recv(l, prev, K_RS, cs[recv_c].len()).await?;
            reduce_into(t.dtype, op, &mut t.data[cs[recv_c].clone()], &got);
        }
        for s in 0..n - 1 {
            let send_c = (me + 1 + n - s) % n;
            let recv_c = (me + n - s) % n;
            send(l, next, K_AG, &t.data[cs[send_c].clone()]).await?;
            let got = recv(l, prev, K_AG, cs[recv_c].len()).await?;
            t.data[cs[recv_c].clone()].copy_from_slice(&got);
        }
    }
    if op == ReduceOp::Avg {
        finish_avg(t.dtype, &mut t.data, n);
    }
    Ok(())
}

/// Binomial-tree broadcast from group rank `root`.
pub async fn broadcast<L: Link>(l: &L, t: &mut Tensor, root: usize) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    let vr = (me + n - root) % n;
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            let src = (vr - mask + root) % n;
            t.data = recv(l, src, K_BCAST, t.data.len()).await?;
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < n {
            let dst = (vr + mask + root) % n;
            send(l, dst, K_BCAST, &t.data).await?;
        }
        mask >>= 1;
    }
    Ok(())
}

/// Ring all-gather: every rank ends with every rank's input, in group-rank order.
pub async fn all_gather<L: Link>(l: &L, input: &Tensor) -> R<Vec<Tensor>> {
    let (n, me) = (l.size(), l.rank());
    let mut parts: Vec<Option<Vec<u8>>> = vec![None; n];
    parts[me] = Some(input.data.clone());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    for s in 0..n.saturating_sub(1) {
        let send_i = (me + n - s) % n;
        let recv_i = (me + n - s - 1) % n;
        let body = parts[send_i].clone().expect("filled in an earlier round");
        send(l, next, K_GATHER, &body).await?;
        parts[recv_i] = Some(recv(l, prev, K_GATHER, input.data.len()).await?);
    }
    Ok(parts
        .into_iter()
        .map(|d| Tensor {
            dtype: input.dtype,
            shape: input.shape.clone(),
            data: d.expect("every part received"),
        })
        .collect())
}

/// All-to-all: `sends[j]` (bytes) goes to group rank `j`; returns the chunk received from every
/// group rank, in group-rank order, where the chunk from `j` must be `recv_lens[j]` bytes.
///
/// Uneven sizes are allowed (`all_to_all_single` with split sizes): a peer whose chunk for this
/// rank has another length is reported as a mismatch. Pairwise exchange: in round `s` a rank
/// sends to `me + s` and receives from `me - s`, so every pair meets exactly once.
pub async fn all_to_all<L: Link>(
    l: &L,
    mut sends: Vec<Vec<u8>>,
    recv_lens: &[usize],
) -> R<Vec<Vec<u8>>> {
    let (n, me) = (l.size(), l.rank());
    if sends.len() != n || recv_lens.len() != n {
        return Err(CollectiveError::Mismatch(format!(
            "all_to_all on a group of {n} got {} send chunks and {} receive sizes",
            sends.len(),
            recv_lens.len()
        )));
    }
    if sends[me].len() != recv_lens[me] {
        return Err(CollectiveError::Mismatch(format!(
            "all_to_all sends {} bytes to itself while expecting {} bytes from itself",
            sends[me].len(),
            recv_lens[me]
        )));
    }
    let mut got: Vec<Vec<u8>> = vec![Vec::new(); n];
    got[me] = std::mem::take(&mut sends[me]);
    for s in 1..n {
        let (to, from) = ((me + s) % n, (me + n - s) % n);
        send(l, to, K_A2A, &sends[to]).await?;
        got[from] = recv(l, from, K_A2A, recv_lens[from]).await?;
    }
    Ok(got)
}

/// Dissemination barrier: log2(n) rounds of empty messages.
pub async fn barrier<L: Link>(l: &L) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    let mut d = 1;
    while d < n {
        send(l, (me + d) % n, K_BARRIER, &[]).await?;
        recv(l, (me + n - d) % n, K_BARRIER, 0).await?;
        d <<= 1;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod testlink {
    //! An in-process [`Link`] over tokio channels, for running the algorithms on a whole world
    //! inside one test (one local task per member).

    use super::{Link, LinkError};
    use std::future::Future;
    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
    use tokio::sync::Mutex;

    pub struct ChanLink {
        me: usize,
        /// `tx[j]`: this member's channel to member `j`.
        tx: Vec<UnboundedSender<Vec<u8>>>,
        /// `rx[j]`: member `j`'s channel to this member.
        rx: Vec<Mutex<UnboundedReceiver<Vec<u8>>>>,
    }

    impl Link for ChanLink {
        fn rank(&self) -> usize {
            self.me
        }
        fn size(&self) -> usize {
            self.tx.len()
        }
        async fn send(&self, to: usize, data: Vec<u8>) -> Result<(), LinkError> {
            self.tx[to]
                .send(data)
                .map_err(|_| LinkError::Failed(format!("rank {to} is gone")))
        }
        async fn recv(&self, from: usize) -> Result<Vec<u8>, LinkError> {
            self.rx[from]
                .lock()
                .await
                .recv()
                .await
                .ok_or_else(|| LinkError::Failed(format!("rank {from} closed")))
        }
    }

    /// Runs `body(link)` for every member of an `n`-member world; results in rank order.
    pub fn run_world<T, F, Fut>(n: usize, body: F) -> Vec<T>
    where
        T: 'static,
        F: Fn(ChanLink) -> Fut,
        Fut: Future<Output = T> + 'static,
    {
        let mut txs: Vec<Vec<Option<UnboundedSender<Vec<u8>>>>> = vec![vec![None; n]; n];
        let mut rxs: Vec<Vec<Option<UnboundedReceiver<Vec<u8>>>>> =
            (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
        for (from, row) in txs.iter_mut().enumerate() {
            for (to, slot) in row.iter_mut().enumerate() {
                let (tx, rx) = unbounded_channel();
                *slot = Some(tx);
                rxs[to][from] = Some(rx);
            }
        }
        let links: Vec<ChanLink> = txs
            .into_iter()
            .zip(rxs)
            .enumerate()
            .map(|(me, (tx, rx))| ChanLink {
                me,
                tx: tx.into_iter().map(|t| t.expect("made")).collect(),
                rx: rx
                    .into_iter()
                    .map(|r| Mutex::new(r.expect("made")))
                    .collect(),
            })
            .collect();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let handles: Vec<_> = links
                .into_iter()
                .map(|l| tokio::task::spawn_local(body(l)))
                .collect();
            let mut out = Vec::with_capacity(n);
            for h in handles {
                out.push(h.await.expect("member task"));
            }
            out
        })
    }
}

#[cfg(test)]
mod tests {
    use super::testlink::run_world;
    use super::*;

    /// Bytes member `from` sends to member `to`: length depends on both, so splits are uneven.
    fn chunk(from: usize, to: usize) -> Vec<u8> {
        (0..(from * 3 + to * 5) % 7)
            .map(|k| (from * 31 + to * 7 + k) as u8)
            .collect()
    }

    #[test]
    fn all_to_all_uneven_matches_direct_exchange_worlds_1_to_8() {
        for n in 1..=8 {
            let got = run_world(n, move |l| async move {
                let me = l.rank();
                let sends = (0..n).map(|to| chunk(me, to)).collect();
                let lens: Vec<usize> = (0..n).map(|from| chunk(from, me).len()).collect();
                all_to_all(&l, sends, &lens).await
            });
            for (me, r) in got.into_iter().enumerate() {
                let want: Vec<Vec<u8>> = (0..n).map(|from| chunk(from, me)).collect();
                assert_eq!(r.expect("ok"), want, "world {n}, rank {me}");
            }
        }
    }

    #[test]
    fn all_to_all_reports_a_peer_with_another_split() {
        let got = run_world(3, |l| async move {
            let me = l.rank();
            let mut lens = vec![4usize; 3];
            if me == 2 {
                lens[0] = 2; // rank 2 expects 2 bytes from rank 0, which sends 4
            }
            all_to_all(&l, vec![vec![me as u8; 4]; 3], &lens).await
        });
        assert!(got[0].is_ok() && got[1].is_ok());
        let e = got[2].clone().unwrap_err().to_string();
        assert!(e.contains("group rank 0 sent 4 bytes of all_to_all"), "{e}");
    }
}
