//! Parity with real PyTorch: every shipped scenario torch mode can run (crates/torch,
//! `eligible`) runs in the simulator and on real torch.distributed (gloo on CPU), both with
//! timeouts scaled by TIME_SCALE, and they must agree on each rank's outcome, the step it ended
//! in, its exception type and text (addresses, ports, paths and pids redacted), and the digests
//! of result tensors, and every "real gloo: ..." claim of its diagnosis must hold in the real
//! run (torch/claims.rs). A scenario whose real behaviour the model cannot follow documents it in
//! `# torch rank R: ...` comment lines (real output quoted); those lines are then what the
//! real run must match, so a change in either shows.
//!
//! No libtest harness (Cargo.toml: harness = false), so the `skip:` and summary lines always
//! show in `cargo test` output. Without torch the test prints why and passes visibly as not
//! run, unless SCEN_TORCH_REQUIRED=1 (CI) makes that a failure. Filter: `cargo test --test
//! torch -- NAME...` runs only scenarios whose name contains one of the NAMEs.
//!
//! The runs made through the library fork their runner from one zygote per test process
//! (crates/torch/src/zygote.rs: torch imported once, not once per run); SCEN_TORCH_ZYGOTE=0
//! starts `python runner.py` per run as `scen run --torch` does. SCEN_TORCH_JOBS=N overrides
//! JOBS (to measure).

use scen_core::report::Report;
use scen_core::scenario::{load_file, Scenario, StoreCall, TimeScale};
use scen_core::verdict::RankVerdict;
use scen_torch::zygote::Zygote;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[path = "torch/claims.rs"]
mod claims;
#[path = "torch/differential.rs"]
mod differential;
#[path = "torch/fr.rs"]
mod fr;
#[path = "torch/gen.rs"]
mod gen;
#[path = "torch/hostile.rs"]
mod hostile;
#[path = "torch/lifecycle.rs"]
mod lifecycle;
#[path = "torch/modes.rs"]
mod modes;
#[path = "torch/pygen.rs"]
mod pygen;
#[path = "torch/record.rs"]
mod record;
#[path = "torch/record_stores.rs"]
mod record_stores;
#[path = "torch/sglang.rs"]
mod sglang;
#[path = "torch/userpath.rs"]
mod userpath;
#[path = "torch/zygote.rs"]
mod zygote;

/// 30 min -> 3 s: long enough for real gloo/store set-up on a loaded 2-core machine.
const TIME_SCALE: TimeScale = TimeScale { num: 1, den: 600 };
/// The shortest timeout a scaled scenario may have: a scenario whose explicit timeouts are
/// short gets a milder scale (the same for every timeout and delay, so their order holds).
const MIN_TIMEOUT_MS: u64 = 1_000;

/// TIME_SCALE, or a milder one that keeps the scenario's shortest timeout at MIN_TIMEOUT_MS.
fn scale_for(s: &Scenario) -> TimeScale {
    use scen_core::scenario::StepKind;
    let shortest = s
        .steps
        .iter()
        .filter_map(|st| match &st.kind {
            StepKind::InitProcessGroup { timeout_ms, .. }
            | StepKind::NewGroup { timeout_ms, .. }
            | StepKind::InitDistributedEnvironment { timeout_ms, .. }
            | StepKind::MonitoredBarrier { timeout_ms, .. } => *timeout_ms,
            StepKind::SetTimeout { timeout_ms, .. } => Some(*timeout_ms),
            StepKind::Store(st) => match &st.call {
                StoreCall::Wait { timeout_ms, .. } => *timeout_ms,
                StoreCall::MakeTcp { spec, .. } => Some(spec.timeout_ms),
                _ => None,
            },
            _ => None,
        })
        .min();
    match shortest {
        Some(t) if TIME_SCALE.apply(t) < MIN_TIMEOUT_MS => TimeScale {
            num: 1,
            den: (t / MIN_TIMEOUT_MS).max(1),
        },
        _ => TIME_SCALE,
    }
}
/// Runs `f` on every item, JOBS at a time (each run forks one process per rank); the results
/// come in the order the runs end.
fn in_parallel<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let queue = Mutex::new(items);
    let results = Mutex::new(Vec::new());
    let jobs = std::env::var("SCEN_TORCH_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(JOBS);
    std::thread::scope(|sc| {
        for _ in 0..jobs {
            sc.spawn(|| loop {
                let Some(item) = queue.lock().expect("queue").pop() else {
                    return;
                };
                let r = f(item);
                results.lock().expect("results").push(r);
            });
        }
    });
    results.into_inner().expect("results")
}

