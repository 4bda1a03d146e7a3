//! `scen record` round trip (docs/record.md): every torch-eligible shipped scenario whose run
//! completes is exported as a torch program (what `scen export --torch` writes), run for real
//! under `scen record` (one Python process per rank, started by a shell launcher with
//! torchrun's environment), and the recorded scenario is simulated: each rank's outcome and its
//! call records (op, group members, sequence number, peer, dtype, shape, root, reduce op, state)
//! must equal the original's. Call records, not file text: the recording names groups `g1`,
//! fills tensors with the rank and writes one step per call.
//!
//! A fixed subset runs in `cargo test --test torch`; SCEN_RECORD_ALL=1 (scripts/record-roundtrip.sh)
//! runs every scenario. Scenarios that cannot round-trip are listed with the reason.

use scen_core::report::Report;
use scen_core::scenario::{load_file, Scenario};
use scen_core::verdict::RankVerdict;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The subset `cargo test` records (all of them: SCEN_RECORD_ALL=1): collectives, subgroups,
/// async work, p2p, batch p2p, uneven all_to_all.
const SUBSET: [&str; 5] = [
    "collectives_gloo_cpu_w3",
    "gloo_new_group_subsets_w4",
    "gloo_async_all_reduce_wait",
    "gloo_batch_isend_irecv_ring_w4",
    "gloo_all_to_all_uneven_w3",
];

/// What must agree, per call: everything but times, step positions and group names.
type CallFact = (
    usize,
    Vec<usize>,
    String,
    u64,
    Option<usize>,
    String,
    String,
    Vec<usize>,
    Option<usize>,
    Option<String>,
    String,
);

