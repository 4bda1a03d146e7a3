//! The scenario text of a recording: a header saying where it came from and what a recording
//! cannot know, `[world]` from the launcher's environment, the merged steps (each with its
//! `# file:line`), and `[[expect]]` with every rank's outcome as it happened.

use super::merge::{merge, Merged};
use super::parse::{CallEnd, OwnEndKind, Proc};
use super::steps::{quote, rank_steps, StepDesc};
use super::{ends, race, timing};
use super::{Options, RecordError};
use crate::outcome::signal_name;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Environment variables the model reads, copied into `[world] env` when every rank had them.
const MODEL_ENV: [&str; 4] = [
    "TORCH_DIST_INIT_BARRIER",
    "TORCH_DISTRIBUTED_DEBUG",
    "TORCH_XCCL_BLOCKING_WAIT",
    "ZE_AFFINITY_MASK",
];

/// How a rank ended, with the merged step (0-based) it was at.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Completes,
    /// Raised: `error` is the part of the message that does not vary between runs; `or`, a
    /// text other real runs of the program read instead ([`race`]).
    Fails {
        step: usize,
        error: String,
        or: Option<String>,
    },
    /// Still running at scen record's time limit, `after_ms` after the first call.
    Running {
        step: usize,
        after_ms: u64,
    },
}

/// A failure in `step` expecting `error` (one text).
fn fails(step: usize, error: String) -> Outcome {
    Outcome::Fails {
        step,
        error,
        or: None,
    }
}

/// The recorded platform: the device of the first tensor not on the CPU, else cpu.
fn recorded_device(ranks: &[Proc]) -> String {
    fn walk(v: &Value) -> Option<String> {
        match v {
            Value::Object(m) => {
                if let Some(d) = m.get("device").and_then(Value::as_str) {
                    if m.contains_key("shape") && d != "cpu" {
                        return Some(d.to_string());
                    }
                }
                m.values().find_map(walk)
            }
            Value::Array(a) => a.iter().find_map(walk),
            _ => None,
        }
    }
    ranks
        .iter()
        .flat_map(|p| &p.calls)
        .find_map(|c| walk(&Value::Object(c.args.clone())))
        .unwrap_or_else(|| "cpu".into())
}

/// The stable part of an exception's text: gloo's `[file.cc:N]` dropped, cut before the first
/// address, number or line break (`RuntimeError: Connection closed by peer`).
pub fn error_substring(exc: &str, msg: &str) -> String {
    let mut m = msg.trim();
    // Only a leading source location: `[Rank 0]: ...` (monitored_barrier) is the text itself,
    // and a location further in (its original exception's) is not the start.
    if let Some(rest) = crate::c10d::error::after_source_location(m) {
        m = rest;
    }
    let cut = m
        .char_indices()
        .find(|&(i, c)| (c == '[' && i > 0) || c == '\n' || c == '(' || c.is_ascii_digit())
        .map_or(m.len(), |(i, _)| i);
    let head: String = m[..cut].chars().take(120).collect();
    let head = head.trim_end_matches(|c: char| c.is_whitespace() || ":,;'\"".contains(c));
    if head.is_empty() {
        exc.to_string()
    } else {
        format!("{exc}: {head}")
    }
}

/// `file:line` relative to the recording's directory when under it.
fn rel(at: &str, o: &Options) -> String {
    match &o.cwd {
        Some(d) => at
            .strip_prefix(&format!("{}/", d.trim_end_matches('/')))
            .unwrap_or(at)
            .to_string(),
        None => at.to_string(),
    }
}

/// Ranks by number; two processes with one rank is an error.
fn by_rank(ranks: &[Proc]) -> Result<BTreeMap<usize, &Proc>, RecordError> {
    let mut out: BTreeMap<usize, &Proc> = BTreeMap::new();
    for p in ranks {
        if let Some(other) = out.insert(p.rank(), p) {
            return Err(RecordError::DuplicateRank {
                rank: p.rank(),
                a: other.file.clone(),
                b: p.file.clone(),
            });
        }
    }
    Ok(out)
}

