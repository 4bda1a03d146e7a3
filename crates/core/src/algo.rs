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

fn kind_name(k: u8) -> &'static str {
    match k {
        K_RS => "all_reduce",
        K_AG => "all_reduce/all_gather",
        K_BCAST => "broadcast",
        K_GATHER => "all_gather",
        K_BARRIER => "barrier",
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
