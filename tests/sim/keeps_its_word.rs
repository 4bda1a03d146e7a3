//! The simulator keeps its word (issues 25 and 31): the virtual time one denoise step's
//! communication takes in a scenario under `[world.links] model = "model.toml"` equals what
//! `scen bench --pattern wan-ulysses|flux-tp|cfg` predicts for the same configuration and model
//! (through the same core functions: `perf::pattern::build`, `ModelFile::predict_us` with the
//! device path's link class and library from `perf::plan`, `perf::pattern::step_us`), within
//! 5 %, for each class of model a user has: the built-in defaults (a fast device fabric), a
//! CPU-like link, a slow hand-written one, and one `scen bench --hw --calibrate` fitted on real
//! oneCCL with per-op `[[ops]]` costs (tests/fixtures/models/calibrated.toml).
//!
//! The step is the pattern's collectives as sglang issues them over its group (Ulysses'
//! `all_to_all_4D` pairs per layer, TP's all_reduces and embedding all_gather, CFG's broadcast
//! and all_gather). Its virtual time is the run's end with the step minus the run's end without
//! it (same start-up, same final barrier), in microseconds.

use scen_core::perf::model::{LinkClass, ModelFile};
use scen_core::perf::pattern::{self, PatternKind, PatternParams};
use scen_core::perf::plan::{library, link_class};
use scen_core::scenario::parse;

/// The model classes: (name, model file text).
fn models() -> Vec<(&'static str, String)> {
    let calibrated = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/models/calibrated.toml"),
    )
    .expect("the calibrated fixture (scripts/make-model-fixture.sh)");
    vec![
        ("defaults", String::new()),
        (
            "cpu-like",
            "[links.intra]\nalpha_us = 100.0\nbeta_gbps = 1.0\n".into(),
        ),
        (
            "slow",
            "[links.intra]\nalpha_us = 500.0\nbeta_gbps = 0.01\n".into(),
        ),
        ("calibrated", calibrated),
    ]
}

fn params() -> PatternParams {
    PatternParams {
        seq: 1024,
        heads: 4,
        head_dim: 64,
        hidden: 256,
        layers: 2,
        text_len: 16,
        elem_bytes: 2,
    }
}

/// The scenario: sglang start-up with `degrees` (e.g. `ulysses = 2`) on one node of `ranks`, a
/// warm-up all_reduce on `group` (its communicator is made on first use, as in the benchmark's
/// warm-up iterations), the step's collectives (`step`) when `with_step`, a barrier.
fn scenario(ranks: usize, degrees: &str, group: &str, step: &str, with_step: bool) -> String {
    let mut s = format!(
        "[world]\nranks_per_node = {ranks}\nplatform = \"xpu\"\n\n[world.links]\nmodel = \"model.toml\"\n\n[sim]\npayloads = \"symbolic\"\n\n[[step]]\nop = \"init_distributed_environment\"\nversion = \"v2\"\n\n[[step]]\nop = \"initialize_model_parallel\"\n{degrees}\n"
    );
    s += &format!("\n[[step]]\nop = \"all_reduce\"\ngroup = \"{group}\"\nshape = [1]\n");
    if with_step {
        s += step;
    }
    s += "\n[[step]]\nop = \"barrier\"\n\n[[expect]]\noutcome = \"completes\"\n";
    s
}

fn end_ms(dir: &std::path::Path, name: &str, text: &str) -> u64 {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let s = parse(text, path.to_str().unwrap(), name).unwrap_or_else(|e| panic!("{e}"));
    let r = scen_sim::simulate(&s, Some(0)).expect("runs");
    assert!(r.expectations_hold(), "{name}: {:?}", r.ranks);
    r.end_us
}

