//! Trace events mirrored as `tracing` log events, so `scen -v` / `RUST_LOG` shows what each rank
//! does inside its `rank` and `step` spans (and `call` spans with group and seq). Logging only
//! reads: the trace, its hash and every report are the same with or without a subscriber, and
//! the virtual time travels as a field (`t_ms`), never a wall clock.

use crate::trace::EventKind;

/// Emits one trace event as a log event: warnings and rank errors at WARN, step boundaries,
/// faults and verdict notes at INFO, model detail at DEBUG.
pub fn mirror(kind: EventKind, t_ms: u64, text: &str) {
    let name = kind.name();
    match kind {
        EventKind::Warn | EventKind::Error => tracing::warn!(t_ms, kind = name, "{text}"),
        EventKind::Info | EventKind::Log => tracing::debug!(t_ms, kind = name, "{text}"),
        EventKind::Start | EventKind::Done | EventKind::Verdict | EventKind::Fault => {
            tracing::info!(t_ms, kind = name, "{text}")
        }
    }
}
