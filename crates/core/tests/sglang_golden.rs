//! Golden comparison against `testdata/sglang_groups.json` (a copy of the
//! spec's golden data): groups per kind, per-rank memberships, and the full
//! `new_group` call sequences for V2 (newest) and V0 (legacy initial); V1 is
//! checked as "V0 with the USP block replaced by the SP-group split".

use std::collections::BTreeMap;

use scen_core::sglang::parallel_state::{
    plan_initialize_model_parallel, GroupKind, NewGroupCall, ParallelConfig, Plan, Version,
};
use serde_json::Value;

fn golden() -> BTreeMap<String, Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/sglang_groups.json");
    let text = std::fs::read_to_string(path).expect("golden JSON readable");
    let all: BTreeMap<String, Value> = serde_json::from_str(&text).expect("golden JSON parses");
    all.into_iter().filter(|(k, _)| k != "_meta").collect()
}

fn usize_of(v: &Value) -> usize {
    v.as_u64().expect("unsigned integer") as usize
}

fn rank_list(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("rank list")
        .iter()
        .map(usize_of)
        .collect()
}

fn rank_lists(v: &Value) -> Vec<Vec<usize>> {
    v.as_array()
        .expect("list of rank lists")
        .iter()
        .map(rank_list)
        .collect()
}

fn config_of(entry: &Value) -> ParallelConfig {
    let c = &entry["config"];
    ParallelConfig {
        world_size: usize_of(&c["world_size"]),
        tp: usize_of(&c["tp"]),
        ulysses: usize_of(&c["ulysses"]),
        ring: usize_of(&c["ring"]),
        sp: usize_of(&c["sp"]),
        cfg: usize_of(&c["cfg"]),
        dp: usize_of(&c["dp"]),
        pp: usize_of(&c["pp"]),
        vae_parallel_size: 0,
    }
}

fn group_kind(v: &Value) -> GroupKind {
    match v.as_str() {
        Some(s) => GroupKind::Alias(s.strip_prefix("alias:").expect("alias:X").to_string()),
        None => GroupKind::Created(rank_lists(v)),
    }
}

/// (tag, ranks, backend) triples of a golden call sequence.
fn golden_calls(v: &Value) -> Vec<(String, Vec<usize>, String)> {
    v.as_array()
        .expect("call sequence")
        .iter()
        .map(|c| {
            (
                c["tag"].as_str().expect("tag").to_string(),
                rank_list(&c["ranks"]),
                c["backend"].as_str().expect("backend").to_string(),
            )
        })
        .collect()
}

fn plan_calls(plan: &Plan) -> Vec<(String, Vec<usize>, String)> {
    plan.calls
        .iter()
        .map(|c: &NewGroupCall| {
            (
                c.tag(),
                c.ranks.clone(),
                c.backend.golden_name().to_string(),
            )
        })
        .collect()
}

fn assert_calls_equal(
    name: &str,
    got: &[(String, Vec<usize>, String)],
    want: &[(String, Vec<usize>, String)],
) {
    assert_eq!(got.len(), want.len(), "{name}: call count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "{name}: call #{i}");
    }
}

#[test]
fn v2_groups_match_golden_per_kind() {
    for (name, entry) in golden() {
        let plan = plan_initialize_model_parallel(config_of(&entry), Version::V2).unwrap();
        let want: BTreeMap<String, GroupKind> = entry["groups"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), group_kind(v)))
            .collect();
        assert_eq!(plan.groups, want, "{name}");
    }
}

#[test]
fn v2_call_sequences_match_golden_newest() {
    for (name, entry) in golden() {
        let plan = plan_initialize_model_parallel(config_of(&entry), Version::V2).unwrap();
        let want = golden_calls(&entry["new_group_call_sequence_newest"]);
        assert_calls_equal(&name, &plan_calls(&plan), &want);
    }
}

#[test]
fn v2_totals_match_spec_r1() {
    let expected = [
        ("w8_tp1_u2_r2_cfg2_dp1", 73),
        ("w8_tp2_u2_r1_cfg2", 77),
        ("w4_u4", 44),
        ("w4_tp2_cfg2", 45),
        ("w16_tp2_u2_r2_cfg2", 129),
        ("w2_cfg2", 27),
    ];
    let golden = golden();
    assert_eq!(golden.len(), expected.len());
    for (name, total) in expected {
        let plan = plan_initialize_model_parallel(config_of(&golden[name]), Version::V2).unwrap();
        assert_eq!(plan.calls.len(), total, "{name}");
    }
}

