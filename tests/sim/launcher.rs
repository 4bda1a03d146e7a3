//! `[world] launcher` as users meet it: every report names its launcher, `--launcher` overrides
//! it on `run`, `explore` and `test` (`both` compares), and a sim-only measurement of how many
//! per-rank verdicts of the differential oracle's generated programs change with the launcher.
//!
//! The measurement (`launcher_changes_generated_verdicts`) runs SAMPLE programs of seed 1 by
//! default; `SCEN_LAUNCHER_DIFF_PROGRAMS=500 SCEN_LAUNCHER_DIFF_SEED=3 cargo test --test sim
//! launcher_changes -- --nocapture` prints the figures for docs/torch.md.

use crate::common::scen;
use scen_core::outcome::{Failure, Killer};
use scen_core::report::Report;
use scen_core::scenario::{parse, Launcher, TimeScale};
use scen_core::verdict::RankVerdict;

#[path = "../torch/gen.rs"]
mod gen;

const TORCHRUN: &str = "scenarios/torchrun_rank0_dies_before_init.toml";
const PLAIN: &str = "scenarios/missing_rank_all_reduce.toml";

fn header(out: &str) -> &str {
    out.lines().next().unwrap_or_default()
}

#[test]
fn run_names_the_launcher_and_launcher_overrides_it() {
    let (code, out, err) = scen(&["run", TORCHRUN]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        header(&out).contains("(sim mode, launcher torchrun, seed 0,"),
        "{out}"
    );
    // Under plain processes rank 0 hosts the store: its crash leaves the others to time out
    // connecting, which the scenario's expectations (written for torchrun) do not say.
    let (code, out, _) = scen(&["run", TORCHRUN, "--launcher", "processes"]);
    assert_eq!(code, 1, "{out}");
    assert!(header(&out).contains("launcher processes"), "{out}");
    assert!(out.contains("DistNetworkError"), "{out}");
    let stopped = |l: &str| l.contains(": fails in") && l.contains("SIGTERM: torchrun stopped");
    assert!(!out.lines().any(stopped), "no agent stops a rank: {out}");

    let (code, out, _) = scen(&[
        "run",
        TORCHRUN,
        "--launcher",
        "processes",
        "--format",
        "json",
    ]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["launcher"], "processes");
    let (_, out, _) = scen(&["run", PLAIN, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["launcher"], "processes");
}

/// `run` takes one launcher. With `--hw` it is the hw launcher's to play (tests/hw.rs,
/// `hw_launcher_flag_decides_who_hosts_the_store`).
#[test]
fn run_refuses_both() {
    let (code, _, err) = scen(&["run", PLAIN, "--launcher", "both"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("both"), "{err}");
}

#[test]
fn explore_both_prints_each_launchers_classes_and_whether_they_differ() {
    let (code, out, err) = scen(&["explore", TORCHRUN, "--seeds", "3", "--launcher", "both"]);
    // The expectations are judged under the scenario's own launcher (torchrun): they hold.
    assert_eq!(code, 0, "{out}{err}");
    let own = out.find("(launcher torchrun): 3 seeds").expect("own first");
    let other = out
        .find("(launcher processes): 3 seeds")
        .expect("then the other");
    assert!(own < other, "{out}");
    assert!(
        out.contains("launcher torchrun: 1 verdict class: crashed; fails in init_process_group \"init\": SIGTERM: torchrun stopped"),
        "{out}"
    );
    assert!(
        out.contains("launcher processes: 1 verdict class: crashed; fails in init_process_group \"init\": DistNetworkError"),
        "{out}"
    );
    assert!(
        out.ends_with("launchers: the verdict classes DIFFER between torchrun and processes\n"),
        "{out}"
    );

    let (code, out, _) = scen(&[
        "explore",
        PLAIN,
        "--seeds",
        "2",
        "--launcher",
        "both",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["verdict_classes_differ"], false, "{v}");
    let launchers: Vec<&str> = v["explorations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["launcher"].as_str().unwrap())
        .collect();
    assert_eq!(launchers, ["processes", "torchrun"]);

    // One launcher: the override is judged like the scenario's own.
    let (code, out, _) = scen(&[
        "explore",
        TORCHRUN,
        "--seeds",
        "2",
        "--launcher",
        "processes",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("(launcher processes)"), "{out}");
    assert!(!out.contains("launchers:"), "{out}");
}

#[test]
fn explore_merge_refuses_shards_of_different_launchers() {
    let dir = tempfile::tempdir().unwrap();
    let mut parts = Vec::new();
    for (i, l) in ["processes", "torchrun"].iter().enumerate() {
        let shard = format!("{i}/2");
        let (code, out, _) = scen(&[
            "explore",
            PLAIN,
            "--seeds",
            "2",
            "--shard",
            &shard,
            "--launcher",
            l,
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{out}");
        let p = dir.path().join(format!("{l}.json"));
        std::fs::write(&p, out).unwrap();
        parts.push(p.display().to_string());
    }
    let (code, _, err) = scen(&["explore", "--merge", &parts[0], &parts[1]]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("different launchers (processes and torchrun)"),
        "{err}"
    );
}

#[test]
fn test_both_notes_the_differing_verdict_and_keeps_the_exit_code() {
    let (code, out, err) = scen(&["test", TORCHRUN, PLAIN, "--launcher", "both"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ok       torchrun_rank0_dies_before_init\nlauncher: torchrun_rank0_dies_before_init verdict differs under processes: crashed; fails in init_process_group \"init\": DistNetworkError"), "{out}");
    assert!(
        !out.contains("launcher: missing_rank_all_reduce"),
        "same verdict under both: no note\n{out}"
    );
    assert!(
        out.contains(
            "launchers: the verdict differs under the other launcher for 1 of 2 scenarios"
        ),
        "{out}"
    );
    // A single launcher replaces the scenario's: its snapshot and expectations then fail.
    let (code, out, _) = scen(&["test", TORCHRUN, "--launcher", "processes"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAILED   torchrun_rank0_dies_before_init: expectation"),
        "{out}"
    );
    let (code, _, err) = scen(&["test", TORCHRUN, "--launcher", "torchrun", "--update"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--update/--review"), "{err}");
}

/// Programs of the measurement `cargo test` runs.
const SAMPLE: u64 = 70;

/// A rank's verdict as the differential oracle compares it: outcome class, step, failure kind,
/// and the text.
fn facts(r: &Report) -> Vec<(String, String)> {
    r.ranks.iter().map(RankVerdict::facts).collect()
}

fn stopped_by_agent(v: &RankVerdict) -> bool {
    matches!(
        v,
        RankVerdict::Failed {
            failure: Failure::Killed {
                by: Killer::Agent { .. },
                ..
            },
            ..
        }
    )
}

/// What torchrun's agent promises, checked on one report: only it stops workers, and once a
/// worker failed on its own no other is left hanging.
fn agent_rules_hold(launcher: Launcher, r: &Report) -> Result<(), String> {
    let stopped = r.ranks.iter().any(stopped_by_agent);
    let failed_alone = r
        .ranks
        .iter()
        .any(|v| matches!(v, RankVerdict::Failed { .. }) && !stopped_by_agent(v));
    let hung = r
        .ranks
        .iter()
        .any(|v| matches!(v, RankVerdict::Hung { .. }));
    match launcher {
        Launcher::Processes if stopped => Err("a worker stopped by an agent there is not".into()),
        Launcher::Torchrun if failed_alone && hung => {
            Err("a rank hangs although a worker failed and the agent stops the group".into())
        }
        _ => Ok(()),
    }
}

/// Generated programs (tests/torch/gen.rs) simulated under both launchers at the differential
/// oracle's time scale (1/600): how many per-rank verdicts change.
#[test]
fn launcher_changes_generated_verdicts() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let programs = env("SCEN_LAUNCHER_DIFF_PROGRAMS").unwrap_or(SAMPLE);
    let seed = env("SCEN_LAUNCHER_DIFF_SEED").unwrap_or(1);
    let (mut ranks, mut outcome_diff, mut text_diff, mut by_agent) = (0, 0, 0, 0);
    let mut differing = Vec::new();
    let mut summaries = Vec::new();
    let mut broken = Vec::new();
    for k in 0..programs {
        let p = gen::program(seed, k, None);
        let file = format!("gen_{seed}_{k}.toml");
        let mut s = parse(&p.text, &file, &file).unwrap_or_else(|e| panic!("{e}\n{}", p.text));
        s.scale_times(TimeScale { num: 1, den: 600 });
        let mut reports = Vec::new();
        for l in [Launcher::Processes, Launcher::Torchrun] {
            s.world.launcher = l;
            let r = scen_sim::simulate(&s, None).unwrap_or_else(|e| panic!("{file} {l:?}: {e}"));
            if let Err(e) = agent_rules_hold(l, &r) {
                broken.push(format!("{seed}/{k} under {}: {e}", l.name()));
            }
            reports.push(r);
        }
        let (a, b) = (facts(&reports[0]), facts(&reports[1]));
        ranks += a.len();
        let outcomes = a.iter().zip(&b).filter(|(x, y)| x.0 != y.0).count();
        outcome_diff += outcomes;
        text_diff += a.iter().zip(&b).filter(|(x, y)| x != y).count();
        by_agent += reports[1]
            .ranks
            .iter()
            .filter(|v| stopped_by_agent(v))
            .count();
        if a != b {
            differing.push(k);
            summaries.push(format!("  {seed}/{k}: {}", p.summary));
        }
    }
    println!(
        "launcher difference (seed {seed}, sim, time scale 1/600): {programs} programs, {ranks} ranks: {outcome_diff} per-rank verdicts differ between processes and torchrun in outcome/step/kind ({:.1}%), {text_diff} in outcome or text ({:.1}%); {by_agent} rank(s) stopped by torchrun's agent; {} program(s) differ: {differing:?}",
        100.0 * outcome_diff as f64 / ranks.max(1) as f64,
        100.0 * text_diff as f64 / ranks.max(1) as f64,
        differing.len(),
    );
    println!("{}", summaries.join("\n"));
    assert!(broken.is_empty(), "{broken:#?}");
    assert!(
        !differing.is_empty(),
        "no generated program's verdict depends on the launcher: is [world] launcher ignored?"
    );
}

/// A rank's own `exit_ms` (`[[world.rank]]`, as `scen record` writes the teardown it measured)
/// decides when torchrun's agent sees its failure: rank 1 raises at once, rank 0 sleeps 1 s
/// and then joins an all_reduce. With the default 450 ms teardown the agent stops rank 0 in
/// its sleep; with rank 1 living 2 s after its raise, rank 0 reaches the all_reduce and reads
/// rank 1's close first (program 7/358 of the user-path oracle, under load).
#[test]
fn a_ranks_own_teardown_decides_the_agents_race() {
    let text = |exit: &str| {
        format!(
            "[world]\nranks_per_node = 2\nplatform = \"cpu\"\nlauncher = \"torchrun\"\n{exit}\n\
             [[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n\n\
             [[step]]\nop = \"raise\"\non = [1]\nerror = \"ValueError: gives up\"\n\n\
             [[step]]\nop = \"sleep\"\non = [0]\nms = 1000\n\n\
             [[step]]\nop = \"all_reduce\"\non = [0]\nshape = [4]\n"
        )
    };
    let rank0 = |exit: &str| {
        let s = parse(&text(exit), "t.toml", "t").expect("loads");
        let r = scen_sim::simulate(&s, None).expect("runs");
        match &r.ranks[0] {
            RankVerdict::Failed { failure, .. } => failure.text(),
            other => panic!("rank 0: {other:?}"),
        }
    };
    assert!(rank0("").contains("SIGTERM"), "{}", rank0(""));
    let late = "\n[[world.rank]]\non = [1]\nexit_ms = 2000\n";
    assert!(
        rank0(late).contains("Connection closed by peer"),
        "{}",
        rank0(late)
    );
}

/// `[world] agent_check_ms` and `agent_stop_ms` (as `scen record` writes what it measured)
/// decide which of a
/// failed peer's close and the agent's SIGTERM ends a blocked rank first: ranks 0 and 1 raise
/// at once and their processes end 1000 and 1050 ms later, rank 2 waits for rank 1's
/// broadcast. With the agent's stop a whole check interval (100 ms) after rank 0's end, rank 2
/// reads rank 1's close; with the check and stop real torchrun made in 7/980 (0 and 38 ms),
/// the SIGTERM comes first.
#[test]
fn the_agents_recorded_stop_decides_a_blocked_ranks_race() {
    let rank2 = |stop: &str| {
        let text = format!(
            "[world]\nranks_per_node = 3\nplatform = \"cpu\"\nlauncher = \"torchrun\"\n{stop}\n\
             [[world.rank]]\non = [0]\nexit_ms = 1000\n\n[[world.rank]]\non = [1]\nexit_ms = 1050\n\n\
             [[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n\n\
             [[step]]\nop = \"raise\"\non = [0, 1]\nerror = \"ValueError: gives up\"\n\n\
             [[step]]\nop = \"broadcast\"\non = [2]\nshape = [4]\nsrc = 1\n"
        );
        let s = parse(&text, "t.toml", "t").expect("loads");
        let r = scen_sim::simulate(&s, None).expect("runs");
        match &r.ranks[2] {
            RankVerdict::Failed { failure, .. } => failure.text(),
            other => panic!("rank 2: {other:?}"),
        }
    };
    let default = rank2("");
    assert!(default.contains("Connection closed by peer"), "{default}");
    let recorded = rank2("agent_check_ms = 0\nagent_stop_ms = 38");
    assert!(
        recorded.contains("SIGTERM: torchrun stopped the worker group after rank 0 failed"),
        "{recorded}"
    );
}
