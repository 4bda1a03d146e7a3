//! Verdicts: how each rank ended, why the stuck ones are stuck, and whether the scenario's
//! expectations hold: the parts of every mode's report (report.rs builds and prints it).

use crate::diagnose::hang::ranges;
use crate::diagnose::hang::RankAt;
use crate::diagnose::{CallRecord, Diagnosis, GroupLog};
use crate::outcome::{Failure, RankEnd};
use crate::probe::Fact;
use crate::scenario::{ExpectedOutcome, Scenario};
use crate::trace::{format_ms, Wait};
use serde::Serialize;
use std::fmt::Write;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RankVerdict {
    Completed {
        t_ms: u64,
    },
    /// `failure`: why, as data; its text is what reports print (`error` in JSON).
    Failed {
        step: usize,
        failure: Failure,
        t_ms: u64,
    },
    /// Still blocked when nothing else could happen; `wait` says on what.
    Hung {
        step: usize,
        wait: Option<Wait>,
    },
    /// Run by another process of the job (under torchrun, srun or mpirun each process runs
    /// one rank; another node's launcher runs its node's ranks) and never heard of here: its
    /// verdict is in that process's report. Never a simulator verdict.
    Elsewhere,
}

impl RankVerdict {
    /// The outcome class with its step and how the rank ended, as two runs of one program are
    /// compared (the differential oracle, the launcher comparison): `completes`, `fails in #3
    /// (raised)`, `hangs in #2`; and the failure's text (empty unless it failed).
    pub fn facts(&self) -> (String, String) {
        match self {
            RankVerdict::Completed { .. } => ("completes".into(), String::new()),
            RankVerdict::Failed { step, failure, .. } => (
                format!("fails in #{} ({})", step + 1, failure.kind()),
                failure.text(),
            ),
            RankVerdict::Hung { step, .. } => (format!("hangs in #{}", step + 1), String::new()),
            RankVerdict::Elsewhere => ("elsewhere".into(), String::new()),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            RankVerdict::Completed { .. } => "completes",
            RankVerdict::Failed { .. } => "fails",
            RankVerdict::Hung { .. } => "hangs",
            RankVerdict::Elsewhere => "elsewhere",
        }
    }

    /// The failure's text, for a failed rank.
    pub fn error(&self) -> Option<String> {
        match self {
            RankVerdict::Failed { failure, .. } => Some(failure.text()),
            _ => None,
        }
    }
}

/// A rank's verdict from what its runner observed (both runners, one rule): how its program
/// ended and when, or else where it last waited (that wait's step, or the last step started).
pub fn rank_verdict(
    end: Option<&(RankEnd, u64)>,
    wait: Option<&Wait>,
    last_step: Option<usize>,
) -> RankVerdict {
    match end {
        Some((RankEnd::Completed, t)) => RankVerdict::Completed { t_ms: *t },
        Some((RankEnd::Failed { step, failure }, t)) => RankVerdict::Failed {
            step: *step,
            failure: failure.clone(),
            t_ms: *t,
        },
        None => RankVerdict::Hung {
            step: wait.map(|w| w.step).or(last_step).unwrap_or(0),
            wait: wait.cloned(),
        },
    }
}

/// The diagnosis of a run from its records, and the call records in report order (by group,
/// then rank). `stall`: the records and rank states at the first stall, if there was one.
pub fn diagnose_run(
    ranks: &[RankVerdict],
    calls: &[CallRecord],
    groups: &GroupLog,
    stall: Option<&(Vec<CallRecord>, Vec<RankAt>, u64)>,
) -> (Diagnosis, Vec<CallRecord>) {
    let finished: Vec<bool> = ranks
        .iter()
        .map(|v| matches!(v, RankVerdict::Completed { .. }))
        .collect();
    // When its peers could first see a rank's failure: a gloo timeout closes its pairs
    // GLOO_CLOSURE_DELAY_MS after the deadline (a peer's call that fails then failed on the
    // timeout both met, not on the rank's end).
    let failed_at: Vec<Option<u64>> = ranks
        .iter()
        .map(|v| match v {
            RankVerdict::Failed { t_ms, failure, .. } => Some(
                t_ms + u64::from(crate::c10d::error::recognise::is_gloo_timeout(failure))
                    * crate::runtime::fabric::GLOO_CLOSURE_DELAY_MS,
            ),
            _ => None,
        })
        .collect();
    let stall = stall.map(|(c, r, t)| (c.as_slice(), r.as_slice(), *t));
    // The cross-rank checks compare every member's calls: with ranks run by other processes
    // (whose calls are not here) they would report every call of this process as unmatched.
    let partial = ranks.iter().any(|v| matches!(v, RankVerdict::Elsewhere));
    let diagnosis = if partial {
        Diagnosis::default()
    } else {
        Diagnosis::build(calls, &finished, &failed_at, stall).with_groups(groups)
    };
    let mut sorted = calls.to_vec();
    sorted.sort_by(|a, b| (a.group.as_str(), a.rank).cmp(&(b.group.as_str(), b.rank)));
    (diagnosis, sorted)
}

/// One stuck rank at a moment when no rank could make progress.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stuck {
    pub rank: usize,
    pub step: usize,
    pub wait: Wait,
    /// For each awaited peer: what that peer is doing.
    pub peers: Vec<String>,
}

/// A moment with no possible progress except timeouts: who is stuck where, waiting for whom.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stall {
    pub t_ms: u64,
    pub stuck: Vec<Stuck>,
    /// Ranks that have not finished and are not blocked in a wait (never started a blocking step).
    pub others: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExpectationCheck {
    pub rank: usize,
    pub expected: String,
    pub actual: String,
    pub holds: bool,
}

