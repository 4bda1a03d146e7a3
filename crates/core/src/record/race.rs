//! Peer-loss texts a recorded run cannot pin. A rank whose gloo call fails because a peer's
//! process died reads "Connection closed by peer" when its messages reached the peer while it
//! lived (gloo's loop read them) or after its sockets closed, and "Connection reset by peer"
//! when they arrived in between, while the kernel tore the dead process down. When the call
//! began within milliseconds of that death, which one a run reads is TCP timing, and real runs
//! of the same program read either (user-path programs 7/156 and 7/160 under torch 2.15). Such
//! a rank's expectation keeps what both texts share, and its comment says why: a recording
//! then states what the program decides, not one run's race.
//!
//! The same holds for two ranks whose gloo calls reach their timeouts within milliseconds of
//! each other: the first to time out closes its pairs, and the other reads that close ("closed
//! by peer") or its own timeout (`Timed out waiting 3000ms for send operation to complete`),
//! whichever comes first (7/249 and 7/367 read both). Such a rank expects either text.
//!
//! And under torchrun, for a rank blocked in a call with a rank whose process then ended: the
//! call raises on the close (gloo's "closed by peer", DETAIL's monitored barrier), unless the
//! agent's SIGTERM (the agent checks its workers every 0.1 s) reaches it first. Real runs of
//! 7/235, 7/336 and 7/344 read each; a loaded CI machine read SIGTERM in both runs of 1/2, a
//! quiet one the raise. Such a rank expects `SIGTERM` or a `RuntimeError`.

use super::parse::{CallEnd, OwnEndKind, Proc};
use crate::c10d::error::{is_peer_loss, own_timeout_ms, OWN_TIMEOUT, PAIRS_CLOSED};

/// How long before a peer's death a call may begin and still race it: gloo writes a call's
/// first message within a millisecond or two of the call (Python and dispatch), and the dying
/// process's loop thread reads it only when scheduled: in 7/487 (torch 2.15, plain processes)
/// two ranks whose calls began 4 and 6 ms before a peer's SIGKILL read its close in one run
/// and its reset in the next.
const BEFORE_MS: u64 = 10;

/// How long after it: the dead process's sockets close once the kernel has torn it down,
/// 10-25 ms for a PyTorch process on the machines measured (runtime/fabric.rs).
const AFTER_MS: u64 = 50;

/// What both peer-loss texts contain, as an `[[expect]]` error substring.
pub const EITHER: &str = "by peer";

/// A process that died: by a signal it sent itself, at once, or in a call of its own by a
/// signal it did not send (gloo's abort on a message larger than its receive, 7/569), some
/// time between that call's start and the end of its teardown. Its sockets close after the
/// kernel's teardown; one that exited closed them itself, with nothing unread.
struct Death {
    rank: usize,
    /// When it sent the signal, or began the call it died in.
    at_ms: u64,
    /// The first and last ms a call of another rank may begin and still race the death.
    from_ms: u64,
    to_ms: u64,
    what: String,
}

/// Every process the recording saw killed by its own signal, or in one of its calls.
fn deaths(ranks: &[Proc]) -> Vec<Death> {
    ranks
        .iter()
        .filter_map(|p| own_signal(p).or_else(|| died_in_call(p)))
        .collect()
}

/// A process that sent itself a signal whose default action ends it.
fn own_signal(p: &Proc) -> Option<Death> {
    let e = p.own_end.as_ref()?;
    let (OwnEndKind::Signal(sig) | OwnEndKind::TeardownSignal(sig)) = e.how else {
        return None;
    };
    let t = e.t_ms?;
    Some(Death {
        rank: p.rank(),
        at_ms: t,
        from_ms: t.saturating_sub(BEFORE_MS),
        to_ms: t + AFTER_MS,
        what: format!("sent itself {}", crate::outcome::signal_name(sig)),
    })
}

