//! A mutation fuzzer for the `scen` command line, kept in the repo so the robustness work of
//! issue 12 can be repeated: it mutates the scenarios in scenarios/ (numbers swapped for hostile
//! values, lines deleted, duplicated or spliced between files, quoted words swapped, bytes
//! flipped), runs `scen check` and, when that accepts the file, a bounded `scen run`, each in its
//! own process under a memory and time limit, and keeps every input that makes scen panic,
//! abort, report an internal error or overrun its limit.
//!
//! It needs no coverage instrumentation (only stable Rust is available), and it runs the real
//! binary so an abort or a stack overflow is seen as what a user sees. See docs/fuzzing.md.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Values that have broken parsers and allocators before.
const HOSTILE_NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "64",
    "127",
    "128",
    "1000",
    "65535",
    "65536",
    "16777217",
    "268435456",
    "2147483647",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "1e300",
    "0.5",
    "nan",
];

/// Lines that are rarely in seeds but each reach a different corner of the loader.
const SNIPPETS: &[&str] = &[
    "seed = 18446744073709551615",
    "world_size = \"WORLD_SIZE * 1000\"",
    "count = \"rank * 1000000000\"",
    "shape = [4294967296, 4294967296]",
    "text = \"{rank\"",
    "name = \"×\"",
    "x = \"\"\"\n{rank\n\"\"\"",
    "expr = \"((((((((((((((((((((rank))))))))))))))))))))\"",
    "ms = 9223372036854775807",
    "latency_max_ms = 9223372036854775807",
    "timeout_ms = 0",
    "ranks = \"0..100000\"",
    "layers = 1048576",
    "[[step]]",
    "[[fault]]",
    "[world]",
    "[sim]",
    "[env]",
    "[[expect]]",
    "op = \"all_reduce\"",
    "op = \"send\"",
    "op = \"recv\"",
    "op = \"init_process_group\"",
    "op = \"new_group\"",
    "op = \"sleep\"",
    "when = \"rank == 0\"",
    "when = \"rank = 0\"",
    "dst = 99",
    "src = -1",
    "backend = \"gloo\"",
    "backend = \"xccl\"",
    "dtype = \"bfloat16\"",
    "device = \"xpu\"",
    "random_order = true",
];

/// xorshift64*: a seeded, reproducible stream (no crate needed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

struct Corpus {
    seeds: Vec<Vec<u8>>,
    words: Vec<String>,
}

fn load_corpus(dir: &Path) -> Corpus {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    let seeds: Vec<Vec<u8>> = paths.iter().filter_map(|p| std::fs::read(p).ok()).collect();
    let mut words = std::collections::BTreeSet::new();
    for s in &seeds {
        let text = String::from_utf8_lossy(s);
        for q in text.split('"').skip(1).step_by(2) {
            if q.len() < 40 && !q.contains('\n') {
                words.insert(q.to_string());
            }
        }
    }
    Corpus {
        seeds,
        words: words.into_iter().collect(),
    }
}

fn lines(b: &[u8]) -> Vec<Vec<u8>> {
    b.split(|c| *c == b'\n').map(|l| l.to_vec()).collect()
}

fn join(ls: &[Vec<u8>]) -> Vec<u8> {
    ls.join(&b'\n')
}