/// A check beside the parity runs: `Err` says what differs.
type Check<'a> = dyn Fn() -> Result<(), String> + 'a;

/// Scenarios run at once (each forks one process per rank).
const JOBS: usize = 2;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn load(path: &Path) -> Scenario {
    try_load(path).unwrap_or_else(|e| panic!("{e}"))
}

/// [`load`] that returns a scenario error instead of panicking (the minimiser's candidates).
fn try_load(path: &Path) -> Result<Scenario, String> {
    let mut s = load_file(path).map_err(|e| e.to_string())?;
    s.file = format!(
        "scenarios/{}",
        path.file_name().unwrap_or_default().to_string_lossy()
    );
    let scale = scale_for(&s);
    s.scale_times(scale);
    Ok(s)
}

/// The wait gloo's monitored barrier times out in is what is left of its timeout when rank 0
/// starts waiting for a member (`timeout - elapsed`, ProcessGroupGloo::monitoredBarrier): the
/// milliseconds the real run spent before that are wall time. Real torch 2.15, three runs of
/// monitored_barrier_missing_rank at the same 1000 ms: `Timed out waiting 997ms`, `998ms`,
/// `1000ms`. The original exception's count is not compared; the barrier's own text (`failed to
/// pass monitoredBarrier in 1000 ms`, the timeout given) is.
fn redact_monitored_wait(text: &str) -> String {
    const AT: &str = "Original exception: \nTimed out waiting ";
    let (Some(i), true) = (
        text.find(AT),
        text.contains("failed to pass monitoredBarrier"),
    ) else {
        return text.to_string();
    };
    let from = i + AT.len();
    let digits = text[from..]
        .chars()
        .take_while(char::is_ascii_digit)
        .count();
    format!("{}N{}", &text[..from], &text[from + digits..])
}

/// Replaces what differs between runs: `[file.cc:123]` locations, `host:port` and
/// `[host]:port` addresses, absolute paths, pids, the wall time a monitored barrier spent; and
/// drops trailing whitespace (a gloo CHECK's message ends in a space a recording's step does
/// not keep).
pub fn redact(text: &str) -> String {
    redact_monitored_wait(&redact_places(text.trim_end()))
}

