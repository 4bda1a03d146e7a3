//! One real-mode run, written once: start the rank processes, watch them until the run is over,
//! end every process still running, and report. `scen run --hw` (crates/hw) and `scen run
//! --torch` (crates/torch) both have this shape; what differs between them (how the ranks start
//! and with what environment, what their output and exits mean, what the watchdog may decide,
//! the report's mode-specific parts) is a [`RankRun`] each mode implements.
//!
//! The order of the watch loop's decisions is the rule both modes follow: first take in what
//! the ranks said (the mode may ask for one more look, or say the run is over), then an ending
//! signal, then every rank having ended, then the mode's watchdog, then the wall-time limit.

use crate::watch::Watch;

/// What one look at the ranks found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// Go on to the loop's decisions.
    Decide,
    /// Look again before deciding anything (output written just before an exit may follow).
    Again,
    /// The run is over (torch: the runner exited with its ranks).
    Over,
}

/// Why the watch loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The ranks ended (each reported its end, or their processes are gone).
    Ended,
    /// An ending signal (SIGINT, SIGTERM, SIGHUP) reached the launcher.
    Interrupted(i32),
    /// The mode's watchdog decided that no rank can make progress.
    Watchdog,
    /// The run reached its wall-time limit.
    OutOfTime,
}

impl Stop {
    /// Did the launcher stop ranks that had not ended (a signal, the watchdog, the limit)?
    pub fn by_launcher(self) -> bool {
        self != Stop::Ended
    }

    /// The ending signal, if one stopped the run.
    pub fn signal(self) -> Option<i32> {
        match self {
            Stop::Interrupted(sig) => Some(sig),
            _ => None,
        }
    }
}

/// The note of a run an ending signal stopped: `who` (the launcher, scen) received it; the CLI
/// exits with 128 + the signal after the report.
pub fn interrupted_note(who: &str, sig: i32) -> String {
    format!(
        "interrupted: {who} received {} and ended every rank; the report shows what was seen until then (exit status {})",
        crate::signals::name(sig),
        128 + sig
    )
}

/// What a real mode supplies to [`run`].
pub trait RankRun {
    /// What the mode's run gives (its report).
    type Output;
    /// What can go wrong in the mode.
    type Error;

    /// Starts every rank process (and what serves them); returns the run's clock. On an error
    /// the mode has ended what it started.
    fn start(&mut self) -> Result<Watch, Self::Error>;

    /// Waits up to [`crate::watch::POLL`] and takes in what the ranks said and how their
    /// processes ended since the last look (counting progress on `clock`).
    fn look(&mut self, clock: &mut Watch) -> Result<Look, Self::Error>;

    /// Has every rank of this launcher ended?
    fn all_ended(&self) -> bool;

    /// The mode's watchdog at `t_ms`: is the run over though ranks have not ended?
    fn hopeless(&mut self, clock: &Watch, t_ms: u64) -> bool;

    /// The loop ended for `stop` at `t_ms` (ms on the run's clock): what the mode records then,
    /// before any process is ended (its notes, the ends of ranks a signal interrupted).
    fn stopped(&mut self, stop: Stop, t_ms: u64);

    /// Ends every rank process still running and reaps them (`stop` is None when the watch
    /// failed). Runs however the watch ended.
    fn end(&mut self, stop: Option<Stop>);

    /// The run's result from what was collected.
    fn report(self, stop: Stop, t_ms: u64) -> Result<Self::Output, Self::Error>;
}

/// Runs `mode`: start, watch, end every process, report.
pub fn run<R: RankRun>(mut mode: R) -> Result<R::Output, R::Error> {
    let mut clock = mode.start()?;
    let watched = watch(&mut mode, &mut clock);
    mode.end(watched.as_ref().ok().map(|(stop, _)| *stop));
    let (stop, t_ms) = watched?;
    mode.report(stop, t_ms)
}

/// The watch loop: looks at the ranks until one of the decisions ends the run; returns why and
/// when (ms on `clock`).
pub fn watch<R: RankRun>(mode: &mut R, clock: &mut Watch) -> Result<(Stop, u64), R::Error> {
    loop {
        let stop = match mode.look(clock)? {
            Look::Again => continue,
            Look::Over => Some(Stop::Ended),
            Look::Decide => decide(mode, clock),
        };
        if let Some(stop) = stop {
            let t_ms = clock.now_ms();
            mode.stopped(stop, t_ms);
            return Ok((stop, t_ms));
        }
    }
}

