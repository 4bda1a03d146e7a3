//! Verdict classes: when two runs of a scenario (different seeds, or a scenario and its shrunk
//! form) "fail the same way".
//!
//! A class is the sorted set of distinct per-rank outcomes, each named without rank numbers,
//! times, ports or step positions: `completes`, `fails in all_reduce "ar": RuntimeError`,
//! `hangs in barrier: recv from rank` (the kind of its typed wait, [`crate::trace::WaitOn::class`]),
//! `crashed`. A failure's class keeps its exception type and its
//! text with numbers removed (see [`error_shape`]). Rank-agnostic and position-agnostic on purpose: a
//! shrinker that removes ranks or earlier steps keeps the class when the failure stays the same.

use crate::report::Report;
use crate::scenario::Scenario;
use crate::verdict::RankVerdict;
use std::collections::BTreeSet;

/// One rank's outcome, canonical.
pub fn rank_class(s: &Scenario, v: &RankVerdict) -> String {
    let step = |i: usize| match s.steps.get(i) {
        Some(st) => match &st.id {
            Some(id) => format!("{} \"{id}\"", st.kind.op_name()),
            None => st.kind.op_name().to_string(),
        },
        None => format!("step {}", i + 1),
    };
    match v {
        RankVerdict::Completed { .. } => "completes".into(),
        RankVerdict::Elsewhere => "elsewhere".into(),
        RankVerdict::Failed { failure, .. } if failure.is_crash() => "crashed".into(),
        RankVerdict::Failed {
            step: i, failure, ..
        } => {
            format!("fails in {}: {}", step(*i), error_shape(&failure.text()))
        }
        RankVerdict::Hung { step: i, wait } => {
            let what = wait.as_ref().map_or("not blocked", |w| w.on.class());
            format!("hangs in {}: {what}", step(*i))
        }
    }
}

/// An error's exception type and text with numbers (ranks, ports, times, sizes) replaced by
/// `N`, cut to its first line and 120 characters: "Connection closed by peer" and "Default
/// process group has not been initialized" are different failures even when both are
/// RuntimeErrors in the same op.
pub fn error_shape(error: &str) -> String {
    let first = error.lines().next().unwrap_or("").trim();
    let mut out = String::new();
    let mut in_number = false;
    for c in first.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('N');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
        if out.chars().count() >= 120 {
            out.push('…');
            break;
        }
    }
    out
}

/// The class key of a run: distinct rank outcomes, sorted, joined with `; `.
pub fn class_key(s: &Scenario, r: &Report) -> String {
    let set: BTreeSet<String> = r.ranks.iter().map(|v| rank_class(s, v)).collect();
    set.into_iter().collect::<Vec<_>>().join("; ")
}