/// Spans of ASCII digits (with a leading '-') in `b`.
fn number_spans(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let start = if i > 0 && b[i - 1] == b'-' { i - 1 } else { i };
            let mut j = i;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            out.push((start, j));
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Spans of the insides of "..." on one line.
fn string_spans(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut open: Option<usize> = None;
    for (i, c) in b.iter().enumerate() {
        match (c, open) {
            (b'"', None) => open = Some(i + 1),
            (b'"', Some(s)) => {
                out.push((s, i));
                open = None;
            }
            (b'\n', _) => open = None,
            _ => {}
        }
    }
    out
}

fn mutate_once(rng: &mut Rng, c: &Corpus, input: Vec<u8>) -> Vec<u8> {
    let mut b = input;
    match rng.below(11) {
        0..=2 => {
            let spans = number_spans(&b);
            if !spans.is_empty() {
                let (s, e) = *rng.pick(&spans);
                let v = rng.pick(HOSTILE_NUMBERS).as_bytes().to_vec();
                b.splice(s..e, v);
            }
        }
        3 => {
            let mut ls = lines(&b);
            if ls.len() > 1 {
                let i = rng.below(ls.len());
                ls.remove(i);
            }
            b = join(&ls);
        }
        4 => {
            // Duplicate a block (a table and its keys) `n` times: many steps, repeated tables.
            let ls = lines(&b);
            let heads: Vec<usize> = (0..ls.len()).filter(|i| ls[*i].starts_with(b"[")).collect();
            if !heads.is_empty() {
                let s = *rng.pick(&heads);
                let e = (s + 1..ls.len())
                    .find(|i| ls[*i].starts_with(b"["))
                    .unwrap_or(ls.len());
                let n = *rng.pick(&[1usize, 2, 3, 50, 500]);
                let block: Vec<Vec<u8>> = ls[s..e].to_vec();
                let mut out = ls.clone();
                for _ in 0..n {
                    out.extend(block.iter().cloned());
                }
                b = join(&out);
            }
        }
        5 => {
            let other: &Vec<u8> = rng.pick(&c.seeds);
            let other = lines(other);
            let mut ls = lines(&b);
            let line = rng.pick(&other).clone();
            let at = rng.below(ls.len() + 1);
            ls.insert(at, line);
            b = join(&ls);
        }
        6 => {
            let mut ls = lines(&b);
            let at = rng.below(ls.len() + 1);
            ls.insert(at, rng.pick(SNIPPETS).as_bytes().to_vec());
            b = join(&ls);
        }
        7 => {
            let spans = string_spans(&b);
            if !spans.is_empty() && !c.words.is_empty() {
                let (s, e) = *rng.pick(&spans);
                let w = rng.pick(&c.words).as_bytes().to_vec();
                b.splice(s..e, w);
            }
        }
        8 => {
            if !b.is_empty() {
                let i = rng.below(b.len());
                match rng.below(4) {
                    0 => b[i] ^= 1 << rng.below(8),
                    1 => b.insert(i, rng.next() as u8),
                    2 => {
                        b.remove(i);
                    }
                    _ => b.truncate(i),
                }
            }
        }
        9 => {
            // Inside a quoted formula: nest it, or splice an operator.
            let spans = string_spans(&b);
            if !spans.is_empty() {
                let (s, e) = *rng.pick(&spans);
                let inner = b[s..e].to_vec();
                let depth = *rng.pick(&[1usize, 10, 300, 5000]);
                let mut v = Vec::new();
                match rng.below(3) {
                    0 => {
                        v.extend(std::iter::repeat_n(b'(', depth));
                        v.extend(&inner);
                        v.extend(std::iter::repeat_n(b')', depth));
                    }
                    1 => {
                        v.extend(&inner);
                        v.extend(rng.pick(&[" * 1000000", " + 1", " - 100", " / 0", " % 0", " == rank", " ** 2"]).as_bytes());
                    }
                    _ => {
                        v.extend(&inner);
                        v.extend("{×".as_bytes());
                    }
                }
                b.splice(s..e, v);
            }
        }
        _ => {
            // Splice the tail of another seed.
            let other = rng.pick(&c.seeds).clone();
            let ls = lines(&b);
            let ol = lines(&other);
            let cut = rng.below(ls.len() + 1);
            let ocut = rng.below(ol.len() + 1);
            let mut out = ls[..cut].to_vec();
            out.extend(ol[ocut..].iter().cloned());
            b = join(&out);
        }
    }
    b
}

/// What one process did.
struct Outcome {
    code: Option<i32>,
    stderr: String,
    timed_out: bool,
}

fn run(bin: &Path, args: &[&str], file: &Path, timeout: Duration, mem_kb: u64) -> Outcome {
    // prlimit sets the address-space limit; `timeout -s KILL` bounds the wall time.
    let mut cmd = Command::new("timeout");
    cmd.arg("-s")
        .arg("KILL")
        .arg(format!("{}", timeout.as_secs()))
        .arg("prlimit")
        .arg(format!("--as={}", mem_kb * 1024))
        .arg(bin)
        .args(args)
        .arg(file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let out = cmd.output().expect("cannot start timeout/prlimit");
    let code = out.status.code();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    Outcome {
        timed_out: code == Some(137) || (code.is_none()),
        code,
        stderr,
    }
}

/// Why this outcome is a defect, as a key that groups the same defect.
fn defect(o: &Outcome, stage: &str) -> Option<String> {
    if let Some(i) = o.stderr.find("panicked at ") {
        let rest = &o.stderr[i + 12..];
        let loc: String = rest.chars().take_while(|c| *c != '\n').collect();
        let loc = loc.trim_end_matches(':').to_string();
        return Some(format!("{stage}: panic at {loc}"));
    }
    if o.stderr.contains("has overflowed its stack") {
        return Some(format!("{stage}: stack overflow"));
    }
    if o.stderr.contains("memory allocation of") {
        return Some(format!("{stage}: allocation failure"));
    }
    if o.timed_out {
        return Some(format!("{stage}: {SLOW}"));
    }
    match o.code {
        Some(0..=2) => None,
        Some(3) => {
            let first = o
                .stderr
                .lines()
                .find(|l| l.contains("internal error"))
                .unwrap_or("");
            let first: String = first.chars().filter(|c| !c.is_ascii_digit()).collect();
            Some(format!("{stage}: internal error {first}"))
        }
        Some(c) => Some(format!("{stage}: exit {c}")),
        None => Some(format!("{stage}: killed by a signal")),
    }
}

/// The defect class of a run over `--run-timeout-s`: with `--slow-ok` it is counted and listed
/// but does not make the exit status 1 (how long a run takes depends on the machine's load).
const SLOW: &str = "over the time limit";

struct Args {
    bin: PathBuf,
    corpus: PathBuf,
    out: PathBuf,
    seed: u64,
    duration: Duration,
    run_timeout: Duration,
    mem_kb: u64,
    /// Stop after this many inputs (CI's fixed budget); `--minutes` still bounds the time.
    max_execs: u64,
    slow_ok: bool,
}

fn parse_args() -> Args {
    let mut a = Args {
        bin: PathBuf::from("target/debug/scen"),
        corpus: PathBuf::from("scenarios"),
        out: PathBuf::from("fuzz/out"),
        seed: 1,
        duration: Duration::from_secs(60),
        run_timeout: Duration::from_secs(20),
        mem_kb: 4 * 1024 * 1024,
        max_execs: u64::MAX,
        slow_ok: false,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let v = argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--bin" => a.bin = v.into(),
            "--corpus" => a.corpus = v.into(),
            "--out" => a.out = v.into(),
            "--seed" => a.seed = v.parse().expect("--seed N"),
            "--minutes" => a.duration = Duration::from_secs(v.parse::<u64>().expect("--minutes N") * 60),
            "--run-timeout-s" => a.run_timeout = Duration::from_secs(v.parse().expect("--run-timeout-s N")),
            "--mem-mb" => a.mem_kb = v.parse::<u64>().expect("--mem-mb N") * 1024,
            "--execs" => a.max_execs = v.parse().expect("--execs N"),
            "--slow-ok" => {
                a.slow_ok = true;
                i += 1;
                continue;
            }
            other => {
                eprintln!("unknown argument {other}\nusage: scen-fuzz [--bin PATH] [--corpus DIR] [--out DIR] [--seed N] [--minutes N] [--execs N] [--run-timeout-s N] [--mem-mb N] [--slow-ok]");
                std::process::exit(2);
            }
        }
        i += 2;
    }
    a
}

fn main() {
    let a = parse_args();
    let corpus = load_corpus(&a.corpus);
    assert!(!corpus.seeds.is_empty(), "no .toml seeds in {}", a.corpus.display());
    std::fs::create_dir_all(a.out.join("crashes")).expect("cannot create the output directory");
    let work = a.out.join(format!("work-{}.toml", std::process::id()));
    let mut rng = Rng(a.seed.max(1));
    let start = Instant::now();
    let mut found: BTreeMap<String, (u64, PathBuf)> = BTreeMap::new();
    let (mut execs, mut runs, mut accepted) = (0u64, 0u64, 0u64);
    let mut last_stats = Instant::now();
    println!(
        "scen-fuzz: seed {}, corpus {}, budget {} execs / {} s, binary {}",
        a.seed,
        a.corpus.display(),
        if a.max_execs == u64::MAX { "unbounded".to_string() } else { a.max_execs.to_string() },
        a.duration.as_secs(),
        a.bin.display()
    );
    while start.elapsed() < a.duration && execs < a.max_execs {
        let mut input = rng.pick(&corpus.seeds).clone();
        for _ in 0..1 + rng.below(4) {
            input = mutate_once(&mut rng, &corpus, input);
        }
        std::fs::write(&work, &input).expect("cannot write the work file");
        execs += 1;
        let check = run(&a.bin, &["check"], &work, Duration::from_secs(10), a.mem_kb);
        let mut bad = defect(&check, "check");
        if bad.is_none() && check.code == Some(0) {
            accepted += 1;
            runs += 1;
            let r = run(&a.bin, &["run", "--format", "json"], &work, a.run_timeout, a.mem_kb);
            bad = defect(&r, "run").map(|k| (k, r)).map(|(k, r)| {
                save_log(&a.out, &k, &r.stderr);
                k
            });
        } else if let Some(k) = &bad {
            save_log(&a.out, k, &check.stderr);
        }
        if let Some(key) = bad {
            let e = found.entry(key.clone()).or_insert_with(|| {
                let name = format!("crash-{:016x}.toml", fnv(key.as_bytes()));
                let path = a.out.join("crashes").join(name);
                std::fs::write(&path, &input).expect("cannot save a crash");
                eprintln!("NEW [{}] {key} -> {}", execs, path.display());
                (0, path)
            });
            e.0 += 1;
        }
        if last_stats.elapsed() > Duration::from_secs(30) {
            last_stats = Instant::now();
            write_stats(&a.out, start.elapsed(), execs, runs, accepted, &found);
        }
    }
    write_stats(&a.out, start.elapsed(), execs, runs, accepted, &found);
    let _ = std::fs::remove_file(&work);
    println!(
        "done: {execs} execs ({accepted} accepted by check, {runs} runs) in {:.0} s; {} distinct defects",
        start.elapsed().as_secs_f64(),
        found.len()
    );
    let failing: Vec<_> = found
        .iter()
        .filter(|(k, _)| !(a.slow_ok && k.ends_with(SLOW)))
        .collect();
    for (k, (n, p)) in &found {
        let tag = if failing.iter().any(|(f, _)| f == &k) { "DEFECT" } else { "slow (not failing)" };
        println!("{tag}: {n} x {k}: {}", p.display());
    }
    std::process::exit(if failing.is_empty() { 0 } else { 1 });
}

fn save_log(out: &Path, key: &str, stderr: &str) {
    let p = out.join("crashes").join(format!("crash-{:016x}.log", fnv(key.as_bytes())));
    if !p.exists() {
        let tail: String = stderr.chars().take(4000).collect();
        let _ = std::fs::write(p, format!("{key}\n\n{tail}"));
    }
}

fn write_stats(
    out: &Path,
    elapsed: Duration,
    execs: u64,
    runs: u64,
    accepted: u64,
    found: &BTreeMap<String, (u64, PathBuf)>,
) {
    let mut s = format!(
        "elapsed_s {:.0}\nexecs {execs}\naccepted_by_check {accepted}\nruns {runs}\ndistinct_defects {}\n",
        elapsed.as_secs_f64(),
        found.len()
    );
    for (k, (n, p)) in found {
        s.push_str(&format!("{n:>6}  {k}  {}\n", p.display()));
    }
    if let Ok(mut f) = std::fs::File::create(out.join("stats.txt")) {
        let _ = f.write_all(s.as_bytes());
    }
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
        (h ^ *c as u64).wrapping_mul(0x0100_0000_01b3)
    })
}
