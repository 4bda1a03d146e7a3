//! Hardware mode on real oneCCL (CPU plugin), real processes and sockets.
//!
//! Parity: for hw-eligible scenarios, the mode-independent part of the result (verdicts, error
//! texts, each rank's step sequence, result digests; `scen_core::parity`) must equal the
//! simulator's. Fault: a rank SIGKILLed mid-collective is reported and everything is cleaned up.
//! Without oneCCL these tests print a skip line saying why (CI installs it: .ci/run).

/// `scen bench --hw` and its gloo host path: real processes too.
#[path = "hw/bench.rs"]
mod bench;
/// One job across nodes (several launchers; srun/mpirun processes).
#[path = "hw/multinode.rs"]
mod multinode;

/// The watchdog on a host the test loads itself: no false hang (issue 32).
#[path = "hw/load.rs"]
mod load;
/// Recordings (`launcher = "torchrun"`): scen's launcher plays torchrun's agent.
#[path = "hw/recordings.rs"]
mod recordings;
/// scen's TCPStore and real PyTorch's, both ways, and scen ranks under a real torchrun.
#[path = "hw/torch_store.rs"]
mod torch_store;

use scen_core::outcome::{Failure, Killer};
use scen_core::parity::mode_independent;
use scen_core::scenario::{load_file, Scenario};
use scen_core::verdict::RankVerdict;
use scen_hw::{HwError, HwOptions};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn load(rel: &str) -> Scenario {
    let mut s = load_file(&path(rel)).unwrap_or_else(|e| panic!("{e}"));
    s.file = rel.to_string();
    s
}

fn options() -> HwOptions {
    HwOptions {
        rank_exe: Some(PathBuf::from(env!("CARGO_BIN_EXE_scen"))),
        max_wall_ms: Some(60_000),
        ..Default::default()
    }
}

/// oneCCL's KVS binds the lowest free port from 4096 on 127.0.0.1, and its server thread dies
/// on a request that is not its own (docs/hw.md, "Watchdog"): the peers of a rank a test kills
/// keep connecting to that port until the launcher ends them, and a job a parallel test starts
/// meanwhile gets it, and hangs in communicator creation. Tests that kill a rank or a launcher
/// run alone; the other tests that start oneCCL jobs may run together.
static ONECCL_JOBS: std::sync::RwLock<()> = std::sync::RwLock::new(());

#[allow(dead_code)] // held for its drop
enum Jobs {
    Shared(std::sync::RwLockReadGuard<'static, ()>),
    Alone(std::sync::RwLockWriteGuard<'static, ()>),
}

/// Held while a test's oneCCL jobs run: `alone` for a test that kills ranks or launchers.
fn oneccl_jobs(alone: bool) -> Jobs {
    if alone {
        Jobs::Alone(ONECCL_JOBS.write().unwrap_or_else(|e| e.into_inner()))
    } else {
        Jobs::Shared(ONECCL_JOBS.read().unwrap_or_else(|e| e.into_inner()))
    }
}

/// `None` (after printing why) when this machine has no oneCCL.
fn run_hw(rel: &str, o: &HwOptions) -> Option<scen_core::report::Report> {
    let s = load(rel);
    let _jobs = oneccl_jobs(o.kill_rank_at.is_some());
    match scen_hw::run(&s, &path(rel), o) {
        Ok(r) => Some(r),
        Err(HwError::Unavailable(why)) => {
            // CI installs oneCCL and sets SCEN_HW_REQUIRED=1: there a skip would hide a break.
            assert!(
                std::env::var("SCEN_HW_REQUIRED").as_deref() != Ok("1"),
                "SCEN_HW_REQUIRED=1 but {why}"
            );
            println!("skip: hardware test of {rel}: {why}");
            None
        }
        Err(e) => panic!("{rel}: {e}"),
    }
}

fn shm_files_of(pids: &[u32]) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return vec![];
    };
    dir.flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| pids.iter().any(|p| n.starts_with(&format!("{p}:"))))
        .collect()
}

