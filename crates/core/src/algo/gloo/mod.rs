//! gloo's own algorithms, as real PyTorch runs them on a gloo group (gloo/allreduce.cc,
//! reduce.cc, allgather.cc, broadcast.cc, gather.cc, scatter.cc, alltoallv.cc, barrier.cc).
//!
//! Why not core's generic ones: under gloo, which rank waits on which, and in which order,
//! decides what a divergent program does. A gloo send completes only once its receiver has
//! posted the matching receive, and every wait has its own timeout, so one missing peer makes a
//! rank time out "for send" and its neighbour "for recv"; a ring that runs the other way, or a
//! broadcast tree of another shape, fails other ranks than real gloo does (the differential
//! oracle, tests/torch/differential.rs, found both). Each function here posts, sends and waits
//! in gloo's order, over [`Link::post_recv`], [`Link::wait_sent`] and [`Link::recv_any`].
//!
//! Sizes: gloo receives into the bytes a receive posted and enforces `length <= nbytes`
//! (pair.cc): a shorter message lands in the first bytes and the rest keeps its value; a
//! longer one aborts the process ([`CollectiveError::TooLarge`]).

mod ring;

pub use ring::{all_gather, all_reduce, reduce};

use super::{frame, CollectiveError, Link, K_A2A, K_BARRIER, K_BCAST, K_ROOTGATHER, K_SCATTER, R};
use crate::payload::Payload;
use crate::tensor::Tensor;
use std::ops::Range;

/// One call's operations in flight (gloo's unbound buffers): sends not yet complete and
/// receives posted but not yet waited for, each in posting order. gloo's `waitSend` and
/// `waitRecv` complete whichever operation finishes first, not a named one.
pub(super) struct Posted<'a, L> {
    l: &'a L,
    /// The algorithm's message kind: every message of one call carries it.
    kind: u8,
    sends: Vec<usize>,
    /// (member, posted bytes, the caller's key for where the bytes go).
    recvs: Vec<(usize, usize, usize)>,
    /// Sends and receives use one unbound buffer, so a pair's error on either fails a wait
    /// for the other (pair.cc `signalException` signals every buffer with an operation on
    /// the pair): barrier.cc, allgather.cc (`out`), broadcast.cc (`in = out`). allreduce.cc
    /// and reduce.cc receive into `tmp`, alltoall.cc into `out` apart from `in`.
    shared: bool,
}

impl<'a, L: Link> Posted<'a, L> {
    /// Sends and receives on buffers of their own.
    pub(super) fn new(l: &'a L, kind: u8) -> Self {
        Posted {
            l,
            kind,
            sends: Vec::new(),
            recvs: Vec::new(),
            shared: false,
        }
    }

    /// Sends and receives on one buffer.
    pub(super) fn shared(l: &'a L, kind: u8) -> Self {
        Posted {
            shared: true,
            ..Posted::new(l, kind)
        }
    }

    /// Posts a send of bytes `r` of `body` to member `to`: it goes out once `to` has posted
    /// its receive ([`Link::send_when_ready`]).
    pub(super) async fn send<D: Payload>(&mut self, to: usize, body: &D, r: Range<usize>) -> R<()> {
        let (m, bytes) = frame(self.kind, body, r);
        self.l.send_when_ready(to, m, bytes).await?;
        self.sends.push(to);
        Ok(())
    }

    /// Posts a receive of at most `bytes` from member `from`; `key` comes back with its message.
    pub(super) async fn recv(&mut self, from: usize, bytes: usize, key: usize) -> R<()> {
        self.l.post_recv(from).await?;
        self.recvs.push((from, bytes, key));
        Ok(())
    }

    /// gloo's `waitSend`: one pending send completes. Meanwhile a message longer than the
    /// receive posted for it aborts the process as it arrives (7/572: rank 0's mis-sized
    /// reduce aborted while it waited for a send, on the root-gather message its third ring
    /// receive got).
    pub(super) async fn wait_send(&mut self) -> R<()> {
        self.wait_send_among(None).await
    }

    /// gloo's `waitSend` on a buffer of its own for member `to` (scatter.cc's `in[i]`): that
    /// send completes; another peer's error does not fail it.
    pub(super) async fn wait_send_to(&mut self, to: usize) -> R<()> {
        self.wait_send_among(Some(to)).await
    }

