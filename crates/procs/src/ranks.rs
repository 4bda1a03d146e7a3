//! A benchmark launcher's rank processes and their scratch directory (their logs, the program
//! they run), ended together: `scen bench --hw` (oneCCL and gloo ranks, crates/hw) and `--path
//! torch` (Python ranks, crates/torch) start N processes, quote a failed rank's last lines, and
//! must leave nothing behind however the sweep ends. Written once here.

use crate::ProcsError;
use std::fs::File;
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

/// The ranks of one launch: their processes and the directory that holds their files.
pub struct Ranks {
    pub children: Vec<Child>,
    /// `<tmp>/<prefix>-<pid>-<ms>`, removed when the ranks are ended.
    pub dir: PathBuf,
}

impl Ranks {
    /// No process yet, and a fresh scratch directory named for `prefix`, this process and now.
    pub fn new(prefix: &str) -> Result<Ranks, ProcsError> {
        let dir = std::env::temp_dir().join(format!(
            "{prefix}-{}-{}",
            std::process::id(),
            crate::watch::unix_ms()
        ));
        std::fs::create_dir_all(&dir)?;
        Ok(Ranks {
            children: Vec::new(),
            dir,
        })
    }

    /// Rank `rank`'s log file, as (stdout, stderr) handles of one file.
    pub fn log(&self, rank: usize) -> Result<(File, File), ProcsError> {
        let out = File::create(self.dir.join(format!("rank{rank}.log")))?;
        let err = out.try_clone()?;
        Ok((out, err))
    }

    /// Rank `rank`'s last four output lines (the bounded tail of crate::log), or "".
    pub fn tail(&self, rank: usize) -> String {
        crate::log::tail_of_path(&self.dir.join(format!("rank{rank}.log")), 4).unwrap_or_default()
    }

    /// The ranks' process ids, in rank order.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Waits up to `grace` for every rank to exit, kills those still running, and reaps all.
    pub fn end(&mut self, grace: Duration) {
        let until = Instant::now() + grace;
        for c in &mut self.children {
            while Instant::now() < until && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

/// However the launch ends (an error, a panic), no rank and no file is left.
impl Drop for Ranks {
    fn drop(&mut self) {
        self.end(Duration::ZERO);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_ends_every_rank_and_removes_the_directory() {
        let mut r = Ranks::new("scen-procs-ranks-test").unwrap();
        let (out, err) = r.log(0).unwrap();
        let child = std::process::Command::new("sh")
            .args(["-c", "echo one; echo two; sleep 30"])
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap();
        r.children.push(child);
        let until = Instant::now() + Duration::from_secs(5);
        while r.tail(0) != "one | two" && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(r.tail(0), "one | two");
        let (pid, dir) = (r.pids()[0], r.dir.clone());
        drop(r);
        assert!(!dir.exists(), "the directory is removed");
        let alive = unsafe { libc::kill(pid as i32, 0) } == 0;
        assert!(!alive, "the rank is killed and reaped");
    }
}