fn pids_of(r: &scen_core::report::Report) -> Vec<u32> {
    let line = r
        .notes
        .iter()
        .find_map(|n| n.strip_prefix("rank processes (rank=pid): "))
        .expect("the report lists the rank processes");
    line.split_whitespace()
        .map(|kv| {
            kv.split_once('=')
                .expect("rank=pid")
                .1
                .parse()
                .expect("pid")
        })
        .collect()
}

fn assert_cleaned_up(r: &scen_core::report::Report) {
    let pids = pids_of(r);
    for p in &pids {
        assert!(
            !Path::new(&format!("/proc/{p}")).exists(),
            "rank process {p} is still alive (or unreaped)"
        );
    }
    assert_eq!(
        shm_files_of(&pids),
        Vec::<String>::new(),
        "leftover /dev/shm files"
    );
}

#[test]
fn eligible_scenarios_give_the_simulators_result_on_oneccl() {
    for rel in [
        "scenarios/five_ops_xccl_w2.toml",
        "scenarios/five_ops_xccl_w4.toml",
        "scenarios/device_id_gloo_xpu.toml",
        "scenarios/five_ops_gloo_fallback_w4.toml",
        "scenarios/five_ops_xccl_w1.toml",
        "scenarios/device_id_gloo_xpu_fixed.toml",
        "scenarios/device_id_cpu_assert.toml",
        "scenarios/tcp_localhost_one_node.toml",
        "scenarios/missing_rank_all_reduce.toml",
        "scenarios/all_to_all_single_uneven_w3.toml",
        "scenarios/sglang_golden_w2_cfg2.toml",
        "scenarios/sglang_golden_w4_u4.toml",
        "scenarios/sglang_golden_w8_tp2_u2_r1_cfg2.toml",
        "tests/hw/dtypes_ops_xccl_w3.toml",
        "tests/hw/blocking_wait_timeout_xccl_w2.toml",
    ] {
        let s = load(rel);
        let sim = scen_sim::simulate(&s, None).expect("simulates");
        let t = Instant::now();
        let Some(hw) = run_hw(rel, &options()) else {
            return;
        };
        println!("{rel}: hw run took {} ms", t.elapsed().as_millis());
        // No rerun: a hang here is a bug to see, with the watchdog's evidence (where each
        // rank's threads slept before SIGKILL, a rank that never returned) in the notes.
        assert_eq!(hw.mode, "hw");
        assert_eq!(
            mode_independent(&hw),
            mode_independent(&sim),
            "{rel}: hw and sim disagree\nhw trace:\n{}\nhw notes:\n  {}",
            hw.trace.render(),
            hw.notes.join("\n  ")
        );
        assert!(hw.expectations_hold(), "{rel}: {:?}", hw.expectations);
        // The call records travel over the side channel: the consistency diagnosis agrees too.
        assert_eq!(hw.diagnosis.mismatches, sim.diagnosis.mismatches, "{rel}");
        assert_eq!(hw.diagnosis.groups, sim.diagnosis.groups, "{rel}");
        assert_eq!(
            hw.diagnosis.hang.is_some(),
            sim.diagnosis.hang.is_some(),
            "{rel}: hang diagnosis"
        );
        assert_eq!(hw.calls.len(), sim.calls.len(), "{rel}: call records");
        if rel.contains("xccl") {
            assert!(
                hw.notes
                    .iter()
                    .any(|n| n.contains("oneCCL 2022") && n.contains("host buffers")),
                "{rel}: the verdict says how xpu tensors were backed: {:?}",
                hw.notes
            );
        }
        assert_cleaned_up(&hw);
    }
}

