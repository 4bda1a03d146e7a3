//! The diagnosis's claims about what the real backend does, held to the real run: every
//! "real gloo: <what happens>" line of a mismatch is a claim (issue 21, item 4), checked for the
//! shipped scenarios (torch.rs parity) and the generated programs (differential.rs) alike.

use scen_core::diagnose::check::Consequence;
use scen_core::diagnose::record::CallKind;
use scen_core::report::Report;
use scen_core::scenario::{Scenario, StepKind};
use scen_core::verdict::RankVerdict;

/// The diagnosis's claims about what real gloo does with a mismatched call ("real gloo:
/// errors", "corrupts silently", ...), checked against what the real run did at that call:
/// returns the claims that do not hold, each as a line for the program's header.
pub fn wrong_claims(s: &Scenario, sim: &Report, real: &Report) -> Vec<String> {
    // The call at step `at` ended at `step`: the step itself, or the `wait` of an async call.
    let at_call = |step: usize, at: usize| {
        step == at
            || step > at
                && matches!(
                    s.steps.get(step).map(|x| &x.kind),
                    Some(StepKind::Wait { .. })
                )
    };
    // An async call at step `at` is still in flight at any later step of the rank.
    let in_flight = |step: usize, at: usize| {
        step > at
            && matches!(
                s.steps.get(at).map(|x| &x.kind),
                Some(StepKind::Collective(c)) if c.work.is_some()
            )
    };
    // Did real rank `r`'s communication end (hang, time out, lose its peer, abort) in the call
    // at step `at`? An argument error raised around a call that ran (a cast after the
    // reduction) is not the backend's doing. gloo's `Application timeout caused pair closure`
    // in a later call says a wait of the group timed out first: an async call in flight.
    let ended_in = |r: usize, at: usize| match real.ranks.get(r) {
        Some(RankVerdict::Hung { step, .. }) => at_call(*step, at),
        Some(RankVerdict::Failed { step, failure, .. }) => {
            let text = failure.text();
            let comm = failure.kind() == "killed"
                || ["Timed out waiting", "by peer", "pair closure"]
                    .iter()
                    .any(|k| text.contains(k));
            comm && at_call(*step, at) || text.contains("pair closure") && in_flight(*step, at)
        }
        _ => false,
    };
    let mut wrong = Vec::new();
    for m in sim
        .diagnosis
        .mismatches
        .iter()
        .filter(|m| m.backend == "gloo")
    {
        // Every member that issued the call: a collective's whole group; a p2p pair's send and
        // its recv (the same `src->dst` sequence number).
        let pair = sim
            .calls
            .iter()
            .find(|c| c.rank == m.a.rank && c.group == m.group && c.call_name() == m.a.call)
            .and_then(|c| c.endpoints());
        let issued: Vec<(usize, usize)> = sim
            .calls
            .iter()
            .filter(|c| c.group == m.group && c.seq == m.seq)
            .filter(|c| match c.kind {
                CallKind::Collective => c.fp.op == m.a.fp.op,
                _ => c.endpoints().is_some() && c.endpoints() == pair,
            })
            .map(|c| (c.rank, c.step))
            .collect();
        let failed = issued.iter().any(|&(r, at)| ended_in(r, at));
        // A rank that ended in a later step with an async call still in flight never saw how
        // that call ended: the real run says nothing about it, so neither claim is contradicted.
        // So did a rank whose `wait(timeout=...)` gave up on it (`Operation timed out!`).
        let gave_up = scen_core::c10d::error::work_wait_timeout().message;
        let unseen = issued.iter().any(|&(r, at)| match real.ranks.get(r) {
            Some(RankVerdict::Failed { step, failure, .. })
                if at_call(*step, at) && failure.text().ends_with(gave_up.as_str()) =>
            {
                true
            }
            Some(RankVerdict::Hung { step, .. } | RankVerdict::Failed { step, .. }) => {
                in_flight(*step, at) && !at_call(*step, at)
            }
            _ => false,
        });
        let holds = (!failed && unseen)
            || match m.consequence {
                Consequence::Hangs | Consequence::Errors | Consequence::Aborts => failed,
                Consequence::CorruptsSilently => !failed,
                Consequence::CorruptsOrHangs | Consequence::LostOrHangs => true,
            };
        if !holds {
            wrong.push(format!(
                "diagnosis claims {} for {} #{} on {} (ranks {:?}); real: {}",
                m.real().split(" (").next().unwrap_or_default(),
                m.a.fp.op,
                m.seq,
                m.group_label,
                issued.iter().map(|x| x.0).collect::<Vec<_>>(),
                if failed {
                    "the call failed"
                } else {
                    "the call completed"
                }
            ));
        }
    }
    wrong
}