/// The scenario text.
pub fn scenario(ranks: &[Proc], o: &Options) -> Result<String, RecordError> {
    let procs = by_rank(ranks)?;
    let recorded = recorded_device(ranks);
    let mut per_rank: BTreeMap<usize, Vec<StepDesc>> = BTreeMap::new();
    let mut of_call: BTreeMap<usize, Vec<Option<usize>>> = BTreeMap::new();
    let mut own_raise: BTreeMap<usize, usize> = BTreeMap::new();
    let mut own_stop: BTreeMap<usize, usize> = BTreeMap::new();
    let earliest_ms = timing::earliest_first_call_ms(ranks);
    let job_end_ms = timing::job_end_ms(ranks).max(o.cut_ms);
    for (r, p) in &procs {
        let mut rs = rank_steps(p, o, &recorded)?;
        if let Some(late) = timing::late_start(p, earliest_ms) {
            rs.steps.insert(0, late);
            for s in rs.of_call.iter_mut().flatten() {
                *s += 1;
            }
        }
        if let Some(step) = raise_step(p) {
            rs.steps.extend(timing::before_raise(p));
            own_raise.insert(*r, rs.steps.len());
            rs.steps.push(step);
        } else if let Some(step) = exit_step(p) {
            rs.steps.extend(timing::before_own_end(p));
            own_raise.insert(*r, rs.steps.len());
            rs.steps.push(step);
        }
        rs.steps.extend(timing::before_exit(p));
        let cut_ms = o
            .timed_out
            .then(|| o.cut_ms.zip(earliest_ms).map(|(c, e)| c.saturating_sub(e)))
            .flatten();
        if let Some(step) = timing::until_stopped(p, job_end_ms, cut_ms) {
            own_stop.insert(*r, rs.steps.len());
            rs.steps.push(step);
        }
        for s in &mut rs.steps {
            s.at = rel(&s.at, o);
        }
        per_rank.insert(*r, rs.steps);
        of_call.insert(*r, rs.of_call);
    }
    let (merged, index) = merge(&per_rank);
    let world = ranks
        .iter()
        .map(Proc::world_size)
        .max()
        .unwrap_or(1)
        .max(procs.keys().last().map_or(1, |r| r + 1));
    let races = race::Races::of(ranks);
    let outcomes: BTreeMap<usize, (Outcome, String)> = procs
        .iter()
        .map(|(r, p)| {
            let steps: Vec<Option<usize>> =
                of_call[r].iter().map(|s| s.map(|i| index[r][i])).collect();
            let raised_at = own_raise.get(r).map(|i| index[r][*i]);
            let stopped_at = own_stop.get(r).map(|i| index[r][*i]);
            let final_at = index[r].last().copied();
            let found = outcome(p, &steps, (raised_at, stopped_at, final_at), earliest_ms, o);
            (*r, either_text(found, p, &races))
        })
        .collect();
    let mut s = header(ranks, &procs, world, &recorded, o);
    world_table(&mut s, ranks, world, &recorded, o);
    for m in &merged {
        step(&mut s, m, world);
    }
    expectations(&mut s, &outcomes);
    Ok(s)
}

/// One line per rank for the command's summary.
pub fn outcome_lines(ranks: &[Proc], o: &Options) -> Vec<String> {
    let mut v: Vec<(usize, String)> = ranks
        .iter()
        .map(|p| {
            let what = match &p.raised {
                Some(e) => format!("raised {}: {}", e.exc, first_line(&e.msg)),
                None => match p.own_end.as_ref().map(|e| e.how) {
                    Some(OwnEndKind::Exit { code }) => format!("exited with code {code}"),
                    Some(OwnEndKind::ExitNow { code }) => {
                        format!("exited with code {code} (os._exit)")
                    }
                    Some(OwnEndKind::Signal(sig)) => format!("sent itself {}", signal_name(sig)),
                    Some(OwnEndKind::TeardownSignal(sig)) => format!(
                        "completed, then its process ended by {} in its teardown",
                        signal_name(sig)
                    ),
                    None if p.exited && p.stopped_by_agent() => {
                        "completed, then stopped by torchrun's agent in its teardown".into()
                    }
                    None if p.exited => "completed".into(),
                    None if o.timed_out => "still running at the time limit".into(),
                    None => match p.agent_status {
                        Some(st) if st < 0 => format!("killed by {}", signal_name(-st)),
                        _ => "ended without exiting (a signal)".into(),
                    },
                },
            };
            (p.rank(), format!("rank {}: {what}", p.rank()))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, l)| l).collect()
}

