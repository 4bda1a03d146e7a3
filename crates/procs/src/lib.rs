//! The process plumbing both real modes share: `scen run --hw` (crates/hw) and `scen run
//! --torch` (crates/torch) each start one real process per rank, log its output, pick free
//! ports, watch the ranks from a polling loop, end them as a process group and turn an exit
//! into a rank's failure. That is written once here.
//!
//! [`log`] holds rank output files and their bounded tail, [`port`] free local ports,
//! [`group`] process groups (die with the parent, SIGKILL the group, reap, is a pid alive),
//! [`exit`] what a process's exit says, [`ranks`] a benchmark's rank processes and their scratch
//! directory, [`signals`] SIGINT/SIGTERM/SIGHUP as an orderly end, [`threads`] where a hung
//! process's threads sleep,
//! [`watch`] the launchers' polling clock, [`run`] the one shape of a run (start, watch, end,
//! report) each mode fills in. No FFI beyond libc calls; depends on scen-core only
//! (its `Failure` and `signal_name`).

pub mod exit;
pub mod group;
pub mod log;
pub mod port;
pub mod ranks;
pub mod run;
pub mod signals;
pub mod threads;
pub mod watch;

/// What can go wrong in the process plumbing.
#[derive(Debug, thiserror::Error)]
pub enum ProcsError {
    /// A file, socket or process operation failed (the OS's error, unchanged).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The handler of an ending signal could not be installed.
    #[error("installing the handler of signal {signal}: {reason}")]
    SignalHandler {
        /// The signal's number.
        signal: i32,
        /// Why (the OS's error, as text: the result is kept for the whole process).
        reason: String,
    },
    /// kill(2) failed (the process or group is gone, or is not ours).
    #[error("sending signal {signal} to {target}: {source}")]
    Kill {
        /// The signal's number.
        signal: i32,
        /// `process N` or `process group N`.
        target: String,
        source: std::io::Error,
    },
}
