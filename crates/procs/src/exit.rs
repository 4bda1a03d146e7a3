//! What a rank process's exit says about how the rank ended, when the rank did not report its
//! end itself: killed by a signal, or exited with a code. The words are core's
//! (`Failure::process_exit`); this is the one place a launcher's `ExitStatus` becomes them.

use scen_core::outcome::Failure;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// The exit's code and signal (exactly one is set for an exited process).
pub fn code_and_signal(status: &ExitStatus) -> (Option<i32>, Option<i32>) {
    (status.code(), status.signal())
}

/// A process that ended without reporting its end: killed by a signal no one scen knows of
/// sent, or exited with a code.
pub fn failure(status: &ExitStatus) -> Failure {
    let (code, signal) = code_and_signal(status);
    Failure::process_exit(code, signal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use scen_core::outcome::Killer;
    use std::process::Command;

    fn status_of(script: &str) -> ExitStatus {
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .status()
            .expect("sh runs")
    }

    #[test]
    fn a_code_is_an_exit_and_a_signal_is_a_kill_by_no_one_known() {
        assert_eq!(
            failure(&status_of("exit 3")),
            Failure::Exited { code: Some(3) }
        );
        assert_eq!(
            failure(&status_of("kill -9 $$")),
            Failure::Killed {
                signal: 9,
                by: Killer::Unknown
            }
        );
        assert_eq!(code_and_signal(&status_of("kill -15 $$")), (None, Some(15)));
        assert_eq!(
            failure(&status_of("kill -15 $$")).text(),
            Failure::process_exit(None, Some(15)).text()
        );
        assert_eq!(
            failure(&status_of("kill -9 $$")).text(),
            "the rank's process was killed by signal 9 (SIGKILL)"
        );
    }
}
