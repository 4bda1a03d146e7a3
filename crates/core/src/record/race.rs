//! Peer-loss texts a recorded run cannot pin. A rank whose gloo call fails because a peer's
//! process died reads "Connection closed by peer" when its messages reached the peer while it
//! lived (gloo's loop read them) or after its sockets closed, and "Connection reset by peer"
//! when they arrived in between, while the kernel tore the dead process down. When the call
//! began within milliseconds of that death, which one a run reads is TCP timing, and real runs
//! of the same program read either (user-path programs 7/156 and 7/160 under torch 2.15). Such
//! a rank's expectation keeps what both texts share, and its comment says why: a recording
//! then states what the program decides, not one run's race.

use super::parse::{CallEnd, OwnEndKind, Proc};

/// How long before a peer's death a call may begin and still race it: gloo writes a call's
/// first message within a millisecond or two of the call (Python and dispatch).
const BEFORE_MS: u64 = 3;

/// How long after it: the dead process's sockets close once the kernel has torn it down,
/// 10-25 ms for a PyTorch process on the machines measured (runtime/fabric.rs).
const AFTER_MS: u64 = 50;

/// What both peer-loss texts contain, as an `[[expect]]` error substring.
pub const EITHER: &str = "by peer";

/// A process that ended at once by a signal it sent itself, and when (its sockets close after
/// the kernel's teardown; one that exited closed them itself, with nothing unread).
pub struct Death {
    pub rank: usize,
    pub t_ms: u64,
    what: String,
}

/// Every process the recording saw killed by its own signal, with the time of the signal.
pub fn deaths(ranks: &[Proc]) -> Vec<Death> {
    ranks
        .iter()
        .filter_map(|p| {
            let e = p.own_end.as_ref()?;
            let OwnEndKind::Signal(sig) = e.how else {
                return None;
            };
            Some(Death {
                rank: p.rank(),
                t_ms: e.t_ms?,
                what: format!("sent itself {}", crate::outcome::signal_name(sig)),
            })
        })
        .collect()
}

/// Why rank `p`'s recorded peer-loss text may read the other way in another run: its failing
/// call began close to another rank's death. `None` for any other failure.
pub fn why_either(p: &Proc, deaths: &[Death]) -> Option<String> {
    let msg = p.raised.as_ref()?.msg.as_str();
    if !crate::c10d::error::is_peer_loss(msg) {
        return None;
    }
    let call = p
        .calls
        .iter()
        .rev()
        .find(|c| matches!(c.end, CallEnd::Error { .. }))?;
    let t = call.t_call_ms?;
    let d = deaths
        .iter()
        .filter(|d| d.rank != p.rank())
        .filter(|d| t + BEFORE_MS >= d.t_ms && t <= d.t_ms + AFTER_MS)
        .min_by_key(|d| d.t_ms.abs_diff(t))?;
    let when = match t.cmp(&d.t_ms) {
        std::cmp::Ordering::Less => format!("{} ms before", d.t_ms - t),
        std::cmp::Ordering::Equal => "in the same ms as".into(),
        std::cmp::Ordering::Greater => format!("{} ms after", t - d.t_ms),
    };
    Some(format!(
        "closed or reset by peer: its failing call began {when} rank {} {}, and whether its \
         messages reached that process before it died, during its teardown or after is TCP \
         timing, which real runs do not repeat (the expectation keeps \"{EITHER}\")",
        d.rank, d.what
    ))
}

/// A line per rank whose expectation keeps only [`EITHER`], for the command's summary.
pub fn loosened(ranks: &[Proc]) -> Vec<String> {
    let deaths = deaths(ranks);
    let mut v: Vec<(usize, String)> = ranks
        .iter()
        .filter_map(|p| Some((p.rank(), why_either(p, &deaths)?)))
        .collect();
    v.sort();
    v.into_iter()
        .map(|(r, why)| format!("rank {r}'s expectation: {why}"))
        .collect()
}
