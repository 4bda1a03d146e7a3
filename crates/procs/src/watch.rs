//! The launchers' polling clock. Both watch their ranks from a loop that wakes every
//! [`POLL`], takes in what the ranks said, and ends the run on a signal, on silence (torch: no
//! progress for a bound; hw: silence and a stall) or on a wall-time limit. [`Watch`] holds the
//! times those decisions are made from, in milliseconds since the run's epoch.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a launcher's loop sleeps (or waits for a message) between two looks at its ranks.
pub const POLL: Duration = Duration::from_millis(20);

/// Milliseconds since the Unix epoch, from the wall clock (0 if it is before 1970). Rank
/// processes share it, so their times and the launcher's are on one time line.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One run's clock: its epoch, when the ranks last showed progress, its wall-time limit, and
/// where an ending signal is read.
#[derive(Debug, Clone)]
pub struct Watch {
    epoch_unix_ms: u64,
    last_progress_ms: u64,
    max_wall_ms: Option<u64>,
    interrupted: Option<fn() -> Option<i32>>,
}

impl Watch {
    /// A run that started at `epoch_unix_ms` ([`unix_ms`]), stopped after `max_wall_ms` if
    /// set; `interrupted` is polled for an ending signal ([`crate::signals`]).
    pub fn new(
        epoch_unix_ms: u64,
        max_wall_ms: Option<u64>,
        interrupted: Option<fn() -> Option<i32>>,
    ) -> Watch {
        Watch {
            epoch_unix_ms,
            last_progress_ms: 0,
            max_wall_ms,
            interrupted,
        }
    }

    /// The run's epoch ([`unix_ms`] at its start).
    pub fn epoch_unix_ms(&self) -> u64 {
        self.epoch_unix_ms
    }

    /// Milliseconds since the epoch.
    pub fn now_ms(&self) -> u64 {
        unix_ms().saturating_sub(self.epoch_unix_ms)
    }

    /// The ranks showed progress at `t_ms` (a message, a line, an exit).
    pub fn progress(&mut self, t_ms: u64) {
        self.last_progress_ms = t_ms;
    }

    /// How long, at `t_ms`, since the last progress (or the epoch).
    pub fn silent_ms(&self, t_ms: u64) -> u64 {
        t_ms.saturating_sub(self.last_progress_ms)
    }

    /// Has the run reached its wall-time limit at `t_ms`?
    pub fn out_of_time(&self, t_ms: u64) -> bool {
        self.max_wall_ms.is_some_and(|m| t_ms >= m)
    }

    /// The wall-time limit, if any.
    pub fn max_wall_ms(&self) -> Option<u64> {
        self.max_wall_ms
    }

    /// The ending signal received, if any.
    pub fn interrupted(&self) -> Option<i32> {
        self.interrupted.and_then(|f| f())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sigterm() -> Option<i32> {
        Some(15)
    }

    #[test]
    fn silence_counts_from_the_last_progress_and_the_limit_is_inclusive() {
        let mut w = Watch::new(unix_ms(), Some(1_000), None);
        assert_eq!(w.silent_ms(300), 300);
        w.progress(250);
        assert_eq!(w.silent_ms(300), 50);
        assert_eq!(w.silent_ms(200), 0);
        assert!(!w.out_of_time(999));
        assert!(w.out_of_time(1_000));
        assert!(!Watch::new(0, None, None).out_of_time(u64::MAX));
        assert_eq!(w.interrupted(), None);
        assert_eq!(Watch::new(0, None, Some(sigterm)).interrupted(), Some(15));
    }

    #[test]
    fn now_counts_from_the_epoch() {
        let w = Watch::new(unix_ms().saturating_sub(5_000), None, None);
        let t = w.now_ms();
        assert!((5_000..60_000).contains(&t), "{t}");
        assert_eq!(Watch::new(u64::MAX, None, None).now_ms(), 0);
    }
}
