//! sglang's all-to-all steps with symbolic payloads (issue 31 item 2): `all_to_all_4d` and
//! `usp_all_to_all` follow `[sim] payloads`, so the shapes real models use (Wan's
//! [3, 4096, 16, 64], over the 2^22-element limit of values) load and run per message, with the
//! same message schedule as values: same verdicts, events and virtual times, only done texts
//! differ.

use super::common::events_without_results;
use scen_core::report::Report;
use scen_core::scenario::{parse, Scenario};
use scen_core::trace::EventKind;
use std::path::Path;

/// Scenarios with sglang all-to-all steps whose values nothing but the step itself checks.
const SCENARIOS: [&str; 3] = [
    "sglang_golden_w8_tp1_u2_r2_cfg2_dp1",
    "fault_sglang_w8_crash_in_ulysses_all_to_all",
    "sglang_v0_xpu_gloo_world",
];

fn load(text: &str, name: &str) -> Result<Scenario, String> {
    parse(text, &format!("{name}.toml"), name).map_err(|e| e.to_string())
}

fn run(s: &Scenario) -> Report {
    scen_sim::simulate(s, None).unwrap_or_else(|e| panic!("{}: {e}", s.name))
}

fn symbolic(text: &str) -> String {
    format!("{text}\n[sim]\npayloads = \"symbolic\"\n")
}

#[test]
fn symbolic_all_to_alls_run_the_same_schedule_as_values() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut symbolic_a2a = 0;
    for name in SCENARIOS {
        let text = std::fs::read_to_string(root.join(format!("{name}.toml"))).expect("read");
        assert!(!text.contains("[sim]"), "{name}: has its own [sim]");
        let v = run(&load(&text, name).unwrap());
        let s = run(&load(&symbolic(&text), name).unwrap());
        assert_eq!(format!("{:?}", v.ranks), format!("{:?}", s.ranks), "{name}");
        assert_eq!(v.end_ms, s.end_ms, "{name}: virtual end time");
        assert_eq!(
            events_without_results(&v),
            events_without_results(&s),
            "{name}: events"
        );
        let a2a_done = |r: &Report, what: &str| {
            r.trace
                .events
                .iter()
                .filter(|e| e.kind == EventKind::Done && e.text.contains("over group"))
                .filter(|e| e.text.contains(what))
                .count()
        };
        let n = a2a_done(&s, "symbolic, digest ");
        assert_eq!(n, a2a_done(&v, "values as expected"), "{name}");
        symbolic_a2a += n;
    }
    assert!(symbolic_a2a >= 8, "{symbolic_a2a} symbolic all-to-alls");
}

/// Wan 2.1's Ulysses tensor at `scen bench --pattern wan-ulysses`'s default shape.
fn wan(payloads: &str) -> String {
    format!(
        "[world]\nranks_per_node = 2\nplatform = \"xpu\"\n\n[sim]\npayloads = \"{payloads}\"\n\n\
         [[step]]\nop = \"init_distributed_environment\"\n\n\
         [[step]]\nop = \"initialize_model_parallel\"\nulysses = 2\n\n\
         [[step]]\nop = \"all_to_all_4d\"\ngroup = \"ulysses\"\nshape = [3, 4096, 16, 64]\n\n\
         [[step]]\nop = \"all_to_all_4d\"\ngroup = \"ulysses\"\nshape = [1, 8192, 8, 64]\nscatter_dim = 1\ngather_dim = 2\n\n\
         [[step]]\nop = \"barrier\"\n"
    )
}

#[test]
fn wan_shapes_run_with_symbolic_payloads_and_values_keep_their_limit() {
    let r = run(&load(&wan("symbolic"), "wan").unwrap());
    assert!(
        r.ranks.iter().all(|r| r.kind() == "completes"),
        "{:?}",
        r.ranks
    );
    let done = r.trace.events.iter().filter(|e| {
        e.kind == EventKind::Done && e.text.contains("[3, 4096, 16, 64] -> [3, 8192, 8, 64]")
    });
    assert_eq!(done.count(), 2, "both ranks ran the qkv all-to-all");
    // 48 MiB per rank through the intra-node link: virtual time is charged for the bytes.
    assert!(r.end_ms > 1, "{} ms", r.end_ms);
    let e = load(&wan("values"), "wan").unwrap_err();
    assert!(
        e.contains("over 2^22 elements") && e.contains("symbolic"),
        "{e}"
    );
    let over = wan("symbolic").replace("[3, 4096, 16, 64]", "[2, 65536, 64, 64]");
    let e = load(&over, "wan").unwrap_err();
    assert!(e.contains("over scen's limit of 2^28 elements"), "{e}");
}
