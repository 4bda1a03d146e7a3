//! Where a process's threads are blocked, read from /proc just before the watchdog kills a
//! rank that hangs: which threads exist (oneCCL's workers, gloo's loops, Python's main thread),
//! their state and the kernel function they sleep in. A hang that does not repeat run to run
//! leaves only this behind, so it goes into the report's notes.

use std::fs;

/// One line per distinct (name, state, wait channel) of `pid`'s threads, with a count, e.g.
/// `scen-rank S futex_wait_queue; ccl_worker R -`. `None` when /proc has no such process.
pub fn snapshot(pid: u32) -> Option<String> {
    let dir = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut tids: Vec<u32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    let mut rows: Vec<(String, usize)> = Vec::new();
    for tid in tids {
        let base = format!("/proc/{pid}/task/{tid}");
        let name = read_trimmed(&format!("{base}/comm")).unwrap_or_else(|| "?".into());
        let state = fs::read_to_string(format!("{base}/stat"))
            .ok()
            .and_then(|s| state_of(&s))
            .unwrap_or('?');
        let wchan = read_trimmed(&format!("{base}/wchan"))
            .filter(|w| !w.is_empty() && w != "0")
            .unwrap_or_else(|| "-".into());
        let row = format!("{name} {state} {wchan}");
        match rows.iter_mut().find(|(r, _)| *r == row) {
            Some((_, n)) => *n += 1,
            None => rows.push((row, 1)),
        }
    }
    let parts: Vec<String> = rows
        .into_iter()
        .map(|(r, n)| if n > 1 { format!("{n}x {r}") } else { r })
        .collect();
    Some(parts.join("; "))
}

fn read_trimmed(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The state letter of a /proc stat line: the field after the `(comm)`, which may hold spaces.
fn state_of(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let s = snapshot(std::process::id()).expect("this process is in /proc");
        assert!(!s.is_empty());
        // The thread running this test is on a CPU.
        assert!(s.contains(" R "), "{s}");
    }

    #[test]
    fn state_after_a_comm_with_spaces_and_parens() {
        assert_eq!(state_of("12 (a b) c) S 1 2"), Some('S'));
        assert_eq!(snapshot(u32::MAX), None);
    }
}