/// The loop's decisions after a look, in their order (the module comment).
fn decide<R: RankRun>(mode: &mut R, clock: &Watch) -> Option<Stop> {
    let t_ms = clock.now_ms();
    if let Some(sig) = clock.interrupted() {
        return Some(Stop::Interrupted(sig));
    }
    if mode.all_ended() {
        return Some(Stop::Ended);
    }
    if mode.hopeless(clock, t_ms) {
        return Some(Stop::Watchdog);
    }
    clock.out_of_time(t_ms).then_some(Stop::OutOfTime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::{unix_ms, POLL};
    use std::process::{Child, Command};

    /// Real `sh` processes as ranks: each exits with its code after its delay (or sleeps on).
    struct Shells {
        scripts: Vec<&'static str>,
        children: Vec<Child>,
        exits: Vec<Option<i32>>,
        quiet_ms: u64,
        max_wall_ms: Option<u64>,
        events: Vec<String>,
    }

    impl Shells {
        fn new(scripts: &[&'static str], quiet_ms: u64, max_wall_ms: Option<u64>) -> Shells {
            Shells {
                scripts: scripts.to_vec(),
                children: vec![],
                exits: vec![None; scripts.len()],
                quiet_ms,
                max_wall_ms,
                events: vec![],
            }
        }
    }

    impl RankRun for Shells {
        type Output = (Stop, Vec<Option<i32>>, Vec<String>);
        type Error = std::io::Error;

        fn start(&mut self) -> Result<Watch, std::io::Error> {
            for s in &self.scripts {
                self.children
                    .push(Command::new("sh").args(["-c", s]).spawn()?);
            }
            Ok(Watch::new(unix_ms(), self.max_wall_ms, None))
        }

        fn look(&mut self, clock: &mut Watch) -> Result<Look, std::io::Error> {
            std::thread::sleep(POLL);
            for (c, exit) in self.children.iter_mut().zip(self.exits.iter_mut()) {
                if let (None, Some(status)) = (&exit, c.try_wait()?) {
                    *exit = Some(status.code().unwrap_or(-1));
                    clock.progress(clock.now_ms());
                }
            }
            Ok(Look::Decide)
        }

        fn all_ended(&self) -> bool {
            self.exits.iter().all(Option::is_some)
        }

        fn hopeless(&mut self, clock: &Watch, t_ms: u64) -> bool {
            clock.silent_ms(t_ms) >= self.quiet_ms
        }

        fn stopped(&mut self, stop: Stop, _t_ms: u64) {
            self.events.push(format!("stopped {stop:?}"));
        }

        fn end(&mut self, stop: Option<Stop>) {
            self.events.push(format!("end {stop:?}"));
            for c in &mut self.children {
                let _ = c.kill();
                let _ = c.wait();
            }
        }

        fn report(self, stop: Stop, _t_ms: u64) -> Result<Self::Output, std::io::Error> {
            Ok((stop, self.exits, self.events))
        }
    }

    #[test]
    fn ranks_that_exit_end_the_run_and_each_phase_runs_once_in_order() {
        let (stop, exits, events) =
            run(Shells::new(&["exit 0", "exit 3"], 60_000, None)).expect("shells run");
        assert_eq!(stop, Stop::Ended);
        assert_eq!(exits, [Some(0), Some(3)]);
        assert_eq!(events, ["stopped Ended", "end Some(Ended)"]);
        assert!(!stop.by_launcher());
    }

    #[test]
    fn the_watchdog_and_the_wall_limit_stop_a_rank_that_never_ends() {
        let (stop, exits, _) =
            run(Shells::new(&["exit 0", "sleep 30"], 300, None)).expect("shells run");
        assert_eq!((stop, exits), (Stop::Watchdog, vec![Some(0), None]));
        let (stop, _, _) = run(Shells::new(&["sleep 30"], 60_000, Some(200))).expect("shells run");
        assert_eq!(stop, Stop::OutOfTime);
        assert!(stop.by_launcher());
        assert_eq!(Stop::Interrupted(2).signal(), Some(2));
        assert!(interrupted_note("scen", 2).contains("scen received SIGINT"));
        assert!(interrupted_note("scen", 2).ends_with("(exit status 130)"));
    }
}