    /// One of the pending sends completes (`only`: the one to that member).
    async fn wait_send_among(&mut self, only: Option<usize>) -> R<()> {
        let sends: Vec<usize> = match only {
            Some(to) => vec![to],
            None => self.sends.clone(),
        };
        let from: Vec<usize> = self.recvs.iter().map(|r| r.0).collect();
        let recvs: &[usize] = if self.shared { &from } else { &[] };
        let (kind, posted) = (self.kind, &self.recvs);
        let too_large = |i: usize, m: &[u8]| match header(m) {
            Some((k, n)) if k == kind && n > posted[i].1 => Some(n),
            _ => None,
        };
        let i = tokio::select! {
            biased;
            sent = self.l.wait_sent(&sends, recvs) => sent?,
            (i, got) = self.l.misfit_arrival(&from, &too_large), if !from.is_empty() => {
                return Err(CollectiveError::TooLarge {
                    from: self.l.group_rank(from[i]),
                    got,
                    posted: posted[i].1,
                });
            }
        };
        let done = sends[i];
        if let Some(k) = self.sends.iter().position(|&m| m == done) {
            self.sends.remove(k);
        }
        Ok(())
    }

    /// gloo's `waitRecv`: one posted receive completes; returns its key and message.
    pub(super) async fn wait_recv<D: Payload>(&mut self) -> R<(usize, D)> {
        let from: Vec<usize> = self.recvs.iter().map(|r| r.0).collect();
        let sends: &[usize] = if self.shared { &self.sends } else { &[] };
        let (i, m) = self.l.recv_any(&from, sends).await?;
        let (peer, posted, key) = self.recvs.remove(i);
        Ok((key, take(self.l, peer, self.kind, posted, &m)?))
    }
}

/// A message's kind and its length in bytes, from its header.
fn header(m: &[u8]) -> Option<(u8, usize)> {
    let n = m.get(1..9)?;
    Some((
        m[0],
        u64::from_le_bytes(n.try_into().expect("8 bytes")) as usize,
    ))
}

/// A message received into `posted` bytes: shorter is fine, longer aborts (pair.cc's
/// `GLOO_ENFORCE_LE(op.preamble.length, op.nbytes)`).
fn take<L: Link, D: Payload>(l: &L, from: usize, kind: u8, posted: usize, m: &[u8]) -> R<D> {
    let got = header(m).map(|(_, n)| n);
    let mismatch = || {
        CollectiveError::Mismatch(format!(
            "group rank {} sent a malformed or foreign message",
            l.group_rank(from)
        ))
    };
    match got {
        Some(n) if m[0] == kind && n > posted => Err(CollectiveError::TooLarge {
            from: l.group_rank(from),
            got: n,
            posted,
        }),
        Some(n) if m[0] == kind => D::decode(&m[9..])
            .filter(|b| b.len() == n)
            .ok_or_else(mismatch),
        _ => Err(mismatch()),
    }
}

/// `ceil(log2(n))`, gloo's `log2ceil`.
fn log2ceil(n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        (usize::BITS - (n - 1).leading_zeros()) as usize
    }
}

/// gloo/broadcast.cc: a binomial tree over virtual ranks (the root is 0) in which, at step
/// `i`, virtual ranks below `2^(i+1)` take part and each sends to its peer with bit `i` set.
/// A receiver waits for its message before it sends on; sends are waited for at the end.
pub async fn broadcast<L: Link, D: Payload>(l: &L, t: &mut Tensor<D>, root: usize) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    let vrank = (me + n - root % n.max(1)) % n;
    let dim = log2ceil(n);
    let mut p = Posted::shared(l, K_BCAST);
    let mut sends = 0;
    let mut mask = (1usize << dim) - 1;
    for i in 0..dim {
        mask ^= 1 << i;
        if vrank & mask != 0 {
            continue;
        }
        let vpeer = vrank ^ (1 << i);
        if vpeer >= n {
            continue;
        }
        let peer = (vpeer + root) % n;
        if vrank & (1 << i) == 0 {
            p.send(peer, &t.data, 0..t.data.len()).await?;
            sends += 1;
        } else {
            p.recv(peer, t.data.len(), 0).await?;
            let (_, got): (_, D) = p.wait_recv().await?;
            t.data.copy_in(0..got.len(), &got);
        }
    }
    for _ in 0..sends {
        p.wait_send().await?;
    }
    Ok(())
}

