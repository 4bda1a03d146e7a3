//! Collective algorithms, written once over a transport trait and computing real results.
//!
//! The simulator runs them over turmoil sockets, the hardware mode's gloo-like CPU groups over
//! OS sockets. One submodule per family: ring algorithms (all-reduce, reduce-scatter,
//! all-gather), rooted trees and fans (broadcast, reduce, gather, scatter) and exchanges
//! (all-to-all, barrier). Every message carries a small header (algorithm, byte count) so a
//! peer that is running a different collective is detected instead of silently mis-read.
//!
//! The algorithms are generic over the [`Payload`] they move: real bytes, or symbolic payloads
//! (payload.rs) whose messages are a header and a few segment records. Either way a message is
//! charged its logical size, `9 + payload bytes`.

mod direct;
mod exchange;
pub mod gloo;
#[cfg(test)]
mod matrix;
mod ring;
mod rooted;
#[cfg(test)]
pub(crate) mod testlink;
mod topo;

pub use direct::{all_gather_direct, all_reduce_nreduce, all_reduce_recursive_doubling};
pub use exchange::{all_to_all, barrier};
pub use ring::{all_gather, all_reduce, reduce_scatter};
pub use rooted::{broadcast, gather, reduce, scatter};
pub use topo::{all_reduce_topo, NodeLayout, ScaleOut};

/// A member's view of one collective call: ordered byte messages to other members, by group rank.
#[allow(async_fn_in_trait)]
pub trait Link {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// Sends `data`, a message of `bytes` logical bytes: `data.len()` for real payloads, more
    /// for a symbolic one (whose data is only its header). The timing model charges `bytes`.
    async fn send(&self, to: usize, data: Vec<u8>, bytes: usize) -> Result<(), LinkError>;
    async fn recv(&self, from: usize) -> Result<Vec<u8>, LinkError>;
    /// Member `r`'s rank in the collective's group, for error texts: `r` itself, except on a
    /// view of some of the group's members (topo.rs).
    fn group_rank(&self, r: usize) -> usize {
        r
    }
    /// A broadcast receiver whose buffer is larger than the message takes the message into its
    /// first bytes and keeps the rest: gloo's (real PyTorch 2.15: a broadcast of 4 floats into
    /// 8 completes on both ranks, tests/fixtures/fr/size_mismatch). Device backends do not.
    fn takes_short_broadcast(&self) -> bool {
        false
    }
    /// The call goes on as the group's next call (its own tag): gloo's list reduce_scatter
    /// is one all-reduce per member, each under a tag of its own. Links without tags ignore it.
    fn next_call(&self) {}
    /// gloo's unbound buffers (gloo/transport/tcp/pair.cc): a receive is posted before it is
    /// waited for, and posting tells the sender (NOTIFY_RECV_READY). Links without that
    /// protocol have nothing to do.
    async fn post_recv(&self, _from: usize) -> Result<(), LinkError> {
        Ok(())
    }
    /// Waits until one of the pending sends, to the members `to` (in posting order), is
    /// complete: its receiver has posted the matching receive. Returns its index in `to`.
    /// `recvs`: the same buffer's pending receives, whose peer's error fails this wait too
    /// (gloo signals a pair's error to every operation of the buffer). Links without gloo's
    /// protocol complete a send when it is handed over.
    async fn wait_sent(&self, _to: &[usize], _recvs: &[usize]) -> Result<usize, LinkError> {
        Ok(0)
    }
    /// Waits for the first message of any pending receive, from the members `from` (in
    /// posting order): gloo's `waitRecv` completes whichever arrives first. Returns the index
    /// in `from` and the message. `sends`: the same buffer's pending sends, whose peer's error
    /// fails this wait too. The default takes them in order.
    async fn recv_any(
        &self,
        from: &[usize],
        _sends: &[usize],
    ) -> Result<(usize, Vec<u8>), LinkError> {
        Ok((0, self.recv(from[0]).await?))
    }
    /// gloo's unbound send (`Posted`): the data goes out once the receiver's ready notice for
    /// it has come (NOTIFY_RECV_READY, gloo/transport/tcp/pair.cc); until then the sender only
    /// holds it, so a sender that dies first has sent nothing (user-path 7/834: a reduce's
    /// root waits for a chunk its aborted peer never sent and reads the reset). Links without
    /// that protocol send at once.
    async fn send_when_ready(
        &self,
        to: usize,
        data: Vec<u8>,
        bytes: usize,
    ) -> Result<(), LinkError> {
        self.send(to, data, bytes).await
    }
    /// gloo's pair checks a message against the receive it was sent for as it arrives, in
    /// its device's loop thread, whatever the rank is waiting for then (pair.cc). Completes
    /// once a message has arrived for one of the posted receives `from` (members, in posting
    /// order: a member's k-th message not yet taken is for its k-th receive here) that
    /// `misfit` (with that receive's index in `from`) has something to say about: that index
    /// and what it said; the message is taken (the loop thread read it). Links without gloo's
    /// protocol never complete it.
    async fn misfit_arrival<T>(
        &self,
        _from: &[usize],
        _misfit: &dyn Fn(usize, &[u8]) -> Option<T>,
    ) -> (usize, T) {
        std::future::pending().await
    }
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
    /// A gloo receiver got a message of its collective larger than the buffer it posted:
    /// gloo's pair enforces `op.preamble.length <= op.nbytes` and the process aborts.
    #[error("group rank {from} sent {got} bytes where this rank posted {posted}")]
    TooLarge {
        from: usize,
        got: usize,
        posted: usize,
    },
    /// gloo's alltoallv: this rank's chunk for itself is not the length it expects from
    /// itself (gloo enforces it before sending anything).
    #[error(
        "all_to_all sends {sent} bytes to itself while expecting {expected} bytes from itself"
    )]
    SelfLength { sent: usize, expected: usize },
}