#[test]
#[tracing_test::traced_test]
fn a_rank_killed_mid_collective_is_reported_and_cleaned_up() {
    let rel = "tests/hw/rank_killed_mid_all_reduce.toml";
    // With oneCCL's shm transport, so the killed ranks leave /dev/shm files to remove.
    let o = HwOptions {
        kill_rank_at: Some((1, 3)),
        rank_env: vec![("CCL_ATL_SHM".into(), "1".into())],
        ..options()
    };
    let t = Instant::now();
    let Some(r) = run_hw(rel, &o) else { return };
    let elapsed_ms = t.elapsed().as_millis() as u64;
    // The watchdog's decisions are log lines (`scen run --hw -v`).
    assert!(logs_contain("watchdog: --kill-rank: SIGKILL rank 1"));
    // The scenario's timeout is 10 s; every other rank must be stopped within it + 5 s.
    assert!(elapsed_ms < 15_000, "took {elapsed_ms} ms");
    match &r.ranks[1] {
        RankVerdict::Failed { step, failure, .. } => {
            assert_eq!(*step, 3);
            assert!(
                matches!(
                    failure,
                    Failure::Killed {
                        signal: 9,
                        by: Killer::Launcher { .. }
                    }
                ),
                "{failure:?}"
            );
            assert_eq!(
                failure.text(),
                "SIGKILL: process killed by the launcher (--kill-rank 1:4)"
            );
        }
        other => panic!("rank 1: {other:?}"),
    }
    let mut hung = 0;
    for (rank, v) in r.ranks.iter().enumerate().filter(|(r, _)| *r != 1) {
        match v {
            // oneCCL's shm transport can finish a collective with a peer's data after its death.
            RankVerdict::Completed { .. } => {}
            RankVerdict::Hung { step, wait } => {
                hung += 1;
                assert_eq!(*step, 3, "rank {rank}");
                let w = wait.as_ref().expect("where the rank was");
                assert!(w.what.contains("all_reduce"), "{}", w.what);
                assert!(w.peers.contains(&1), "rank {rank} waits for {:?}", w.peers);
            }
            other => panic!("rank {rank}: {other:?}"),
        }
    }
    if hung > 0 {
        let stall = r.final_stall.as_ref().expect("a final stall");
        assert!(stall
            .stuck
            .iter()
            .flat_map(|x| x.peers.iter())
            .any(|p| p.starts_with("rank 1, which failed") && p.contains("SIGKILL")));
        assert!(r.notes.iter().any(|n| n.starts_with("watchdog: SIGKILLed")));
        assert!(logs_contain("watchdog: stall: no rank can make progress"));
        assert!(logs_contain("watchdog: SIGKILLed"));
    }
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("removed ") && n.contains("/dev/shm")),
        "the shm files of killed ranks were removed: {:?}",
        r.notes
    );
    println!("kill test: {hung} rank(s) hung, stopped after {elapsed_ms} ms");
    assert_cleaned_up(&r);
}