/// One note per step whose `expect` did not apply on some ranks: `expect of step 3 all_reduce
/// "tp" (file:22) does not apply on ranks 2, 3: not members of its group (no-op, R27)`.
/// `facts`: what the ranks reported, typed ([`Fact::ExpectNotApplied`] counts here).
pub fn expect_notes(scenario: &Scenario, facts: &[(usize, Fact)]) -> Vec<String> {
    let mut by_step: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for (r, f) in facts {
        if let Fact::ExpectNotApplied { step } = f {
            by_step.entry(*step).or_default().push(*r);
        }
    }
    by_step
        .into_iter()
        .map(|(s, ranks)| {
            let step = &scenario.steps[s];
            format!(
                "expect of {} ({}:{}) does not apply on rank{} {}: not a member of its group, \
                 the call is a no-op there (R27)",
                step.label(),
                scenario.file,
                step.loc.line,
                if ranks.len() == 1 { "" } else { "s" },
                ranges(&ranks)
            )
        })
        .collect()
}

/// The `[[expect]]` that applies to rank `r`: the last entry whose `on` matches it (none: the
/// rank is expected to complete).
pub fn expectation_for(scenario: &Scenario, r: usize) -> Option<&crate::scenario::Expectation> {
    let world = &scenario.world;
    let spec = &world.ranks[r];
    scenario
        .expect
        .iter()
        .rev()
        .find(|e| e.on.matches(spec, world))
}

/// Checks every rank against the scenario's `[[expect]]` (last matching entry wins; none = completes).
pub fn check_expectations(scenario: &Scenario, ranks: &[RankVerdict]) -> Vec<ExpectationCheck> {
    ranks
        .iter()
        .enumerate()
        .map(|(r, v)| {
            let e = expectation_for(scenario, r);
            let (outcome, error, step) = match e {
                Some(e) => (e.outcome, e.error.clone(), e.step),
                None => (ExpectedOutcome::Completes, Vec::new(), None),
            };
            let mut expected = outcome.name().to_string();
            if let Some(s) = step {
                let _ = write!(expected, " in {}", scenario.steps[s].label());
            }
            let quoted: Vec<String> = error.iter().map(|e| format!("\"{e}\"")).collect();
            if !quoted.is_empty() {
                let _ = write!(expected, " with {}", quoted.join(" or "));
            }
            if let ExpectedOutcome::Running { after_ms } = outcome {
                let _ = write!(expected, " at {}", format_ms(after_ms).trim());
                return ExpectationCheck {
                    rank: r,
                    expected,
                    actual: describe_verdict(scenario, v),
                    holds: running_holds(v, step, after_ms),
                };
            }
            let holds = v.kind() == outcome.name()
                && match v {
                    RankVerdict::Failed {
                        step: s, failure, ..
                    } => {
                        let text = failure.text();
                        let text = crate::c10d::error::without_source_locations(&text);
                        step.is_none_or(|x| x == *s)
                            && (error.is_empty() || error.iter().any(|w| text.contains(w.as_str())))
                    }
                    RankVerdict::Hung { step: s, .. } => step.is_none_or(|x| x == *s),
                    RankVerdict::Completed { .. } => true,
                    RankVerdict::Elsewhere => false,
                };
            ExpectationCheck {
                rank: r,
                expected,
                actual: describe_verdict(scenario, v),
                holds,
            }
        })
        .collect()
}

/// `running` at `after_ms` in step `step`: still blocked there, or ended no earlier than
/// `after_ms` (a failure in that step or a later one).
fn running_holds(v: &RankVerdict, step: Option<usize>, after_ms: u64) -> bool {
    match v {
        RankVerdict::Hung { step: s, .. } => step.is_none_or(|x| x == *s),
        RankVerdict::Failed { step: s, t_ms, .. } => {
            *t_ms >= after_ms && step.is_none_or(|x| *s >= x)
        }
        RankVerdict::Completed { t_ms } => *t_ms >= after_ms,
        RankVerdict::Elsewhere => false,
    }
}

/// `step 2 new_group (file:12)`: step `s` and where it is written. A rank killed before it
/// started a scenario without steps ended "in" step 0, which does not exist: that says so.
pub fn step_place(scenario: &Scenario, s: usize) -> String {
    match scenario.steps.get(s) {
        Some(st) => format!("{} ({}:{})", st.label(), scenario.file, st.loc.line),
        None => format!("step {} (before any step of {})", s + 1, scenario.file),
    }
}

/// `fails in step 2 new_group (file:12): RuntimeError: ...`.
pub fn describe_verdict(scenario: &Scenario, v: &RankVerdict) -> String {
    let at = |s: usize| step_place(scenario, s);
    match v {
        RankVerdict::Completed { t_ms } => format!("completes at {}", format_ms(*t_ms).trim()),
        RankVerdict::Failed {
            step,
            failure,
            t_ms,
        } => {
            format!(
                "fails in {} at {}: {failure}",
                at(*step),
                format_ms(*t_ms).trim()
            )
        }
        RankVerdict::Elsewhere => {
            "ran in another process of the job (its verdict is in that process's report)".into()
        }
        RankVerdict::Hung { step, wait } => {
            let mut s = format!("hangs in {}", at(*step));
            if let Some(w) = wait {
                let _ = write!(s, ": {}", w.what);
                if w.deadline_ms.is_none() {
                    s.push_str(" (forever: no timeout applies)");
                }
            }
            s
        }
    }
}