/// gloo/gather.cc: the root posts a receive from every member into its slot of the output and
/// waits for them in any order; every other member sends and waits for its send.
pub async fn gather<L: Link, D: Payload>(
    l: &L,
    t: &Tensor<D>,
    root: usize,
) -> R<Option<Vec<Tensor<D>>>> {
    let (n, me) = (l.size(), l.rank());
    let mut p = Posted::new(l, K_ROOTGATHER);
    if me != root {
        p.send(root, &t.data, 0..t.data.len()).await?;
        p.wait_send().await?;
        return Ok(None);
    }
    let chunk = t.data.len();
    let mut parts: Vec<D> = (0..n).map(|_| D::zeros(chunk)).collect();
    for from in (0..n).filter(|&k| k != me) {
        p.recv(from, chunk, from).await?;
    }
    parts[me] = t.data.clone();
    for _ in 1..n {
        let (k, got): (_, D) = p.wait_recv().await?;
        parts[k].copy_in(0..got.len(), &got);
    }
    let tensor = |data| Tensor {
        dtype: t.dtype,
        shape: t.shape.clone(),
        data,
    };
    Ok(Some(parts.into_iter().map(tensor).collect()))
}

/// gloo/scatter.cc: the root sends every member its part and waits for the sends; every other
/// member posts one receive and waits for it.
pub async fn scatter<L: Link, D: Payload>(
    l: &L,
    parts: Option<Vec<Tensor<D>>>,
    like: &Tensor<D>,
    root: usize,
) -> R<Tensor<D>> {
    let (n, me) = (l.size(), l.rank());
    let mut out = like.clone();
    let mut p = Posted::new(l, K_SCATTER);
    if me != root {
        p.recv(root, like.data.len(), 0).await?;
        let (_, got): (_, D) = p.wait_recv().await?;
        out.data.copy_in(0..got.len(), &got);
        return Ok(out);
    }
    let parts = parts.unwrap_or_default();
    if parts.len() != n {
        return Err(CollectiveError::Mismatch(format!(
            "scatter root has {} tensors for a group of {n}",
            parts.len()
        )));
    }
    for (to, part) in parts.iter().enumerate().filter(|(k, _)| *k != me) {
        p.send(to, &part.data, 0..part.data.len()).await?;
    }
    out.data = parts[me].data.clone();
    // scatter.cc sends each part from a buffer of its own and waits for them in rank order: a
    // rank waiting for an earlier member is not failed by a later one's end (7/690: the root
    // waited for rank 1, stuck behind a dead rank 3, until torchrun's agent stopped it).
    for to in (0..n).filter(|&k| k != me) {
        p.wait_send_to(to).await?;
    }
    Ok(out)
}

/// gloo/alltoallv.cc: member `me` copies its own chunk (enforcing that it is as long as the
/// chunk it expects from itself), then sends to `me + i` and receives from `me - i` for every
/// `i`, all posted first, then waits alternate between a send and a receive.
pub async fn all_to_all<L: Link, D: Payload>(
    l: &L,
    sends: Vec<D>,
    recv_lens: &[usize],
) -> R<Vec<D>> {
    let (n, me) = (l.size(), l.rank());
    if sends.len() != n || recv_lens.len() != n {
        return Err(CollectiveError::Mismatch(format!(
            "all_to_all on a group of {n} got {} send chunks and {} receive sizes",
            sends.len(),
            recv_lens.len()
        )));
    }
    let mine = &sends[me];
    if mine.len() != recv_lens[me] {
        return Err(CollectiveError::SelfLength {
            sent: mine.len(),
            expected: recv_lens[me],
        });
    }
    let mut out: Vec<D> = recv_lens.iter().map(|&b| D::zeros(b)).collect();
    out[me] = mine.clone();
    let mut p = Posted::new(l, K_A2A);
    for i in 1..n {
        let (to, from) = ((me + i) % n, (me + n - i) % n);
        p.send(to, &sends[to], 0..sends[to].len()).await?;
        p.recv(from, recv_lens[from], from).await?;
    }
    for _ in 1..n {
        p.wait_send().await?;
        let (k, got): (_, D) = p.wait_recv().await?;
        out[k].copy_in(0..got.len(), &got);
    }
    Ok(out)
}

/// gloo/barrier.cc: a dissemination barrier; at distance `d` = 1, 2, 4, ... each member
/// receives from `me - d` and sends to `me + d`, waiting for the receive, then the send.
pub async fn barrier<L: Link>(l: &L) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    let mut p = Posted::shared(l, K_BARRIER);
    let empty: Vec<u8> = Vec::new();
    let mut d = 1;
    while d < n {
        p.recv((me + n - d) % n, 0, 0).await?;
        p.send((me + d) % n, &empty, 0..0).await?;
        let _: (_, Vec<u8>) = p.wait_recv().await?;
        p.wait_send().await?;
        d <<= 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
