//! How the recorded processes ended, written into `[world]`: each rank's measured teardown and
//! torchrun's agent's check and stop. They decide races a recording must keep: a peer's
//! timeout against a dying rank's close, and under torchrun which rank the agent names and
//! whether its SIGTERM or a failed peer's close reaches a blocked rank first.

use super::parse::Proc;
use std::fmt::Write;

/// torchrun's agent as the run measured it: its check that saw the first failed worker's exit,
/// from that worker's process end to the time the agent noted the exit, and its stop, from that
/// check to the end of the first worker its SIGTERM ended (that worker's own end after the
/// signal included, so a few ms late). The agent checks every 0.1 s, so its check came
/// anywhere within that; the check decides which rank the agent names, the stop which of a
/// peer's close and the SIGTERM reaches a blocked rank first (7/980: check 0 ms, stop 38, a
/// close at 52; 7/1013: check 29, stop 64; 7/523: check 21 ms after rank 3's exit and before
/// rank 2's at 45, which it did not name).
pub(super) fn agent_timing(ranks: &[Proc]) -> Option<(u64, u64)> {
    let stopped = |p: &Proc| p.stopped_by_agent() && p.own_end.is_none();
    let failed = |p: &Proc| p.agent_status.is_some() && !stopped(p);
    let first = |pick: &dyn Fn(&Proc) -> bool| {
        ranks
            .iter()
            .filter(|p| pick(p))
            .filter_map(|p| p.t_gone_ms)
            .min()
    };
    let first_exit = first(&failed)?;
    let seen = ranks.iter().filter_map(|p| p.agent_seen_ms).min()?;
    let check = seen.saturating_sub(first_exit);
    let stop = first(&stopped)?.saturating_sub(first_exit + check);
    let max = crate::scenario::MAX_EXIT_MS;
    Some((check.min(max), stop.min(max)))
}

/// Ranks whose programs end within this many ms of the first of them are taken to end in
/// one instant when simulated: the recording leaves out gaps this short (timing.rs), so
/// ranks whose calls time out together raise together there, where real ones raise up to a
/// few tens of ms apart (7/980: 29 ms).
const ENDS_TOGETHER_MS: u64 = 50;

/// Each rank's program end the simulation measures its teardown from: the first end among
/// the ranks whose ends fall within [`ENDS_TOGETHER_MS`] of the first of them (ranks ending
/// together end in one simulated instant, so their processes end in the real run's order and
/// gaps: 7/980's rank 1 ended 52 ms after rank 0, its own teardown only 27 ms longer).
fn reference_ends(ends: &[(usize, u64)]) -> Vec<(usize, u64)> {
    let mut sorted = ends.to_vec();
    sorted.sort_by_key(|(r, t)| (*t, *r));
    let mut first: Option<u64> = None;
    sorted
        .into_iter()
        .map(|(r, t)| {
            let start = match first {
                Some(f) if t - f <= ENDS_TOGETHER_MS => f,
                _ => t,
            };
            first = Some(start);
            (r, start)
        })
        .collect()
}

/// Each rank's measured teardown, when its process's end was seen: from its program's end (its
/// raise, its own exit, else its atexit handlers; the first of the ranks ending together with
/// it, [`reference_ends`]) to its process's. A rank torchrun's agent
/// stopped in its teardown would have lived longer: it gets that time or the default, the
/// longer, so the simulated agent stops it in its teardown too and names the rank whose exit it
/// saw first (7/523: two ranks with the default 450 ms ended before the measured 664 ms of the
/// rank real torchrun named; they lived 800 ms until the stop). A rank a signal of its own
/// ended keeps the default.
pub(super) fn teardowns(s: &mut String, ranks: &[Proc]) {
    let seen: Vec<&Proc> = ranks
        .iter()
        .filter(|p| p.exited && p.t_gone_ms.is_some())
        // A process a signal of its own ended in its teardown ends at its `exit` step.
        .filter(|p| {
            !matches!(
                p.own_end.as_ref().map(|e| e.how),
                Some(super::parse::OwnEndKind::TeardownSignal(_))
            )
        })
        .filter(|p| p.own_end_ms().or(p.t_exit_ms).is_some())
        .collect();
    let ends: Vec<(usize, u64)> = seen
        .iter()
        .filter_map(|p| Some((p.rank(), p.own_end_ms().or(p.t_exit_ms)?)))
        .collect();
    let refs = reference_ends(&ends);
    let mut by_rank: Vec<(usize, u64, u64, bool, Option<u64>)> = seen
        .iter()
        .filter_map(|p| {
            let end = p.own_end_ms().or(p.t_exit_ms)?;
            let from = refs
                .iter()
                .find(|(r, _)| *r == p.rank())
                .map_or(end, |x| x.1);
            let lived = p.t_gone_ms?.checked_sub(from)?;
            // The agent's own SIGTERM; another signal in the teardown is the rank's own (gloo's
            // SIGABRT after a raise: 7/533's rank 4 lived 60 ms and aborted, before any stop).
            let stopped = p.stopped_by_agent();
            // A master store freed at the program's end (local to a `main()` that returned)
            // closed then, before the globals.
            let freed_at_end = p.calls.iter().filter_map(|c| c.t_freed_ms).min();
            let globals = [p.t_globals_ms, freed_at_end].into_iter().flatten().min();
            let globals = globals.map(|t| t.saturating_sub(from).min(lived));
            Some((p.rank(), lived, end - from, stopped, globals))
        })
        .collect();
    by_rank.sort();
    for (r, lived, earlier, stopped, globals) in by_rank {
        // Stopped in its teardown: it would have lived longer, at least the usual teardown (a
        // rank the agent stopped 0.1 s into it must not end before the simulated stop), and
        // past the simulated stop, which may come a whole monitor interval after the failed
        // rank's exit where the real agent's check came anywhere within it (7/533).
        let (ms, how) = match stopped {
            true => (
                (lived + crate::runtime::torchrun::MONITOR_INTERVAL_MS)
                    .max(crate::scenario::DEFAULT_EXIT_MS),
                " until torchrun's agent stopped it in its teardown (its own was longer)",
            ),
            false => (lived, " (its teardown)"),
        };
        let together = match earlier {
            0 => String::new(),
            ms => format!(", counted from the first program end {ms} ms before its own (ranks ending within {ENDS_TOGETHER_MS} ms of each other end together when simulated)"),
        };
        let ms = ms.min(crate::scenario::MAX_EXIT_MS);
        let _ = writeln!(
            s,
            "\n[[world.rank]]  # recorded: this rank's process lived {lived} ms after its program{how}{together}\non = \"rank == {r}\"\nexit_ms = {ms}"
        );
        if let Some(g) = globals {
            let _ = writeln!(
                s,
                "# recorded: its program's globals, and the TCPStore it made as master, were freed {g} ms into that\nglobals_freed_ms = {g}"
            );
        }
    }
}