#[test]
fn simulator_only_scenarios_are_refused_with_the_reason() {
    let s = load("scenarios/tcp_port_reused_by_other_job.toml");
    match scen_hw::run(
        &s,
        &path("scenarios/tcp_port_reused_by_other_job.toml"),
        &options(),
    ) {
        Err(HwError::NotEligible(why)) => assert!(why.contains("[[world.service]]"), "{why}"),
        other => panic!("{other:?}"),
    }
    let s = load("scenarios/fault_slow_rank_store_timeout.toml");
    match scen_hw::run(
        &s,
        &path("scenarios/fault_slow_rank_store_timeout.toml"),
        &options(),
    ) {
        Err(HwError::NotEligible(why)) => assert!(why.contains("[[faults]]"), "{why}"),
        other => panic!("{other:?}"),
    }
    let s = load("scenarios/tcp_localhost_two_nodes.toml");
    match scen_hw::run(
        &s,
        &path("scenarios/tcp_localhost_two_nodes.toml"),
        &options(),
    ) {
        Err(HwError::NotEligible(why)) => assert!(why.contains("--nnodes 2"), "{why}"),
        other => panic!("{other:?}"),
    }
    let rel = "scenarios/gloo_file_init_completes.toml";
    match scen_hw::run(&load(rel), &path(rel), &options()) {
        Err(HwError::NotEligible(why)) => assert!(
            why.contains("file:///tmp/scen/fstore") && why.contains("FileStore"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
}

/// Started by torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set), `scen run --hw` runs
/// that one rank; two such processes make the job, like `torchrun --nproc-per-node 2`.
#[test]
fn under_torchrun_each_process_runs_its_own_rank() {
    let _jobs = oneccl_jobs(false);
    let rel = "scenarios/five_ops_xccl_w2.toml";
    if let Err(HwError::Unavailable(why)) =
        scen_hw::launcher::check_eligible(&load(rel), &options(), false)
    {
        assert!(
            std::env::var("SCEN_HW_REQUIRED").as_deref() != Ok("1"),
            "{why}"
        );
        println!("skip: torchrun-mode test: {why}");
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let kids: Vec<_> = (0..2)
        .map(|r| {
            std::process::Command::new(env!("CARGO_BIN_EXE_scen"))
                .args(["run", "--hw", rel, "--max-wall-s", "60"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .env("RANK", r.to_string())
                .env("LOCAL_RANK", r.to_string())
                .env("WORLD_SIZE", "2")
                .env("LOCAL_WORLD_SIZE", "2")
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .output_in_thread()
        })
        .collect();
    for (r, k) in kids.into_iter().enumerate() {
        let out = k.join().expect("joins").expect("runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "rank {r}:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!(
                "started by torchrun: this process ran rank {r} only"
            )),
            "{text}"
        );
        assert!(text.contains("expectations: 1/1 hold"), "{text}");
        // Without TORCHELASTIC_USE_AGENT_STORE=True rank 0 hosts the store: plain processes.
        assert!(text.contains("(hw mode, launcher processes,"), "{text}");
        assert!(
            text.contains("the other ranks' verdicts are in their own processes' reports")
                && !text.contains("nodes' reports"),
            "{text}"
        );
        // The other rank ran in the other process: neither hung here nor diagnosed as missing.
        let other = 1 - r;
        assert!(
            text.contains("1 run elsewhere")
                && text.contains(&format!("rank   {other}: ran in another process")),
            "{text}"
        );
        assert!(
            !text.contains("hangs") && !text.contains("unmatched"),
            "{text}"
        );
    }
}

trait OutputInThread {
    fn output_in_thread(
        &mut self,
    ) -> std::thread::JoinHandle<std::io::Result<std::process::Output>>;
}

impl OutputInThread for std::process::Command {
    fn output_in_thread(
        &mut self,
    ) -> std::thread::JoinHandle<std::io::Result<std::process::Output>> {
        let child = self
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn();
        std::thread::spawn(move || child?.wait_with_output())
    }
}

/// Rank 1 dies while the others create or use the communicator with it: the culprit is rank 1
/// alone, and the ranks waiting in the same call with it are not a cycle.
#[test]
fn a_rank_dying_in_communicator_creation_is_the_only_culprit() {
    let rel = "scenarios/five_ops_xccl_w4.toml";
    let o = HwOptions {
        kill_rank_at: Some((1, 1)),
        kill_delay_ms: 150,
        ..options()
    };
    let Some(r) = run_hw(rel, &o) else { return };
    assert!(
        matches!(
            &r.ranks[1],
            RankVerdict::Failed {
                failure: Failure::Killed {
                    signal: 9,
                    by: Killer::Launcher { .. }
                },
                ..
            }
        ),
        "{:?}",
        r.ranks[1]
    );
    if let Some(hang) = &r.diagnosis.hang {
        assert_eq!(hang.cycle, Vec::<usize>::new(), "a false cycle");
        for s in &hang.stuck {
            assert_eq!(s.waits_for, vec![1], "rank {} ({})", s.rank, s.what);
        }
    }
    if let Some(stall) = &r.final_stall {
        for x in &stall.stuck {
            assert_eq!(x.wait.peers, vec![1], "rank {}: {}", x.rank, x.wait.what);
        }
    }
    assert_cleaned_up(&r);
}

/// Rank 0, the TCPStore's host, dies before the others connect: they end at once with the
/// error c10d raises after its 30-minute connect timeout, not after waiting it out.
#[test]
fn a_dead_store_host_ends_the_run_at_once_with_the_connect_timeout_error() {
    let rel = "tests/hw/store_host_dies_w3.toml";
    let o = HwOptions {
        kill_rank_at: Some((0, 1)),
        kill_delay_ms: 100,
        ..options()
    };
    let t = Instant::now();
    let Some(r) = run_hw(rel, &o) else { return };
    let elapsed_ms = t.elapsed().as_millis();
    assert!(elapsed_ms < 15_000, "took {elapsed_ms} ms");
    for rank in [1, 2] {
        match &r.ranks[rank] {
            RankVerdict::Failed { step, failure, .. } => {
                assert_eq!(*step, 1);
                assert_eq!(failure.exception(), Some("DistNetworkError"));
                let error = failure.text();
                assert!(
                    error.starts_with("DistNetworkError: The client socket has timed out after 1800000ms while trying to connect to (127.0.0.1, "),
                    "rank {rank}: {error}"
                );
            }
            other => panic!("rank {rank}: {other:?}"),
        }
    }
    assert!(r
        .notes
        .iter()
        .any(|n| n.contains("TCPStore's host, rank 0, is dead")));
    assert_cleaned_up(&r);
}

/// The short kill test (scripts/kill-test.sh runs the long one): a random rank SIGKILLed at a
/// random moment, and the launcher itself SIGTERMed and SIGKILLed. Every run that can report
/// does so within the scenario's timeout + 5 s; no process and no file is left behind.
#[test]
fn kill_trials_leave_nothing_behind() {
    let rel = "tests/hw/kill_trials_w4.toml";
    let _jobs = oneccl_jobs(true);
    if let Err(HwError::Unavailable(why)) =
        scen_hw::launcher::check_eligible(&load(rel), &options(), false)
    {
        assert!(
            std::env::var("SCEN_HW_REQUIRED").as_deref() != Ok("1"),
            "{why}"
        );
        println!("skip: kill trials: {why}");
        return;
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    println!("kill trials: seed {seed}");
    let mut rng = seed | 1;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    // The last two trials run it as torchrun would (the launcher plays the agent: its store,
    // its stop of the other ranks after a failure).
    let trials = [
        ("rank", "processes"),
        ("rank", "processes"),
        ("TERM", "processes"),
        ("KILL", "processes"),
        ("rank", "torchrun"),
        ("TERM", "torchrun"),
    ];
    for (trial, (target, launcher)) in trials.into_iter().enumerate() {
        let delay_ms = 200 + next(2_000);
        let shm_before = shm_names();
        let t = Instant::now();
        let launcher = std::process::Command::new(env!("CARGO_BIN_EXE_scen"))
            .args([
                "run",
                "--hw",
                rel,
                "--max-wall-s",
                "60",
                "--launcher",
                launcher,
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("CCL_ATL_SHM", if trial % 2 == 0 { "1" } else { "0" })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the launcher starts");
        let ranks = wait_for_ranks(launcher.id(), 4);
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let what = match target {
            "rank" => {
                let victim = ranks[next(ranks.len() as u64) as usize];
                // SAFETY: kill(2) on a rank process of the launcher this test started.
                unsafe { libc::kill(victim as i32, libc::SIGKILL) };
                format!("rank pid {victim} SIGKILLed")
            }
            sig => {
                let n = if sig == "TERM" {
                    libc::SIGTERM
                } else {
                    libc::SIGKILL
                };
                // SAFETY: kill(2) on the launcher this test started.
                unsafe { libc::kill(launcher.id() as i32, n) };
                format!("launcher SIG{sig}ed")
            }
        };
        let out = launcher.wait_with_output().expect("the launcher ends");
        let elapsed_ms = t.elapsed().as_millis();
        let text = String::from_utf8_lossy(&out.stdout);
        println!(
            "trial {trial}: {what} after {delay_ms} ms; ended after {elapsed_ms} ms, {:?}",
            out.status
        );
        if target != "KILL" {
            assert!(
                text.contains("outcome:"),
                "trial {trial} ({what}): no report:\n{text}"
            );
            assert!(
                elapsed_ms < 15_000,
                "trial {trial} ({what}): {elapsed_ms} ms"
            );
        }
        if target == "TERM" && text.contains("interrupted") {
            assert_eq!(out.status.code(), Some(143), "trial {trial}: {text}");
        }
        // torchrun's agent's store closed with the run.
        let agent_store = "TCPStore listening on 127.0.0.1:";
        if let Some(i) = text.find(agent_store) {
            let port: String = text[i + agent_store.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let port: u16 = port.parse().expect("the agent's port");
            assert!(
                std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
                "trial {trial} ({what}): the agent's store at {port} still listens"
            );
        }
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        // Files are the trial's own by pid: other tests create and remove theirs meanwhile.
        let ours = || -> Vec<String> {
            shm_names()
                .difference(&shm_before)
                .filter(|n| ranks.iter().any(|p| n.starts_with(&format!("{p}:"))))
                .cloned()
                .collect()
        };
        while Instant::now() < deadline && (ranks.iter().any(|p| alive(*p)) || !ours().is_empty()) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let orphans: Vec<&u32> = ranks.iter().filter(|p| alive(**p)).collect();
        assert!(
            orphans.is_empty(),
            "trial {trial} ({what}): orphans {orphans:?}"
        );
        let left = ours();
        assert!(
            left.is_empty(),
            "trial {trial} ({what}): /dev/shm leftovers {left:?}"
        );
    }
}

fn shm_names() -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A live (not zombie) process?
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| !r.starts_with('Z')))
        .unwrap_or(false)
}

/// The rank processes of launcher `pid`, once `n` of them run (at most 20 s).
fn wait_for_ranks(pid: u32, n: usize) -> Vec<u32> {
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let kids: Vec<u32> = std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                    .filter(|p| {
                        let stat =
                            std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                        let ppid = stat
                            .rsplit_once(") ")
                            .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok());
                        let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                        ppid == Some(pid) && cmd.split(|b| *b == 0).any(|a| a == b"__hw-rank")
                    })
                    .collect()
            })
            .unwrap_or_default();
        if kids.len() >= n || Instant::now() > deadline {
            return kids;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// SIGINT and SIGHUP end a hardware run at once: every rank killed and marked interrupted in
/// the printed report, exit status 128 + the signal. (No oneCCL needed: gloo ranks.)
#[test]
fn a_signal_ends_the_run_with_a_report_and_128_plus_its_number() {
    let rel = "tests/hw/sleepers_gloo_w2.toml";
    for (sig, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGHUP, "SIGHUP")] {
        let t = Instant::now();
        let launcher = std::process::Command::new(env!("CARGO_BIN_EXE_scen"))
            .args(["run", "--hw", rel])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the launcher starts");
        let ranks = wait_for_ranks(launcher.id(), 2);
        assert_eq!(ranks.len(), 2, "both ranks started");
        std::thread::sleep(std::time::Duration::from_millis(1_500));
        // SAFETY: kill(2) on the launcher this test started.
        unsafe { libc::kill(launcher.id() as i32, sig) };
        let out = launcher.wait_with_output().expect("the launcher ends");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(128 + sig),
            "{name}:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(t.elapsed().as_secs() < 20, "{name}: {:?}", t.elapsed());
        let marked = format!("interrupted: the launcher received {name} and killed this rank");
        assert!(text.contains(&marked), "{name}:\n{text}");
        assert!(text.contains("rank processes (rank=pid)"), "{text}");
        for p in &ranks {
            assert!(!alive(*p), "{name}: rank process {p} still runs");
        }
    }
}
