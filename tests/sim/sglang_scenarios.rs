//! sglang start-up driven through the simulator, checked against the golden data (spec
//! docs/rules/sglang.md §8, sglang R1–R4, R11): every shipped `sglang_golden_<config>.toml` must leave each rank
//! in exactly the groups the golden JSON lists for it, after exactly the golden number of
//! `new_group` calls; the V0 scenario must show yunchang's legacy (TP-mixed) Ulysses groups.
//! The planner's full call sequences are compared call by call in crates/core/tests.

use scen_core::scenario::{load_file, Scenario};
use scen_core::trace::EventKind;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

fn golden() -> BTreeMap<String, Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/core/testdata/sglang_groups.json"
    );
    let text = std::fs::read_to_string(path).expect("golden JSON readable");
    let all: BTreeMap<String, Value> = serde_json::from_str(&text).expect("golden JSON parses");
    all.into_iter().filter(|(k, _)| k != "_meta").collect()
}

fn scenario(file: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(file);
    load_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Per rank, the `done` text of the step with id `step_id`.
fn done_texts(s: &Scenario, step_id: &str) -> Vec<String> {
    let step = s
        .steps
        .iter()
        .find(|st| st.id.as_deref() == Some(step_id))
        .unwrap_or_else(|| panic!("{}: no step `{step_id}`", s.file))
        .index;
    let r = scen_sim::simulate(s, None).expect("simulation runs");
    (0..s.world.size())
        .map(|rank| {
            r.trace
                .events
                .iter()
                .find(|e| e.rank == Some(rank) && e.step == Some(step) && e.kind == EventKind::Done)
                .unwrap_or_else(|| panic!("{}: rank {rank} never finished `{step_id}`", s.file))
                .text
                .clone()
        })
        .collect()
}

/// `... groups cfg=[0, 4] dit=[0, 1] ...` -> {"cfg": [0, 4], "dit": [0, 1]}.
fn groups_of(done: &str) -> BTreeMap<String, Vec<usize>> {
    let (_, list) = done.split_once("groups ").expect("groups in the done text");
    list.split("] ")
        .map(|part| {
            let (kind, ranks) = part.split_once("=[").expect("kind=[ranks]");
            let ranks = ranks
                .trim_end_matches(']')
                .split(", ")
                .map(|r| r.parse().expect("rank"))
                .collect();
            (kind.to_string(), ranks)
        })
        .collect()
}

fn calls_in(done: &str) -> usize {
    let (head, _) = done.split_once(" new_group calls").expect("call count");
    head.rsplit(' ').next().unwrap().parse().expect("count")
}

fn ranks(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("rank list")
        .iter()
        .map(|r| r.as_u64().expect("rank") as usize)
        .collect()
}

#[test]
fn golden_configs_give_every_rank_its_golden_groups_r1_r4() {
    let golden = golden();
    assert_eq!(golden.len(), 6, "six golden configs");
    for (key, entry) in &golden {
        let s = scenario(&format!("sglang_golden_{key}.toml"));
        let done = done_texts(&s, "model_parallel");
        let want_calls = entry["new_group_call_sequence_newest"]
            .as_array()
            .expect("sequence")
            .len();
        for (rank, text) in done.iter().enumerate() {
            // The world coordinator's 2 calls are made by init_distributed_environment.
            assert_eq!(calls_in(text) + 2, want_calls, "{key} rank {rank}: {text}");
            let got = groups_of(text);
            let per_rank = entry["per_rank"][rank.to_string()]
                .as_object()
                .expect("per_rank entry");
            for (kind, m) in per_rank {
                assert_eq!(
                    got.get(kind),
                    Some(&ranks(&m["ranks"])),
                    "{key} rank {rank} group {kind}: {text}"
                );
            }
        }
    }
}

#[test]
fn v0_legacy_split_puts_tp_pairs_in_ulysses_groups_r11() {
    let golden = golden();
    let legacy = &golden["w8_tp2_u2_r1_cfg2"]["legacy_yunchang_usp_split"]["ulysses"];
    let legacy: Vec<Vec<usize>> = legacy.as_array().unwrap().iter().map(ranks).collect();
    let s = scenario("sglang_v0_tp2_ulysses_mixed.toml");
    for (rank, text) in done_texts(&s, "model_parallel").iter().enumerate() {
        let got = &groups_of(text)["ulysses"];
        assert!(got.contains(&rank), "rank {rank} in its Ulysses group");
        assert!(
            legacy.contains(got),
            "rank {rank}: {got:?} is a legacy group"
        );
        // The V2 split would have given the rank its SP group instead (R11).
        assert_ne!(got, &groups_of(text)["sp"], "rank {rank}: {text}");
    }
}

#[test]
fn v0_golden_configs_follow_the_legacy_sequence_and_split() {
    for (key, entry) in &golden() {
        let s = scenario(&format!("sglang_v0_golden_{key}.toml"));
        let want_calls = entry["new_group_call_sequence_legacy_initial"]
            .as_array()
            .expect("legacy sequence")
            .len();
        let legacy = &entry["legacy_yunchang_usp_split"];
        for (rank, text) in done_texts(&s, "model_parallel").iter().enumerate() {
            assert_eq!(calls_in(text) + 2, want_calls, "{key} rank {rank}: {text}");
            let got = groups_of(text);
            for (kind, m) in entry["per_rank"][rank.to_string()].as_object().unwrap() {
                let want = match kind.as_str() {
                    // yunchang's contiguous split (R11); the rank keeps the list containing it.
                    "ulysses" | "ring" => legacy[kind]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(ranks)
                        .rfind(|l| l.contains(&rank))
                        .expect("rank in a legacy group"),
                    // V2-only coordinators do not exist in V0.
                    "replica" | "encoder_dp" | "vae_decode" => continue,
                    _ => ranks(&m["ranks"]),
                };
                assert_eq!(
                    got.get(kind),
                    Some(&want),
                    "{key} rank {rank} {kind}: {text}"
                );
            }
        }
    }
}

/// The fixture real sglang 0.5.23 made (scripts/sglang-groups-fixture.sh).
fn real_0_5_23() -> BTreeMap<String, Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/core/testdata/sglang_0.5.23_groups.json"
    );
    let text = std::fs::read_to_string(path).expect("fixture readable");
    let all: BTreeMap<String, Value> = serde_json::from_str(&text).expect("fixture parses");
    all.into_iter().filter(|(k, _)| k != "_meta").collect()
}

#[test]
fn release_0_5_23_scenarios_give_every_rank_real_sglangs_groups() {
    let real = real_0_5_23();
    assert_eq!(real.len(), 6, "six golden configs");
    for (key, entry) in &real {
        let s = scenario(&format!("sglang_0523_golden_{key}.toml"));
        let want_calls = entry["new_group_calls"].as_array().expect("calls").len();
        for (rank, text) in done_texts(&s, "model_parallel").iter().enumerate() {
            // The world coordinator's 2 calls are made by init_distributed_environment.
            assert_eq!(calls_in(text) + 2, want_calls, "{key} rank {rank}: {text}");
            let got = groups_of(text);
            let kinds = entry["per_rank"][rank.to_string()].as_object().unwrap();
            let want: BTreeMap<String, Vec<usize>> = kinds
                .iter()
                .map(|(k, g)| (k.clone(), ranks(&g["ranks"])))
                .collect();
            assert_eq!(got, want, "{key} rank {rank}: {text}");
        }
    }
}