fn redact_places(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('[') {
        let Some(j) = rest[i..].find(']') else { break };
        let inner = &rest[i + 1..i + j];
        out.push_str(&rest[..i]);
        if inner.contains(".cc:") || inner.contains(".cpp:") || inner.contains(".h:") {
            // gloo's source location: not modelled.
            rest = rest[i + j + 1..]
                .strip_prefix(' ')
                .unwrap_or(&rest[i + j + 1..]);
            continue;
        } else {
            out.push_str(&rest[i..=i + j]);
        }
        rest = &rest[i + j + 1..];
    }
    out.push_str(rest);
    out.split(' ')
        .map(|w| {
            let core = w.trim_matches(|c: char| "[]():,.'\"".contains(c));
            // `host:port`, or gloo's `[host]:port`.
            let looks_addr = core.split([':', ']']).next().is_some_and(|h| {
                h.split('.').count() == 4 && h.split('.').all(|p| p.parse::<u8>().is_ok())
            });
            if looks_addr {
                w.replace(core, "ADDR")
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The facts both modes must agree on, one line per rank.
fn facts(r: &Report) -> Vec<String> {
    r.ranks
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            RankVerdict::Completed { .. } => format!("rank {i}: completes"),
            RankVerdict::Failed { step, failure, .. } => {
                format!(
                    "rank {i}: fails in #{}: {} ({})",
                    step + 1,
                    redact(&failure.text()),
                    failure.kind()
                )
            }
            RankVerdict::Hung { step, .. } => format!("rank {i}: hangs in #{}", step + 1),
            RankVerdict::Elsewhere => format!("rank {i}: ran elsewhere"),
        })
        .collect()
}

/// Result digests per (rank, step), where the step finished with one.
fn digests(r: &Report) -> Vec<(usize, usize, String)> {
    let mut out: Vec<(usize, usize, String)> = r
        .trace
        .events
        .iter()
        .filter(|e| e.kind == scen_core::trace::EventKind::Done)
        .filter_map(|e| {
            let i = e.text.find("digest ")? + 7;
            Some((e.rank?, e.step?, e.text.get(i..i + 16)?.to_string()))
        })
        .collect();
    out.sort();
    out
}

/// `# torch digest: rank R step S` comments: a result the real run computes differently (the
/// comment around it says why); its digest is not compared.
fn documented_digests(path: &Path) -> Vec<(usize, usize)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.strip_prefix("# torch digest: rank "))
        .filter_map(|l| {
            let (r, st) = l.split_once(" step ")?;
            Some((
                r.trim().parse().ok()?,
                st.trim().parse::<usize>().ok()?.checked_sub(1)?,
            ))
        })
        .collect()
}

/// `# torch rank R: LINE` comments: the documented real outcome of rank R.
fn documented(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.strip_prefix("# torch rank "))
        .filter_map(|l| {
            let (r, rest) = l.split_once(": ")?;
            Some((r.trim().parse().ok()?, rest.trim().to_string()))
        })
        .collect()
}

enum Outcome {
    Agree,
    Documented,
    /// Differed on its first real run and agreed on a second: real PyTorch did not repeat its
    /// own outcome (the first run's difference is printed, and counted apart).
    Varies(String),
    Differ(String),
    Ineligible(String),
    /// Eligible, but what it runs on is not installed (real sglang): visibly not run.
    NotRun(String),
}

/// The tests' zygote, unless SCEN_TORCH_ZYGOTE=0.
fn start_zygote(python: &Path) -> Option<Arc<Zygote>> {
    if std::env::var("SCEN_TORCH_ZYGOTE").as_deref() == Ok("0") {
        return None;
    }
    let z = Zygote::start(python).unwrap_or_else(|e| panic!("starting the tests' zygote: {e}"));
    Some(Arc::new(z))
}

