//! Logs through `tracing`: `-v` (info), `-vv` (debug), `-vvv` (trace) or `RUST_LOG` show them on
//! stderr, `--log-file FILE` writes them to a file (through src/output.rs: whole, when the
//! command ends). Lines carry no wall-clock time (the model's
//! events carry their virtual `t_ms`), and a subscriber never changes a trace or a report.
//! Rank processes of `run --hw` inherit the filter through `SCEN_LOG` and write to their rank
//! log, which the launcher forwards.

use crate::output::Pending;
use std::path::Path;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// The environment variable that carries the filter to `run --hw`'s rank processes.
pub const CHILD_FILTER_VAR: &str = "SCEN_LOG";

/// The filter for `verbose` (-v count) when RUST_LOG does not set one.
fn directive(verbose: u8) -> &'static str {
    match verbose {
        0 | 1 => "info,turmoil=warn",
        2 => "debug,turmoil=warn",
        _ => "trace",
    }
}

/// Installs the subscriber for this process (nothing when no logging is asked for). The log
/// file, when asked for, is returned pending: the caller commits it when the command ends.
pub fn init(verbose: u8, log_file: Option<&Path>) -> anyhow::Result<Option<Pending>> {
    use anyhow::Context;
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .or_else(|| std::env::var(CHILD_FILTER_VAR).ok())
        .filter(|s| !s.is_empty());
    let to_stderr = verbose > 0 || from_env.is_some();
    if !to_stderr && log_file.is_none() {
        return Ok(None);
    }
    let text = from_env.unwrap_or_else(|| directive(verbose).to_string());
    let filter = EnvFilter::try_new(&text).with_context(|| format!("log filter `{text}`"))?;
    let (pending, file) = match log_file {
        Some(p) => {
            let (pending, f) = Pending::create(p).with_context(|| "--log-file")?;
            (Some(pending), Some(f))
        }
        None => (None, None),
    };
    let stderr_layer = to_stderr.then(|| {
        tracing_subscriber::fmt::layer()
            .without_time()
            .with_target(false)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
    });
    let file_layer = file.map(|f| {
        tracing_subscriber::fmt::layer()
            .without_time()
            .with_target(false)
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(f))
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(stderr_layer)
        .with(file_layer)
        .try_init()
        .context("a log subscriber is already installed")?;
    // Rank processes started by `run --hw` log at the same level into their rank logs.
    std::env::set_var(CHILD_FILTER_VAR, &text);
    Ok(pending)
}