fn call_facts(r: &Report) -> Vec<CallFact> {
    let mut v: Vec<CallFact> = r
        .calls
        .iter()
        .map(|c| {
            (
                c.rank,
                c.group_ranks.to_vec(),
                format!("{:?}", c.kind),
                c.seq,
                c.peer,
                c.fp.op.clone(),
                c.fp.dtype.clone(),
                c.fp.shape.clone(),
                c.fp.root,
                c.fp.reduce_op.clone(),
                c.state.name().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

fn outcomes(r: &Report) -> Vec<String> {
    r.ranks
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            RankVerdict::Completed { .. } => format!("rank {i}: completes"),
            RankVerdict::Failed { failure, .. } => format!("rank {i}: fails: {}", failure.text()),
            RankVerdict::Hung { .. } => format!("rank {i}: hangs"),
            RankVerdict::Elsewhere => format!("rank {i}: elsewhere"),
        })
        .collect()
}

/// Why `s` is not part of the round trip, if it is not.
fn excluded(path: &Path, s: &Scenario, sim: &Report) -> Option<String> {
    if let Err(why) = scen_torch::eligible::check(s) {
        return Some(format!("not torch-eligible: {why}"));
    }
    if scen_torch::eligible::uses_sglang(s) {
        return Some(
            "runs real sglang's start-up: its calls are sglang's, not the program's".into(),
        );
    }
    if !sim
        .ranks
        .iter()
        .all(|v| matches!(v, RankVerdict::Completed { .. }))
    {
        return Some("its run does not complete".into());
    }
    // The real run's outcome where it differs from the model's (tests/torch.rs).
    let text = std::fs::read_to_string(path).unwrap_or_default();
    if let Some(l) = text
        .lines()
        .find(|l| l.starts_with("# torch rank ") && !l.ends_with("completes"))
    {
        return Some(format!(
            "its real run does not complete ({})",
            l.trim_start_matches("# ")
        ));
    }
    None
}

/// The shell launcher: every rank a `python prog.py` with torchrun's environment.
fn launcher(s: &Scenario, ep: &scen_torch::net::Endpoints, python: &Path, prog: &Path) -> String {
    let world = scen_torch::translate::world_env(s);
    let port = world
        .get("MASTER_PORT")
        .map(|p| ep.env_value("MASTER_PORT", p))
        .unwrap_or_else(|| ep.port(29500).to_string());
    let mut sh = String::new();
    for r in 0..s.world.size() {
        let mut env: Vec<String> = scen_torch::translate::torchrun_identity(s, r)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        env.push(format!(
            "MASTER_ADDR=127.0.0.1 MASTER_PORT={port} OMP_NUM_THREADS=1"
        ));
        sh.push_str(&format!(
            "{} '{}' '{}' & ",
            env.join(" "),
            python.display(),
            prog.display()
        ));
    }
    sh.push_str("wait");
    sh
}

/// One scenario's round trip: `Ok(None)` round-trips, `Ok(Some(why))` left out, `Err` differs.
type TripResult = Result<Option<String>, String>;

/// Exports, records and simulates one scenario: `Ok(None)` when it round-trips,
/// `Ok(Some(reason))` when it is excluded, `Err` when the round trip differs.
fn round_trip(path: &Path, python: &Path, dir: &Path) -> TripResult {
    let s = load_file(path).map_err(|e| e.to_string())?;
    let sim = scen_sim::simulate(&s, None).map_err(|e| format!("simulator: {e}"))?;
    if let Some(why) = excluded(path, &s, &sim) {
        return Ok(Some(why));
    }
    let mut sc = s.clone();
    scen_core::scenario::fault::apply_env(&mut sc);
    let ep = scen_torch::net::Endpoints::local(&sc).map_err(|e| e.to_string())?;
    let source = std::fs::read_to_string(path).ok();
    let prog = dir.join(format!("{}.py", s.name));
    std::fs::write(
        &prog,
        scen_torch::translate::program(&sc, source.as_deref(), &ep),
    )
    .map_err(|e| e.to_string())?;
    let out = dir.join(format!("{}.recorded.toml", s.name));
    let run = Command::new(env!("CARGO_BIN_EXE_scen"))
        .args(["record", "--timeout-s", "120", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", &launcher(&sc, &ep, python, &prog)])
        .current_dir(dir)
        .output()
        .map_err(|e| e.to_string())?;
    if !run.status.success() {
        return Err(format!(
            "scen record exited {:?}: {}",
            run.status.code(),
            String::from_utf8_lossy(&run.stderr)
                .lines()
                .rev()
                .take(8)
                .collect::<Vec<_>>()
                .join("\n    ")
        ));
    }
    let rec = load_file(&out).map_err(|e| format!("the recorded scenario does not load: {e}"))?;
    let again =
        scen_sim::simulate(&rec, None).map_err(|e| format!("simulator on the recording: {e}"))?;
    let mut diffs = Vec::new();
    if outcomes(&sim) != outcomes(&again) {
        diffs.push(format!(
            "outcomes {:?} vs recorded {:?}",
            outcomes(&sim),
            outcomes(&again)
        ));
    }
    let (a, b) = (call_facts(&sim), call_facts(&again));
    if a != b {
        let first = a.iter().zip(&b).find(|(x, y)| x != y);
        diffs.push(format!(
            "call records differ ({} vs {} calls); first: {:?}",
            a.len(),
            b.len(),
            first.map_or_else(
                || "one is a prefix of the other".into(),
                |(x, y)| format!("{x:?} vs {y:?}")
            )
        ));
    }
    if diffs.is_empty() {
        Ok(None)
    } else {
        Err(diffs.join("\n    "))
    }
}

/// The round trip over the subset (or every scenario with SCEN_RECORD_ALL=1).
pub fn round_trips(root: &Path, python: &Path) -> Result<(), String> {
    let all = std::env::var("SCEN_RECORD_ALL").as_deref() == Ok("1");
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("scenarios"))
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter(|p| {
            all || SUBSET
                .iter()
                .any(|n| p.file_stem().is_some_and(|s| s == *n))
        })
        .collect();
    files.sort();
    let dir = tempfile::Builder::new()
        .prefix("scen-record-rt-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let mut results: Vec<(String, TripResult)> = super::in_parallel(files, |p| {
        let name = p
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        (name, round_trip(&p, python, dir.path()))
    });
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let ok = results
        .iter()
        .filter(|(_, r)| matches!(r, Ok(None)))
        .count();
    let mut failed = Vec::new();
    for (n, r) in &results {
        match r {
            Ok(Some(why)) => println!("record round trip: {n}: not part of it: {why}"),
            Err(e) => {
                println!("record round trip: {n}: DIFFERS\n    {e}");
                failed.push(n.clone());
            }
            Ok(None) => {}
        }
    }
    println!(
        "record round trip: {ok} of {} recorded scenario(s) round-trip ({}), {} differ, {} not part of it",
        ok + failed.len(),
        if all { "every shipped scenario" } else { "the fixed subset; SCEN_RECORD_ALL=1 for all" },
        failed.len(),
        results.len() - ok - failed.len()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("round trip differs for {}", failed.join(", ")))
    }
}

/// A program whose rank 1 raises after its all_reduce, while the others go on to a barrier.
const RAISES: &str = r#"import torch, torch.distributed as dist
dist.init_process_group(backend="gloo")
t = torch.ones(8, dtype=torch.bfloat16)
dist.all_reduce(t, op=dist.ReduceOp.MAX)
if dist.get_rank() == 1:
    raise ValueError("rank one gives up")
dist.barrier()
"#;

/// Rank 0's batch_isend_irecv sends to rank 1, which never receives (it sleeps past the
/// group's 1 s timeout): the batch's work raises in its `wait()`.
const BATCH_WAIT: &str = r#"import datetime, time, torch, torch.distributed as dist
dist.init_process_group(backend="gloo", timeout=datetime.timedelta(seconds=1))
if dist.get_rank() == 0:
    [w.wait() for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.ones(4), 1)])]
