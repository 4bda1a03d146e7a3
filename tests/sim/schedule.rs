//! Seeds perturb the intra-node schedule (crates/sim/src/schedule.rs): explore finds a race
//! between ranks of one host, the race replays exactly from its seed, seed 0 keeps the
//! reference order, and a single-node run differs from seed to seed.

use crate::common::root;
use scen_core::class::class_key;
use scen_core::scenario::{load_file, parse};
use std::collections::BTreeSet;
use std::process::Command;

const RACE: &str = "scenarios/race_local_store_host_exits_xccl_hang.toml";
const SHRUNK: &str = "scenarios/race_local_store_host_exits_xccl_hang_shrunk.toml";

fn explore(file: &str, seeds: u64) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_scen"))
        .args(["explore", file, "--seeds", &seeds.to_string()])
        .args(["--format", "json"])
        .current_dir(root())
        .output()
        .expect("scen runs");
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not json ({e}): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

/// The hang class of the single-node race: some rank lost the store, others hang.
fn is_hang(key: &str) -> bool {
    key.contains("Failed to recv") && key.contains("hangs in all_reduce \"rest_ar\"")
}

#[test]
fn explore_finds_the_intra_node_hang_within_200_seeds() {
    let (code, v) = explore(RACE, 200);
    let classes = v["classes"].as_array().expect("classes");
    let keys: Vec<&str> = classes.iter().filter_map(|c| c["key"].as_str()).collect();
    // Seed 0 (the reference order) completes: the hang needs another intra-node order.
    assert_eq!(classes[0]["first_seed"], 0, "{keys:?}");
    assert_eq!(keys[0], "completes", "{keys:?}");
    let hang = classes
        .iter()
        .find(|c| c["key"].as_str().is_some_and(is_hang))
        .unwrap_or_else(|| panic!("no hang class in 200 seeds: {keys:?}"));
    assert_eq!(code, 1, "the hang class breaks the expectations");
    // Its first seed replays into the same class with the library, twice identically.
    let s = load_file(&root().join(RACE)).expect("loads");
    let seed = hang["first_seed"].as_u64().expect("seed");
    let a = scen_sim::simulate(&s, Some(seed)).expect("runs");
    let b = scen_sim::simulate(&s, Some(seed)).expect("runs");
    assert_eq!(class_key(&s, &a), hang["key"].as_str().expect("key"));
    assert_eq!(a.trace_hash, hang["trace_hash"].as_str().expect("hash"));
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.trace.render(), b.trace.render());
}

#[test]
fn the_shrunk_race_keeps_its_class_at_its_seed() {
    let shrunk = load_file(&root().join(SHRUNK)).expect("shrunk loads");
    let original = load_file(&root().join(RACE)).expect("original loads");
    assert!(shrunk.steps.len() < original.steps.len());
    let r = scen_sim::simulate(&shrunk, None).expect("runs");
    assert!(
        is_hang(&class_key(&shrunk, &r)),
        "{}",
        class_key(&shrunk, &r)
    );
    assert!(r.expectations_hold());
    let before = scen_sim::simulate(&original, Some(shrunk.sim.seed)).expect("runs");
    assert_eq!(class_key(&original, &before), class_key(&shrunk, &r));
}

/// Four ranks on one host, each checking in to the store and running one gloo all_reduce.
const ONE_HOST: &str = r#"
[scenario]
description = "four local ranks"

[world]
ranks_per_node = 4
platform = "cpu"

[[step]]
op = "init_process_group"
backend = "gloo"

[[step]]
op = "all_reduce"
expect = "6"

[[expect]]
outcome = "completes"
"#;

#[test]
fn seeds_change_the_order_on_one_host_and_each_seed_replays_exactly() {
    let s = parse(ONE_HOST, "one_host.toml", "one_host").expect("parses");
    let mut hashes = BTreeSet::new();
    let mut check_ins = BTreeSet::new();
    for seed in 0..8 {
        let a = scen_sim::simulate(&s, Some(seed)).expect("runs");
        let b = scen_sim::simulate(&s, Some(seed)).expect("runs");
        assert_eq!(a.trace_hash, b.trace_hash, "seed {seed}");
        assert!(a.expectations_hold(), "seed {seed}");
        hashes.insert(a.trace_hash.clone());
        // Which rank checks in first (the store's `add` counter) depends on the order.
        let first = a
            .trace
            .render()
            .lines()
            .find(|l| l.contains("(init/ = 1)"))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
            .expect("a first check-in");
        check_ins.insert(first);
    }
    assert!(hashes.len() >= 6, "only {} distinct traces", hashes.len());
    assert!(
        check_ins.len() >= 2,
        "rank {check_ins:?} always checks in first"
    );
}

#[test]
fn seed_zero_runs_the_reference_order() {
    // Ranks start in rank order and the store counts them in that order.
    let s = parse(ONE_HOST, "one_host.toml", "one_host").expect("parses");
    let r = scen_sim::simulate(&s, Some(0)).expect("runs");
    let order: Vec<String> = r
        .trace
        .render()
        .lines()
        .filter(|l| l.contains("checked in to TCPStore"))
        .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
        .collect();
    assert_eq!(order, ["r0", "r1", "r2", "r3"]);
}