pub(crate) type R<T> = Result<T, CollectiveError>;

use crate::payload::Payload;
use std::ops::Range;

const K_RS: u8 = 1;
const K_AG: u8 = 2;
const K_BCAST: u8 = 3;
const K_GATHER: u8 = 4;
const K_BARRIER: u8 = 5;
const K_A2A: u8 = 6;
const K_REDUCE: u8 = 7;
const K_RSCATTER: u8 = 8;
const K_ROOTGATHER: u8 = 9;
const K_SCATTER: u8 = 10;

fn kind_name(k: u8) -> &'static str {
    match k {
        K_RS => "all_reduce",
        K_AG => "all_reduce/all_gather",
        K_BCAST => "broadcast",
        K_GATHER => "all_gather",
        K_BARRIER => "barrier",
        K_A2A => "all_to_all",
        K_REDUCE => "reduce",
        K_RSCATTER => "reduce_scatter",
        K_ROOTGATHER => "gather",
        K_SCATTER => "scatter",
        _ => "unknown",
    }
}

/// Sends bytes `r` of `body`: kind, logical length, then the payload's encoding.
pub(crate) async fn send<L: Link, D: Payload>(
    l: &L,
    to: usize,
    kind: u8,
    body: &D,
    r: Range<usize>,
) -> R<()> {
    let (m, bytes) = frame(kind, body, r);
    Ok(l.send(to, m, bytes).await?)
}

/// The message of bytes `r` of `body`, and its logical length.
pub(crate) fn frame<D: Payload>(kind: u8, body: &D, r: Range<usize>) -> (Vec<u8>, usize) {
    let len = r.len();
    let mut m = Vec::with_capacity(body.encoded_len_hint(&r).min(1 << 20) + 9);
    m.push(kind);
    m.extend_from_slice(&(len as u64).to_le_bytes());
    body.encode(r, &mut m);
    (m, 9 + len)
}

/// Sends all of `body`.
pub(crate) async fn send_all<L: Link, D: Payload>(l: &L, to: usize, kind: u8, body: &D) -> R<()> {
    send(l, to, kind, body, 0..body.len()).await
}

