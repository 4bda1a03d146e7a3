//! The real side of the user's-path oracle (userpath.rs): how a generated program is launched
//! (plain processes through `sh -c`, or torchrun), and each rank's end as the real run shows
//! it, read from exit statuses and stderr, with no instrumentation of the calls: see
//! userpath.rs's header for the rules.

use super::pygen::{Kind, PyProgram};
use scen_core::outcome::Failure;
use std::path::Path;

/// How a real rank ended.
pub enum End {
    Completed,
    Failed(Failure),
    /// Still running when `scen record --timeout-s` cut the job.
    Hung,
}

pub struct RealRank {
    pub rank: usize,
    pub end: End,
    /// The line of prog.py it ended at, where known.
    pub line: Option<usize>,
    /// Killed after its program's last line (in the interpreter's teardown).
    pub after_end: bool,
    /// Its stderr (kept with a differing program).
    pub stderr: String,
}

/// `sh -c` text starting one `python prog.py` per rank (stderr to rR.err, status to rR.rc);
/// `off`: a rank with its own MASTER_PORT.
pub fn shell_command(python: &Path, p: &PyProgram, port: u16, off: Option<(usize, u16)>) -> String {
    let w = p.world;
    let mut sh = String::new();
    for r in 0..w {
        let port = match off {
            Some((o, q)) if o == r => q,
            _ => port,
        };
        sh.push_str(&format!(
            "{{ RANK={r} LOCAL_RANK={r} WORLD_SIZE={w} LOCAL_WORLD_SIZE={w} MASTER_ADDR=127.0.0.1 MASTER_PORT={port} '{}' prog.py 2>r{r}.err; echo $? >r{r}.rc; }} & ",
            python.display()
        ));
    }
    sh.push_str("wait");
    sh
}

