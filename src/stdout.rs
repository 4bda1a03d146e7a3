//! Standard output that survives a reader going away.
//!
//! Rust ignores SIGPIPE, so std's `println!` panics when stdout is a pipe whose reader has
//! exited (`scen run FILE | head`). The binary's `println!`/`print!` (shadowed in main.rs) come
//! here instead: once stdout is closed, further output is dropped and the command still ends
//! with its own exit code (so `set -o pipefail` sees the verdict), never with a panic.

use std::fmt::Arguments;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to stdout failed; later output is dropped.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `args` (and a newline when `newline`) to stdout, or nothing once stdout is closed.
pub fn write(args: Arguments<'_>, newline: bool) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| {
        if newline {
            out.write_all(b"\n")
        } else {
            Ok(())
        }
    });
    if let Err(e) = written {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != ErrorKind::BrokenPipe {
            eprintln!(
                "error: cannot write to standard output: {e}; the rest of the output is dropped"
            );
        }
    }
}
