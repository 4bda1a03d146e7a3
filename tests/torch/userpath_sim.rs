//! The user-path oracle's simulated side (userpath.rs): a recording simulated under its own
//! launcher, and each rank's facts (outcome class and position, text) worded as the real side's
//! are (userpath_real.rs), so the two compare as strings.

use super::pygen::{Kind, PyProgram};
use super::real::{self, RealRank};
use super::{redact, Facts, Recorded};
use scen_core::scenario::ExpectedOutcome;
use scen_core::trace::EventKind;
use scen_core::verdict::RankVerdict;

/// The recording simulated under its own launcher.
pub(super) struct Simulated {
    pub(super) ranks: Vec<RankVerdict>,
    steps: Vec<Step>,
    /// The recording's own `[[expect]]`s the simulation does not meet: `rank R: expected
    /// ..., simulated ...` (empty: the recording holds its own expectations).
    pub(super) broken: Vec<String>,
    /// Per rank: its program had ended (its last step done) when its process was stopped.
    ended: Vec<bool>,
    /// Per rank: the time its recording says it was still running at (`running`, `after_s`:
    /// a job `scen record --timeout-s` cut).
    running_ms: Vec<Option<u64>>,
}

pub(super) fn simulate(r: &Recorded) -> Result<Simulated, String> {
    let Some(text) = &r.recording else {
        return Err(format!(
            "scen record exited {:?} without a recording: {}",
            r.code,
            tail(&r.stderr)
        ));
    };
    if r.code == Some(3) {
        return Err(format!("scen record exited 3: {}", tail(&r.stderr)));
    }
    let s = scen_core::scenario::parse(text, "rec.toml", "rec")
        .map_err(|e| format!("the recording does not load: {e}"))?;
    let rep = scen_sim::simulate(&s, None).map_err(|e| format!("simulating the recording: {e}"))?;
    let broken = scen_core::verdict::check_expectations(&s, &rep.ranks)
        .into_iter()
        .filter(|c| !c.holds)
        .map(|c| {
            format!(
                "rank {}: expected {}, simulated {}",
                c.rank, c.expected, c.actual
            )
        })
        .collect();
    let ended =
        rep.ranks
            .iter()
            .enumerate()
            .map(|(r, v)| match v {
                RankVerdict::Failed { step, .. } => rep.trace.events.iter().any(|e| {
                    e.rank == Some(r) && e.step == Some(*step) && e.kind == EventKind::Done
                }),
                _ => false,
            })
            .collect();
    let running_ms = (0..s.world.ranks.len())
        .map(
            |r| match scen_core::verdict::expectation_for(&s, r)?.outcome {
                ExpectedOutcome::Running { after_ms } => Some(after_ms),
                _ => None,
            },
        )
        .collect();
    Ok(Simulated {
        ranks: rep.ranks,
        steps: step_lines(text),
        broken,
        ended,
        running_ms,
    })
}

fn tail(s: &str) -> String {
    s.lines().rev().take(4).collect::<Vec<_>>().join(" | ")
}

/// A recorded step: its `# prog.py:N`, whether it is a sleep, and its `on` (None: every rank).
struct Step {
    line: usize,
    sleep: bool,
    /// The sleep the recorder writes for a rank a signal stopped after its last call.
    stopped: bool,
    on: Option<Vec<usize>>,
}

impl Step {
    fn runs_on(&self, r: usize) -> bool {
        self.on.as_ref().is_none_or(|o| o.contains(&r))
    }
}

/// Each `[[step]]  # prog.py:N` of a recording in order.
fn step_lines(text: &str) -> Vec<Step> {
    let mut v: Vec<Step> = Vec::new();
    for l in text.lines() {
        if let Some(c) = l.strip_prefix("[[step]]") {
            let line = c
                .rsplit(':')
                .next()
                .and_then(|x| x.trim().parse().ok())
                .unwrap_or(0);
            v.push(Step {
                line,
                sleep: false,
                stopped: false,
                on: None,
            });
        } else if let Some(last) = v.last_mut() {
            // A signal that ended the process in its teardown, after its program completed
            // (gloo's abort at exit), is after its last line too.
            if l.contains("still running when a signal stopped it")
                || l.contains("ended its process in its teardown")
            {
                last.stopped = true;
            } else if l.trim() == "op = \"sleep\"" {
                last.sleep = true;
            } else if let Some(list) = l.strip_prefix("on = [") {
                let ranks = list.trim_end_matches(']').split(',');
                last.on = Some(ranks.filter_map(|x| x.trim().parse().ok()).collect());
            }
        }
    }
    v
}

