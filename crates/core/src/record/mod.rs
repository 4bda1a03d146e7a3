//! `scen record`'s translation: what a real torch.distributed program did, rank by rank (the
//! JSON lines python/scen/recorder.py writes), as one scenario. Pure: no processes, no
//! files; `src/cmd/record.rs` runs the program and hands the records here.
//!
//! [`parse`] reads the records, [`steps`] turns each rank's calls into steps, [`merge`] makes
//! one program of them (equal steps shared, with `on`), [`write`] the scenario text: `[world]`
//! from the launcher's environment, a `# file:line` on every step, `[[expect]]` with each
//! rank's outcome. `--platform`/`--backend` re-target it (gloo device groups and CPU tensors
//! to the accelerator; groups made with an explicit gloo backend stay on the CPU).

mod ends;
pub mod merge;
pub mod parse;
pub mod race;
pub mod steps;
pub mod timing;
pub mod write;

pub use parse::{parse, Proc};
use std::collections::BTreeMap;

/// What `scen record` was asked for.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The command that ran (the header quotes it).
    pub command: String,
    /// Re-target to this platform (`xpu`, `cuda`, `cpu`).
    pub platform: Option<String>,
    /// Re-target device groups that used gloo (or no backend) to this backend.
    pub backend: Option<String>,
    /// scen ended the program at its time limit: ranks still running then are written as
    /// `running` at that time.
    pub timed_out: bool,
    /// When it did (wall-clock ms, the recorder's clock).
    pub cut_ms: Option<u64>,
    /// Paths in `file:line` are written relative to this directory when under it.
    pub cwd: Option<String>,
}

/// Why the records cannot become a scenario.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordError {
    /// No process made a torch.distributed call.
    #[error("the program made no torch.distributed call (nothing recorded){0}")]
    NoRecords(String),
    /// The program ran without torch.
    #[error("torch is not installed for {python}: install it there (`{python} -m pip install torch`), or run scen record where a Python with torch comes first on PATH")]
    NoTorch { python: String },
    /// A record file is damaged.
    #[error("{file}:{line}: {message}")]
    BadRecord {
        file: String,
        line: usize,
        message: String,
    },
    /// A call the scenario format cannot express.
    #[error("rank {rank} at {at}: {message}")]
    Unsupported {
        rank: usize,
        at: String,
        message: String,
    },
    /// Two processes say they are the same rank.
    #[error("two processes recorded rank {rank}: {a} and {b} (one job per recording)")]
    DuplicateRank { rank: usize, a: String, b: String },
    /// The scenario written does not load: a defect in scen.
    #[error("the recorded scenario does not load ({0}); this is a defect in scen record")]
    Invalid(String),
    /// `--platform` / `--backend` not understood.
    #[error("{0}")]
    BadOption(String),
}

/// A recording made into a scenario.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The scenario file's text (loads with `scen check`).
    pub text: String,
    pub world: usize,
    pub steps: usize,
    /// One line per rank: its outcome as recorded.
    pub outcomes: Vec<String>,
    /// Each step written as an approximation of the call (`# recorded APPROXIMATED: ...` in the
    /// text), with the call's file:line, and each expectation that keeps less than the run's
    /// text ([`race`]): the command prints them, so a recording never runs another program, or
    /// expects another outcome, unsaid.
    pub approximations: Vec<String>,
}

/// The approximation comments of a recording's text, each with its step's `# file:line`.
fn approximations(text: &str) -> Vec<String> {
    let mut at = "";
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(a) = line.strip_prefix("[[step]]  # ") {
            at = a;
        } else if let Some(n) = line.strip_prefix("# recorded APPROXIMATED: ") {
            out.push(format!("{at}: {n}"));
        }
    }
    out
}

/// A rank whose program completed and whose process a signal of its own (not the agent's
/// SIGTERM) then ended in its teardown: that end, at its last call's line, when the process
/// was gone.
fn teardown_signal(p: &Proc) -> Option<parse::OwnEnd> {
    let sig = p.own_fatal_signal()?;
    if !p.exited || p.raised.is_some() {
        return None;
    }
    Some(parse::OwnEnd {
        how: parse::OwnEndKind::TeardownSignal(sig),
        at: p.calls.last()?.at.clone(),
        t_ms: p.t_gone_ms,
    })
}

/// The scenario for processes `procs` (those that recorded no call are left out).
pub fn record(procs: Vec<Proc>, o: &Options) -> Result<Recording, RecordError> {
    if let Some(p) = &o.platform {
        if !["xpu", "cuda", "cpu"].contains(&p.as_str()) {
            return Err(RecordError::BadOption(format!(
                "--platform {p}: expected xpu, cuda or cpu"
            )));
        }
    }
    if o.backend.is_some() && o.platform.is_none() {
        return Err(RecordError::BadOption(
            "--backend re-targets a recording: give --platform too (e.g. --platform xpu --backend xccl)".into(),
        ));
    }
    let no_torch = procs.iter().find_map(|p| p.no_torch.clone());
    // torchrun's agent records each failed worker's exit status (by pid) in its own file.
    let statuses: BTreeMap<u64, (i32, Option<u64>)> = procs
        .iter()
        .flat_map(|p| p.worker_exits.iter().map(|(pid, c, t)| (*pid, (*c, *t))))
        .collect();
    let ranks: Vec<Proc> = procs
        .into_iter()
        .filter(|p| !p.calls.is_empty())
        .map(|mut p| {
            p.agent_status = statuses.get(&p.pid).map(|s| s.0);
            p.agent_seen_ms = statuses.get(&p.pid).and_then(|s| s.1);
            p.own_end = p.own_end.take().or_else(|| teardown_signal(&p));
            p
        })
        .collect();
    if ranks.is_empty() {
        return Err(match no_torch {
            Some(python) => RecordError::NoTorch { python },
            None => RecordError::NoRecords(String::new()),
        });
    }
    let text = write::scenario(&ranks, o)?;
    let s = crate::scenario::load::parse(&text, "recorded.toml", "recorded")
        .map_err(|e| RecordError::Invalid(e.to_string()))?;
    Ok(Recording {
        world: s.world.size(),
        steps: s.steps.len(),
        outcomes: write::outcome_lines(&ranks, o),
        approximations: approximations(&text)
            .into_iter()
            .chain(race::loosened(&ranks))
            .collect(),
        text,
    })
}

#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod timing_tests;
