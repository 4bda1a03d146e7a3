//! The cleanup guard: a small process (`scen __hw-reaper`) that outlives a launcher killed by
//! SIGKILL, which can clean nothing itself. The launcher writes each rank's pid to the guard's
//! stdin and `done` once it has cleaned up. If stdin ends without `done`, the launcher died:
//! the guard makes sure its ranks are gone (they die by their death signal; any still there are
//! SIGKILLed, checked by command line against pid reuse) and removes their /dev/shm files.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the guard waits for orphaned ranks to disappear.
const RANKS_GONE_MS: u64 = 5_000;

/// The launcher's end of the guard.
pub struct Guard {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Guard {
    /// Starts `exe __hw-reaper` in its own process group (a terminal's Ctrl-C does not reach it).
    pub fn start(exe: &Path) -> std::io::Result<Guard> {
        let mut child = Command::new(exe)
            .arg("__hw-reaper")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let stdin = child.stdin.take();
        Ok(Guard { child, stdin })
    }

    /// Tells the guard about a rank process.
    pub fn watch(&mut self, pid: u32) {
        self.send(&format!("{pid}\n"));
    }

    fn send(&mut self, line: &str) {
        if let Some(s) = self.stdin.as_mut() {
            if s.write_all(line.as_bytes())
                .and_then(|_| s.flush())
                .is_err()
            {
                self.stdin = None;
            }
        }
    }

    /// The launcher cleaned up: the guard exits without doing anything.
    pub fn done(mut self) {
        self.send("done\n");
        self.stdin = None;
        let _ = self.child.wait();
    }
}

use std::os::unix::process::CommandExt;

/// `scen __hw-reaper`: reads pids until `done` (exit 0) or the end of stdin (clean up, exit 0).
pub fn main() -> i32 {
    let mut pids: Vec<u32> = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.trim() {
            "done" => return 0,
            s => pids.extend(s.parse::<u32>().ok()),
        }
    }
    let until = Instant::now() + Duration::from_millis(RANKS_GONE_MS);
    while pids.iter().any(|p| is_rank(*p)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in pids.iter().filter(|p| is_rank(**p)) {
        // Checked just now to be one of scen's rank processes.
        let _ = scen_procs::group::kill_process(*p);
    }
    let until = Instant::now() + Duration::from_millis(RANKS_GONE_MS);
    while pids.iter().any(|p| is_rank(*p)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    crate::procs::remove_shm(&pids);
    0
}

/// Is `pid` a live (not zombie) scen rank process?
fn is_rank(pid: u32) -> bool {
    scen_procs::group::is_live_with_arg(pid, "__hw-rank")
}
