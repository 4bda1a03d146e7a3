//! How a rank's process ended, as data.
//!
//! Every mode learns a rank's end in its own way — the simulator from its task and its faults,
//! the hardware launcher from a side channel and `waitpid`, torch mode from progress lines and
//! the runner's exit records — but all of them say it with these types. Whether a rank raised,
//! was killed (by which signal, on whose behalf), exited without a word, ran into one of scen's
//! limits or was interrupted is decided where it is known and never recovered from a text:
//! [`Failure::text`] makes the words only when a report prints them.
//!
//! This module depends on nothing else in the crate, so the scenario, the runtime, the verdict
//! and the class code can all use it without importing one another.

use serde::{Deserialize, Serialize};

/// How a rank's program ended (a rank that never ends is hung: the runner decides that).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RankEnd {
    Completed,
    /// `step`: the 0-based index of the step the rank was in.
    Failed {
        step: usize,
        failure: Failure,
    },
}

impl RankEnd {
    /// A Python exception raised in `step`.
    pub fn raised(step: usize, exception: &str, message: impl Into<String>) -> RankEnd {
        RankEnd::Failed {
            step,
            failure: Failure::Raised {
                exception: exception.to_string(),
                message: message.into(),
            },
        }
    }
}

/// Why a rank failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Failure {
    /// The program raised a Python exception: its class name and its text.
    Raised { exception: String, message: String },
    /// The rank's process was killed by `signal`, on behalf of `by`.
    Killed { signal: i32, by: Killer },
    /// The process exited (`code`, if it had one) without reporting how its program ended.
    Exited { code: Option<i32> },
    /// A value the run computed exceeds one of scen's limits: the run has no verdict.
    OverLimit { detail: String },
    /// scen's launcher received an ending `signal` and killed the rank; `at` says where it was
    /// (" in step 2 sleep", " while it waited: ...", " before it started any step").
    Interrupted {
        signal: i32,
        launcher: ScenLauncher,
        at: String,
    },
}

/// Who had a rank killed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "who", rename_all = "snake_case")]
pub enum Killer {
    /// A crash fault of the scenario: its index in `[[fault]]` and its label (`fault #2
    /// (file.toml:31)`).
    Fault { index: usize, label: String },
    /// torchrun's agent stopped the worker group after rank `after_rank` failed.
    Agent { after_rank: usize },
    /// scen's own launcher injected the kill (`scen run --hw --kill-rank R:S`: `reason`).
    Launcher { reason: String },
    /// No one scen knows of: the process itself (an abort, e.g. gloo's size check on a message
    /// larger than the posted buffer: c10d/error.rs `gloo_enforce_abort`), the OS, another program.
    Unknown,
}

/// Which of scen's launchers ended an interrupted rank (their reports word it differently).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScenLauncher {
    /// `scen run --hw`'s launcher.
    Hw,
    /// `scen run --torch`.
    Torch,
}

/// The exception class name of [`Failure::OverLimit`] in texts (not a PyTorch exception).
pub const SCEN_LIMIT: &str = "ScenLimit";

/// The words every crash fault's text carries: `SIGKILL: process killed by fault #2 (...)`.
const KILLED_BY: &str = "process killed by";

impl Failure {
    /// The failure as a report prints it (PyTorch's words for a raised exception).
    pub fn text(&self) -> String {
        match self {
            // As Python's traceback ends: a bare `assert` prints `AssertionError` alone.
            Failure::Raised { exception, message } if message.is_empty() => exception.clone(),
            Failure::Raised { exception, message } => format!("{exception}: {message}"),
            Failure::Killed {
                by: Killer::Fault { label, .. },
                signal,
            } => format!("{}: {KILLED_BY} {label}", signal_name(*signal)),
            Failure::Killed {
                by: Killer::Agent { after_rank },
                signal,
            } => format!(
                "{}: torchrun stopped the worker group after rank {after_rank} failed (signal {signal})",
                signal_name(*signal)
            ),
            Failure::Killed {
                by: Killer::Launcher { reason },
                signal,
            } => format!(
                "{}: {KILLED_BY} the launcher ({reason})",
                signal_name(*signal)
            ),
            Failure::Killed {
                by: Killer::Unknown,
                signal,
            } => format!(
                "the rank's process was killed by signal {signal}{}",
                if matches!(*signal, SIGKILL | SIGABRT) {
                    format!(" ({})", signal_name(*signal))
                } else {
                    String::new()
                }
            ),
            Failure::Exited { code: Some(c) } => {
                format!("the rank's process exited with code {c}")
            }
            Failure::Exited { code: None } => "the rank's process ended".into(),
            Failure::OverLimit { detail } => format!("{SCEN_LIMIT}: {detail}"),
            Failure::Interrupted {
                signal,
                launcher,
                at,
            } => format!(
                "interrupted: {} received {} and killed this rank{at}",
                match launcher {
                    ScenLauncher::Hw => "the launcher",
                    ScenLauncher::Torch => "scen",
                },
                signal_name(*signal)
            ),
        }
    }

