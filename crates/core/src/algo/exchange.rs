//! Exchanges without a root: all-to-all (pairwise) and the dissemination barrier.

use super::{recv, send, send_all, CollectiveError, Link, K_A2A, K_BARRIER, R};
use crate::payload::Payload;

/// All-to-all: `sends[j]` (bytes) goes to group rank `j`; returns the chunk received from every
/// group rank, in group-rank order, where the chunk from `j` must be `recv_lens[j]` bytes.
///
/// Uneven sizes are allowed (`all_to_all_single` with split sizes): a peer whose chunk for this
/// rank has another length is reported as a mismatch. Pairwise exchange: in round `s` a rank
/// sends to `me + s` and receives from `me - s`, so every pair meets exactly once.
pub async fn all_to_all<L: Link, D: Payload>(
    l: &L,
    mut sends: Vec<D>,
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
    if sends[me].len() != recv_lens[me] {
        return Err(CollectiveError::Mismatch(format!(
            "all_to_all sends {} bytes to itself while expecting {} bytes from itself",
            sends[me].len(),
            recv_lens[me]
        )));
    }
    let mut got: Vec<D> = vec![D::default(); n];
    got[me] = std::mem::take(&mut sends[me]);
    for s in 1..n {
        let (to, from) = ((me + s) % n, (me + n - s) % n);
        send_all(l, to, K_A2A, &sends[to]).await?;
        got[from] = recv(l, from, K_A2A, recv_lens[from]).await?;
    }
    Ok(got)
}

/// Dissemination barrier: log2(n) rounds of empty messages.
pub async fn barrier<L: Link>(l: &L) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    let mut d = 1;
    while d < n {
        send(l, (me + d) % n, K_BARRIER, &Vec::new(), 0..0).await?;
        let _: Vec<u8> = recv(l, (me + n - d) % n, K_BARRIER, 0).await?;
        d <<= 1;
    }
    Ok(())
}