/// torchrun with every rank's stderr in its own log file.
pub fn torchrun_command(p: &PyProgram, port: u16) -> Vec<String> {
    [
        "torchrun",
        "--nproc-per-node",
        &p.world.to_string(),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        &port.to_string(),
        "--log-dir",
        "logs",
        "--redirects",
        "2",
        "prog.py",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Every rank's end, from the run directory (and, under torchrun, its failure summary in
/// `scen record`'s stderr). `cut`: the job ran to `scen record --timeout-s`, which ended it
/// (SIGKILL to every process; torchrun then reports nothing): a rank with no end of its own
/// was still running.
pub fn read_ranks(
    dir: &Path,
    p: &PyProgram,
    launcher: &str,
    record_stderr: &str,
    cut: bool,
) -> Vec<RealRank> {
    let summary = torchrun_summary(record_stderr);
    (0..p.world)
        .map(|r| {
            let (err, status) = if launcher == "torchrun" {
                let status = summary.0.get(&r).copied();
                (
                    find_log(&dir.join("logs"), r),
                    if cut {
                        status
                    } else {
                        Some(status.unwrap_or(0))
                    },
                )
            } else {
                let rc = std::fs::read_to_string(dir.join(format!("r{r}.rc"))).ok();
                let rc = rc.and_then(|s| s.trim().parse::<i32>().ok());
                // sh reports a signal as 128 + it.
                let rc = rc.map(|c| if c > 128 { -(c - 128) } else { c });
                let rc = rc.filter(|c| !(cut && *c == -9));
                (
                    std::fs::read_to_string(dir.join(format!("r{r}.err"))).unwrap_or_default(),
                    rc,
                )
            };
            RealRank {
                stderr: err.clone(),
                ..rank_end(p, r, &err, status, summary.1)
            }
        })
        .collect()
}

/// A rank's end from its stderr and status (negative: killed by that signal; None: never ended).
fn rank_end(
    p: &PyProgram,
    r: usize,
    err: &str,
    status: Option<i32>,
    root: Option<usize>,
) -> RealRank {
    let at = |end: End, line: Option<usize>| RealRank {
        rank: r,
        end,
        line,
        after_end: false,
        stderr: String::new(),
    };
    if let Some((text, line)) = last_traceback(err) {
        let (exception, message) = text.split_once(": ").unwrap_or((&text, ""));
        let exception = exception
            .rsplit('.')
            .next()
            .unwrap_or(exception)
            .to_string();
        let message = message.to_string();
        return at(End::Failed(Failure::Raised { exception, message }), line);
    }
    let own_end = own_end_line(p, r);
    let dumped = dumped_frame(err);
    // A stack dumped with no frame of prog.py: the signal came after the program's last line.
    // So did a SIGTERM that dumped nothing: the program registers faulthandler for it, and
    // Python uninstalls faulthandler only as it finalizes, after the last line (7/630).
    let dump = err.lines().any(|l| is_dump_header(unprefixed(l)));
    let after_end = dumped.is_none() && (dump || status == Some(-15));
    let line = dumped.or(own_end);
    match status {
        None => at(End::Hung, line),
        Some(0) => at(End::Completed, None),
        Some(s) if s < 0 => {
            let f = match (-s, root) {
                (15, Some(root)) if root != r => super::agent_stop(root),
                (sig, _) => Failure::process_exit(None, Some(sig)),
            };
            RealRank {
                after_end,
                ..at(End::Failed(f), line)
            }
        }
        Some(c) => at(End::Failed(Failure::process_exit(Some(c), None)), own_end),
    }
}

/// The generator's line where rank `r` ends by itself (a raise, exit or self-kill), if any.
fn own_end_line(p: &PyProgram, r: usize) -> Option<usize> {
    p.lines
        .iter()
        .position(|l| l.kind == Kind::End && l.ranks.contains(&r))
        .map(|i| i + 1)
}

/// The last Python traceback in `err`: its `Type: text` (module prefix kept; lines up to a
/// blank line or the end) and the line of its last frame in prog.py.
fn last_traceback(err: &str) -> Option<(String, Option<usize>)> {
    let lines: Vec<&str> = err
        .lines()
        .map(unprefixed)
        .filter(|l| !is_cpp_log(l))
        .collect();
    let start = lines
        .iter()
        .rposition(|l| l.starts_with("Traceback (most recent call last):"))?;
    let block = &lines[start + 1..];
    let mut line = None;
    let mut i = 0;
    while i < block.len() && (block[i].starts_with(' ') || block[i].is_empty()) {
        if let Some(n) = prog_line(block[i]) {
            line = Some(n);
        }
        i += 1;
    }
    let text: Vec<&str> = block[i..]
        .iter()
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("  ") && !is_noise(l))
        .copied()
        .collect();
    Some((text.join("\n"), line))
}

/// A line without the `[rank3]: ` torch.distributed puts before a traceback's lines.
fn unprefixed(l: &str) -> &str {
    match l.strip_prefix("[rank").and_then(|x| x.split_once("]: ")) {
        Some((n, rest)) if n.chars().all(|c| c.is_ascii_digit()) => rest,
        _ => l,
    }
}

/// c10d's C++ log lines (`[W1127 ...`), interleaved with Python's stderr at any time.
fn is_cpp_log(l: &str) -> bool {
    ["[W", "[E", "[I"].iter().any(|p| l.starts_with(p))
}

/// What ends an exception's text: a faulthandler dump, gloo's abort.
fn is_noise(l: &str) -> bool {
    [
        "terminate called",
        "Fatal Python",
        "Current thread",
        "Thread 0x",
    ]
    .iter()
    .any(|p| l.starts_with(p))
}

/// A faulthandler dump's thread header: the current thread's, or another's (a gloo thread that
/// aborts leaves the main thread, which runs prog.py, under `Thread 0x...`).
fn is_dump_header(l: &str) -> bool {
    l.starts_with("Current thread") || l.starts_with("Thread 0x")
}

/// The innermost prog.py frame of the last faulthandler dump (each thread's frames are listed
/// most recent first; the thread that runs prog.py has them).
fn dumped_frame(err: &str) -> Option<usize> {
    let lines: Vec<&str> = err.lines().map(unprefixed).collect();
    let last = lines.iter().rposition(|l| is_dump_header(l))?;
    let first = lines[..=last]
        .iter()
        .rposition(|l| !is_dump_header(l) && !l.starts_with(' ') && !l.is_empty())
        .map_or(0, |i| i + 1);
    lines[first..].iter().find_map(|l| prog_line(l))
}

/// `File "/x/prog.py", line 12, in <module>` (a traceback) or `File "/x/prog.py", line 12 in
/// <module>` (faulthandler): 12.
fn prog_line(l: &str) -> Option<usize> {
    let l = l.trim_start();
    if !l.starts_with("File \"") || !l.contains("prog.py\", line ") {
        return None;
    }
    let rest = l.split("prog.py\", line ").nth(1)?;
    rest.split([',', ' ']).next()?.parse().ok()
}

/// torchrun's failure summary: each listed rank's exitcode (a rank not listed exited 0), and
/// the Root Cause rank.
fn torchrun_summary(stderr: &str) -> (std::collections::BTreeMap<usize, i32>, Option<usize>) {
    let mut codes = std::collections::BTreeMap::new();
    let mut root = None;
    let mut in_root = false;
    let mut rank = None;
    for l in stderr.lines() {
        let t = l.trim();
        if t.starts_with("Root Cause") {
            in_root = true;
        } else if let Some(v) = t.strip_prefix("rank      : ") {
            rank = v
                .split_whitespace()
                .next()
                .and_then(|x| x.parse::<usize>().ok());
            if in_root && root.is_none() {
                root = rank;
            }
        } else if let Some(v) = t.strip_prefix("exitcode  : ") {
            if let (Some(r), Some(c)) = (
                rank,
                v.split_whitespace()
                    .next()
                    .and_then(|x| x.parse::<i32>().ok()),
            ) {
                codes.insert(r, c);
            }
        }
    }
    (codes, root)
}

/// Local rank `r`'s stderr.log somewhere under torchrun's --log-dir.
fn find_log(dir: &Path, r: usize) -> String {
    let want = format!("/{r}/stderr.log");
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(&want) {
                return std::fs::read_to_string(&p).unwrap_or_default();
            }
        }
    }
    String::new()
}
