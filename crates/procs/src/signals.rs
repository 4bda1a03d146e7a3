//! SIGINT, SIGTERM and SIGHUP during a real-mode run (`--hw`, `--torch`): the launcher must not
//! die and leave its ranks running (they are in their own process group, out of the terminal's
//! reach), so while a [`Guard`] is armed these signals only set a flag; the launcher's loop sees
//! it, ends every rank and still reports what it saw. Outside a run they keep their default
//! effect.
//!
//! Exit status: the CLI exits 128 + the signal's number after printing the report (130 SIGINT,
//! 143 SIGTERM, 129 SIGHUP), as a shell reports a process the signal killed.

use crate::ProcsError;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The signals a launcher turns into an orderly end.
pub const ENDING: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// How many guards are armed (signals end their runs) — none: signals act as by default.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// The last ending signal received while a guard was armed; 0 = none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// Installing the handlers, once per process: Err((signal, why)).
static INSTALLED: OnceLock<Result<(), (i32, String)>> = OnceLock::new();

fn install() -> Result<(), ProcsError> {
    INSTALLED
        .get_or_init(|| {
            for sig in ENDING {
                // SAFETY: the action only touches atomics and calls emulate_default_handler,
                // which signal-hook documents as usable inside a signal handler.
                let r = unsafe {
                    signal_hook::low_level::register(sig, move || {
                        if ACTIVE.load(Ordering::SeqCst) > 0 {
                            RECEIVED.store(sig, Ordering::SeqCst);
                        } else {
                            let _ = signal_hook::low_level::emulate_default_handler(sig);
                        }
                    })
                };
                r.map_err(|e| (sig, e.to_string()))?;
            }
            Ok(())
        })
        .clone()
        .map_err(|(signal, reason)| ProcsError::SignalHandler { signal, reason })
}

/// While alive, ending signals are caught and recorded instead of ending the process.
pub struct Guard(());

impl Guard {
    /// Installs the handlers (once per process) and starts catching; the first guard armed
    /// while none is clears the last run's signal.
    pub fn arm() -> Result<Guard, ProcsError> {
        install()?;
        if ACTIVE.fetch_add(1, Ordering::SeqCst) == 0 {
            RECEIVED.store(0, Ordering::SeqCst);
        }
        Ok(Guard(()))
    }

    /// The ending signal received since `arm`, if any.
    pub fn received(&self) -> Option<i32> {
        interrupted_by()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The ending signal that interrupted the last run of this process, if one did: the CLI exits
/// with 128 + it after printing the report.
pub fn interrupted_by() -> Option<i32> {
    Some(RECEIVED.load(Ordering::SeqCst)).filter(|s| *s != 0)
}

/// `SIGINT` and the like, for messages (core's names, as reports print them).
pub fn name(sig: i32) -> String {
    scen_core::outcome::signal_name(sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ending_signal_is_recorded_while_armed_and_named() {
        let g = Guard::arm().expect("handlers install");
        assert_eq!(g.received(), None);
        // SAFETY: raise(3) of a signal whose handler was just installed (it only sets a flag).
        unsafe { libc::raise(libc::SIGHUP) };
        assert_eq!(g.received(), Some(libc::SIGHUP));
        assert_eq!(interrupted_by(), Some(libc::SIGHUP));
        drop(g);
        // The record outlives the guard (the CLI reads it after the report)...
        assert_eq!(interrupted_by(), Some(libc::SIGHUP));
        // ...and the next run starts clean.
        let g = Guard::arm().expect("arms again");
        assert_eq!(g.received(), None);
        drop(g);
        let names: Vec<String> = ENDING.iter().map(|s| name(*s)).collect();
        assert_eq!(names, ["SIGINT", "SIGTERM", "SIGHUP"]);
        assert_eq!(name(64), "signal 64");
    }
}