/// The pattern's collectives as scenario steps, each `per_step` times, in the order sglang
/// issues them (per layer for the per-layer ones).
fn steps(kind: PatternKind, p: &PatternParams) -> String {
    let step = |body: String| format!("\n[[step]]\n{body}dtype = \"bf16\"\n");
    let mut s = String::new();
    match kind {
        PatternKind::WanUlysses { ulysses: u } => {
            for _ in 0..p.layers {
                s += &step(format!(
                    "op = \"all_to_all_4d\"\ngroup = \"ulysses\"\nshape = [3, {}, {}, {}]\nscatter_dim = 2\ngather_dim = 1\n",
                    p.seq, p.heads, p.head_dim
                ));
                s += &step(format!(
                    "op = \"all_to_all_4d\"\ngroup = \"ulysses\"\nshape = [1, {}, {}, {}]\nscatter_dim = 1\ngather_dim = 2\n",
                    p.seq * u,
                    p.heads / u,
                    p.head_dim
                ));
            }
        }
        PatternKind::FluxTp { tp } => {
            s += &step(format!(
                "op = \"all_gather\"\ngroup = \"tp\"\nshape = [{}, {}]\n",
                p.seq,
                p.hidden / tp
            ));
            for _ in 0..2 * p.layers {
                s += &step(format!(
                    "op = \"all_reduce\"\ngroup = \"tp\"\nshape = [{}, {}]\n",
                    p.seq, p.hidden
                ));
            }
        }
        PatternKind::Cfg { .. } => {
            s += &step(format!(
                "op = \"broadcast\"\ngroup = \"cfg\"\nsrc = 0\nshape = [{}, {}]\n",
                p.text_len, p.hidden
            ));
            s += &step(format!(
                "op = \"all_gather\"\ngroup = \"cfg\"\nshape = [{}, {}]\n",
                p.seq, p.hidden
            ));
        }
    }
    s
}

/// Simulated and predicted milliseconds of one denoise step of `kind` on one node.
fn step_ms(
    dir: &std::path::Path,
    model: &ModelFile,
    kind: PatternKind,
    degrees: &str,
    group: &str,
) -> (f64, f64) {
    let p = params();
    // What `scen bench --pattern ... --nnodes 1` predicts (the xccl path: oneCCL's selection).
    let pat = pattern::build(kind, &p).unwrap();
    let class = link_class(false, 1);
    assert_eq!(class, LinkClass::Intra);
    let lib = library(false, None, true).unwrap();
    let op_us: Vec<f64> = pat
        .ops
        .iter()
        .map(|o| model.predict_us(o.op, o.size_bytes, pat.ranks, class, lib))
        .collect();
    let predicted_ms = pattern::step_us(&pat, &op_us) / 1e3;
    let name = format!("{}_{}", pat.name, pat.ranks);
    let body = steps(kind, &p);
    let with = end_ms(
        dir,
        &format!("{name}_with.toml"),
        &scenario(pat.ranks, degrees, group, &body, true),
    );
    let without = end_ms(
        dir,
        &format!("{name}.toml"),
        &scenario(pat.ranks, degrees, group, &body, false),
    );
    (with.saturating_sub(without) as f64 / 1e3, predicted_ms)
}

#[test]
fn denoise_step_time_matches_bench_prediction() {
    let dir = std::env::temp_dir().join(format!("scen-keeps-its-word-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut bad = Vec::new();
    for (model_name, text) in models() {
        std::fs::write(dir.join("model.toml"), &text).unwrap();
        let model = ModelFile::parse("model.toml", &text).unwrap();
        for (kind, degrees, group) in [
            (
                PatternKind::WanUlysses { ulysses: 2 },
                "ulysses = 2",
                "ulysses",
            ),
            (
                PatternKind::WanUlysses { ulysses: 4 },
                "ulysses = 4",
                "ulysses",
            ),
            (PatternKind::FluxTp { tp: 2 }, "tp = 2", "tp"),
            (PatternKind::Cfg { cfg: 2 }, "cfg = 2", "cfg"),
        ] {
            let (sim_ms, predicted_ms) = step_ms(&dir, &model, kind, degrees, group);
            let err = (sim_ms - predicted_ms) / predicted_ms;
            let line = format!(
                "{model_name} {kind:?}: the simulator's step takes {sim_ms:.3} ms, scen bench predicts {predicted_ms:.3} ms ({:+.2} %)",
                err * 100.0
            );
            eprintln!("{line}");
            if err.abs() > 0.05 {
                bad.push(line);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(bad.is_empty(), "{bad:#?}");
}