    /// A process that ended without reporting its end: killed by `signal` (by no one scen
    /// knows of), or exited with `code`.
    pub fn process_exit(code: Option<i32>, signal: Option<i32>) -> Failure {
        match signal {
            Some(signal) => Failure::Killed {
                signal,
                by: Killer::Unknown,
            },
            None => Failure::Exited { code },
        }
    }

    /// What an `[[expect]] error` pins of the failure: the exception class of a raised one, the
    /// signal of a fault's or the agent's kill, `interrupted`, `ScenLimit`; the whole text of
    /// an unexplained death.
    pub fn headline(&self) -> String {
        match self {
            Failure::Raised { exception, .. } => exception.clone(),
            Failure::Killed {
                by: Killer::Fault { .. } | Killer::Agent { .. } | Killer::Launcher { .. },
                signal,
            } => signal_name(*signal),
            Failure::OverLimit { .. } => SCEN_LIMIT.into(),
            Failure::Interrupted { .. } => "interrupted".into(),
            Failure::Killed { .. } | Failure::Exited { .. } => self.text(),
        }
    }

    /// The Python exception class, for a raised failure.
    pub fn exception(&self) -> Option<&str> {
        match self {
            Failure::Raised { exception, .. } => Some(exception),
            _ => None,
        }
    }

    /// A fault scen injected killed the rank: a scenario's crash fault, or hardware mode's
    /// `--kill-rank`.
    pub fn is_crash(&self) -> bool {
        matches!(
            self,
            Failure::Killed {
                by: Killer::Fault { .. } | Killer::Launcher { .. },
                ..
            }
        )
    }

    /// The JSON report's name of the failure's kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Raised { .. } => "raised",
            Failure::Killed { .. } => "killed",
            Failure::Exited { .. } => "exited",
            Failure::OverLimit { .. } => "over_limit",
            Failure::Interrupted { .. } => "interrupted",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

/// SIGKILL's number on Linux (the only platform the real modes run on).
pub const SIGKILL: i32 = 9;
/// abort(3)'s signal: an uncaught C++ exception (gloo's GLOO_ENFORCE) ends a process with it.
pub const SIGABRT: i32 = 6;
/// SIGTERM's number on Linux.
pub const SIGTERM: i32 = 15;

/// `SIGKILL`, `SIGTERM`, ... for the signals scen sends or receives; `signal N` otherwise.
pub fn signal_name(sig: i32) -> String {
    match sig {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        6 => "SIGABRT".into(),
        9 => "SIGKILL".into(),
        11 => "SIGSEGV".into(),
        15 => "SIGTERM".into(),
        other => format!("signal {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_the_words_reports_always_printed() {
        let crash = Failure::Killed {
            signal: SIGKILL,
            by: Killer::Fault {
                index: 1,
                label: "fault #2 (s.toml:31)".into(),
            },
        };
        assert_eq!(
            crash.text(),
            "SIGKILL: process killed by fault #2 (s.toml:31)"
        );
        assert!(crash.is_crash());
        let agent = Failure::Killed {
            signal: SIGTERM,
            by: Killer::Agent { after_rank: 2 },
        };
        assert_eq!(
            agent.text(),
            "SIGTERM: torchrun stopped the worker group after rank 2 failed (signal 15)"
        );
        assert!(!agent.is_crash());
        let raised = Failure::Raised {
            exception: "RuntimeError".into(),
            message: "process killed by fault #2".into(),
        };
        assert!(!raised.is_crash(), "a text never makes a crash");
        assert_eq!(
            Failure::Interrupted {
                signal: 2,
                launcher: ScenLauncher::Torch,
                at: " in step 2 sleep".into()
            }
            .text(),
            "interrupted: scen received SIGINT and killed this rank in step 2 sleep"
        );
        assert_eq!(
            Failure::Killed {
                signal: 9,
                by: Killer::Unknown
            }
            .text(),
            "the rank's process was killed by signal 9 (SIGKILL)"
        );
    }

    #[test]
    fn the_json_form_carries_the_type() {
        let v = serde_json::to_value(Failure::Killed {
            signal: 15,
            by: Killer::Agent { after_rank: 0 },
        })
        .unwrap();
        assert_eq!(v["kind"], "killed");
        assert_eq!(v["by"]["who"], "agent");
        assert_eq!(v["by"]["after_rank"], 0);
    }
}