#[test]
fn v2_usp_call_order_matches_golden() {
    for (name, entry) in golden() {
        let plan = plan_initialize_model_parallel(config_of(&entry), Version::V2).unwrap();
        let got: Vec<(String, Vec<usize>)> = plan
            .calls
            .iter()
            .filter(|c| c.coordinator == "ulysses" || c.coordinator == "ring")
            .map(|c| (c.coordinator.to_string(), c.ranks.clone()))
            .collect();
        let want: Vec<(String, Vec<usize>)> = entry["usp_new_group_call_order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_str().unwrap().to_string(), rank_list(&p[1])))
            .collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn v2_per_rank_memberships_match_golden() {
    for (name, entry) in golden() {
        let plan = plan_initialize_model_parallel(config_of(&entry), Version::V2).unwrap();
        let per_rank = entry["per_rank"].as_object().unwrap();
        assert_eq!(per_rank.len(), plan.config.world_size, "{name}");
        for (rank, kinds) in per_rank {
            let rank: usize = rank.parse().unwrap();
            for (kind, m) in kinds.as_object().unwrap() {
                let got = &plan.memberships(rank)[kind];
                assert_eq!(got.ranks, rank_list(&m["ranks"]), "{name} r{rank} {kind}");
                assert_eq!(
                    got.rank_in_group,
                    usize_of(&m["rank_in_group"]),
                    "{name} r{rank} {kind}"
                );
            }
        }
    }
}

#[test]
fn v0_call_sequences_match_golden_legacy_initial() {
    for (name, entry) in golden() {
        let Some(seq) = entry.get("new_group_call_sequence_legacy_initial") else {
            continue;
        };
        let plan = plan_initialize_model_parallel(config_of(&entry), Version::V0).unwrap();
        assert_calls_equal(&name, &plan_calls(&plan), &golden_calls(seq));
    }
}

#[test]
fn v0_groups_match_golden_with_legacy_usp_split() {
    for (name, entry) in golden() {
        let plan = plan_initialize_model_parallel(config_of(&entry), Version::V0).unwrap();
        let legacy = &entry["legacy_yunchang_usp_split"];
        for axis in ["ulysses", "ring"] {
            assert_eq!(
                plan.groups[axis],
                GroupKind::Created(rank_lists(&legacy[axis])),
                "{name} {axis}"
            );
        }
        for kind in ["world", "dp", "cfg", "pp", "sp", "tp", "dit"] {
            assert_eq!(
                plan.groups[kind],
                group_kind(&entry["groups"][kind]),
                "{name} {kind}"
            );
        }
        for derived in ["replica", "encoder_dp", "vae_decode"] {
            assert!(!plan.groups.contains_key(derived), "{name} {derived}");
        }
    }
}

#[test]
fn v1_is_legacy_sequence_with_sp_group_usp_split() {
    for (name, entry) in golden() {
        let legacy = golden_calls(&entry["new_group_call_sequence_legacy_initial"]);
        let usp: Vec<(String, Vec<usize>, String)> = entry["usp_new_group_call_order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p[0].as_str().unwrap().to_string(),
                    rank_list(&p[1]),
                    "DEFAULT(None)".to_string(),
                )
            })
            .collect();
        let first_usp = legacy.iter().position(|c| c.0 == "ulysses").unwrap();
        let mut want = legacy.clone();
        want.splice(first_usp..first_usp + usp.len(), usp);
        let plan = plan_initialize_model_parallel(config_of(&entry), Version::V1).unwrap();
        assert_calls_equal(&name, &plan_calls(&plan), &want);
    }
}

#[test]
fn r11_ulysses_groups_stay_inside_sp_groups_only_after_the_fix() {
    let golden = golden();
    let entry = &golden["w16_tp2_u2_r2_cfg2"];
    for (version, inside) in [
        (Version::V0, false),
        (Version::V1, true),
        (Version::V2, true),
    ] {
        let plan = plan_initialize_model_parallel(config_of(entry), version).unwrap();
        let all_inside = (0..plan.config.world_size)
            .map(|r| plan.memberships(r))
            .all(|m| m["ulysses"].ranks.iter().all(|r| m["sp"].ranks.contains(r)));
        assert_eq!(all_inside, inside, "{version:?}");
    }
}

#[test]
fn r2_coordinator_calls_alternate_device_then_gloo() {
    for (name, entry) in golden() {
        let plan = plan_initialize_model_parallel(config_of(&entry), Version::V2).unwrap();
        for coord in &plan.coordinators {
            let calls = &plan.calls[coord.first_call..coord.end_call];
            assert_eq!(
                calls.len(),
                2 * coord.group_ranks.len(),
                "{name} {}",
                coord.coordinator
            );
            for (pair, ranks) in calls.chunks(2).zip(&coord.group_ranks) {
                assert_eq!((&pair[0].ranks, &pair[1].ranks), (ranks, ranks));
                assert_eq!(pair[1].backend.golden_name(), "gloo");
            }
        }
    }
}

#[test]
fn rank_generator_order_matches_golden() {
    use scen_core::sglang::rank_generator::{RankGenerator, SGLANG_ORDER};
    for (name, entry) in golden() {
        let c = config_of(&entry);
        let gen = RankGenerator::new(c.tp, c.sp, c.pp, c.cfg, c.dp, SGLANG_ORDER).unwrap();
        assert_eq!(gen.order(), entry["order"].as_str().unwrap(), "{name}");
        assert_eq!(
            gen.ordered_size(),
            rank_list(&entry["ordered_size"]),
            "{name}"
        );
    }
}