/// The message's first line, gloo's `[file.cc:N] ` location dropped, at most 160 characters.
fn first_line(m: &str) -> String {
    let l = m.lines().next().unwrap_or("");
    let l = crate::c10d::error::after_source_location(l).unwrap_or(l);
    let short: String = l.chars().take(160).collect();
    if short.len() < l.len() {
        format!("{short}...")
    } else {
        short
    }
}

/// Whether one of the rank's calls raised (even one the program caught): the rank is recorded
/// as failing in that call.
fn a_call_raised(p: &Proc) -> bool {
    p.calls
        .iter()
        .any(|c| matches!(c.end, CallEnd::Error { .. }))
}

/// The program's own exception (no torch.distributed call raised it) as a `raise` step after
/// the rank's last call, at the file:line of the raise. A rank whose call raised fails in that
/// call instead (the simulator raises it there too, so its later code never runs).
fn raise_step(p: &Proc) -> Option<StepDesc> {
    let e = p.raised.as_ref().filter(|_| !a_call_raised(p))?;
    let msg = e.msg.trim();
    let error = if msg.is_empty() {
        e.exc.clone()
    } else {
        format!("{}: {msg}", e.exc)
    };
    Some(StepDesc {
        op: "raise".into(),
        fields: vec![("error".into(), quote(&error))],
        at: e.at.clone(),
        notes: vec![],
    })
}

/// The program ending its own process after its last call (sys.exit, os._exit, a signal to
/// itself) as an `exit` step at its file:line. A rank whose call raised fails there instead.
fn exit_step(p: &Proc) -> Option<StepDesc> {
    let e = p.own_end.as_ref().filter(|_| !a_call_raised(p))?;
    let fields = match e.how {
        OwnEndKind::Exit { code } => vec![("code".into(), code.to_string())],
        OwnEndKind::ExitNow { code } => vec![
            ("code".into(), code.to_string()),
            ("teardown".into(), "false".into()),
        ],
        OwnEndKind::Signal(sig) | OwnEndKind::TeardownSignal(sig) => {
            vec![("signal".into(), quote(&signal_name(sig)))]
        }
    };
    let notes = match e.how {
        OwnEndKind::TeardownSignal(sig) => vec![format!(
            "its program completed, then {} ended its process in its teardown (gloo's abort at exit, seen by torchrun's agent; real runs do not repeat it): written as its own signal after its last call",
            signal_name(sig)
        )],
        _ => vec![],
    };
    Some(StepDesc {
        op: "exit".into(),
        fields,
        at: e.at.clone(),
        notes,
    })
}

/// What an `[[expect]]` of a rank that ended its own process pins, and its comment.
fn own_end_outcome(how: OwnEndKind, rank: usize, step: usize, at: &str) -> (Outcome, String) {
    let (error, what) = match how {
        OwnEndKind::Exit { code: 0 } | OwnEndKind::ExitNow { code: 0 } => {
            return (
                Outcome::Completes,
                format!(
                    "rank {rank} exited with code 0 at {at}, in step {}",
                    step + 1
                ),
            )
        }
        OwnEndKind::Exit { code } | OwnEndKind::ExitNow { code } => (
            format!("exited with code {code}"),
            format!("exited with code {code}"),
        ),
        OwnEndKind::Signal(sig) => (
            format!("killed by signal {sig}"),
            format!("sent itself {}", signal_name(sig)),
        ),
        OwnEndKind::TeardownSignal(sig) => (
            format!("killed by signal {sig}"),
            format!(
                "completed its program, then {} ended its process in its teardown",
                signal_name(sig)
            ),
        ),
    };
    (
        fails(step, error),
        format!("rank {rank} {what} at {at}, in step {}", step + 1),
    )
}

/// A failure that raced another rank's death, timeout or torchrun's stop ([`race::Races`])
/// expects what both readings share, or either text; the comment says why.
fn either_text(found: (Outcome, String), p: &Proc, races: &race::Races) -> (Outcome, String) {
    let (Outcome::Fails { step, error, .. }, note) = &found else {
        return found;
    };
    let Some((how, why)) = races.loosening(p) else {
        return found;
    };
    let outcome = Outcome::Fails {
        step: *step,
        error: how.shared.map_or_else(|| error.clone(), String::from),
        or: how.or.map(String::from),
    };
    let why: Vec<String> = why.iter().map(|w| format!("\n# ({w})")).collect();
    (outcome, format!("{note}{}", why.concat()))
}

