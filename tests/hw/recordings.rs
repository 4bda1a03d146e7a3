//! Recordings under `--hw`: `scen record` writes `launcher = "torchrun"`, and scen's hw launcher
//! plays torchrun's agent (crates/hw/src/agent.rs). Every recorded example, and every torchrun
//! scenario of scenarios/ hw can run, gives the simulator's per-rank verdicts on real processes
//! (the failing recording too: the agent stops the rank the others' failure leaves waiting);
//! the agent's store and the ranks leave nothing behind; `--launcher` decides who hosts the store;
//! a rank killed inside oneCCL makes the agent stop the others, as torchrun's would.

use super::{assert_cleaned_up, load, options, path, pids_of, run_hw};
use scen_core::outcome::{Failure, Killer};
use scen_core::parity::mode_independent;
use scen_core::scenario::Launcher;
use scen_core::verdict::RankVerdict;
use scen_hw::{HwError, HwOptions};
use std::time::Instant;

/// The recorded examples (each must run under --hw) and scenarios/'s torchrun scenarios.
fn torchrun_files() -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for (dir, recorded) in [("examples", true), ("scenarios", false)] {
        let mut files: Vec<String> = walk(&path(dir))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .filter_map(|p| {
                let rel = p
                    .strip_prefix(path(""))
                    .ok()?
                    .to_string_lossy()
                    .into_owned();
                (load(&rel).world.launcher == Launcher::Torchrun).then_some(rel)
            })
            .collect();
        files.sort();
        out.extend(files.into_iter().map(|f| (f, recorded)));
    }
    out
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return vec![];
    };
    rd.flatten()
        .flat_map(|e| {
            let p = e.path();
            if p.is_dir() {
                walk(&p)
            } else {
                vec![p]
            }
        })
        .collect()
}

/// Which failed rank the agent names is a race of real processes when several fail within one
/// monitor interval (the simulator names the earliest, the lowest on a tie): the lines say
/// `after rank ?`, and the ranks named are returned to be checked apart.
fn agent_blame(lines: Vec<String>) -> (Vec<String>, Vec<usize>) {
    const AT: &str = "torchrun stopped the worker group after rank ";
    let mut named = Vec::new();
    let lines = lines
        .into_iter()
        .map(|l| match l.find(AT) {
            Some(i) => {
                let rest = &l[i + AT.len()..];
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                named.extend(digits.parse::<usize>().ok());
                format!("{}{AT}?{}", &l[..i], &rest[digits.len()..])
            }
            None => l,
        })
        .collect();
    (lines, named)
}

/// The agent's store port is free once the run is over, or else held by a process that is
/// neither this test process (the launcher's agent store) nor one of the run's ranks: the other
/// hw tests of this binary run beside this one and may be handed the port the moment the agent
/// let it go (CI saw that once). A listener of ours is a leak and fails, naming its holder.
fn assert_port_not_ours(rel: &str, port: u16, run_pids: &[u32]) {
    if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
        return;
    }
    let holders = listeners_of(port);
    let me = std::process::id();
    let ours: Vec<&u32> = holders
        .iter()
        .filter(|p| **p == me || run_pids.contains(p))
        .collect();
    assert!(
        ours.is_empty() && !holders.is_empty(),
        "{rel}: the agent's store port {port} is still taken: listening pids {holders:?} \
         (this test process {me}, the run's ranks {run_pids:?})"
    );
    println!("{rel}: port {port} was taken again, by another process {holders:?} (not this run's)");
}

/// The processes holding a listening TCP socket on `port` (/proc/net/tcp{,6}, then each
/// process's open sockets); empty where /proc does not tell.
fn listeners_of(port: u16) -> Vec<u32> {
    const LISTEN: &str = "0A";
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1).and_then(|a| a.rsplit(':').next());
            let is_port = local_port.and_then(|h| u16::from_str_radix(h, 16).ok()) == Some(port);
            if is_port && f.get(3) == Some(&LISTEN) {
                inodes.extend(f.get(9).map(|i| format!("socket:[{i}]")));
            }
        }
    }
    let mut pids = Vec::new();
    for proc in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = proc
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let fds = std::fs::read_dir(proc.path().join("fd"))
            .into_iter()
            .flatten();
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|l| inodes.iter().any(|i| l.as_os_str() == i.as_str()))
        });
        if holds {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn a_listener_is_found_with_its_process() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let port = l.local_addr().expect("addr").port();
    assert_eq!(listeners_of(port), vec![std::process::id()]);
    drop(l);
    assert_eq!(listeners_of(port), Vec::<u32>::new());
}

/// The TCPStore port the launcher's agent listened on (its note).
fn agent_port(r: &scen_core::report::Report) -> Option<u16> {
    let n = r
        .notes
        .iter()
        .find_map(|n| n.strip_prefix("torchrun's agent (this launcher): TCPStore listening on "))?;
    n.split_whitespace()
        .next()?
        .rsplit(':')
        .next()?
        .parse()
        .ok()
}

