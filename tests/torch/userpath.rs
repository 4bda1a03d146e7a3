//! The differential oracle on the user's path (issue 30 item 5): generated *Python programs*
//! (pygen.rs), not scenarios, go through what a user does: `scen record -o rec.toml -- LAUNCH`,
//! then `scen run rec.toml`. Per program and launcher (plain processes: one `python prog.py`
//! per rank with MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, started by `sh -c`; and `torchrun
//! --nproc-per-node W`), the real run is compared with the simulation of its own recording,
//! rank by rank: the outcome class and position, and the redacted text.
//!
//! Design, kept simple:
//! - The real run is the recorded run: `scen record` passes the program through untouched, so
//!   the ranks' exit statuses and stderr are the real run's. A run that differs is run again
//!   (the same `scen record` command, RERUNS times at most; only its real facts are used), so a
//!   program whose real runs vary counts as agreeing when a rerun agrees, and the figures are
//!   given against the first run alone too, with the programs whose real runs differ.
//! - A real rank's facts, read without instrumenting the calls: the class from its exit
//!   (status 0 completes; a Python traceback on stderr raised, with its last `Type: text`; a
//!   signal killed; another code exited), the position from the last frame in prog.py of that
//!   traceback, or of the stack `PYTHONFAULTHANDLER=1` dumps on SIGABRT/SIGSEGV, or of the stack
//!   the program's first line has faulthandler dump on SIGTERM (torchrun's agent stopping it;
//!   that line is the one concession the generated programs make), or the generator's own line
//!   for a rank's `sys.exit`/self-kill. A signal whose dump has no frame of prog.py came after
//!   the program's last line (in the interpreter's teardown): its position is "after its last
//!   line". Under torchrun, exit codes come from torchrun's failure summary (a rank it does not
//!   list exited 0) and stderr from its per-rank logs (`--log-dir --redirects 2`); the agent's
//!   SIGTERM is worded as the model words it, naming torchrun's "Root Cause" rank.
//! - The simulated rank's position is the `# prog.py:N` comment of the recorded step it ended
//!   in. Positions compare as lines; a sleep compares as "sleep after" the rank's previous call
//!   (the recorder heads a sleep between calls with the next call's line, and a sleep a signal
//!   ended with the previous call's: that one is "after its last line" unless the program's
//!   next line on that rank is a sleep, where the signal found it).
//! - Text: `RankVerdict::facts`'s text and the real one, both through tests/torch.rs `redact`.
//! - Also counted: whether the recording simulates to its own recorded expectations (one that
//!   does not is kept in target/userpath/ as `prog_S_K_LAUNCHER.self.rec.toml`, headed by the
//!   expectations it breaks, which are printed too), internal
//!   errors (scen record exit 3, or a recording that does not load or simulate), refusals (exit
//!   2 must name the call and `prog.py:LINE`), how often each row of docs/api-coverage.md was
//!   drawn.
//! - Runs are sequential (one program at a time: the machine has 2 cores).
//!
//! `cargo test --test torch -- userpath`: the sample (the SAMPLE programs of seed 1, each
//! under its launchers); it fails on a differing (program, launcher) not in userpath_known.txt and on a
//! listed one that agrees now. The long run: `scripts/userpath-long.sh` (2,000 programs of seed
//! 7 in resumable chunks, figures only), or in one process `SCEN_USERPATH_PROGRAMS=2000
//! SCEN_USERPATH_SEED=7 cargo test --test torch -- userpath`. With `SCEN_USERPATH_ONLY`,
//! `SCEN_USERPATH_MINIMISE=1` also cuts each program that differs in outcome down to the lines
//! that make it differ and prints it. `SCEN_USERPATH_ONLY=3,9` runs those
//! programs of the seed. Differing programs are kept in target/userpath/ (the program with both
//! sides in its header, its recording, and the recorder's raw records of the first run in
//! `prog_S_K_LAUNCHER.raw/`, which `scen record --from` translates again).

use super::pygen::{self, Kind, PyProgram};
use super::redact;
use scen_core::outcome::{Failure, Killer};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

#[path = "userpath_real.rs"]
mod real;
#[path = "userpath_sim.rs"]
mod sim;
use real::RealRank;
use sim::simulate;

