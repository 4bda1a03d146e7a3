//! The rank processes as a group: started so that they die with their launcher, SIGKILLed
//! together through their process group, reaped; and, for a process that outlived its
//! launcher, whether a pid is still one of ours.

use crate::ProcsError;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// Makes `cmd`'s process die (SIGKILL) when the launcher does, even by SIGKILL
/// (PR_SET_PDEATHSIG, checked against the race where the launcher died first). The death
/// signal follows the thread that forks, so start ranks from the thread that outlives them.
pub fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only async-signal-safe calls: prctl, getppid, _exit.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The launcher died before prctl took effect: nobody would send the signal.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

fn kill(pid: libc::pid_t, target: String) -> Result<(), ProcsError> {
    signal(pid, libc::SIGKILL, target)
}

fn signal(pid: libc::pid_t, sig: i32, target: String) -> Result<(), ProcsError> {
    // SAFETY: kill(2) has no memory effects; callers name their own children or group.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(ProcsError::Kill {
            signal: sig,
            target,
            source: std::io::Error::last_os_error(),
        })
    }
}

/// SIGKILLs one process (a child not yet reaped, or a pid just checked with [`is_live_with_arg`]).
pub fn kill_process(pid: u32) -> Result<(), ProcsError> {
    kill(pid as libc::pid_t, format!("process {pid}"))
}

/// SIGTERMs one process (a launcher asked to stop its workers, as torchrun does on SIGTERM).
pub fn terminate_process(pid: u32) -> Result<(), ProcsError> {
    signal(pid as libc::pid_t, libc::SIGTERM, format!("process {pid}"))
}

/// SIGKILLs every process of group `pgid` (a group this launcher made for its ranks).
pub fn kill_group(pgid: i32) -> Result<(), ProcsError> {
    kill(-pgid, format!("process group {pgid}"))
}

/// Ends the ranks: if any of `children` still runs, SIGKILLs process group `pgid` (only the
/// launcher's rank processes are in it; not sent when all have exited, so a reused group id is
/// never hit); then reaps every child. Returns how many were still running.
pub fn end_group<'a>(
    pgid: Option<i32>,
    children: impl IntoIterator<Item = &'a mut Child>,
) -> usize {
    let mut children: Vec<&mut Child> = children.into_iter().collect();
    let mut running = 0;
    for c in children.iter_mut() {
        if matches!(c.try_wait(), Ok(None)) {
            running += 1;
        }
    }
    if let (Some(g), true) = (pgid, running > 0) {
        let _ = kill_group(g);
    }
    for c in children {
        let _ = c.wait();
    }
    running
}

/// Is `pid` a live (not zombie) process whose command line has the argument `arg`? (Checked
/// by command line so that a reused pid is not taken for a rank.)
pub fn is_live_with_arg(pid: u32, arg: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name: "pid (comm) S ...".
    let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
    if matches!(state, Some('Z') | Some('X') | None) {
        return false;
    }
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_child_dies_when_the_thread_that_started_it_ends() {
        // The launcher's death is the start of every rank's death: a `sleep` started with the
        // death signal from a thread that then ends is gone at once.
        let h = std::thread::spawn(|| {
            let mut cmd = Command::new("sleep");
            cmd.arg("30");
            die_with_parent(&mut cmd);
            cmd.spawn().expect("sleep starts")
        });
        let mut child = h.join().expect("joins");
        let t = std::time::Instant::now();
        let status = child.wait().expect("waits");
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(t.elapsed().as_secs() < 5);
    }

    #[test]
    fn ending_a_group_kills_and_reaps_the_running_and_counts_them() {
        let mut a = Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep starts");
        let pgid = a.id() as i32;
        let mut b = Command::new("sleep")
            .arg("31")
            .process_group(pgid)
            .spawn()
            .expect("sleep starts");
        let mut done = Command::new("true")
            .process_group(pgid)
            .spawn()
            .expect("true starts");
        let _ = done.wait();
        // spawn may return before the child's exec shows in /proc (posix_spawn): wait for it.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !is_live_with_arg(b.id(), "31") && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(is_live_with_arg(b.id(), "31"));
        assert!(!is_live_with_arg(b.id(), "30"));
        let pid_b = b.id();
        assert_eq!(end_group(Some(pgid), [&mut a, &mut b, &mut done]), 2);
        assert_eq!(
            a.try_wait().expect("reaped").and_then(|s| s.signal()),
            Some(9)
        );
        assert_eq!(
            b.try_wait().expect("reaped").and_then(|s| s.signal()),
            Some(9)
        );
        assert!(!is_live_with_arg(pid_b, "31"));
        // The group is gone: killing it again fails, and says whom it was for.
        let e = kill_group(pgid).expect_err("no such group");
        assert!(
            e.to_string().contains(&format!("process group {pgid}")),
            "{e}"
        );
    }
}