/// A process that died inside a call by a signal torchrun's agent did not send (an abort).
fn died_in_call(p: &Proc) -> Option<Death> {
    let under_agent = p.env.contains_key("TORCHELASTIC_RUN_ID");
    let not_agent = !under_agent || p.own_fatal_signal().is_some();
    if p.exited || p.raised.is_some() || p.own_end.is_some() || !not_agent {
        return None;
    }
    let call = p.calls.last().filter(|c| c.end == CallEnd::Open)?;
    let (t0, gone) = (call.t_call_ms?, p.t_gone_ms?);
    Some(Death {
        rank: p.rank(),
        at_ms: t0,
        from_ms: t0.saturating_sub(BEFORE_MS),
        to_ms: gone,
        what: format!(
            "began the {} it died in by a signal it did not send itself (gloo's abort), its \
             process gone {} ms later",
            call.op,
            gone.saturating_sub(t0)
        ),
    })
}

/// Why rank `p`'s recorded peer-loss text may read the other way in another run: its failing
/// call began close to another rank's death. `None` for any other failure.
fn why_either(p: &Proc, deaths: &[Death]) -> Option<String> {
    let msg = p.raised.as_ref()?.msg.as_str();
    if !is_peer_loss(msg) {
        return None;
    }
    let call = failing_call(p)?;
    let t = call.t_call_ms?;
    let d = deaths
        .iter()
        .filter(|d| d.rank != p.rank())
        .filter(|d| (d.from_ms..=d.to_ms).contains(&t))
        .min_by_key(|d| d.at_ms.abs_diff(t))?;
    let when = match t.cmp(&d.at_ms) {
        std::cmp::Ordering::Less => format!("{} ms before", d.at_ms - t),
        std::cmp::Ordering::Equal => "in the same ms as".into(),
        std::cmp::Ordering::Greater => format!("{} ms after", t - d.at_ms),
    };
    Some(format!(
        "closed or reset by peer: its failing call began {when} rank {} {}, and whether its \
         messages reached that process before it died, during its teardown or after is TCP \
         timing, which real runs do not repeat (the expectation keeps \"{EITHER}\")",
        d.rank, d.what
    ))
}

/// The rank's call that raised (its last).
fn failing_call(p: &Proc) -> Option<&super::parse::Call> {
    p.calls
        .iter()
        .rev()
        .find(|c| matches!(c.end, CallEnd::Error { .. }))
}

/// How close two timeouts, and a timeout and the failure it would have caused, must be to
/// race: gloo's timers are exact to the millisecond, the processes that run them are not.
const TIMEOUT_RACE_MS: u64 = 50;

/// A gloo call that failed at its own timeout: the rank, when, and the timeout.
struct Expiry {
    rank: usize,
    t_ms: u64,
    timeout_ms: u64,
}

/// Every rank whose failing call ended at its own gloo timeout.
fn expiries(ranks: &[Proc]) -> Vec<Expiry> {
    ranks
        .iter()
        .filter_map(|p| {
            let timeout_ms = own_timeout_ms(&p.raised.as_ref()?.msg)?;
            Some(Expiry {
                rank: p.rank(),
                t_ms: failing_call(p)?.t_end_ms?,
                timeout_ms,
            })
        })
        .collect()
}