/// What an `[[expect]]` of a rank that raised pins (in `step`, `inside` a call of it or as
/// the program's own raise step), and its comment.
fn raised_outcome(
    e: &super::parse::Raised,
    rank: usize,
    (step, inside): (usize, bool),
    at: &str,
) -> (Outcome, String) {
    let where_ = if inside {
        format!("in step {} at {at}", step + 1)
    } else {
        format!(
            "at {at}, in step {} (the program's own exception, not a torch.distributed call: a raise step)",
            step + 1
        )
    };
    (
        fails(step, error_substring(&e.exc, &e.msg)),
        format!(
            "rank {rank} raised {} {where_}: {}",
            e.exc,
            first_line(&e.msg)
        ),
    )
}

/// How rank `p` ended; `steps[i]` is the merged step of its call i, `raised_at` the merged
/// step of its own raise ([`raise_step`]) or exit, `stopped_at` that of the sleep it was
/// stopped in ([`timing::until_stopped`]), `final_at` its last step, `earliest_ms` the job's
/// first call (a time limit's `after_s` counts from it). Also a comment line.
fn outcome(
    p: &Proc,
    steps: &[Option<usize>],
    (raised_at, stopped_at, final_at): (Option<usize>, Option<usize>, Option<usize>),
    earliest_ms: Option<u64>,
    o: &Options,
) -> (Outcome, String) {
    let last = steps.iter().rev().find_map(|s| *s).unwrap_or(0);
    let failed_call = p
        .calls
        .iter()
        .zip(steps)
        .rev()
        .find(|(c, _)| matches!(c.end, CallEnd::Error { .. }));
    let open_call = p
        .calls
        .iter()
        .zip(steps)
        .rev()
        .find(|(c, _)| c.end == CallEnd::Open)
        .and_then(|(_, s)| *s);
    let rank = p.rank();
    if let Some(e) = &p.raised {
        let (step, inside) = match (failed_call, raised_at) {
            (Some((_, Some(s))), _) => (*s, true),
            (_, Some(s)) => (s, false),
            _ => (last, false),
        };
        return raised_outcome(e, rank, (step, inside), &rel(&e.at, o));
    }
    let stopped_in_teardown = p.exited && p.stopped_by_agent();
    if let (Some(e), Some(step), None, false) =
        (&p.own_end, raised_at, failed_call, stopped_in_teardown)
    {
        return own_end_outcome(e.how, rank, step, &rel(&e.at, o));
    }
    if stopped_in_teardown {
        let last = final_at.unwrap_or(last);
        return (
            fails(last, "SIGTERM".into()),
            format!(
                "rank {rank} completed its program, then torchrun's agent stopped it (SIGTERM) in its teardown, after step {}",
                last + 1
            ),
        );
    }
    if p.exited {
        return (Outcome::Completes, format!("rank {rank} completed"));
    }
    let step = open_call.or(stopped_at).unwrap_or(last);
    if o.timed_out {
        return (
            Outcome::Running {
                step,
                after_ms: o
                    .cut_ms
                    .zip(earliest_ms)
                    .map_or(0, |(c, e)| c.saturating_sub(e)),
            },
            format!(
                "rank {rank} was still in step {} when scen record's time limit ended it",
                step + 1
            ),
        );
    }
    let torchrun = p.env.contains_key("TORCHELASTIC_RUN_ID");
    // The signal, when torchrun's agent recorded it: one of its own (an abort) is not the
    // agent's SIGTERM.
    let own_signal = p.own_fatal_signal();
    let (error, why) = match own_signal {
        Some(sig) => (
            format!("killed by signal {sig}"),
            format!(" ({}, as torchrun's agent saw it)", signal_name(sig)),
        ),
        None if torchrun => (
            "SIGTERM".to_string(),
            " (torchrun stops every worker when one fails)".to_string(),
        ),
        None => (String::new(), String::new()),
    };
    (
        fails(step, error),
        format!("rank {rank} ended by a signal in step {}{why}", step + 1),
    )
}

