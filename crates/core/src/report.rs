//! One report for every mode: what it holds and how it is built (the binary's `render` module
//! prints it: human text, JSON, JUnit).
//!
//! The simulator, the hardware launcher and torch mode each observe a run their own way, but
//! they hand what they saw to [`build`] as an [`Observed`] (trace, rank ends, waits, steps, call
//! and group records, stalls) with the few facts only the mode knows ([`RunFacts`]). Verdicts,
//! expectations, notes, the consistency and hang diagnosis and the environment diagnosis are
//! then made here, once, the same way in every mode — so a comparison of modes compares runs,
//! not three report builders.

use crate::diagnose::{CallRecord, Diagnosis};
use crate::observe::Observed;
use crate::outcome::Failure;
use crate::probe::Fact;
use crate::scenario::{Launcher, RankSpec, Scenario};
use crate::trace::{Event, EventKind, Trace};
use crate::verdict::{
    check_expectations, diagnose_run, expect_notes, rank_verdict, ExpectationCheck, RankVerdict,
    Stall,
};
use serde::Serialize;

/// Which runner made a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The deterministic simulator (virtual time).
    Sim,
    /// `--hw`: real processes, sockets and oneCCL (wall time).
    Hw,
    /// `--torch`: the program on real PyTorch (wall time).
    Torch,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Sim => "sim",
            Mode::Hw => "hw",
            Mode::Torch => "torch",
        }
    }

    /// Real processes on the wall clock (times count from the launch), not virtual time.
    pub fn is_real(self) -> bool {
        !matches!(self, Mode::Sim)
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq<&str> for Mode {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub scenario: String,
    pub file: String,
    pub mode: Mode,
    /// How the job was started (`[world] launcher`, or `--launcher`): who hosts the TCPStore
    /// and whether an agent stops the workers after one fails.
    pub launcher: Launcher,
    pub seed: u64,
    pub ranks: Vec<RankVerdict>,
    /// The first stall (the moment to look at), if any.
    pub first_stall: Option<Stall>,
    /// The final stall, when ranks are still stuck at the end.
    pub final_stall: Option<Stall>,
    pub end_ms: u64,
    /// The same, in microseconds: the simulator's clock follows its timing model below a
    /// millisecond (the real modes: `end_ms` x 1000).
    pub end_us: u64,
    pub trace: Trace,
    pub trace_hash: String,
    pub expectations: Vec<ExpectationCheck>,
    pub notes: Vec<String>,
    /// Every collective/p2p call of every rank, flight-recorder style, in report order
    /// (by group, then rank, then call order).
    pub calls: Vec<CallRecord>,
    /// Consistency mismatches and the wait-for graph of the first stall.
    pub diagnosis: Diagnosis,
    /// Per rank, the time its process spent inside the device library (hardware mode with
    /// device groups; empty otherwise), in rank order.
    pub device_time: Vec<DeviceTime>,
}

/// How much of a rank process's time was inside the device library's calls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceTime {
    pub rank: usize,
    /// `oneCCL`.
    pub library: String,
    /// Microseconds inside the library's calls (communicator creation included).
    pub inside_us: u64,
    /// Microseconds since the process loaded the library (about its whole life).
    pub of_us: u64,
    /// Calls made.
    pub calls: u64,
}

impl DeviceTime {
    /// `rank 0: 1.23 s of 1.40 s inside oneCCL (88%), 51 calls`.
    pub fn line(&self) -> String {
        let pct = 100.0 * self.inside_us as f64 / self.of_us.max(1) as f64;
        format!(
            "rank {}: {:.2} s of {:.2} s inside {} ({pct:.0}%), {} calls",
            self.rank,
            self.inside_us as f64 / 1e6,
            self.of_us as f64 / 1e6,
            self.library,
            self.calls
        )
    }
}

/// The device time facts the ranks reported, in rank order.
fn device_time(facts: &[(usize, Fact)]) -> Vec<DeviceTime> {
    let mut out: Vec<DeviceTime> = facts
        .iter()
        .filter_map(|(rank, f)| match f {
            Fact::DeviceTime {
                library,
                inside_us,
                of_us,
                calls,
            } => Some(DeviceTime {
                rank: *rank,
                library: library.clone(),
                inside_us: *inside_us,
                of_us: *of_us,
                calls: *calls,
            }),
            _ => None,
        })
        .collect();
    out.sort_by_key(|d| d.rank);
    out
}

impl Report {
    pub fn expectations_hold(&self) -> bool {
        self.expectations.iter().all(|e| e.holds)
    }
}

/// What only the mode knows about a run.
pub struct RunFacts<'a> {
    pub mode: Mode,
    pub seed: u64,
    /// When the run ended (virtual ms in the simulator, ms after launch in the real modes).
    pub end_ms: u64,
    /// The same in microseconds.
    pub end_us: u64,
    /// The ranks this run launched; `None` = all. A hardware node checks only its own ranks'
    /// expectations (the others ran on other machines).
    pub local: Option<&'a [usize]>,
    /// The world's ranks as they ran (environment faults applied): the environment
    /// diagnosis compares their variables.
    pub env_ranks: &'a [RankSpec],
    /// The mode's own notes (fault attribution, watchdog actions, ports...), first in the report.
    pub notes: Vec<String>,
    /// The trace was gathered from several processes (the real modes): it is put in time order
    /// and closed with the notes as verdict events, which the simulator records as they happen.
    pub gathered: bool,
}

/// The report of a run from what was observed of it.
pub fn build(s: &Scenario, mut o: Observed, run: RunFacts<'_>) -> Report {
    if run.gathered {
        o.trace.events.sort_by_key(|e| e.t_ms);
        for n in &run.notes {
            o.trace.events.push(Event {
                t_ms: run.end_ms,
                rank: None,
                step: None,
                kind: EventKind::Verdict,
                text: n.clone(),
                tag: None,
            });
        }
    }
    let elsewhere = |r: usize| o.ends[r].is_none() && run.local.is_some_and(|l| !l.contains(&r));
    let ranks: Vec<_> = (0..s.world.size())
        .map(|r| match elsewhere(r) {
            true => RankVerdict::Elsewhere,
            false => rank_verdict(o.ends[r].as_ref(), o.waits[r].as_ref(), o.step[r]),
        })
        .collect();
    let expectations = check_expectations(s, &ranks)
        .into_iter()
        .filter(|e| run.local.is_none_or(|l| l.contains(&e.rank)))
        .collect();
    let mut notes = run.notes;
    notes.extend(expect_notes(s, &o.facts));
    if run.mode == Mode::Sim {
        notes.extend(s.sim.payloads.note());
    }
    let (diagnosis, calls) =
        diagnose_run(&ranks, &o.calls, &o.groups, o.first_stall_calls.as_ref());
    let failed: Vec<(usize, usize, &Failure)> = (ranks.iter().enumerate())
        .filter_map(|(r, v)| match v {
            RankVerdict::Failed { step, failure, .. } => Some((r, *step, failure)),
            _ => None,
        })
        .collect();
    let diagnosis = diagnosis.with_env(run.env_ranks).with_device(s, &failed);
    let device_time = device_time(&o.facts);
    Report {
        scenario: s.name.clone(),
        file: s.file.clone(),
        mode: run.mode,
        launcher: s.world.launcher,
        seed: run.seed,
        ranks,
        first_stall: o.first_stall,
        final_stall: o.final_stall,
        end_ms: run.end_ms,
        end_us: run.end_us,
        trace_hash: format!("{:016x}", o.trace.hash()),
        trace: o.trace,
        expectations,
        notes,
        calls,
        diagnosis,
        device_time,
    }
}