/// The other text rank `p` could have read, and why: its gloo call failed (a peer's close or
/// its own timeout) within [`TIMEOUT_RACE_MS`] of another rank's own timeout, when its own
/// timeout, counted from its call as the other's, was as close.
fn why_timeout_either(p: &Proc, expiries: &[Expiry]) -> Option<(&'static str, String)> {
    let msg = p.raised.as_ref()?.msg.as_str();
    // Its own timeout, in either of gloo's words (7/330 read each in real runs).
    let closure = msg.contains(PAIRS_CLOSED);
    let own = own_timeout_ms(msg).is_some();
    if !own && !closure && !is_peer_loss(msg) {
        return None;
    }
    let call = failing_call(p)?;
    let (t0, t1) = (call.t_call_ms?, call.t_end_ms?);
    if closure
        && group_timeout_ms(p, call).is_some_and(|ms| (t0 + ms).abs_diff(t1) <= TIMEOUT_RACE_MS)
    {
        // Its own timeout closed its pairs under the call, and the call read the closure:
        // gloo says the same timeout in either words (7/330 read each in real runs).
        let or = OWN_TIMEOUT.trim_end();
        return Some((
            or,
            format!(
                "its own timeout, in gloo's other words: the call ended at its group's timeout, \
                 and whether it reads the timeout or the pairs' closure that timeout caused is \
                 timing real runs do not repeat (the expectation also takes \"{or}\")"
            ),
        ));
    }
    let e = expiries
        .iter()
        .filter(|e| e.rank != p.rank() && e.t_ms.abs_diff(t1) <= TIMEOUT_RACE_MS)
        .filter(|e| (t0 + e.timeout_ms).abs_diff(t1) <= TIMEOUT_RACE_MS)
        .min_by_key(|e| e.t_ms.abs_diff(t1))?;
    let (or, read) = if own {
        (EITHER, "its own timeout")
    } else if closure {
        (OWN_TIMEOUT.trim_end(), "its pairs' closure")
    } else {
        (OWN_TIMEOUT.trim_end(), "the close")
    };
    Some((
        or,
        format!(
            "timed out or closed by peer: rank {} timed out {} ms from this rank's failure, with \
             the {} ms timeout this rank's call also reached then; the first timeout closes \
             its pairs, and whether this rank read {read} or the other comes first is timing \
             real runs do not repeat (the expectation also takes \"{or}\")",
            e.rank,
            e.t_ms.abs_diff(t1),
            e.timeout_ms
        ),
    ))
}

/// How long after a peer's process ended a call may begin and still read its close before
/// torchrun's agent stops the rank (the agent's 0.1 s check, at most).
const AGENT_RACE_MS: u64 = 100;

/// When each rank's process ended of its own accord (an exception, its own exit or signal)
/// or died in a call (gloo's abort, 7/569): its measured end (`gone`, after its teardown)
/// where scen record saw it, else its program's.
fn own_ends(ranks: &[Proc]) -> Vec<(usize, u64)> {
    ranks
        .iter()
        .filter_map(|p| {
            if died_in_call(p).is_some() {
                return Some((p.rank(), p.t_gone_ms?));
            }
            let t = p.own_end_ms()?;
            Some((p.rank(), p.t_gone_ms.unwrap_or(t).max(t)))
        })
        .collect()
}

/// The other end rank `p` could have had, and why, under torchrun: the agent stopped it
/// (SIGTERM) in a call with a rank whose process had ended by then, at most [`AGENT_RACE_MS`]
/// before the call began (the other end: the call's own error, a `RuntimeError`); or its call
/// raised on a peer's close as that peer's process ended (the other end: the agent's SIGTERM).
fn why_agent_either(p: &Proc, ends: &[(usize, u64)]) -> Option<(&'static str, String)> {
    let by_agent = p.agent_status.is_none() || p.stopped_by_agent();
    if !(by_agent && p.env.contains_key("TORCHELASTIC_RUN_ID") && p.own_end.is_none()) {
        return None;
    }
    let stopped = p.raised.is_none() && !p.exited;
    let (call, or, read) = match &p.raised {
        None if stopped => {
            // Its last call still running, or raising on the close when the SIGTERM came,
            // before the exception reached the program's top (7/587).
            let call = p.calls.last().filter(|c| match &c.end {
                CallEnd::Open => true,
                CallEnd::Error { msg, .. } => is_peer_loss(msg),
                CallEnd::Done => false,
            })?;
            (call, "RuntimeError", "its close (the call raises)")
        }
        Some(e) if is_peer_loss(&e.msg) => (failing_call(p)?, "SIGTERM", "the agent's SIGTERM"),
        _ => return None,
    };
    let t0 = call.t_call_ms?;
    let members = group_members(p, call);
    let (peer, t) = ends
        .iter()
        .filter(|(r, t)| *r != p.rank() && t0 <= t + AGENT_RACE_MS)
        .filter(|(r, _)| members.as_ref().is_none_or(|m| m.contains(r)))
        .min_by_key(|(_, t)| *t)?;
    let when = if t0 <= *t {
        format!("{} ms after", t - t0)
    } else {
        format!("{} ms before", t0 - t)
    };
    Some((
        or,
        format!(
            "stopped by torchrun's agent or raised: rank {peer}'s process ended {when} this \
             rank's call began, and whether the call's error on its close or the agent's \
             SIGTERM (it checks its workers every 0.1 s) ends this rank first is timing real \
             runs do not repeat (the expectation also takes {read}: \"{or}\")"
        ),
    ))
}