/// Programs of the sample `cargo test` runs, with the launchers each runs under. 1/2: a rank's
/// extra call times out and fails both ranks, as plain processes only: under torchrun its rank
/// 0 raises as rank 1's process ends, while the agent stops it, and on a loaded machine the
/// agent wins (a CI run read SIGTERM in both real runs), a race real runs do not repeat.
/// 1/49: a `file://` init, both launchers. 1/135: tagged send/recv and all_to_all_single on a
/// world of 2 that completes, under torchrun. None is decided by a loaded machine's import
/// stagger.
const SAMPLE: [(u64, &[&str]); 3] = [(2, &["processes"]), (49, &LAUNCHERS), (135, &["torchrun"])];
/// Real runs of a differing program after its first.
const RERUNS: usize = 1;
const LAUNCHERS: [&str; 2] = ["processes", "torchrun"];

/// One rank's comparable facts: class with position, and redacted text.
type Facts = (String, String);

/// How one (program, launcher) came out.
#[derive(Default)]
struct Judged {
    /// Per rank (outcome agrees, text agrees): best real run, and the first.
    best: Vec<(bool, bool)>,
    first: Vec<(bool, bool)>,
    varies: bool,
    self_holds: Option<bool>,
    internal: Option<String>,
    refused: Option<Result<String, String>>,
    header: Option<String>,
}

#[derive(Default)]
struct Tally {
    programs: usize,
    ranks: usize,
    outcome: usize,
    text: usize,
    first_outcome: usize,
    first_text: usize,
    varies: usize,
    self_holds: usize,
    self_total: usize,
    internal: Vec<String>,
    refused_ok: usize,
    refused_bad: Vec<String>,
    differing: Vec<u64>,
}

/// Where every run of this test lives (a fresh directory per run).
struct Ctx<'a> {
    root: &'a Path,
    python: &'a Path,
    seed: u64,
}

pub fn run(root: &Path, python: &Path) -> Result<(), String> {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let long = env("SCEN_USERPATH_PROGRAMS");
    let seed = env("SCEN_USERPATH_SEED").unwrap_or(1);
    let only: Option<Vec<u64>> = std::env::var("SCEN_USERPATH_ONLY")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect());
    let picked: Vec<u64> = match &only {
        Some(ks) => ks.clone(),
        None => match long {
            Some(n) => (0..n).collect(),
            None if seed == 1 => SAMPLE.iter().map(|(k, _)| *k).collect(),
            None => (0..SAMPLE.len() as u64).collect(),
        },
    };
    let dry = std::env::var("SCEN_USERPATH_DRY").unwrap_or_default();
    if dry == "1" || dry == "text" {
        // The rows the programs draw (and their text), without running them.
        let mut rows: BTreeMap<String, usize> = BTreeMap::new();
        for k in &picked {
            let p = pygen::program(seed, *k);
            if dry == "text" {
                println!("userpath: program {seed}/{k}:\n{}", p.text);
            }
            for r in p.rows {
                *rows.entry(r).or_default() += 1;
            }
        }
        print_rows(root, &rows);
        return Ok(());
    }
    let cx = Ctx { root, python, seed };
    let minimising = std::env::var("SCEN_USERPATH_MINIMISE").is_ok_and(|v| v == "1");
    let mut tallies: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut rows: BTreeMap<String, usize> = BTreeMap::new();
    for k in picked {
        let p = pygen::program(seed, k);
        if only.is_some() {
            println!("userpath: program {seed}/{k}:\n{}", p.text);
        }
        for r in &p.rows {
            *rows.entry(r.clone()).or_default() += 1;
        }
        let sample = SAMPLE.iter().find(|(s, _)| *s == k && seed == 1);
        let launchers = match sample {
            Some((_, ls)) if only.is_none() && long.is_none() => ls,
            _ => &LAUNCHERS[..],
        };
        for &l in launchers {
            let j = judge(&cx, &p, k, l);
            print_done(seed, k, l, &j);
            if only.is_some() && minimising && differs_in_outcome(&j) {
                let m = minimise(&cx, &p, k, l);
                println!(
                    "userpath: program {seed}/{k} under {l}, minimised:\n{}",
                    m.text
                );
            }
            add(tallies.entry(l).or_default(), k, j);
        }
    }
    for (l, t) in &tallies {
        print_tally(seed, l, t);
    }
    print_rows(root, &rows);
    let errors: Vec<String> = tallies
        .values()
        .flat_map(|t| t.internal.iter().chain(&t.refused_bad).cloned())
        .collect();
    if !errors.is_empty() {
        return Err(format!(
            "internal errors or bad refusals:\n{}",
            errors.join("\n")
        ));
    }
    if long.is_some() || only.is_some() {
        return Ok(());
    }
    ratchet(root, seed, &tallies)
}

