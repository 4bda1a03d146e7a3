//! Where a process's threads are blocked, read from /proc just before the watchdog kills a
//! rank that hangs: which threads exist (oneCCL's workers, gloo's loops, Python's main thread),
//! their state, the kernel function they sleep in and the CPU time they used (a spinning
//! worker and a blocked one look alike otherwise). A hang that does not repeat run to run
//! leaves only this behind, so it goes into the report's notes.

use std::fs;

/// One line per distinct (name, state, wait channel) of `pid`'s threads, with a count and
/// their CPU time, e.g. `scen S do_epoll_wait 0.1s; 2x oneccl R - 29.5s`. `None` when /proc
/// has no such process.
pub fn snapshot(pid: u32) -> Option<String> {
    let dir = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut tids: Vec<u32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    let mut rows: Vec<(String, usize, u64)> = Vec::new();
    for tid in tids {
        let base = format!("/proc/{pid}/task/{tid}");
        let name = read_trimmed(&format!("{base}/comm")).unwrap_or_else(|| "?".into());
        let stat = fs::read_to_string(format!("{base}/stat")).unwrap_or_default();
        let state = state_of(&stat).unwrap_or('?');
        let ticks = cpu_ticks(&stat).unwrap_or(0);
        let wchan = read_trimmed(&format!("{base}/wchan"))
            .filter(|w| !w.is_empty() && w != "0")
            .unwrap_or_else(|| "-".into());
        let row = format!("{name} {state} {wchan}");
        match rows.iter_mut().find(|(r, _, _)| *r == row) {
            Some((_, n, t)) => {
                *n += 1;
                *t += ticks;
            }
            None => rows.push((row, 1, ticks)),
        }
    }
    let hz = clock_ticks_per_s();
    let parts: Vec<String> = rows
        .into_iter()
        .map(|(r, n, t)| {
            let cpu = format!("{:.1}s", t as f64 / hz);
            if n > 1 {
                format!("{n}x {r} {cpu}")
            } else {
                format!("{r} {cpu}")
            }
        })
        .collect();
    Some(parts.join("; "))
}

fn read_trimmed(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// utime + stime of a /proc stat line, in clock ticks: fields 14 and 15, the 12th and 13th
/// after the `(comm)`.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let mut f = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
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
    fn cpu_time_after_a_comm_with_spaces_and_parens() {
        let stat = "12 (a b) c) R 1 2 3 4 5 6 7 8 9 10 250 50 0 0";
        assert_eq!(cpu_ticks(stat), Some(300));
        assert_eq!(cpu_ticks("12 (x) S 1"), None);
        let s = snapshot(std::process::id()).expect("this process is in /proc");
        assert!(s.split("; ").all(|row| row.ends_with('s')), "{s}");
    }

    #[test]
    fn state_after_a_comm_with_spaces_and_parens() {
        assert_eq!(state_of("12 (a b) c) S 1 2"), Some('S'));
        assert_eq!(snapshot(u32::MAX), None);
    }
}
