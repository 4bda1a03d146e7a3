//! The model's `Version::V0_5_23` against real sglang 0.5.23: testdata/sglang_0.5.23_groups.json
//! was made by real sglang on this kind of machine (scripts/sglang-groups-fixture.sh: torchrun,
//! CPU, gloo) for the six golden configs of docs/rules/sglang.md §8. Every `new_group` call (ranks and
//! the backend argument as passed) and every rank's group of every kind must match the plan.
//! On CPU the device backend is gloo, so the fixture cannot tell a device group from a gloo one;
//! the last test pins the backend classes against the spec's V2 golden sequence instead.

use std::collections::BTreeMap;

use scen_core::sglang::parallel_state::{
    plan_initialize_model_parallel, BackendChoice, GroupKind, ParallelConfig, Plan, Version,
};
use serde_json::Value;

fn load(file: &str) -> BTreeMap<String, Value> {
    let path = format!("{}/testdata/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("fixture readable");
    let all: BTreeMap<String, Value> = serde_json::from_str(&text).expect("fixture parses");
    all.into_iter().filter(|(k, _)| k != "_meta").collect()
}

fn ranks(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("rank list")
        .iter()
        .map(|r| r.as_u64().expect("rank") as usize)
        .collect()
}

/// The config of a golden key, from the spec's golden data.
fn config(key: &str) -> ParallelConfig {
    let spec = load("sglang_groups.json");
    let c = &spec[key]["config"];
    let n = |k: &str| c[k].as_u64().expect("degree") as usize;
    ParallelConfig {
        world_size: n("world_size"),
        tp: n("tp"),
        ulysses: n("ulysses"),
        ring: n("ring"),
        sp: n("sp"),
        cfg: n("cfg"),
        dp: n("dp"),
        pp: n("pp"),
        vae_parallel_size: 0,
    }
}

fn plan(key: &str) -> Plan {
    plan_initialize_model_parallel(config(key), Version::V0_5_23).expect("plans")
}

/// The backend argument a call passes on the CPU platform (device backend = gloo).
fn cpu_backend(b: BackendChoice) -> Option<&'static str> {
    match b {
        BackendChoice::Device | BackendChoice::Gloo => Some("gloo"),
        BackendChoice::Default => None,
    }
}

#[test]
fn the_fixture_has_the_six_golden_configs_from_real_sglang_0_5_23() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/sglang_0.5.23_groups.json"
    ))
    .unwrap();
    let meta: Value = serde_json::from_str::<Value>(&text).unwrap()["_meta"].clone();
    assert_eq!(meta["sglang"], "0.5.23");
    let keys: Vec<String> = load("sglang_0.5.23_groups.json").into_keys().collect();
    let spec: Vec<String> = load("sglang_groups.json").into_keys().collect();
    assert_eq!(keys, spec);
}

#[test]
fn new_group_calls_match_real_sglang() {
    for (key, real) in load("sglang_0.5.23_groups.json") {
        let plan = plan(&key);
        let want: Vec<(Vec<usize>, Option<String>)> = real["new_group_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    ranks(&c["ranks"]),
                    c["backend"].as_str().map(str::to_string),
                )
            })
            .collect();
        let got: Vec<(Vec<usize>, Option<String>)> = plan
            .calls
            .iter()
            .map(|c| (c.ranks.clone(), cpu_backend(c.backend).map(str::to_string)))
            .collect();
        assert_eq!(got.len(), want.len(), "{key}: call count");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{key}: call #{i} ({})", plan.calls[i].tag());
        }
    }
}

/// Follows `alias:` chains to the coordinator that owns the groups.
fn owner<'a>(plan: &'a Plan, kind: &'a str) -> &'a str {
    let mut k = kind;
    while let Some(GroupKind::Alias(t)) = plan.groups.get(k) {
        k = t;
    }
    k
}

#[test]
fn every_rank_has_real_sglangs_groups_and_coordinator_names() {
    for (key, real) in load("sglang_0.5.23_groups.json") {
        let plan = plan(&key);
        let per_rank = real["per_rank"].as_object().unwrap();
        assert_eq!(per_rank.len(), plan.config.world_size, "{key}");
        for (rank, kinds) in per_rank {
            let rank: usize = rank.parse().unwrap();
            let kinds = kinds.as_object().unwrap();
            let memberships = plan.memberships(rank);
            let got: Vec<&String> = memberships.keys().collect();
            let want: Vec<&String> = kinds.keys().collect();
            assert_eq!(got, want, "{key} r{rank}: group kinds");
            for (kind, g) in kinds {
                let m = &memberships[kind];
                assert_eq!(m.ranks, ranks(&g["ranks"]), "{key} r{rank} {kind}");
                if let Some(name) = g["unique_name"].as_str() {
                    let c = plan
                        .coordinator(owner(&plan, kind))
                        .unwrap_or_else(|| panic!("{key}: no coordinator for {kind}"));
                    assert_eq!(c.unique_name, name, "{key} r{rank} {kind}");
                }
            }
        }
    }
}

#[test]
fn it_is_v2_plus_single_rank_moe_ep_groups_right_after_tp() {
    for (key, spec) in load("sglang_groups.json") {
        let w = config(&key).world_size;
        let mut want: Vec<(String, Vec<usize>, String)> = spec["new_group_call_sequence_newest"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let tag = c["tag"].as_str().unwrap().to_string();
                let b = c["backend"].as_str().unwrap().to_string();
                (tag, ranks(&c["ranks"]), b)
            })
            .collect();
        let after_tp = want.iter().rposition(|c| c.0.starts_with("tp.")).unwrap() + 1;
        let moe_ep = (0..w).flat_map(|r| {
            [
                ("moe_ep.device".to_string(), vec![r], "DEVICE".to_string()),
                ("moe_ep.cpu".to_string(), vec![r], "gloo".to_string()),
            ]
        });
        want.splice(after_tp..after_tp, moe_ep);
        let got: Vec<(String, Vec<usize>, String)> = plan(&key)
            .calls
            .iter()
            .map(|c| {
                (
                    c.tag(),
                    c.ranks.clone(),
                    c.backend.golden_name().to_string(),
                )
            })
            .collect();
        assert_eq!(got, want, "{key}");
        assert_eq!(got.len(), want.len());
    }
}

#[test]
fn cfg_sp_is_a_view_of_cfg_only_when_cfg_without_sp() {
    for key in ["w4_tp2_cfg2", "w2_cfg2"] {
        assert_eq!(
            plan(key).groups.get("cfg_sp"),
            Some(&GroupKind::Alias("cfg".into())),
            "{key}"
        );
    }
    for key in ["w8_tp1_u2_r2_cfg2_dp1", "w4_u4", "w16_tp2_u2_r2_cfg2"] {
        assert_eq!(plan(key).groups.get("cfg_sp"), None, "{key}");
    }
}