/// One line per (program, launcher), so a long run stopped early still gives its figures.
fn print_done(seed: u64, k: u64, l: &str, j: &Judged) {
    if let Some(h) = &j.header {
        println!("userpath: DIFFER\n{h}");
    }
    let c = |v: &[(bool, bool)], f: fn(&(bool, bool)) -> bool| v.iter().filter(|x| f(x)).count();
    println!(
        "userpath: done {seed}/{k} {l}: ranks {}, outcome {}, text {}, first-run outcome {}, text {}, varies {}, self {}{}{}",
        j.best.len(),
        c(&j.best, |x| x.0),
        c(&j.best, |x| x.1),
        c(&j.first, |x| x.0),
        c(&j.first, |x| x.1),
        u8::from(j.varies),
        match j.self_holds { Some(true) => "holds", Some(false) => "FAILS", None => "-" },
        j.internal.as_ref().map(|e| format!(", INTERNAL ERROR: {e}")).unwrap_or_default(),
        match &j.refused { Some(Ok(m)) => format!(", refused: {m}"), Some(Err(m)) => format!(", BAD REFUSAL: {m}"), None => String::new() },
    );
}

fn add(t: &mut Tally, k: u64, j: Judged) {
    t.programs += 1;
    if let Some(e) = j.internal {
        t.internal.push(format!("{k}: {e}"));
    }
    match j.refused {
        Some(Ok(_)) => t.refused_ok += 1,
        Some(Err(e)) => t.refused_bad.push(format!("{k}: {e}")),
        None => {}
    }
    if let Some(h) = j.self_holds {
        t.self_total += 1;
        t.self_holds += usize::from(h);
    }
    t.ranks += j.best.len();
    t.outcome += j.best.iter().filter(|x| x.0).count();
    t.text += j.best.iter().filter(|x| x.1).count();
    t.first_outcome += j.first.iter().filter(|x| x.0).count();
    t.first_text += j.first.iter().filter(|x| x.1).count();
    t.varies += usize::from(j.varies);
    if j.header.is_some() {
        t.differing.push(k);
    }
}

fn print_tally(seed: u64, l: &str, t: &Tally) {
    let pct = |a: usize, n: usize| 100.0 * a as f64 / n.max(1) as f64;
    println!(
        "userpath (seed {seed}, {l}): {} programs, {} ranks compared: outcome {:.1}%, exact text {:.1}% (first real run only: {:.1}%, {:.1}%; {} program(s) whose real runs differ from one another); recording simulates to its own recorded outcome: {}/{}; internal errors (exit 3): {}; refused: {} (naming call and line), {} not; {} program(s) differ{}",
        t.programs,
        t.ranks,
        pct(t.outcome, t.ranks),
        pct(t.text, t.ranks),
        pct(t.first_outcome, t.ranks),
        pct(t.first_text, t.ranks),
        t.varies,
        t.self_holds,
        t.self_total,
        t.internal.len(),
        t.refused_ok,
        t.refused_bad.len(),
        t.differing.len(),
        if t.differing.is_empty() { String::new() } else { format!(" (target/userpath/: {:?})", t.differing) },
    );
}

