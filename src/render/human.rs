//! The human report (`scen run`, `scen replay`): the verdict per rank with the ranks that share
//! it, the diagnosis, the first stall, notes and expectations, in lines that fit a screen for
//! 16 ranks.

use scen_core::diagnose::hang::ranges;
use scen_core::report::{Mode, Report};
use scen_core::scenario::Scenario;
use scen_core::trace::format_ms;
use scen_core::verdict::{describe_verdict, RankVerdict};
use std::fmt::Write;

/// Verdict lines with the ranks that share them, in rank order of first appearance. When the
/// diagnosis has a wait-for graph, hung ranks print without their wait detail (it says more).
fn grouped_verdicts(scenario: &Scenario, r: &Report) -> Vec<(String, Vec<usize>)> {
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, v) in r.ranks.iter().enumerate() {
        let line = match v {
            RankVerdict::Hung { step, .. } if r.diagnosis.hang.is_some() => {
                format!(
                    "hangs in {}",
                    scen_core::verdict::step_place(scenario, *step)
                )
            }
            _ => describe_verdict(scenario, v),
        };
        match out.iter_mut().find(|(l, _)| *l == line) {
            Some((_, ranks)) => ranks.push(i),
            None => out.push((line, vec![i])),
        }
    }
    out
}

/// The human report: verdict per rank, the first stall, expectations. Fits a screen for 16 ranks.
pub fn render(scenario: &Scenario, r: &Report) -> String {
    let mut out = String::new();
    // The simulator's time is virtual; the hardware mode's is wall time since its launch.
    let (header_time, clock) = if r.mode.is_real() {
        ("wall clock".to_string(), "after launch")
    } else {
        (format!("seed {}, virtual epoch 0", r.seed), "virtual")
    };
    let _ = writeln!(
        out,
        "scen {} — {} ({} mode, launcher {}, {header_time})",
        r.scenario,
        r.file,
        r.mode,
        r.launcher.name()
    );
    let counts = |k: &str| r.ranks.iter().filter(|v| v.kind() == k).count();
    let elsewhere = match counts("elsewhere") {
        0 => String::new(),
        n => format!(", {n} run elsewhere"),
    };
    let _ = writeln!(
        out,
        "outcome: {} completed, {} failed, {} hung{elsewhere}; ended at {} {clock}",
        counts("completes"),
        counts("fails"),
        counts("hangs"),
        end_time(r)
    );
    for (line, ranks) in grouped_verdicts(scenario, r) {
        let who = if ranks.len() == 1 {
            format!("rank {:>3}", ranks[0])
        } else {
            format!("ranks {}", ranges(&ranks))
        };
        let _ = writeln!(out, "  {who}: {line}");
    }
    if !r.diagnosis.is_empty() {
        let _ = writeln!(out, "diagnosis:");
        for l in r.diagnosis.lines(&scenario.file) {
            let _ = writeln!(out, "  {l}");
        }
    }
    if let (Some(st), None) = (&r.first_stall, &r.diagnosis.hang) {
        let _ = writeln!(
            out,
            "first stall at {}: no rank could make progress",
            format_ms(st.t_ms).trim()
        );
        for s in &st.stuck {
            let when = match (&s.wait.deadline_ms, &s.wait.timeout_error) {
                (Some(d), Some(e)) => format!("times out at {}: {e}", format_ms(*d).trim()),
                (Some(d), None) => format!("times out at {}", format_ms(*d).trim()),
                _ => "waits forever (no watchdog)".to_string(),
            };
            let _ = writeln!(
                out,
                "  rank {:>3} in {}: {}",
                s.rank,
                scenario.steps[s.step].label(),
                s.wait.what
            );
            for p in &s.peers {
                let _ = writeln!(out, "           waiting for {p}");
            }
            let _ = writeln!(out, "           {when}");
        }
        for o in &st.others {
            let _ = writeln!(out, "  {o}");
        }
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    if !r.device_time.is_empty() {
        let _ = writeln!(out, "time inside the device library:");
        for d in &r.device_time {
            let _ = writeln!(out, "  {}", d.line());
        }
    }
    let ok = r.expectations.iter().filter(|e| e.holds).count();
    let _ = writeln!(out, "expectations: {ok}/{} hold", r.expectations.len());
    for e in r.expectations.iter().filter(|e| !e.holds) {
        let _ = writeln!(
            out,
            "  rank {}: expected {}, got {}",
            e.rank, e.expected, e.actual
        );
    }
    let _ = writeln!(
        out,
        "trace: {} events, hash {}",
        r.trace.events.len(),
        r.trace_hash
    );
    out
}

/// When the run ended: to the microsecond in the simulator, whose clock follows its timing model
/// below a millisecond (docs/performance.md); to the millisecond in the real modes.
fn end_time(r: &Report) -> String {
    match r.mode {
        Mode::Sim => format!("{}.{:06}s", r.end_us / 1_000_000, r.end_us % 1_000_000),
        _ => format_ms(r.end_ms).trim().to_string(),
    }
}