#[test]
fn recordings_run_under_hw_with_the_simulators_verdicts() {
    let files = torchrun_files();
    assert!(
        files.iter().filter(|(_, rec)| *rec).count() >= 3,
        "the recorded examples: {files:?}"
    );
    for (rel, recorded) in files {
        let s = load(&rel);
        match scen_hw::launcher::check_eligible(&s, &options(), false) {
            Err(HwError::NotEligible(why)) if !recorded => {
                println!("skip: {rel}: hw cannot run it: {why}");
                continue;
            }
            Err(HwError::Unavailable(_)) | Ok(()) => {}
            Err(e) => panic!("{rel}: a recording must run under --hw: {e}"),
        }
        let sim = scen_sim::simulate(&s, None).expect("simulates");
        let t = Instant::now();
        let Some(hw) = run_hw(&rel, &options()) else {
            return;
        };
        println!("{rel}: hw run took {} ms", t.elapsed().as_millis());
        assert_eq!(hw.launcher, Launcher::Torchrun, "{rel}");
        let (hw_lines, hw_named) = agent_blame(mode_independent(&hw));
        let (sim_lines, sim_named) = agent_blame(mode_independent(&sim));
        assert_eq!(
            hw_lines,
            sim_lines,
            "{rel}: hw and sim disagree\nhw trace:\n{}\nnotes: {:?}",
            hw.trace.render(),
            hw.notes
        );
        assert_eq!(hw_named.is_empty(), sim_named.is_empty(), "{rel}");
        for r in hw_named {
            // The rank the agent names failed by itself, not by the agent's hand.
            assert!(
                matches!(&hw.ranks[r], RankVerdict::Failed { failure, .. }
                    if !matches!(failure, Failure::Killed { by: Killer::Agent { .. }, .. })),
                "{rel}: the agent names rank {r}: {:?}",
                hw.ranks[r]
            );
        }
        assert!(hw.expectations_hold(), "{rel}: {:?}", hw.expectations);
        assert!(sim.expectations_hold(), "{rel}: {:?}", sim.expectations);
        assert_eq!(hw.diagnosis.mismatches, sim.diagnosis.mismatches, "{rel}");
        assert_eq!(hw.diagnosis.groups, sim.diagnosis.groups, "{rel}");
        assert_eq!(hw.calls.len(), sim.calls.len(), "{rel}: call records");
        assert_cleaned_up(&hw);
        let port = agent_port(&hw).expect("the agent's store note");
        assert_port_not_ours(&rel, port, &pids_of(&hw));
    }
}

/// The failing recording started as plain processes (`--launcher processes`): rank 0 hosts the
/// store and nobody stops rank 1; its store connection closes with rank 0. hw and the simulator
/// agree on that too.
#[test]
fn the_failing_recording_as_plain_processes_gives_the_simulators_verdicts() {
    let rel = "examples/skip_rank/skip_all_reduce_gloo_w2.recorded.toml";
    let mut s = load(rel);
    s.world.launcher = Launcher::Processes;
    let sim = scen_sim::simulate(&s, None).expect("simulates");
    let _jobs = super::oneccl_jobs(false);
    let hw = match scen_hw::run(&s, &path(rel), &options()) {
        Ok(r) => r,
        Err(e) => panic!("{rel}: {e}"),
    };
    assert_eq!(hw.launcher, Launcher::Processes);
    assert_eq!(mode_independent(&hw), mode_independent(&sim), "{rel}");
    assert!(
        matches!(&hw.ranks[1], RankVerdict::Failed { failure, .. } if failure.text().starts_with("DistNetworkError")),
        "{:?}",
        hw.ranks[1]
    );
    assert!(agent_port(&hw).is_none(), "no agent: {:?}", hw.notes);
    assert_cleaned_up(&hw);
}