fn check(
    path: &Path,
    python: &Path,
    sglang: Option<&str>,
    zygote: Option<&Arc<Zygote>>,
) -> Outcome {
    let s = load(path);
    if let Err(why) = scen_torch::eligible::check(&s) {
        return Outcome::Ineligible(why.to_string());
    }
    let pinned = scen_torch::eligible::SGLANG_VERSION;
    if scen_torch::eligible::uses_sglang(&s) && sglang != Some(pinned) {
        return Outcome::NotRun(format!(
            "runs real sglang {pinned}, which is not installed for {} (scripts/install-torch-cpu.sh --sglang)",
            python.display()
        ));
    }
    let sim = match scen_sim::simulate(&s, None) {
        Ok(r) => r,
        Err(e) => return Outcome::Differ(format!("simulator: {e}")),
    };
    let source = std::fs::read_to_string(path).ok();
    let o = scen_torch::TorchOptions {
        python: Some(python.to_path_buf()),
        max_wall_ms: Some(120_000),
        zygote: zygote.cloned(),
        ..Default::default()
    };
    let real = match scen_torch::run(&s, source.as_deref(), &o) {
        Ok(r) => r,
        Err(e) => return Outcome::Differ(format!("torch mode: {e}")),
    };
    let (want, got) = (facts(&sim), facts(&real));
    let doc = documented(path);
    let mut diffs: Vec<String> = Vec::new();
    for (r, (a, b)) in want.iter().zip(&got).enumerate() {
        match doc.iter().find(|(d, _)| *d == r) {
            Some((_, line)) => {
                let real = b.strip_prefix(&format!("rank {r}: ")).unwrap_or(b);
                if !real.starts_with(line.as_str()) {
                    diffs.push(format!("documented `rank {r}: {line}`\n    torch: {b}"));
                }
            }
            None if a != b => diffs.push(format!("sim:   {a}\n    torch: {b}")),
            None => {}
        }
    }
    let (ds, dt) = (digests(&sim), digests(&real));
    let skip = documented_digests(path);
    for (r, st, d) in ds.iter().filter(|(r, st, _)| !skip.contains(&(*r, *st))) {
        if let Some((_, _, d2)) = dt.iter().find(|(r2, s2, _)| r2 == r && s2 == st) {
            if d != d2 {
                diffs.push(format!(
                    "rank {r} step #{}: result digest sim {d}, torch {d2}",
                    st + 1
                ));
            }
        }
    }
    diffs.extend(sglang::compare(&s, &sim, &real));
    diffs.extend(claims::wrong_claims(&s, &sim, &real));
    if diffs.is_empty() && !doc.is_empty() {
        Outcome::Documented
    } else if diffs.is_empty() {
        Outcome::Agree
    } else {
        Outcome::Differ(diffs.join("\n    "))
    }
}

/// Ctrl-C during `scen run --torch`: every rank is ended, the report still prints (each rank
/// failed "interrupted" where it was, at the time of the signal), scen exits 130, and no
/// process or file is left behind.
fn sigint_ends_the_run_with_a_report(python: &Path) -> Result<(), String> {
    use std::process::{Command, Stdio};
    use std::time::Duration;
    let dir_tmp = tempfile::Builder::new()
        .prefix("scen-torch-sigint-")
        .tempdir()
        .expect("temp dir");
    let dir = dir_tmp.path().to_path_buf();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("sleepers.toml");
    let scenario = "# Two ranks sleeping a minute after init: a run to interrupt.\n[scenario]\ndescription = \"sleepers\"\n\n[world]\nranks_per_node = 2\nplatform = \"cpu\"\n\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n\n[[step]]\nop = \"sleep\"\nms = 60000\n";
    std::fs::write(&file, scenario).map_err(|e| e.to_string())?;
    let keep = dir.join("run");
    let child = Command::new(env!("CARGO_BIN_EXE_scen"))
        .args(["run", "--torch"])
        .arg(&file)
        .arg("--python")
        .arg(python)
        .arg("--keep")
        .arg(&keep)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let sleeping = |r: usize| {
        std::fs::read_to_string(keep.join(format!("rank{r}.jsonl")))
            .is_ok_and(|t| t.contains("\"ev\": \"start\", \"step\": 1"))
    };
    while !(sleeping(0) && sleeping(1)) && started.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(100));
    }
    // Interrupted well after the sleeps began: the report must place the end at the signal.
    std::thread::sleep(Duration::from_millis(1500));
    let signalled = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let runner_left = std::fs::read_dir("/proc")
        .map_err(|e| e.to_string())?
        .flatten()
        .filter_map(|p| std::fs::read(p.path().join("cmdline")).ok())
        .any(|c| String::from_utf8_lossy(&c).contains(&*keep.to_string_lossy()));
    let _ = std::fs::remove_dir_all(&dir);
    if !signalled.is_ok_and(|s| s.success()) {
        return Err("could not send SIGINT".into());
    }
    if out.status.code() != Some(130) {
        return Err(format!(
            "exit status {:?}, want 130\n{stdout}",
            out.status.code()
        ));
    }
    if !stdout.contains("interrupted: scen received SIGINT and killed this rank in step 2 sleep") {
        return Err(format!("no interrupted ranks in the report:\n{stdout}"));
    }
    let ended_s: f64 = stdout
        .split("ended at ")
        .nth(1)
        .and_then(|t| t.split('s').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or(0.0);
    if ended_s < 1.5 {
        return Err(format!(
            "the report ends at {ended_s} s, before the signal (sent 1.5 s after the sleeps began):\n{stdout}"
        ));
    }
    if runner_left {
        return Err("a process of the run is still alive after scen exited".into());
    }
    Ok(())
}