/// The timeout of the call's group: its `new_group`'s, or the world's from
/// `init_process_group` (None: not recorded).
fn group_timeout_ms(p: &Proc, call: &super::parse::Call) -> Option<u64> {
    let made = match call.args.get("group").and_then(|g| g.as_str()) {
        Some(handle) if handle != "WORLD" => p.calls.iter().find(|c| {
            c.op == "new_group" && c.result.get("handle").and_then(|h| h.as_str()) == Some(handle)
        })?,
        _ => p.calls.iter().find(|c| c.op == "init_process_group")?,
    };
    made.args.get("timeout_ms")?.as_u64()
}

/// The global ranks of the call's group, where the recording says (None: the world, or not
/// known).
fn group_members(p: &Proc, call: &super::parse::Call) -> Option<Vec<usize>> {
    let handle = call.args.get("group")?.as_str()?;
    let made = p.calls.iter().find(|c| {
        c.op == "new_group" && c.result.get("handle").and_then(|h| h.as_str()) == Some(handle)
    })?;
    let ranks = made.args.get("ranks")?.as_array()?;
    Some(
        ranks
            .iter()
            .filter_map(|r| r.as_u64().map(|r| r as usize))
            .collect(),
    )
}

/// How a rank's expectation is loosened: its text replaced by what both readings share (a
/// death race), and a second text taken beside it (a timeout or torchrun's stop). A failure
/// can race both: 7/361's rank 0 began its call near a peer's SIGKILL and reached its
/// timeout with another rank's, and its real runs read a reset and its own timeout.
pub struct Loosening {
    pub shared: Option<&'static str>,
    pub or: Option<&'static str>,
}

/// What the race rules look at, from every recorded rank: who killed themselves, who timed
/// out, and when each process ended of its own accord. One order of the rules, for the
/// expectations and the command's summary alike.
pub struct Races {
    deaths: Vec<Death>,
    expiries: Vec<Expiry>,
    ends: Vec<(usize, u64)>,
}

impl Races {
    pub fn of(ranks: &[Proc]) -> Races {
        Races {
            deaths: deaths(ranks),
            expiries: expiries(ranks),
            ends: own_ends(ranks),
        }
    }

    /// Rank `p`'s loosening and why (one reason a line), if a rule applies: a death, and a
    /// timeout or else torchrun's agent.
    pub fn loosening(&self, p: &Proc) -> Option<(Loosening, Vec<String>)> {
        let death = why_either(p, &self.deaths);
        let other =
            why_timeout_either(p, &self.expiries).or_else(|| why_agent_either(p, &self.ends));
        if death.is_none() && other.is_none() {
            return None;
        }
        let how = Loosening {
            shared: death.as_ref().map(|_| EITHER),
            or: other.as_ref().map(|(or, _)| *or),
        };
        Some((how, death.into_iter().chain(other.map(|o| o.1)).collect()))
    }
}

/// A line per rank whose expectation keeps only [`EITHER`] or takes a second text, for the
/// command's summary.
pub fn loosened(ranks: &[Proc]) -> Vec<String> {
    let races = Races::of(ranks);
    let mut v: Vec<(usize, String)> = ranks
        .iter()
        .filter_map(|p| Some((p.rank(), races.loosening(p)?.1.join("; "))))
        .collect();
    v.sort();
    v.into_iter()
        .map(|(r, why)| format!("rank {r}'s expectation: {why}"))
        .collect()
}