else:
    time.sleep(3)
"#;

/// A program whose rank 0 waits for a message rank 1 never sends (rank 1 sleeps).
const HANGS: &str = r#"import time, torch, torch.distributed as dist
dist.init_process_group(backend="gloo")
if dist.get_rank() == 0:
    dist.recv(torch.zeros(2), src=1)
time.sleep(600)
"#;

/// Rank 1 computes for 3 s before the all_reduce its peer waits for with a 1 s timeout.
const LATE: &str = r#"import datetime, time, torch, torch.distributed as dist
dist.init_process_group(backend="gloo", timeout=datetime.timedelta(seconds=1))
if dist.get_rank() == 1:
    time.sleep(3)
dist.all_reduce(torch.ones(4))
"#;

/// Rank 1 exits with code 3 and rank 2 SIGKILLs itself after a barrier; rank 0 completes.
const EXITS: &str = r#"import os, signal, sys, torch.distributed as dist
dist.init_process_group(backend="gloo")
dist.barrier()
if dist.get_rank() == 1:
    sys.exit(3)
if dist.get_rank() == 2:
    os.kill(os.getpid(), signal.SIGKILL)
"#;

/// Rank 0's monitored_barrier names ranks 1 and 2, which sleep on in their own code.
const MONITORED: &str = r#"import datetime, time, torch.distributed as dist
dist.init_process_group(backend="gloo")
if dist.get_rank() == 0:
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=1), wait_all_ranks=True)
else:
    time.sleep(3)
"#;

/// Tagged sends received in the other order: gloo deadlocks until the timeout (rank 0 comes
/// 0.5 s late, so rank 1's recv times out first and rank 0's send sees its pairs close).
const TAGS: &str = r#"import datetime, time, torch, torch.distributed as dist
dist.init_process_group(backend="gloo", timeout=datetime.timedelta(seconds=2))
if dist.get_rank() == 0:
    time.sleep(0.5)
    dist.send(torch.ones(4), 1, tag=1)
    dist.send(torch.ones(2), 1, tag=2)
else:
    dist.recv(torch.zeros(2), 0, tag=2)
    dist.recv(torch.zeros(4), 0, tag=1)
"#;

/// `work.wait(timeout=1 s)` on an all_reduce rank 1 never joins: `Operation timed out!`.
const WAIT_TIMEOUT: &str = r#"import datetime, time, torch, torch.distributed as dist
dist.init_process_group(backend="gloo")
if dist.get_rank() == 0:
    w = dist.all_reduce(torch.ones(4), async_op=True)
    w.wait(timeout=datetime.timedelta(seconds=1))