fn main() {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let required = std::env::var("SCEN_TORCH_REQUIRED").as_deref() == Ok("1");
    let python = match scen_torch::python::find(None) {
        Ok((p, _)) if p.exists() => p,
        Ok((p, _)) => {
            assert!(
                !required,
                "SCEN_TORCH_REQUIRED=1 but {} does not exist",
                p.display()
            );
            println!("skip: torch parity (tests/torch.rs): {} does not exist; run scripts/install-torch-cpu.sh", p.display());
            return;
        }
        Err(e) => {
            assert!(!required, "SCEN_TORCH_REQUIRED=1 but {e}");
            println!("skip: torch parity (tests/torch.rs): {e}");
            return;
        }
    };
    let sglang = scen_torch::python::sglang_version(&python);
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("scenarios"))
        .expect("scenarios/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter(|p| {
            let n = p.file_stem().unwrap_or_default().to_string_lossy();
            filters.is_empty() || filters.iter().any(|f| n.contains(f.as_str()))
        })
        .collect();
    files.sort();
    let start = Instant::now();
    let zygote = start_zygote(&python);
    let zygote = zygote.as_ref();
    let mut results: Vec<(String, Outcome)> = in_parallel(files.clone(), |p| {
        let name = p
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let t = Instant::now();
        let mut o = check(&p, &python, sglang.as_deref(), zygote);
        if let Outcome::Differ(first) = &o {
            // Once more: a real run that does not repeat itself is not the model's difference.
            let again = check(&p, &python, sglang.as_deref(), zygote);
            if matches!(again, Outcome::Agree | Outcome::Documented) {
                o = Outcome::Varies(first.clone());
            }
        }
        let tag = match &o {
            Outcome::Agree => "agree",
            Outcome::Documented => "documented",
            Outcome::Varies(_) => "agree on a second real run (the first differed)",
            Outcome::Differ(_) => "DIFFER",
            Outcome::Ineligible(_) => "ineligible",
            Outcome::NotRun(_) => "not run",
        };
        if !matches!(o, Outcome::Ineligible(_) | Outcome::NotRun(_)) {
            println!(
                "torch parity {name}: {tag} ({:.1} s)",
                t.elapsed().as_secs_f64()
            );
        }
        (name, o)
    });
    let checks: [(&str, &str, &Check); 14] = [
        (
            "exit",
            "ranks exit as Python processes do: status, after the interpreter's teardown",
            &|| lifecycle::ranks_exit_as_python_does(&root(), &python, zygote),
        ),
        (
            "hostile_text",
            "hostile strings in every text field run as the program's data, never as code",
            &|| hostile::text_never_runs(&root(), &python),
        ),
        (
            "zygote",
            "a killed zygote fails its run naming it, a dropped one is gone, no process left",
            &|| zygote::never_leaves_a_process(&python),
        ),
        (
            "sigint",
            "Ctrl-C ends the ranks, report printed, exit 130",
            &|| sigint_ends_the_run_with_a_report(&python),
        ),
        (
            "three_modes",
            "one program in sim, hw and torch: the same report sections",
            &|| modes::three_modes(&root(), &python),
        ),
        (
            "fr_replays",
            "imported real flight-recorder dumps replay on real torch as the jobs ran",
            &|| fr::replays_do_what_the_dumped_jobs_did(&root(), &python),
        ),
        (
            "record",
            "scen record round trip: export, record for real, simulate: same outcomes and calls",
            &|| record::round_trips(&root(), &python),
        ),
        (
            "differential",
            "generated programs: the simulator and real PyTorch agree rank by rank",
            &|| differential::run(&root(), &python, zygote),
        ),
        (
            "userpath",
            "generated Python programs, recorded and simulated: the simulation agrees with the real run rank by rank",
            &|| userpath::run(&root(), &python),
        ),
        (
            "record_outcomes",
            "scen record: a raising rank's exception and step (a batch work's wait too), a hanging rank at --timeout-s",
            &|| record::raising_and_hanging_ranks(&python),
        ),
        (
            "api_coverage",
            "docs/api-coverage.md lists every public torch.distributed function of this torch",
            &|| api_coverage(&python),
        ),
        (
            "record_timing",
            "scen record: a late rank stays late, a rank lives until its process ends (its teardown measured), monitored_barrier, p2p tags, its own exit and SIGKILL, wait(timeout)",
            &|| record::timing_is_recorded(&python),
        ),
        (
            "record_refusals",
            "scen record: the default store's calls (taking it, set, get, add, check, wait, compare_set, delete_key, num_keys) are steps; other Store use (a method without a step, a master store freed early, port 0) and dist.breakpoint are refused naming the call and its line",
            &|| record_stores::own_store_use_is_refused(&python),
        ),
        (
            "record_stores",
            "scen record: a program's own TCPStore and PrefixStore are steps, and the recording simulates to the real run (a get timing out, a master gone, a taken port, no master, missing workers)",
            &|| record_stores::own_stores_are_recorded(&python),
        ),
    ];
    for (name, what, check) in checks {
        if !(filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))) {
            continue;
        }
        let t = Instant::now();
        let result = check();
        println!(
            "torch {name} ({what}): {} ({:.1} s)",
            if result.is_ok() { "ok" } else { "FAILED" },
            t.elapsed().as_secs_f64()
        );
        if let Err(e) = result {
            results.push((name.into(), Outcome::Differ(e)));
        }
    }
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let count = |f: fn(&Outcome) -> bool| results.iter().filter(|(_, o)| f(o)).count();
    let agree = count(|o| matches!(o, Outcome::Agree));
    let doc = count(|o| matches!(o, Outcome::Documented));
    let inel = count(|o| matches!(o, Outcome::Ineligible(_)));
    let not_run = count(|o| matches!(o, Outcome::NotRun(_)));
    for (n, o) in &results {
        match o {
            Outcome::Ineligible(why) => println!("skip: {n}: not eligible for torch mode: {why}"),
            Outcome::NotRun(why) => println!("skip: {n}: NOT RUN: {why}"),
            _ => {}
        }
    }
    assert!(
        !(required && not_run > 0),
        "SCEN_TORCH_REQUIRED=1 but {not_run} eligible scenario(s) could not run (see the skip lines)"
    );
    let failed: Vec<&(String, Outcome)> = results
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Differ(_)))
        .collect();
    for (n, o) in &failed {
        if let Outcome::Differ(d) = o {
            println!("DIFFER {n}:\n    {d}");
        }
    }
    let varied: Vec<&(String, Outcome)> = results
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Varies(_)))
        .collect();
    for (n, o) in &varied {
        if let Outcome::Varies(d) = o {
            println!("VARIES {n} (its first real run differed, its second agreed):\n    {d}");
        }
    }
    println!(
        "torch parity: {} eligible: {agree} agree, {} agree only on a second real run (real runs vary), {doc} documented, {} differ, {not_run} not run; {inel} not eligible; time scale {TIME_SCALE} (milder where a timeout would drop below {MIN_TIMEOUT_MS} ms); {:.0} s",
        agree + varied.len() + doc + failed.len() + not_run,
        varied.len(),
        failed.len(),
        start.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        std::process::exit(1);
    }
}

/// scripts/api-coverage.py --check with the torch under test: every public function of its
/// torch.distributed is classified and docs/api-coverage.md is what the script writes.
fn api_coverage(python: &std::path::Path) -> Result<(), String> {
    let out = std::process::Command::new(python)
        .arg(root().join("scripts/api-coverage.py"))
        .arg("--check")
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
