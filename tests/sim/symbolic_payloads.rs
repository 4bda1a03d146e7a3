//! Symbolic payloads (`[sim] payloads = "symbolic"`, crates/core/src/payload.rs) must run the
//! same message schedule as values: for scenarios whose values nobody checks, every rank's
//! verdict, every error and warning, who is stuck and every event's virtual time are the same;
//! only the done texts differ (a size and a digest instead of values). Also: the loader's
//! choice between values and symbolic, its errors, and digests equal across ranks.

use super::common::events_without_results;
use scen_core::report::Report;
use scen_core::scenario::{parse, Payloads, Scenario};
use scen_core::trace::EventKind;
use std::path::Path;

/// Scenarios covering all_reduce, reduce, broadcast, all_gather, reduce_scatter, all_to_all,
/// gather, scatter, coalesced ops, p2p and batch p2p, async works, hangs, mismatches, crashes,
/// timeouts, gloo and xccl.
const SCENARIOS: [&str; 16] = [
    "collectives_gloo_cpu_w3",
    "collectives_xccl_w4",
    "gloo_gather_scatter_w3",
    "gloo_reduce_scatter_w2",
    "gloo_all_to_all_uneven_w3",
    "gloo_coalesced_w2",
    "gloo_send_recv",
    "gloo_batch_isend_irecv_ring_w4",
    "all_to_all_single_split_mismatch_xccl",
    "async_op_hang_moves_to_wait",
    "mismatch_shape_gloo",
    "mismatch_dtype_xccl",
    "missing_rank_all_reduce",
    "fault_crash_in_allreduce_gloo",
    "p2p_size_mismatch_xccl",
    "gloo_all_reduce_timeout",
];

/// 1 MiB messages across two nodes: virtual times depend on the bytes charged per message.
const LARGE_MESSAGES: &str = r#"
[world]
nodes = 2
ranks_per_node = 2
platform = "xpu"

[[step]]
op = "init_process_group"
backend = "xccl"

[[step]]
op = "all_reduce"
shape = [1048576]
fill = "rank + i"

[[step]]
op = "all_gather_into_tensor"
shape = [262144]
fill = "rank"

[[step]]
op = "broadcast"
src = 1
shape = [524288]
fill = "i"

[[step]]
op = "reduce_scatter_tensor"
shape = [262144]
fill = "rank"

[[step]]
op = "all_to_all_single"
shape = [1048576]
fill = "i"
"#;

#[test]
fn symbolic_charges_the_same_bytes_as_values_for_large_messages() {
    let values = load(LARGE_MESSAGES, "large");
    let symbolic = load(&with_payloads(LARGE_MESSAGES, "symbolic"), "large");
    let small = load(
        &LARGE_MESSAGES
            .replace("[1048576]", "[8]")
            .replace("[262144]", "[8]")
            .replace("[524288]", "[8]"),
        "small",
    );
    let (v, s, tiny) = (run(&values, None), run(&symbolic, None), run(&small, None));
    assert!(
        v.ranks.iter().all(|r| r.kind() == "completes"),
        "{:?}",
        v.ranks
    );
    assert!(
        v.end_us > tiny.end_us + 100,
        "1 MiB messages take virtual time: {} us, against {} us with 8 elements",
        v.end_us,
        tiny.end_us
    );
    assert_eq!(v.end_us, s.end_us);
    assert_eq!(events_without_results(&v), events_without_results(&s));
}

