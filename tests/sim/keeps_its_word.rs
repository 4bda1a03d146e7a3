//! The simulator keeps its word (issue 25 item 4): the virtual time one denoise step's
//! communication takes in a scenario under `[world.links] model = "model.toml"` equals what
//! `scen bench --pattern wan-ulysses` predicts for the same configuration and model (through
//! the same core functions: `perf::pattern::build`, `ModelFile::predict_us` with the device
//! path's link class and library, `perf::pattern::step_us`), within 10 %.
//!
//! The step is the pattern's collectives as sglang issues them: per layer the
//! `all_to_all_4D` of `[3, seq, heads, head_dim]` (scatter 2, gather 1) and its inverse of
//! `[seq*u, heads/u, head_dim]` (scatter 1, gather 2) over the Ulysses group. Its virtual time
//! is the run's end with the step minus the run's end without it (start-up and final barrier
//! alike). The model is hand-written (links only), slow enough that a step is hundreds of
//! milliseconds and the simulator's 1 ms tick is noise.

use scen_core::perf::model::{LinkClass, ModelFile};
use scen_core::perf::pattern::{self, PatternKind, PatternParams};
use scen_core::perf::plan::{library, link_class};
use scen_core::scenario::parse;

const MODEL: &str = "[links.intra]\nalpha_us = 500.0\nbeta_gbps = 0.01\n";

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

/// The scenario: sglang start-up with Ulysses `u` on one node, the step's all-to-alls when
/// `with_step`, a barrier.
fn scenario(u: usize, p: &PatternParams, with_step: bool) -> String {
    let mut s = format!(
        "[world]\nranks_per_node = {u}\nplatform = \"xpu\"\n\n[world.links]\nmodel = \"model.toml\"\n\n[sim]\npayloads = \"symbolic\"\n\n[[step]]\nop = \"init_distributed_environment\"\nversion = \"v2\"\n\n[[step]]\nop = \"initialize_model_parallel\"\nulysses = {u}\n"
    );
    if with_step {
        for _ in 0..p.layers {
            s += &format!(
                "\n[[step]]\nop = \"all_to_all_4d\"\ngroup = \"ulysses\"\nshape = [3, {}, {}, {}]\nscatter_dim = 2\ngather_dim = 1\ndtype = \"bf16\"\n",
                p.seq, p.heads, p.head_dim
            );
            s += &format!(
                "\n[[step]]\nop = \"all_to_all_4d\"\ngroup = \"ulysses\"\nshape = [1, {}, {}, {}]\nscatter_dim = 1\ngather_dim = 2\ndtype = \"bf16\"\n",
                p.seq * u,
                p.heads / u,
                p.head_dim
            );
        }
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
    r.end_ms
}

#[test]
fn wan_ulysses_step_time_matches_bench_prediction() {
    let dir = std::env::temp_dir().join(format!("scen-keeps-its-word-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("model.toml"), MODEL).unwrap();
    let model = ModelFile::parse("model.toml", MODEL).unwrap();
    for u in [2usize, 4] {
        let p = params();
        // What `scen bench --pattern wan-ulysses --ulysses u --nnodes 1` predicts (xccl path).
        let pat = pattern::build(PatternKind::WanUlysses { ulysses: u }, &p).unwrap();
        let class = link_class(false, 1);
        assert_eq!(class, LinkClass::Intra);
        let lib = library(false, None, true).unwrap();
        let op_us: Vec<f64> = pat
            .ops
            .iter()
            .map(|o| model.predict_us(o.op, o.size_bytes, pat.ranks, class, lib))
            .collect();
        let predicted_ms = pattern::step_us(&pat, &op_us) / 1e3;
        let with = end_ms(&dir, &format!("with_u{u}.toml"), &scenario(u, &p, true));
        let without = end_ms(&dir, &format!("without_u{u}.toml"), &scenario(u, &p, false));
        let sim_ms = with.saturating_sub(without) as f64;
        let err = (sim_ms - predicted_ms) / predicted_ms;
        eprintln!(
            "wan-ulysses u{u}: sim {sim_ms} ms, bench {predicted_ms:.1} ms, error {:+.1} %",
            err * 100.0
        );
        assert!(
            err.abs() <= 0.10,
            "wan-ulysses u{u}: the simulator's step takes {sim_ms} ms, scen bench predicts {predicted_ms:.1} ms ({:+.1} %)",
            err * 100.0
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
