//! The rank processes' lives: started so that they die with the launcher (PR_SET_PDEATHSIG,
//! checked against the race where the launcher died first), logging to files that exist on
//! no directory (nothing to leave behind), killed as a group, their /dev/shm files removed.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};

pub struct RankProc {
    pub rank: usize,
    pub child: Child,
    /// The launcher's handle on the rank's output (the file has no name on disk).
    pub log: File,
    pub exit: Option<(ExitStatus, u64)>,
    /// The rank's side channel closed.
    pub closed: bool,
}

/// A file for a rank's output that no directory holds: O_TMPFILE where the file system has it,
/// else created and unlinked at once. The kernel frees it when the last handle closes, however
/// the launcher and the rank end.
pub fn anonymous_log(dir: &Path, name: &str) -> std::io::Result<File> {
    let tmp = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(dir);
    if let Ok(f) = tmp {
        return Ok(f);
    }
    let path = dir.join(format!("{name}-{}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

/// Makes `cmd`'s process die (SIGKILL) when the launcher does, even by SIGKILL. The death signal
/// follows the thread that forks, so the launcher starts ranks from the thread that outlives
/// them (the one running `launch`).
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

/// SIGKILLs the process group (only this launcher's rank processes are in it) and reaps them.
/// Returns how many were still running.
pub fn kill_all(pgid: Option<i32>, procs: &mut [RankProc]) -> usize {
    let mut running = 0;
    for p in procs.iter_mut() {
        if p.exit.is_none() && matches!(p.child.try_wait(), Ok(None)) {
            running += 1;
        }
    }
    if let Some(g) = pgid {
        if running > 0 {
            // SAFETY: kill(2) on the process group of this launcher's own, unreaped children.
            unsafe { libc::kill(-g, libc::SIGKILL) };
        }
    }
    for p in procs.iter_mut() {
        let _ = p.child.wait();
    }
    running
}

/// Removes `/dev/shm/<pid>:*` (oneCCL's shm transport files) of the given processes.
pub fn remove_shm(pids: &[u32]) -> usize {
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return 0;
    };
    let prefixes: Vec<String> = pids.iter().map(|p| format!("{p}:")).collect();
    let mut n = 0;
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if prefixes.iter().any(|p| name.starts_with(p)) && std::fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

/// A rank process's own output (its log lines, with `-v` its spans) as INFO events of the
/// launcher, so `scen run --hw -v` and `--log-file` show every rank in one place.
pub fn forward_rank_log(rank: usize, mut log: &File) {
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    let mut text = String::new();
    if log.seek(SeekFrom::Start(0)).is_err() || log.read_to_string(&mut text).is_err() {
        return;
    }
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        tracing::info!(target: "scen_hw::rank_output", rank, "{line}");
    }
}

/// The last `lines` non-blank lines of a rank's output, joined by ` | `.
pub fn log_tail(mut log: &File, lines: usize) -> Option<String> {
    let mut text = String::new();
    log.seek(SeekFrom::Start(0)).ok()?;
    // Bounded: a rank that printed gigabytes must not make the report wait or run out of memory.
    let len = log.metadata().ok()?.len();
    let keep: u64 = 64 * 1024;
    if len > keep {
        log.seek(SeekFrom::Start(len - keep)).ok()?;
    }
    let mut bytes = Vec::new();
    log.take(keep).read_to_end(&mut bytes).ok()?;
    text.push_str(&String::from_utf8_lossy(&bytes));
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if all.is_empty() {
        return None;
    }
    Some(all[all.len().saturating_sub(lines)..].join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_rank_log_has_no_name_on_disk_and_keeps_its_tail() {
        let dir = std::env::temp_dir();
        let before = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
        let mut f = anonymous_log(&dir, "scen-hw-test").expect("a log file");
        let after = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
        assert!(
            after <= before,
            "the log file is visible in {}",
            dir.display()
        );
        writeln!(f, "one\n\ntwo\nthree").expect("writes");
        assert_eq!(log_tail(&f, 2).as_deref(), Some("two | three"));
    }

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
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(t.elapsed().as_secs() < 5);
    }
}
