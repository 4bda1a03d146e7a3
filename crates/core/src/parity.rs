//! The mode-independent part of a run: what the simulator and the hardware mode must agree on.
//!
//! Times, ports, process ids and the libraries' own bootstrap differ between modes; the per-rank
//! verdict, the error texts, each rank's sequence of steps (hence every group's op order), the
//! warnings and log lines, and the digests of result tensors must not.

use crate::report::Report;
use crate::trace::{EventKind, EventTag};
use crate::verdict::RankVerdict;

/// One line per fact, in a fixed order: verdicts first, then each rank's events.
pub fn mode_independent(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for (rank, v) in r.ranks.iter().enumerate() {
        out.push(match v {
            RankVerdict::Completed { .. } => format!("rank {rank}: completes"),
            RankVerdict::Failed { step, failure, .. } => {
                format!("rank {rank}: fails in #{}: {failure}", step + 1)
            }
            RankVerdict::Hung { step, .. } => format!("rank {rank}: hangs in #{}", step + 1),
            RankVerdict::Elsewhere => format!("rank {rank}: ran elsewhere"),
        });
    }
    for rank in 0..r.ranks.len() {
        for e in r.trace.events.iter().filter(|e| e.rank == Some(rank)) {
            let step = e.step.map(|s| s + 1).unwrap_or(0);
            let line = match e.kind {
                EventKind::Start => format!("r{rank} #{step} start"),
                EventKind::Done => match digest(&e.text) {
                    Some(d) => format!("r{rank} #{step} done digest {d}"),
                    None => format!("r{rank} #{step} done"),
                },
                // Store connect retries depend on which process started first: timing, not model.
                EventKind::Warn if e.tag == Some(EventTag::ConnectRetry) => continue,
                // Its text names the port, which each mode picks; that it was logged is compared.
                EventKind::Warn if e.tag == Some(EventTag::AgentPortBind) => {
                    format!("r{rank} #{step} warn (the agent's store port could not be bound)")
                }
                EventKind::Error | EventKind::Warn | EventKind::Log => {
                    format!("r{rank} #{step} {} {}", e.kind.name(), e.text)
                }
                EventKind::Info | EventKind::Verdict | EventKind::Fault => continue,
            };
            out.push(line);
        }
    }
    out
}

/// The 16-hex-digit tensor digest a done event prints, if any. A symbolic payload's digest
/// (`[N x f32] symbolic, digest ...`) is not a digest of values, so it is never compared.
fn digest(text: &str) -> Option<&str> {
    if text.contains("symbolic, digest ") {
        return None;
    }
    let i = text.find("digest ")? + "digest ".len();
    let d = text.get(i..i + 16)?;
    d.chars().all(|c| c.is_ascii_hexdigit()).then_some(d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn digest_is_found_only_when_complete() {
        assert_eq!(
            super::digest("[3, 3] digest 7dfc541089e9a740 (values as expected)"),
            Some("7dfc541089e9a740")
        );
        assert_eq!(super::digest("digest 7dfc"), None);
        assert_eq!(super::digest("sent 4 elements"), None);
        assert_eq!(
            super::digest("[262144 x f32] symbolic, digest 7dfc541089e9a740"),
            None
        );
    }
}