fn header(
    ranks: &[Proc],
    procs: &BTreeMap<usize, &Proc>,
    world: usize,
    recorded: &str,
    o: &Options,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Recorded by `scen record` (docs/record.md) from: {}",
        o.command.replace('\n', " ")
    );
    let _ = writeln!(
        s,
        "# {world} rank(s), {} process(es) recorded, tensors on {recorded}. Every torch.distributed call of every rank is a",
        ranks.len()
    );
    s.push_str(
        "# step (ranks with the same calls share it), with the file:line that made it. Time a rank spent\n\
         # outside torch.distributed (200 ms or more between calls, a late start of 1 s or more, the\n\
         # time before it raised or exited) is a `sleep` step. Not recorded: tensor values (each\n\
         # tensor is filled with its rank).\n",
    );
    let missing: Vec<usize> = (0..world).filter(|r| !procs.contains_key(r)).collect();
    if !missing.is_empty() {
        let _ = writeln!(s, "# Rank(s) {missing:?} recorded no call (not started, or killed before torch.distributed): they have no steps here.");
    }
    if let Some(p) = &o.platform {
        let _ = writeln!(
            s,
            "# Re-targeted to platform {p}{}: device groups that used gloo now use it and CPU tensors live on {p};\n\
             # groups made with an explicit gloo backend keep it, with their tensors on the CPU.",
            o.backend.as_ref().map(|b| format!(", backend {b}")).unwrap_or_default()
        );
    }
    let _ = writeln!(
        s,
        "[scenario]\ndescription = {}",
        quote(&format!("recorded: {}", o.command))
    );
    s
}

fn world_table(s: &mut String, ranks: &[Proc], world: usize, recorded: &str, o: &Options) {
    let local = ranks
        .iter()
        .find_map(|p| {
            p.env
                .get("LOCAL_WORLD_SIZE")
                .and_then(|v| v.parse::<usize>().ok())
        })
        .filter(|l| *l > 0 && world.is_multiple_of(*l))
        .unwrap_or(world);
    let _ = writeln!(s, "\n[world]");
    if world / local > 1 {
        let _ = writeln!(s, "nodes = {}", world / local);
    }
    let _ = writeln!(s, "ranks_per_node = {local}");
    let platform = o.platform.clone().unwrap_or_else(|| recorded.to_string());
    let _ = writeln!(s, "platform = {}", quote(&platform));
    if ranks
        .iter()
        .any(|p| p.env.contains_key("TORCHELASTIC_RUN_ID"))
    {
        let _ = writeln!(s, "launcher = \"torchrun\"");
        if let Some((check, stop)) = ends::agent_timing(ranks) {
            let _ = writeln!(
                s,
                "agent_check_ms = {check}  # recorded: torchrun's agent saw the first failed worker's exit {check} ms after its process ended (it checks every {} ms)\nagent_stop_ms = {stop}  # recorded: its SIGTERM had ended a worker {stop} ms after that check",
                crate::runtime::torchrun::MONITOR_INTERVAL_MS
            );
        }
    }
    let mut env: Vec<String> = MODEL_ENV
        .iter()
        .filter_map(|k| {
            let v = ranks[0].env.get(*k)?;
            ranks
                .iter()
                .all(|p| p.env.get(*k) == Some(v))
                .then(|| format!("{k} = {}", quote(v)))
        })
        .collect();
    if let Some(port) = port_the_program_names(ranks) {
        env.push(format!("MASTER_PORT = {}", quote(&port)));
    }
    if !env.is_empty() {
        let _ = writeln!(s, "env = {{ {} }}", env.join(", "));
    }
    ports(s, ranks);
    ends::teardowns(s, ranks);
}

/// The `MASTER_PORT` every rank had, when an `init_method` names it (`tcp://host:PORT`, e.g.
/// built from `$MASTER_PORT` under torchrun): the launcher's store must be on that port for the
/// program to meet it, so the recording keeps it (the launcher's default would be another).
/// Likewise when a TCPStore the program makes is on it: the two meet on that port (torchrun's
/// agent store, or init's on rank 0, takes it first: EADDRINUSE).
fn port_the_program_names(ranks: &[Proc]) -> Option<String> {
    let port = ranks.first()?.env.get("MASTER_PORT")?;
    if !ranks.iter().all(|p| p.env.get("MASTER_PORT") == Some(port)) {
        return None;
    }
    let names_it = |c: &super::parse::Call| {
        c.op == "init_process_group"
            && c.args
                .get("init_method")
                .and_then(Value::as_str)
                .is_some_and(|m| m.starts_with("tcp://") && m.ends_with(&format!(":{port}")))
            || c.op == "TCPStore"
                && c.args
                    .get("port")
                    .and_then(Value::as_u64)
                    .is_some_and(|p| p.to_string() == *port)
    };
    ranks
        .iter()
        .any(|p| p.calls.iter().any(names_it))
        .then(|| port.clone())
}