/// How often each row of docs/api-coverage.md was drawn (every row, 0 included).
fn print_rows(root: &Path, drawn: &BTreeMap<String, usize>) {
    let table = std::fs::read_to_string(root.join("docs/api-coverage.md")).unwrap_or_default();
    let mut counts: Vec<(String, usize)> = table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| function") && !l.starts_with("| use"))
        .filter_map(|l| l.split(" | ").next())
        .map(|c| c.trim_start_matches("| ").trim_matches('`').to_string())
        .map(|c| {
            let n = drawn.get(&c).copied().unwrap_or(0);
            (c, n)
        })
        .collect();
    counts.sort_by_key(|c| c.1);
    let (min, max) = (counts.first(), counts.last());
    println!(
        "userpath rows drawn ({} rows of docs/api-coverage.md): min {:?}, max {:?}",
        counts.len(),
        min,
        max
    );
    let never: Vec<&str> = counts
        .iter()
        .filter(|c| c.1 == 0)
        .map(|c| c.0.as_str())
        .collect();
    println!("userpath rows never drawn: {never:?}");
    let list: Vec<String> = counts.iter().map(|(r, n)| format!("{r}={n}")).collect();
    println!("userpath rows: {}", list.join("; "));
}

/// The sample's ratchet: `seed/k launcher` lines of userpath_known.txt.
fn ratchet(root: &Path, seed: u64, tallies: &BTreeMap<&str, Tally>) -> Result<(), String> {
    let listed: Vec<String> = std::fs::read_to_string(root.join("tests/torch/userpath_known.txt"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .collect();
    let ids: Vec<String> = tallies
        .iter()
        .flat_map(|(l, t)| t.differing.iter().map(move |k| format!("{seed}/{k} {l}")))
        .collect();
    let new: Vec<&String> = ids.iter().filter(|i| !listed.contains(i)).collect();
    let fixed: Vec<&String> = listed
        .iter()
        .filter(|l| l.starts_with(&format!("{seed}/")) && !ids.contains(l))
        .collect();
    if new.is_empty() && fixed.is_empty() {
        return Ok(());
    }
    Err(format!(
        "differing programs not in tests/torch/userpath_known.txt: {new:?}; listed there but agreeing now (remove them): {fixed:?}"
    ))
}

/// One recorded real run: its ranks' facts, and what `scen record` did.
struct Recorded {
    real: Vec<RealRank>,
    code: Option<i32>,
    stderr: String,
    recording: Option<String>,
    dir: tempfile::TempDir,
}

/// Records `p` under launcher `l` in a fresh directory.
fn record(cx: &Ctx, p: &PyProgram, l: &str) -> Result<Recorded, String> {
    let dir = tempfile::Builder::new()
        .prefix("scen-userpath-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("prog.py"), &p.text).map_err(|e| e.to_string())?;
    let port = || -> Result<u16, String> {
        scen_procs::port::below_ephemeral()
            .and_then(|s| s.local_addr().map_err(Into::into))
            .map(|a| a.port())
            .map_err(|e| e.to_string())
    };
    let master = port()?;
    let launch: Vec<String> = if l == "torchrun" {
        real::torchrun_command(p, master)
    } else {
        let off = match p.port_off {
            Some(r) => Some((r, port()?)),
            None => None,
        };
        vec![
            "sh".into(),
            "-c".into(),
            real::shell_command(cx.python, p, master, off),
        ]
    };
    let bin = cx.python.parent().unwrap_or(Path::new("/"));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = std::time::Instant::now();
    let out = Command::new("nice")
        .args([
            "-n",
            "5",
            env!("CARGO_BIN_EXE_scen"),
            "record",
            "--timeout-s",
            &p.cut_s.unwrap_or(150).to_string(),
            "-o",
            "rec.toml",
            "--keep",
            "raw",
            "--",
        ])
        .args(&launch)
        .current_dir(dir.path())
        // No terminal for a program's pdb (`dist.breakpoint`): it reads end of input.
        .stdin(std::process::Stdio::null())
        .env("PATH", path)
        .env("PYTHONFAULTHANDLER", "1")
        .env("OMP_NUM_THREADS", "1")
        .envs(p.detail.then_some(("TORCH_DISTRIBUTED_DEBUG", "DETAIL")))
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let cut = p
        .cut_s
        .is_some_and(|c| started.elapsed().as_secs_f64() >= c as f64);
    let real = real::read_ranks(dir.path(), p, l, &stderr, cut);
    let recording = std::fs::read_to_string(dir.path().join("rec.toml")).ok();
    Ok(Recorded {
        real,
        code: out.status.code(),
        stderr,
        recording,
        dir,
    })
}

/// Records, simulates and compares program `k` under launcher `l`.
fn judge(cx: &Ctx, p: &PyProgram, k: u64, l: &str) -> Judged {
    let mut j = Judged::default();
    let first = match record(cx, p, l) {
        Ok(r) => r,
        Err(e) => {
            j.internal = Some(format!("harness: {e}"));
            return j;
        }
    };
    if first.code == Some(2) {
        j.refused = Some(refusal(p, &first));
        return j;
    }
    // A refused call no rank reached (they failed before it) is no refusal; a rank that
    // completed went through it, so the recorder should have refused it.
    if let Some(name) = p.refused {
        if first
            .real
            .iter()
            .any(|r| matches!(r.end, real::End::Completed))
        {
            j.refused = Some(Err(format!(
                "program calls {name} and a rank completed, but scen record exited {:?}",
                first.code
            )));
            return j;
        }
    }
    let sim = match simulate(&first) {
        Ok(s) => s,
        Err(e) => {
            j.internal = Some(e);
            return j;
        }
    };
    j.self_holds = Some(sim.broken.is_empty());
    if !sim.broken.is_empty() {
        keep_self(cx, k, l, &sim.broken, &first);
    }
    let want = sim.facts(p);
    let mut runs = vec![first
        .real
        .iter()
        .map(|r| r.facts(p))
        .collect::<Vec<Facts>>()];
    while agreement(&want, runs.last().expect("a run"))
        .iter()
        .any(|x| !x.1)
        && runs.len() <= RERUNS
    {
        match record(cx, p, l) {
            Ok(again) => runs.push(again.real.iter().map(|r| r.facts(p)).collect()),
            Err(_) => break,
        }
    }
    j.varies = runs.windows(2).any(|w| w[0] != w[1]);
    j.first = agreement(&want, &runs[0]);
    let last = agreement(&want, runs.last().expect("a run"));
    let matched = last.iter().all(|x| x.1);
    j.best = if matched { last } else { j.first.clone() };
    if !matched {
        j.header = Some(keep(cx, p, k, l, &want, &runs, &first));
    }
    j
}

/// Whether a judged (program, launcher) has a rank whose outcome differs from the real run's.
fn differs_in_outcome(j: &Judged) -> bool {
    j.refused.is_none() && j.internal.is_none() && j.best.iter().any(|x| !x.0)
}

/// A program that differs in outcome under launcher `l`, cut down (issue 30 item 5): from the
/// last line up, each call, sleep or end line that names nothing later lines use (no `=`, no
/// init) becomes `pass`, so line numbers stay, and stays out while the program still differs.
/// Each try runs the program for real and simulates its recording again.
fn minimise(cx: &Ctx, p: &PyProgram, k: u64, l: &str) -> PyProgram {
    let mut cur = p.clone();
    for i in (0..cur.lines.len()).rev() {
        let text = cur.text.lines().nth(i).unwrap_or("");
        if cur.lines[i].kind == Kind::Other
            || text.contains(" = ")
            || text.contains("init_process_group")
        {
            continue;
        }
        let mut lines: Vec<&str> = cur.text.lines().collect();
        lines[i] = "pass";
        let mut cand = cur.clone();
        cand.text = format!("{}\n", lines.join("\n"));
        cand.lines[i].kind = Kind::Other;
        if differs_in_outcome(&judge(cx, &cand, k, l)) {
            cur = cand;
        }
    }
    cur
}

/// Per rank (outcome agrees, text agrees).
fn agreement(sim: &[Facts], real: &[Facts]) -> Vec<(bool, bool)> {
    sim.iter()
        .zip(real)
        .map(|(a, b)| (a.0 == b.0, a == b))
        .collect()
}

/// Keeps a differing program in target/userpath/ with both sides in its header.
fn keep(
    cx: &Ctx,
    p: &PyProgram,
    k: u64,
    l: &str,
    sim: &[Facts],
    runs: &[Vec<Facts>],
    first: &Recorded,
) -> String {
    let mut h = String::new();
    let _ = writeln!(h, "# program {}/{k} under {l}: {}", cx.seed, p.summary);
    for (r, (a, b)) in sim.iter().zip(&runs[0]).enumerate() {
        let _ = writeln!(h, "#   rank {r} sim:  {} {}", a.0, a.1);
        let _ = writeln!(h, "#   rank {r} real: {} {}", b.0, b.1);
    }
    if runs.len() > 1 {
        let _ = writeln!(
            h,
            "#   {} real runs{}",
            runs.len(),
            if runs.windows(2).any(|w| w[0] != w[1]) {
                ", which differ from one another"
            } else {
                ", the same"
            }
        );
    }
    let dir = cx.root.join("target/userpath");
    let _ = std::fs::create_dir_all(&dir);
    let stem = format!("prog_{}_{k}_{l}", cx.seed);
    let _ = std::fs::write(dir.join(format!("{stem}.py")), format!("{h}{}", p.text));
    if let Some(rec) = &first.recording {
        let _ = std::fs::write(dir.join(format!("{stem}.rec.toml")), rec);
    }
    let _ = std::fs::write(dir.join(format!("{stem}.record-stderr.txt")), &first.stderr);
    for r in &first.real {
        let _ = std::fs::write(dir.join(format!("{stem}.rank{}.err", r.rank)), &r.stderr);
    }
    keep_raw(first, &dir.join(format!("{stem}.raw")));
    h
}

/// Copies the recorder's raw records (`scen record --keep raw`) of the first run to `to`, so
/// a miss can be replayed: `scen record --from DIR`, or read record by record.
fn keep_raw(first: &Recorded, to: &Path) {
    let Ok(files) = std::fs::read_dir(first.dir.path().join("raw")) else {
        return;
    };
    let _ = std::fs::remove_dir_all(to);
    let _ = std::fs::create_dir_all(to);
    for f in files.flatten() {
        let _ = std::fs::copy(f.path(), to.join(f.file_name()));
    }
}

/// Keeps a recording that does not simulate to its own expectations in target/userpath/
/// (`prog_S_K_LAUNCHER.self.rec.toml`, headed by the expectations it breaks), and prints them.
fn keep_self(cx: &Ctx, k: u64, l: &str, broken: &[String], first: &Recorded) {
    let mut h = format!(
        "# program {}/{k} under {l}: the recording's own expectations it does not meet\n",
        cx.seed
    );
    for b in broken {
        let _ = writeln!(h, "#   {b}");
        println!("userpath: self {}/{k} {l}: {b}", cx.seed);
    }
    let dir = cx.root.join("target/userpath");
    let _ = std::fs::create_dir_all(&dir);
    let stem = format!("prog_{}_{k}_{l}", cx.seed);
    if let Some(rec) = &first.recording {
        let _ = std::fs::write(
            dir.join(format!("{stem}.self.rec.toml")),
            format!("{h}{rec}"),
        );
    }
    keep_raw(first, &dir.join(format!("{stem}.self.raw")));
}

/// A refused program: scen record must exit 2 and name `prog.py:LINE` and the call made on
/// that line (the generator's refused call, or any other the recorder refuses).
fn refusal(p: &PyProgram, r: &Recorded) -> Result<String, String> {
    let named = r.stderr.lines().find_map(|l| {
        let n: usize = l
            .split("prog.py:")
            .nth(1)?
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()?;
        let code = p.text.lines().nth(n.checked_sub(1)?)?;
        let call = code.split("dist.").nth(1)?.split('(').next()?;
        let alias = match call {
            "all_gather_single" => "all_gather_into_tensor",
            "reduce_scatter_single" => "reduce_scatter_tensor",
            c => c,
        };
        (l.contains(call) || l.contains(alias)).then(|| l.trim().to_string())
    });
    match (r.code, named) {
        (Some(2), Some(m)) => Ok(m),
        (c, _) => Err(format!(
            "{}: scen record exited {c:?}, said {:?}",
            p.refused
                .map_or("a refusal".into(), |n| format!("program calls {n}")),
            r.stderr.lines().rev().take(3).collect::<Vec<_>>()
        )),
    }
}

/// The failure the model names for torchrun's SIGTERM after `after_rank` failed.
pub fn agent_stop(after_rank: usize) -> Failure {
    Failure::Killed {
        signal: 15,
        by: Killer::Agent { after_rank },
    }
}