/// Receives a message of at most `len` elements into the start of `into` (gloo's broadcast
/// receive, [`Link::takes_short_broadcast`]); a longer one is a mismatch, as in [`recv`].
pub(crate) async fn recv_into<L: Link, D: Payload>(
    l: &L,
    from: usize,
    kind: u8,
    into: &mut D,
) -> R<()> {
    let m = l.recv(from).await?;
    let len = into.len();
    let got_len = m
        .get(1..9)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize);
    let body = match got_len {
        Some(n) if m[0] == kind && n <= len => D::decode(&m[9..]).filter(|b| b.len() == n),
        Some(n) if m[0] == kind && l.takes_short_broadcast() => {
            return Err(CollectiveError::TooLarge {
                from: l.group_rank(from),
                got: n,
                posted: len,
            })
        }
        _ => None,
    };
    let Some(body) = body else {
        return Err(CollectiveError::Mismatch(format!(
            "group rank {} sent {} bytes of {} while this rank expects at most {len} bytes of {}",
            l.group_rank(from),
            got_len.unwrap_or(0),
            kind_name(m[0]),
            kind_name(kind)
        )));
    };
    into.copy_in(0..body.len(), &body);
    Ok(())
}

/// Receives a message of `len` bytes of collective `kind`; on a gloo link a longer one aborts
/// the process ([`CollectiveError::TooLarge`]), any other misfit is a [`CollectiveError::Mismatch`].
pub(crate) async fn recv<L: Link, D: Payload>(l: &L, from: usize, kind: u8, len: usize) -> R<D> {
    recv_upto(l, from, kind, len, len).await
}

/// [`recv`] of a message of `min..=len` bytes: gloo's pair takes a message shorter than the
/// posted buffer into its first bytes (`min` = 0 on a gloo link, `len` otherwise).
async fn recv_upto<L: Link, D: Payload>(
    l: &L,
    from: usize,
    kind: u8,
    min: usize,
    len: usize,
) -> R<D> {
    let m = l.recv(from).await?;
    if m.len() < 9 {
        return Err(CollectiveError::Mismatch(format!(
            "rank {} sent a malformed message",
            l.group_rank(from)
        )));
    }
    let got_len = u64::from_le_bytes(m[1..9].try_into().expect("8 bytes")) as usize;
    if m[0] == kind && got_len > len && l.takes_short_broadcast() {
        return Err(CollectiveError::TooLarge {
            from: l.group_rank(from),
            got: got_len,
            posted: len,
        });
    }
    let body = (m[0] == kind && (min..=len).contains(&got_len))
        .then(|| D::decode(&m[9..]))
        .flatten()
        .filter(|b| b.len() == got_len);
    body.ok_or_else(|| {
        CollectiveError::Mismatch(format!(
            "group rank {} sent {} bytes of {} while this rank expects {len} bytes of {}",
            l.group_rank(from),
            got_len,
            kind_name(m[0]),
            kind_name(kind)
        ))
    })
}

/// Receives into bytes `at` of `data` (a ring chunk) and folds the message in with `fold`: on a
/// gloo link a shorter message lands in the chunk's first bytes and the rest keeps its value
/// (gloo's pair accepts it; real torch 2.15, scenarios/mismatch_shape_gloo.toml).
pub(crate) async fn recv_chunk<L: Link, D: Payload>(
    l: &L,
    from: usize,
    kind: u8,
    at: Range<usize>,
    data: &mut D,
    fold: impl FnOnce(&mut D, Range<usize>, &D),
) -> R<()> {
    let min = if l.takes_short_broadcast() {
        0
    } else {
        at.len()
    };
    let got: D = recv_upto(l, from, kind, min, at.len()).await?;
    fold(data, at.start..at.start + got.len(), &got);
    Ok(())
}

/// Byte ranges of `n` elements split into `parts` nearly equal chunks.
pub(crate) fn chunks(n: usize, parts: usize, w: usize) -> Vec<std::ops::Range<usize>> {
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