/// Ranks that rendezvoused at different ports (each its own `MASTER_PORT`: a launcher script
/// that computes it per rank) are written so, one `[[world.rank]]` per rank; where they agree,
/// which port it was does not decide the outcome and the launcher's default stands.
fn ports(s: &mut String, ranks: &[Proc]) {
    let port = |p: &Proc| p.env.get("MASTER_PORT").cloned();
    let first = ranks.first().and_then(port);
    if ranks.iter().all(|p| port(p) == first) {
        return;
    }
    let mut by_rank: Vec<(usize, String)> = ranks
        .iter()
        .filter_map(|p| Some((p.rank(), port(p)?)))
        .collect();
    by_rank.sort();
    for (r, v) in by_rank {
        let _ = writeln!(
            s,
            "\n[[world.rank]]  # recorded: this rank's MASTER_PORT\non = \"rank == {r}\"\nenv = {{ MASTER_PORT = {} }}",
            quote(&v)
        );
    }
}

fn step(s: &mut String, m: &Merged, world: usize) {
    let _ = writeln!(s, "\n[[step]]  # {}", m.step.at);
    for n in &m.step.notes {
        let _ = writeln!(s, "# recorded {n}");
    }
    let _ = writeln!(s, "op = {}", quote(&m.step.op));
    if m.ranks != (0..world).collect::<Vec<_>>() {
        let _ = writeln!(s, "on = {:?}", m.ranks);
    }
    for (k, v) in &m.step.fields {
        let _ = writeln!(s, "{k} = {v}");
    }
}

fn expectations(s: &mut String, outcomes: &BTreeMap<usize, (Outcome, String)>) {
    if outcomes.values().all(|(o, _)| *o == Outcome::Completes) {
        s.push_str("\n# every rank completed\n[[expect]]\noutcome = \"completes\"\n");
        return;
    }
    for (_, note) in outcomes.values() {
        let _ = writeln!(s, "\n# {note}");
    }
    let mut groups: BTreeMap<&Outcome, Vec<usize>> = BTreeMap::new();
    for (r, (o, _)) in outcomes {
        groups.entry(o).or_default().push(*r);
    }
    for (o, rs) in groups {
        let _ = write!(s, "\n[[expect]]\non = {rs:?}\n");
        match o {
            Outcome::Completes => s.push_str("outcome = \"completes\"\n"),
            Outcome::Running { step, after_ms } => {
                let _ = writeln!(
                    s,
                    "outcome = \"running\"\nafter_s = {:?}\nstep = {}",
                    *after_ms as f64 / 1000.0,
                    step + 1
                );
            }
            Outcome::Fails { step, error, or } => {
                let _ = writeln!(s, "outcome = \"fails\"\nstep = {}", step + 1);
                match or {
                    Some(other) => {
                        let _ = writeln!(s, "error = [{}, {}]", quote(error), quote(other));
                    }
                    None if !error.is_empty() => {
                        let _ = writeln!(s, "error = {}", quote(error));
                    }
                    None => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::error_substring;

    #[test]
    fn the_error_keeps_what_does_not_vary() {
        assert_eq!(
            error_substring(
                "RuntimeError",
                "[/x/gloo/pair.cc:561] Connection closed by peer [127.0.0.1]:24239. This"
            ),
            "RuntimeError: Connection closed by peer"
        );
        assert_eq!(
            error_substring("ValueError", "boom on 2"),
            "ValueError: boom on"
        );
        assert_eq!(error_substring("KeyError", "3"), "KeyError");
        // monitored_barrier's own text opens with `[Rank 0]`; its original exception's
        // location further in is not where it starts (it was, and matched no simulated text).
        assert_eq!(
            error_substring(
                "RuntimeError",
                "[Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms\n Original exception: \n[/x/pair.cc:561] Connection closed by peer [127.0.0.1]:1"
            ),
            "RuntimeError: [Rank"
        );
    }
}