/// A sleep's position: after the rank's previous call (the recorder heads a sleep between
/// calls with the next call's line, and one a signal ended with the previous call's).
fn sleep_after(line: Option<usize>) -> String {
    line.map_or("sleep at its start".into(), |l| {
        format!("sleep after line {l}")
    })
}

impl Simulated {
    /// The program's next line on rank `r` after `line`, if it is a sleep (1-based). A call
    /// that made no step on the rank (`init_device_mesh` of the world's group, a query) does
    /// not stand between: 7/1088 was stopped in the sleep after one.
    fn next_sleep(&self, p: &PyProgram, line: usize, r: usize) -> Option<usize> {
        let stepped = |line: usize| {
            self.steps
                .iter()
                .any(|s| s.line == line && !s.sleep && s.runs_on(r))
        };
        let next = p.lines.iter().enumerate().skip(line).find(|(i, l)| {
            l.ranks.contains(&r)
                && (l.kind == Kind::Sleep || (l.kind == Kind::Call && stepped(i + 1)))
        });
        match next {
            Some((i, l)) if l.kind == Kind::Sleep => Some(i + 1),
            _ => None,
        }
    }

    pub(super) fn facts(&self, p: &PyProgram) -> Vec<Facts> {
        // After the rank's last line: stopped once its last step was done (in its teardown),
        // or in the sleep the recorder wrote for a rank still running after its last call,
        // unless the program's next line on that rank is a sleep: then it was stopped in that
        // sleep (the recorder heads its stopped sleep with the last call's line).
        let last = |step: usize, r: usize| !self.steps[step + 1..].iter().any(|s| s.runs_on(r));
        let next_sleep = |line: usize, r: usize| self.next_sleep(p, line, r);
        let at = |step: usize, r: usize| match self.steps.get(step) {
            Some(s) if s.stopped && last(step, r) && next_sleep(s.line, r).is_some() => {
                let n = next_sleep(s.line, r).expect("a sleep line");
                sleep_after(previous_call(p, r, n))
            }
            Some(s) if (s.stopped || self.ended[r]) && last(step, r) => {
                "after its last line".to_string()
            }
            Some(s) if s.sleep => {
                let before = self.steps[..step].iter().rev();
                sleep_after(
                    before
                        .filter(|s| !s.sleep && s.runs_on(r))
                        .map(|s| s.line)
                        .next(),
                )
            }
            Some(s) => format!("line {}", s.line),
            None => format!("step {}", step + 1),
        };
        // A job `scen record --timeout-s` cut: a rank still running at the cut shows as the
        // real one does, whatever it did after it.
        let cut = |r: usize| self.running_ms[r].unwrap_or(u64::MAX);
        let fact = |(r, v): (usize, &RankVerdict)| match v {
            RankVerdict::Completed { t_ms } | RankVerdict::Failed { t_ms, .. }
                if *t_ms >= cut(r) =>
            {
                ("hangs".into(), String::new())
            }
            RankVerdict::Completed { .. } => ("completes".into(), String::new()),
            RankVerdict::Failed { step, failure, .. } => (
                format!("fails ({}) at {}", failure.kind(), at(*step, r)),
                redact(&failure.text()),
            ),
            RankVerdict::Hung { .. } => ("hangs".into(), String::new()),
            RankVerdict::Elsewhere => ("elsewhere".into(), String::new()),
        };
        self.ranks.iter().enumerate().map(fact).collect()
    }
}

impl RealRank {
    /// The rank's facts as the simulated ones are worded.
    pub(super) fn facts(&self, p: &PyProgram) -> Facts {
        let at = |line: Option<usize>| match line {
            None if self.after_end => "after its last line".to_string(),
            None => "an unknown line".to_string(),
            Some(n) => match p.lines.get(n - 1) {
                Some(l) if l.kind == Kind::Sleep => sleep_after(previous_call(p, self.rank, n)),
                _ => format!("line {n}"),
            },
        };
        match &self.end {
            real::End::Completed => ("completes".into(), String::new()),
            real::End::Hung => ("hangs".into(), String::new()),
            real::End::Failed(f) => (
                format!("fails ({}) at {}", f.kind(), at(self.line)),
                redact(&f.text()),
            ),
        }
    }
}

/// The last line before `n` that rank `r` runs and that is a call.
fn previous_call(p: &PyProgram, r: usize, n: usize) -> Option<usize> {
    p.lines[..n - 1]
        .iter()
        .rposition(|l| l.kind == Kind::Call && l.ranks.contains(&r))
        .map(|i| i + 1)
}