else:
    time.sleep(3)
"#;

/// torch 2.15's object collectives call `all_gather_single` (what `all_gather_into_tensor` is an
/// alias of): recorded, they are the sizes, then the pickled bytes (rank 1's object is longer:
/// every rank sends the longest).
const OBJECTS: &str = r#"import torch, torch.distributed as dist
dist.init_process_group(backend="gloo")
out = [None] * dist.get_world_size()
dist.all_gather_object(out, {"rank": dist.get_rank(), "pad": "x" * (10 * dist.get_rank())})
t = torch.zeros(2 * dist.get_world_size())
dist.all_gather_single(t, torch.ones(2))
dist.destroy_process_group()
"#;

/// The time between calls decides outcomes, so it is recorded: a late rank's sleep is a step
/// and the recording simulates to the outcome it recorded (written without it, rank 1 was on
/// time and everyone completed); a monitored_barrier is recorded as itself with its timeout;
/// send/recv keep their tags (written without them, the crossed tags were a size mismatch that
/// aborts rank 1); a rank's own sys.exit and SIGKILL are exit steps (written before as a
/// completed rank and a sleep); `work.wait(timeout=...)` keeps its timeout; an object
/// collective is what it sends (`OBJECTS`).
pub fn timing_is_recorded(python: &Path) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("scen-record-timing-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    for (name, program, world, want) in [
        // The 3 s sleep to two digits; a loaded machine adds up to a few hundred ms.
        ("late", LATE, 2, "op = \"sleep\"\non = [1]\nms = 3"),
        (
            "monitored",
            MONITORED,
            3,
            "op = \"monitored_barrier\"\non = [0]\ntimeout_s = 1.0\nwait_all_ranks = true\n",
        ),
        ("tags", TAGS, 2, "dst = 1\ntag = 1\n"),
        (
            "exits",
            EXITS,
            3,
            "op = \"exit\"\non = [1]\ncode = 3\n\n[[step]]  # exits.py:7\nop = \"exit\"\non = [2]\nsignal = \"SIGKILL\"\n",
        ),
        (
            "wait_timeout",
            WAIT_TIMEOUT,
            2,
            "op = \"wait\"\non = [0]\nwork = \"w1\"\ntimeout_s = 1.0\n",
        ),
        (
            "objects",
            OBJECTS,
            2,
            "op = \"all_gather_into_tensor\"\nshape = [1]\ndtype = \"i64\"\n\n[[step]]  # objects.py:4\nop = \"all_gather_into_tensor\"\nshape = [44]\ndtype = \"u8\"\n\n[[step]]  # objects.py:6\nop = \"all_gather_into_tensor\"\nshape = [2]\n",
        ),
    ] {
        let text = record_program(dir.path(), python, name, program, world, &[])?;
        let late_ms = |t: &str| {
            let at = t.find(want)? + want.len() - 1;
            let digits: String = t[at..].chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u64>().ok()
        };
        if !text.contains(want) || (name == "late" && !late_ms(&text).is_some_and(|ms| (3000..=3600).contains(&ms))) {
            return Err(format!(
                "{name}: the recording lacks\n{want}\n--- it is:\n{text}"
            ));
        }
        let s = scen_core::scenario::parse(&text, "t.toml", name).map_err(|e| e.to_string())?;
        // Every rank of "late" completes: each one's teardown is measured (scen record's
        // lifeline), a real Python process's: more than 50 ms.
        let measured = |r: usize| s.world.rank_exit_ms.get(&r).is_some_and(|ms| *ms > 50);
        if name == "late" && !(measured(0) && measured(1)) {
            return Err(format!("late: each rank's teardown is not in the recording:
{text}"));
        }
        let r = scen_sim::simulate(&s, None).map_err(|e| e.to_string())?;
        let checks = scen_core::verdict::check_expectations(&s, &r.ranks);
        if let Some(c) = checks.iter().find(|c| !c.holds) {
            return Err(format!(
                "{name}: the recording fails its own expectation on rank {}: expected {}, got {}\n{text}",
                c.rank, c.expected, c.actual
            ));
        }
    }
    Ok(())
}

/// `scen record` of `program` on `world` ranks (the shell launcher): the scenario's text.
pub(crate) fn record_program(
    dir: &Path,
    python: &Path,
    name: &str,
    program: &str,
    world: usize,
    extra: &[&str],
) -> Result<String, String> {
    let prog = dir.join(format!("{name}.py"));
    std::fs::write(&prog, program).map_err(|e| e.to_string())?;
    let port = scen_procs::port::below_ephemeral()
        .map_err(|e| e.to_string())?
        .local_addr()
        .map_err(|e| e.to_string())?
        .port();
    let mut sh = String::new();
    for r in 0..world {
        sh.push_str(&format!(
            "RANK={r} LOCAL_RANK={r} WORLD_SIZE={world} LOCAL_WORLD_SIZE={world} MASTER_ADDR=127.0.0.1 MASTER_PORT={port} '{}' {name}.py & ",
            python.display()
        ));
    }
    sh.push_str("wait");
    let out = dir.join(format!("{name}.toml"));
    let run = Command::new(env!("CARGO_BIN_EXE_scen"))
        .arg("record")
        .args(extra)
        .arg("-o")
        .arg(&out)
        .args(["--", "sh", "-c", &sh])
        .current_dir(dir)
        // No terminal for a program's pdb (`dist.breakpoint`): it reads end of input.
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if !run.status.success() {
        return Err(format!(
            "scen record exited {:?}: {}",
            run.status.code(),
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    let (code, _, err) = {
        let o = Command::new(env!("CARGO_BIN_EXE_scen"))
            .arg("check")
            .arg(&out)
            .output()
            .map_err(|e| e.to_string())?;
        (
            o.status.code(),
            (),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    if code != Some(0) {
        return Err(format!("scen check: {err}"));
    }
    // The recording checks itself: scen record simulated it and said whether each rank ends
    // as recorded (the programs here all do).
    let said = String::from_utf8_lossy(&run.stderr);
    let all = format!("simulated (seed 0): {world} of {world} rank(s) end as recorded");
    if !said.contains(&all) {
        return Err(format!(
            "scen record's self-check did not say `{all}`:\n{said}"
        ));
    }
    std::fs::read_to_string(&out).map_err(|e| e.to_string())
}

/// The `sleep` steps a recording starts with: ranks that started late (before any init).
fn late_start_steps(text: &str) -> usize {
    text.split("op = \"init_process_group\"")
        .next()
        .map_or(0, |head| head.matches("[[step]]").count().saturating_sub(1))
}

/// A rank that raises is recorded with its exception and step (its own code's exception as a
/// `raise` step), its peers with theirs, and the simulation of the recording ends every rank as
/// the real run did; a rank still waiting at `--timeout-s` is recorded as hanging in its call.
pub fn raising_and_hanging_ranks(python: &Path) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("scen-record-raise-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let text = record_program(dir.path(), python, "raises", RAISES, 3, &[])?;
    // A rank that started a second or more after the first is recorded with a `sleep` step
    // before its init (a loaded machine starts processes that far apart): the steps after it
    // move by as many.
    let late = late_start_steps(&text);
    let want = [
        "[[step]]  # raises.py:4\nop = \"all_reduce\"\nshape = [8]\ndtype = \"bf16\"\nreduce_op = \"max\"\n".to_string(),
        "[[step]]  # raises.py:7\nop = \"barrier\"\non = [0, 2]\n".into(),
        "[[step]]  # raises.py:6\nop = \"raise\"\non = [1]\nerror = \"ValueError: rank one gives up\"\n".into(),
        format!("# rank 1 raised ValueError at raises.py:6, in step {}", 4 + late),
        format!("[[expect]]\non = [1]\noutcome = \"fails\"\nstep = {}\nerror = \"ValueError: rank one gives up\"\n", 4 + late),
    ];
    for w in &want {
        if !text.contains(w.as_str()) {
            return Err(format!("the recording lacks\n{w}\n--- it is:\n{text}"));
        }
    }
    // Ranks 0 and 2 fail in the barrier on rank 1's end: its close, or, when their messages
    // reached its process during its teardown (a loaded machine), its reset (real runs read
    // either; docs/record.md).
    let peer_loss = |r: usize| {
        let close = format!(
            "step = {}\nerror = \"RuntimeError: Connection closed by peer\"\n",
            3 + late
        );
        let reset = format!(
            "step = {}\nerror = \"RuntimeError: Read error\"\n",
            3 + late
        );
        text.split("[[expect]]").any(|e| {
            let on = e.lines().find(|l| l.starts_with("on = ")).unwrap_or("");
            on.contains(&r.to_string()) && (e.contains(&close) || e.contains(&reset))
        })
    };
    if !(peer_loss(0) && peer_loss(2)) {
        return Err(format!(
            "ranks 0 and 2 are not expected to fail on rank 1's end in the barrier:\n{text}"
        ));
    }
    // The simulator fails the peers in the barrier too (rank 0's gloo barrier may be waiting
    // on rank 2 rather than on rank 1 when it fails; the model then says so), and rank 1
    // raises its own exception at the raise step, as the real rank did.
    let s =
        scen_core::scenario::parse(&text, "raises.toml", "raises").map_err(|e| e.to_string())?;
    let r = scen_sim::simulate(&s, None).map_err(|e| e.to_string())?;
    let in_barrier = |v: &RankVerdict| matches!(v, RankVerdict::Failed { step, failure, .. } if *step == 2 + late && failure.exception() == Some("RuntimeError"));
    if !(in_barrier(&r.ranks[0])
        && in_barrier(&r.ranks[2])
        && matches!(&r.ranks[1], RankVerdict::Failed { step, failure, .. }
            if *step == 3 + late && failure.text() == "ValueError: rank one gives up"))
    {
        return Err(format!("simulated: {:?}", outcomes(&r)));
    }
    // What a batch_isend_irecv's work raises in its `wait()` is the batch call's own failure:
    // the rank fails in the batch's step (as simulated), not in a raise of its code after it
    // (userpath 7/151). record_program checks that the recording holds its own expectations.
    let text = record_program(dir.path(), python, "batch", BATCH_WAIT, 2, &[])?;
    let want = "# rank 0 raised RuntimeError in step 2 at batch.py:4: Timed out waiting 1000ms for send operation to complete";
    if !text.contains(want) || text.contains("op = \"raise\"") {
        return Err(format!("the recording lacks\n{want}\n--- it is:\n{text}"));
    }
    let text = record_program(
        dir.path(),
        python,
        "hangs",
        HANGS,
        2,
        &["--timeout-s", "10"],
    )?;
    // Cut by the time limit: rank 0 still in its recv, rank 1 still in its own code (its
    // sleep is recorded up to the cut), both `running` then; simulated, rank 0's recv ends only
    // after that time (rank 1's process ends), so the recording holds its own expectations.
    let want = "[[expect]]\non = [0]\noutcome = \"running\"\nafter_s = ";
    if !text.contains(want) || !text.contains("op = \"sleep\"") {
        return Err(format!(
            "the recording lacks\n{want}\n(and a sleep)--- it is:\n{text}"
        ));
    }
    let s = scen_core::scenario::parse(&text, "hangs.toml", "hangs").map_err(|e| e.to_string())?;
    let r = scen_sim::simulate(&s, None).map_err(|e| e.to_string())?;
    let checks = scen_core::verdict::check_expectations(&s, &r.ranks);
    if let Some(c) = checks.iter().find(|c| !c.holds) {
        return Err(format!(
            "the timed-out recording fails its own expectation on rank {}: expected {}, got {}\n{text}",
            c.rank, c.expected, c.actual
        ));
    }
    // `sh` does not pass SIGTERM on: scen record killed the ranks it recorded itself.
    let left = std::fs::read_dir("/proc")
        .map_err(|e| e.to_string())?
        .flatten()
        .filter_map(|p| std::fs::read(p.path().join("cmdline")).ok())
        .any(|c| String::from_utf8_lossy(&c).contains("hangs.py"));
    if left {
        return Err("a rank of the hanging program is still alive after scen record".into());
    }
    Ok(())
}