/// `--launcher` with `--hw`: a recording started as plain processes has rank 0 host the store
/// (scen's protocol, the job token), and the report says so; as recorded, the agent hosts it.
#[test]
fn hw_launcher_flag_decides_who_hosts_the_store() {
    let rel = "examples/five_ops/five_ops_gloo_w4.recorded.toml";
    for (flag, launcher, agent) in [
        (None, "torchrun", true),
        (Some("processes"), "processes", false),
    ] {
        let _jobs = super::oneccl_jobs(false);
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_scen"));
        cmd.args(["run", "--hw", rel, "--max-wall-s", "60", "--format", "json"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if let Some(f) = flag {
            cmd.args(["--launcher", f]);
        }
        let out = cmd.output().expect("runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{flag:?}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(v["launcher"], launcher, "{text}");
        let notes: Vec<&str> = v["notes"]
            .as_array()
            .expect("notes")
            .iter()
            .filter_map(|n| n.as_str())
            .collect();
        let hosted = notes
            .iter()
            .any(|n| n.starts_with("torchrun's agent (this launcher): TCPStore listening"));
        let client = notes
            .iter()
            .any(|n| n.starts_with("TORCHELASTIC_USE_AGENT_STORE=True"));
        assert_eq!((hosted, client), (agent, agent), "{flag:?}: {notes:?}");
    }
}

/// A rank SIGKILLed inside oneCCL (which never notices a dead peer): under torchrun the agent
/// stops the others a monitor interval after its exit, with its reason, at once rather than
/// at the watchdog's stall; nothing is left behind.
#[test]
fn a_rank_killed_inside_oneccl_makes_the_agent_stop_the_others() {
    let rel = "examples/five_ops/five_ops_xccl_w4.retargeted.toml";
    // Rank 1 is killed as soon as it starts step 3 (broadcast): the others cannot finish
    // all_gather and barrier without it.
    // Over oneCCL's shm transport the others neither notice nor abort (over tcp a peer's
    // death can SIGABRT them first): they wait until the agent stops them.
    let o = HwOptions {
        kill_rank_at: Some((1, 2)),
        kill_delay_ms: 0,
        rank_env: vec![("CCL_ATL_SHM".into(), "1".into())],
        ..options()
    };
    let t = Instant::now();
    let Some(r) = run_hw(rel, &o) else { return };
    let elapsed_ms = t.elapsed().as_millis();
    assert!(
        matches!(
            &r.ranks[1],
            RankVerdict::Failed {
                failure: Failure::Killed {
                    by: Killer::Launcher { .. },
                    ..
                },
                ..
            }
        ),
        "{:?}",
        r.ranks[1]
    );
    for rank in [0, 2, 3] {
        match &r.ranks[rank] {
            RankVerdict::Failed { failure, .. } => assert_eq!(
                failure.text(),
                "SIGTERM: torchrun stopped the worker group after rank 1 failed (signal 15)",
                "rank {rank}"
            ),
            other => panic!("rank {rank}: {other:?}"),
        }
    }
    assert!(
        r.first_stall.is_none(),
        "the agent, not the watchdog, ended it"
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("rank 1 failed; SIGTERM to the workers still running: [0, 2, 3]")),
        "{:?}",
        r.notes
    );
    println!(
        "agent stop after a kill inside oneCCL: {elapsed_ms} ms, pids {:?}",
        pids_of(&r)
    );
    assert_cleaned_up(&r);
}

/// hw's eligible scenarios, started as torchrun (`--launcher torchrun`): the simulator's
/// verdicts under torchrun too (hangs, timeouts the watchdog raises for oneCCL, failures the
/// agent follows with its stop).
#[test]
fn eligible_scenarios_under_torchrun_give_the_simulators_verdicts() {
    for rel in [
        "scenarios/five_ops_xccl_w2.toml",
        "scenarios/device_id_gloo_xpu.toml",
        "scenarios/five_ops_gloo_fallback_w4.toml",
        "scenarios/five_ops_xccl_w1.toml",
        "scenarios/device_id_gloo_xpu_fixed.toml",
        "scenarios/device_id_cpu_assert.toml",
        "scenarios/tcp_localhost_one_node.toml",
        "scenarios/missing_rank_all_reduce.toml",
        "scenarios/all_to_all_single_uneven_w3.toml",
        "scenarios/sglang_golden_w2_cfg2.toml",
        "tests/hw/dtypes_ops_xccl_w3.toml",
        "tests/hw/blocking_wait_timeout_xccl_w2.toml",
    ] {
        let mut s = load(rel);
        s.world.launcher = Launcher::Torchrun;
        let sim = scen_sim::simulate(&s, None).expect("simulates");
        let t = Instant::now();
        let _jobs = super::oneccl_jobs(false);
        let hw = match scen_hw::run(&s, &path(rel), &options()) {
            Ok(r) => r,
            Err(HwError::Unavailable(why)) => {
                assert!(
                    std::env::var("SCEN_HW_REQUIRED").as_deref() != Ok("1"),
                    "SCEN_HW_REQUIRED=1 but {why}"
                );
                println!("skip: {rel} under torchrun: {why}");
                return;
            }
            Err(e) => panic!("{rel}: {e}"),
        };
        println!(
            "{rel} (torchrun): hw run took {} ms",
            t.elapsed().as_millis()
        );
        assert_eq!(hw.launcher, Launcher::Torchrun, "{rel}");
        let (hw_lines, _) = agent_blame(mode_independent(&hw));
        let (sim_lines, _) = agent_blame(mode_independent(&sim));
        assert_eq!(
            hw_lines,
            sim_lines,
            "{rel} under torchrun: hw and sim disagree\nhw trace:\n{}\nnotes: {:?}",
            hw.trace.render(),
            hw.notes
        );
        assert_cleaned_up(&hw);
    }
}
