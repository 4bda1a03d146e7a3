//! SIGINT, SIGTERM and SIGHUP during `scen run --hw`: the launcher must not die and leave its
//! ranks running (they are in their own process group, out of the terminal's reach), so while
//! a launch is running these signals only set a flag; the launcher's loop sees it, ends every
//! rank and still reports what it saw. Outside a launch they keep their default effect.
//!
//! Exit status: `scen run --hw` exits 128 + the signal's number after printing the report
//! (130 SIGINT, 143 SIGTERM, 129 SIGHUP), as a shell reports a process the signal killed.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The signals the launcher turns into an orderly end.
pub const ENDING: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// How many launches are running (signals end them) — none: signals act as by default.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// The last ending signal received during a launch; 0 = none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// Installs the handlers once per process.
fn install() -> Result<(), String> {
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
                r.map_err(|e| format!("installing the handler of signal {sig}: {e}"))?;
            }
            Ok(())
        })
        .clone()
}

/// While alive, ending signals are caught and recorded instead of ending the process.
pub struct Guard(());

impl Guard {
    pub fn arm() -> Result<Guard, String> {
        install()?;
        if ACTIVE.fetch_add(1, Ordering::SeqCst) == 0 {
            RECEIVED.store(0, Ordering::SeqCst);
        }
        Ok(Guard(()))
    }

    /// The ending signal received since `arm`, if any.
    pub fn received(&self) -> Option<i32> {
        Some(RECEIVED.load(Ordering::SeqCst)).filter(|s| *s != 0)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The ending signal that interrupted the last launch of this process, if one did: the CLI
/// exits with 128 + it after printing the report.
pub fn interrupted_by() -> Option<i32> {
    Some(RECEIVED.load(Ordering::SeqCst)).filter(|s| *s != 0)
}

/// `SIGINT` and the like, for messages.
pub fn name(sig: i32) -> String {
    signal_hook::low_level::signal_name(sig)
        .map(str::to_string)
        .unwrap_or_else(|| format!("signal {sig}"))
}
