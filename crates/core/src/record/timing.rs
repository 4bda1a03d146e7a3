//! The time a rank spent outside torch.distributed, written as `sleep` steps: a rank that
//! computes, sleeps or starts late between two calls stays late in the scenario, so a late-rank
//! bug is not recorded as a clean run. Gaps are measured on the recorder's wall clock; a gap
//! shorter than [`MIN_GAP_MS`] is the program's own bookkeeping (and the machine's noise) and
//! is left out, a longer one is rounded to two significant digits (so ranks that wait alike
//! share a step).

use super::parse::{Call, Proc};
use super::steps::StepDesc;

/// The shortest gap between two calls of a rank written as a sleep.
pub const MIN_GAP_MS: u64 = 200;

/// How much later than the earliest rank a rank's first call must come to be written as a
/// late start (interpreter start-up and `import torch` differ by up to a second between ranks).
pub const MIN_LATE_START_MS: u64 = 1_000;

/// `ms` to two significant digits (at least 10 ms).
fn round_ms(ms: u64) -> u64 {
    let mut unit = 10;
    while ms / unit >= 100 {
        unit *= 10;
    }
    (ms + unit / 2) / unit * unit
}

/// A sleep of `gap_ms` before the code at `at` (`why` says which gap it was).
fn sleep(gap_ms: u64, at: &str, why: &str) -> StepDesc {
    let ms = round_ms(gap_ms).max(1);
    StepDesc {
        op: "sleep".into(),
        fields: vec![("ms".into(), ms.to_string())],
        at: at.to_string(),
        notes: vec![format!("{why} (the recorded time, to two digits)")],
    }
}

/// The sleep before call `c`, whose rank's previous call returned at `prev_end_ms`.
pub fn before_call(prev_end_ms: Option<u64>, c: &Call) -> Option<StepDesc> {
    let gap = c.t_call_ms?.checked_sub(prev_end_ms?)?;
    (gap >= MIN_GAP_MS).then(|| sleep(gap, &c.at, "outside torch.distributed before this call"))
}

/// The sleep before the program's own raise, after its last call.
pub fn before_raise(p: &Proc) -> Option<StepDesc> {
    let e = p.raised.as_ref()?;
    let gap = e.t_ms?.checked_sub(last_end_ms(p)?)?;
    (gap >= MIN_GAP_MS).then(|| sleep(gap, &e.at, "after its last call, before it raised"))
}

/// The sleep before the program ends its own process (sys.exit, a signal), after its last call.
pub fn before_own_end(p: &Proc) -> Option<StepDesc> {
    let e = p.own_end.as_ref()?;
    let gap = e.t_ms?.checked_sub(last_end_ms(p)?)?;
    (gap >= MIN_GAP_MS).then(|| {
        sleep(
            gap,
            &e.at,
            "after its last call, before it ended its process",
        )
    })
}

/// The sleep between a rank's last call and its process's normal end (its connections and,
/// on rank 0, its TCPStore live until then).
pub fn before_exit(p: &Proc) -> Option<StepDesc> {
    if p.raised.is_some() || p.own_end.is_some() {
        return None;
    }
    let gap = p.t_exit_ms?.checked_sub(last_end_ms(p)?)?;
    let at = p.calls.last().map(|c| c.at.as_str()).unwrap_or("?:0");
    (gap >= MIN_GAP_MS).then(|| sleep(gap, at, "after its last call, before its process ended"))
}

/// The sleep before a rank's first call when it came late against the earliest rank's.
pub fn late_start(p: &Proc, earliest_ms: Option<u64>) -> Option<StepDesc> {
    let first = p.calls.first()?;
    let gap = first.t_call_ms?.checked_sub(earliest_ms?)?;
    (gap >= MIN_LATE_START_MS).then(|| {
        sleep(
            gap,
            &first.at,
            "later than the earliest rank's first call (a late start)",
        )
    })
}

/// A rank whose process a signal ended while it ran its own code (its last call had returned;
/// torchrun's agent stops every worker when one fails): it was still running when the job
/// ended, so it sleeps until then and a little past, and the launcher's stop reaches it in the
/// simulation too (written as finished, it would complete before the failure). `cut_ms`: the
/// job ran to scen record's time limit, that long after its first call; the rank sleeps that
/// much longer, so it is still asleep at the limit however much of the job's real time (the
/// ranks' start, their calls) the simulation does not spend (7/399: 1 s short otherwise).
pub fn until_stopped(p: &Proc, job_end_ms: Option<u64>, cut_ms: Option<u64>) -> Option<StepDesc> {
    if p.exited || p.raised.is_some() || p.own_end.is_some() {
        return None;
    }
    let last = p.calls.last()?;
    if last.end != super::parse::CallEnd::Done {
        return None;
    }
    let gap = job_end_ms?.checked_sub(last.t_end_ms?)? + STOP_MARGIN_MS + cut_ms.unwrap_or(0);
    let why = match cut_ms {
        Some(_) => "after its last call, still running when a signal stopped it at scen record's time limit: until the limit and as long again (the simulation need not spend all of the job's real time before it)",
        None => "after its last call until the job ended, still running when a signal stopped it",
    };
    Some(sleep(gap, &last.at, why))
}

/// How far past the job's last recorded event a stopped rank's sleep reaches.
const STOP_MARGIN_MS: u64 = 1_000;

/// The last time any rank recorded.
pub fn job_end_ms(ranks: &[Proc]) -> Option<u64> {
    ranks
        .iter()
        .flat_map(|p| {
            let calls = p.calls.iter().flat_map(|c| [c.t_call_ms, c.t_end_ms]);
            calls
                .chain([
                    p.t_exit_ms,
                    p.raised.as_ref().and_then(|r| r.t_ms),
                    p.own_end.as_ref().and_then(|e| e.t_ms),
                ])
                .flatten()
        })
        .max()
}

/// The earliest first call of all ranks.
pub fn earliest_first_call_ms(ranks: &[Proc]) -> Option<u64> {
    ranks
        .iter()
        .filter_map(|p| p.calls.first()?.t_call_ms)
        .min()
}

fn last_end_ms(p: &Proc) -> Option<u64> {
    p.calls.last()?.t_end_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_round_to_two_significant_digits() {
        assert_eq!(round_ms(203), 200);
        assert_eq!(round_ms(4003), 4000);
        assert_eq!(round_ms(1267), 1300);
        assert_eq!(round_ms(57), 60);
    }

    #[test]
    fn a_short_gap_is_left_out_and_a_long_one_is_a_sleep() {
        let call = |t: u64| Call {
            op: "all_reduce".into(),
            at: "p.py:9".into(),
            args: Default::default(),
            result: Default::default(),
            end: super::super::parse::CallEnd::Done,
            t_call_ms: Some(t),
            t_end_ms: Some(t + 5),
            t_freed_ms: None,
        };
        assert!(before_call(Some(1_000), &call(1_150)).is_none());
        let s = before_call(Some(1_000), &call(5_003)).expect("a sleep");
        assert_eq!(s.fields, vec![("ms".to_string(), "4000".to_string())]);
        assert!(before_call(None, &call(5_003)).is_none());
    }
}
