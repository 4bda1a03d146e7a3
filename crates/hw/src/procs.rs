//! The rank processes' lives as hw sees them: started to die with the launcher and killed as a
//! group (scen-procs' `group`), logging to files that exist on no directory (scen-procs'
//! `log`); here, what is hw's own: a rank's record, its /dev/shm files (oneCCL's), and its
//! output forwarded to the launcher's log.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::process::{Child, ExitStatus};

pub struct RankProc {
    pub rank: usize,
    pub child: Child,
    /// The launcher's handle on the rank's output (the file has no name on disk).
    pub log: File,
    pub exit: Option<(ExitStatus, u64)>,
    /// The rank's side channel closed.
    pub closed: bool,
}

/// SIGKILLs the process group (only this launcher's rank processes are in it) and reaps them.
/// Returns how many were still running.
pub fn kill_all(pgid: Option<i32>, procs: &mut [RankProc]) -> usize {
    scen_procs::group::end_group(pgid, procs.iter_mut().map(|p| &mut p.child))
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