/// The scenario's text without its steps' `expect`/`expect_ulps` lines.
fn without_expects(text: &str) -> String {
    text.lines()
        .filter(|l| {
            let t = l.trim_start();
            !(t.starts_with("expect =") || t.starts_with("expect=") || t.starts_with("expect_ulps"))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `text` with `[sim] payloads = "<kind>"`.
fn with_payloads(text: &str, kind: &str) -> String {
    let line = format!("payloads = \"{kind}\"");
    if text.lines().any(|l| l.trim() == "[sim]") {
        text.replacen("[sim]\n", &format!("[sim]\n{line}\n"), 1)
    } else {
        format!("{text}\n[sim]\n{line}\n")
    }
}

fn load(text: &str, name: &str) -> Scenario {
    parse(text, &format!("{name}.toml"), name).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn run(s: &Scenario, seed: Option<u64>) -> Report {
    scen_sim::simulate(s, seed).unwrap_or_else(|e| panic!("{}: {e}", s.name))
}

#[test]
fn symbolic_runs_the_same_schedule_as_values_on_scenarios_without_expect() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut symbolic_results = 0;
    for name in SCENARIOS {
        let text = std::fs::read_to_string(root.join(format!("{name}.toml"))).expect("read");
        let plain = without_expects(&text);
        let values = load(&plain, name);
        assert_eq!(values.sim.payloads, Payloads::Values, "{name}");
        let symbolic = load(&with_payloads(&plain, "symbolic"), name);
        assert!(symbolic.sim.payloads.symbolic(), "{name}");
        let (v, s) = (run(&values, None), run(&symbolic, None));
        assert_eq!(
            format!("{:?}", v.ranks),
            format!("{:?}", s.ranks),
            "{name}: verdicts"
        );
        assert_eq!(
            format!("{:?}", v.first_stall),
            format!("{:?}", s.first_stall),
            "{name}: first stall"
        );
        assert_eq!(
            format!("{:?}", v.final_stall),
            format!("{:?}", s.final_stall),
            "{name}: final stall"
        );
        assert_eq!(v.end_ms, s.end_ms, "{name}: virtual end time");
        assert_eq!(
            events_without_results(&v),
            events_without_results(&s),
            "{name}: events"
        );
        let sym_done = s
            .trace
            .events
            .iter()
            .filter(|e| e.kind == EventKind::Done && e.text.contains("symbolic, digest "))
            .count();
        let val_done = v
            .trace
            .events
            .iter()
            .filter(|e| e.kind == EventKind::Done && e.text.contains("digest "))
            .count();
        assert_eq!(sym_done, val_done, "{name}: every result is symbolic");
        symbolic_results += sym_done;
        assert!(
            s.notes.iter().any(|n| n.starts_with("payloads: symbolic")),
            "{name}: {:?}",
            s.notes
        );
    }
    assert!(symbolic_results > 50, "{symbolic_results} symbolic results");
}

/// The done texts of step `step` (0-based), by rank.
fn done_texts(r: &Report, step: usize) -> Vec<String> {
    r.trace
        .events
        .iter()
        .filter(|e| e.kind == EventKind::Done && e.step == Some(step))
        .map(|e| e.text.clone())
        .collect()
}

const FIVE_RANKS: &str = r#"
[world]
nodes = 1
ranks_per_node = 5
platform = "cpu"

[[step]]
op = "init_process_group"
backend = "gloo"

[[step]]
op = "all_reduce"
shape = [7, 3]
fill = "rank * 10 + i"

[[step]]
op = "broadcast"
src = 3
shape = [11]
fill = "rank + i"

[[step]]
op = "all_gather"
shape = [2]
fill = "rank"

[[step]]
op = "all_reduce"
reduce_op = "max"
shape = [7, 3]
fill = "rank * 10 + i"

[sim]
payloads = "symbolic"
"#;

#[test]
fn every_rank_of_an_all_reduce_broadcast_or_all_gather_gets_one_digest() {
    let s = load(FIVE_RANKS, "five");
    let r = run(&s, None);
    let mut firsts = Vec::new();
    for step in 1..=4 {
        let texts = done_texts(&r, step);
        assert_eq!(texts.len(), 5, "step {step}: {texts:?}");
        assert!(texts[0].contains("symbolic, digest "), "{}", texts[0]);
        assert!(
            texts.iter().all(|t| *t == texts[0]),
            "step {step}: {texts:?}"
        );
        firsts.push(texts[0].clone());
    }
    assert!(
        firsts[0].starts_with("[21 x f32] symbolic, digest "),
        "{}",
        firsts[0]
    );
    // A max over the same inputs is another result than a sum.
    assert_ne!(firsts[0], firsts[3]);
}

#[test]
fn same_seed_gives_the_same_trace_hash_with_symbolic_payloads() {
    let s = load(FIVE_RANKS, "five");
    for seed in [0, 3] {
        assert_eq!(
            run(&s, Some(seed)).trace_hash,
            run(&s, Some(seed)).trace_hash,
            "seed {seed}"
        );
    }
}

/// 8 ranks x all_reduce of 32 Mi f32 (128 MiB): 2 GiB of tensors over all ranks, twice the
/// limit. Symbolic payloads never allocate them, so this runs in a debug build in moments.
fn big_world(expect: bool, payloads: Option<&str>) -> String {
    let mut t = String::from(
        r#"
[world]
nodes = 2
ranks_per_node = 4
platform = "xpu"

[[step]]
op = "init_process_group"
backend = "xccl"

[[step]]
op = "all_reduce"
shape = [33554432]
fill = "rank"
"#,
    );
    if expect {
        t.push_str("expect = \"28\"\n");
    }
    if let Some(p) = payloads {
        t.push_str(&format!("\n[sim]\npayloads = \"{p}\"\n"));
    }
    t
}

#[test]
fn a_world_over_the_tensor_limit_without_expect_runs_symbolic_with_a_note() {
    let s = load(&big_world(false, None), "big");
    assert_eq!(
        s.sim.payloads,
        Payloads::Symbolic {
            auto_total_bytes: Some(2 << 30)
        }
    );
    let r = run(&s, None);
    assert!(
        r.ranks.iter().all(|v| v.kind() == "completes"),
        "{:?}",
        r.ranks
    );
    assert!(
        r.notes.contains(
            &"payloads: symbolic (tensors would need 2.0 GiB over all ranks, over the 1.0 GiB limit; values are not computed)".to_string()
        ),
        "{:?}",
        r.notes
    );
    let texts = done_texts(&r, 1);
    assert_eq!(texts.len(), 8);
    assert!(texts.iter().all(|t| *t == texts[0]), "{texts:?}");
    assert!(
        texts[0].starts_with("[33554432 x f32] symbolic, digest "),
        "{}",
        texts[0]
    );
    // Explicit symbolic: the same run, without the over-limit note.
    let explicit = load(&big_world(false, Some("symbolic")), "big");
    let e = run(&explicit, None);
    assert_eq!(e.end_ms, r.end_ms);
    assert_eq!(done_texts(&e, 1), texts);
}

#[test]
fn a_world_over_the_tensor_limit_is_refused_when_values_are_checked_or_asked_for() {
    let hint =
        "`[sim] payloads = \"symbolic\"` lifts this limit when no step checks values (`expect`)";
    for (expect, payloads) in [(true, None), (false, Some("values"))] {
        let e = parse(&big_world(expect, payloads), "big.toml", "big").unwrap_err();
        assert_eq!((e.line, e.col), (12, 6), "{e}");
        assert!(
            e.message
                .contains("over scen's limit of 1.0 GiB over all ranks"),
            "{e}"
        );
        assert!(e.message.ends_with(hint), "{e}");
    }
}

#[test]
fn symbolic_payloads_refuse_an_expect_and_a_bad_value_is_located() {
    let e = parse(&big_world(true, Some("symbolic")), "big.toml", "big").unwrap_err();
    assert_eq!((e.line, e.col), (15, 10), "{e}");
    assert!(
        e.message.starts_with(
            "`expect` checks values, which `[sim] payloads = \"symbolic\"` does not compute"
        ),
        "{e}"
    );
    let e = parse(&big_world(false, Some("bytes")), "big.toml", "big").unwrap_err();
    assert_eq!(
        e.to_string(),
        "big.toml:17:12: unknown payloads `bytes` (values, symbolic)"
    );
}

#[test]
fn real_modes_refuse_symbolic_payloads() {
    let s = load(&big_world(false, None), "big");
    let why = s.sim.payloads.real_mode_refusal().expect("refused");
    assert!(
        why.starts_with("its tensors would need 2.0 GiB over all ranks"),
        "{why}"
    );
    let s = load(&big_world(false, Some("symbolic")), "big");
    let why = s.sim.payloads.real_mode_refusal().expect("refused");
    assert!(why.contains("real modes always move real bytes"), "{why}");
    let s = load(
        &big_world(false, Some("values")).replace("33554432", "4"),
        "small",
    );
    assert_eq!(s.sim.payloads.real_mode_refusal(), None);
}

#[test]
fn hardware_mode_refuses_a_symbolic_world_before_starting_anything() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, payloads, want) in [
        (
            "auto.toml",
            None,
            "its tensors would need 2.0 GiB over all ranks",
        ),
        (
            "explicit.toml",
            Some("symbolic"),
            "it sets [sim] payloads = \"symbolic\", which only the simulator has",
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, big_world(false, payloads)).expect("write");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_scen"))
            .args(["run", "--hw"])
            .arg(&path)
            .output()
            .expect("scen runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!(
                "error: this scenario cannot run in hardware mode: {want}"
            )),
            "{err}"
        );
    }
}
