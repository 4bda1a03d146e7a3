//! Unit tests of the translation: public-API calls, time scale, env faults, real sglang's
//! start-up calls, and every translatable shipped scenario compiling as Python.

use super::*;
use scen_core::scenario::{load_file, parse};
use std::path::Path;

const SRC: &str = "[world]\nranks_per_node = 2\nplatform = \"cpu\"\n\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\ntimeout_s = 60\n\n[[step]]\nop = \"all_reduce\"\non = \"rank == 1\"\nreduce_op = \"max\"\nfill = \"rank * 10 + i\"\nexpect = \"10 + i\"\n";

#[test]
fn steps_become_public_api_calls_under_their_scenario_lines() {
    let s = parse(SRC, "t.toml", "t").expect("parses");
    let p = program(&s, Some(SRC), &Endpoints::default());
    assert!(p.contains("dist.init_process_group(backend=\"gloo\", timeout=ms(60000))"));
    assert!(p.contains("if float(rank == 1.0) != 0:"));
    assert!(p.contains("dist.all_reduce(t, op=OPS[\"max\"], group=G)"));
    assert!(p.contains("    # op = \"all_reduce\""));
    assert!(p.contains("formula(\"((rank * 10.0) + i)\")"));
    assert!(p.contains("run(main)"));
}

#[test]
fn file_init_methods_move_under_the_run_directory() {
    let src = SRC.replace(
        "timeout_s = 60\n",
        "init_method = \"file:///tmp/s/f\"\nrank = \"rank\"\nworld_size = 2\n",
    );
    let s = parse(&src, "t.toml", "t").expect("parses");
    assert_eq!(crate::eligible::check(&s), Ok(()));
    let p = program(&s, None, &Endpoints::default());
    assert!(
        p.contains("init_method=file_url(\"file:///tmp/s/f\")"),
        "{p}"
    );
    assert!(p.contains("def file_url(u):"));
}

#[test]
fn time_scale_makes_default_timeouts_explicit() {
    let src = SRC.replace("timeout_s = 60\n", "");
    let mut s = parse(&src, "t.toml", "t").expect("parses");
    s.scale_times(scen_core::scenario::TimeScale { num: 1, den: 600 });
    let p = program(&s, None, &Endpoints::default());
    assert!(p.contains("dist.init_process_group(backend=\"gloo\", timeout=ms(3000))"));
    assert!(p.contains("scaled by 1/600"));
}

#[test]
fn env_faults_on_torchrun_vars_and_expect_ulps_reach_the_program() {
    let src = format!(
        "{}expect_ulps = 2\n\n[[faults]]\nkind = \"env\"\non = [0]\nenv = {{ WORLD_SIZE = \"3\" }}\n",
        SRC
    );
    let mut s = parse(&src, "t.toml", "t").expect("parses");
    scen_core::scenario::fault::apply_env(&mut s);
    let p = program(&s, None, &Endpoints::default());
    // Only rank 0's WORLD_SIZE differs from what torchrun gives; rank 1 has no overrides.
    assert!(p.contains("    0: {\"WORLD_SIZE\": \"3\"},\n}"), "{p}");
    assert!(p.contains("expected(\"(10.0 + i)\", 2)"), "{p}");
    assert!(p.contains("\"bf16\": (7, -126)"));
}

#[test]
fn sglang_0_5_23_start_up_calls_real_sglang() {
    let src = "[world]\nranks_per_node = 2\nplatform = \"cpu\"\n\n[[step]]\nop = \"init_distributed_environment\"\nversion = \"0.5.23\"\n\n[[step]]\nop = \"initialize_model_parallel\"\ncfg = 2\n";
    let mut s = parse(src, "t.toml", "t").expect("parses");
    assert!(crate::eligible::check(&s).is_ok());
    s.scale_times(scen_core::scenario::TimeScale { num: 1, den: 600 });
    let p = program(&s, Some(src), &Endpoints::default());
    assert!(p.contains("from sglang.multimodal_gen.runtime.distributed import parallel_state"));
    assert!(p.contains(
        "sglang_init_distributed_environment(st, expand_env(\"tcp://${MASTER_ADDR}:${MASTER_PORT}\"), 3000 / 1000)"
    ), "{p}");
    assert!(p.contains(
        "sglang_initialize_model_parallel(st, tp=1, ulysses=1, ring=1, sp=1, cfg=2, dp=1, pp=1, vae=0)"
    ));
    // The models of older code are not what any installed sglang runs.
    let v2 = parse(&src.replace("0.5.23", "v2"), "t.toml", "t").expect("parses");
    let why = crate::eligible::check(&v2).unwrap_err();
    assert!(
        matches!(
            why,
            crate::eligible::Ineligible::Step {
                why: crate::eligible::StepIneligible::SglangVersion("v2"),
                ..
            }
        ),
        "{why}"
    );
}

/// Every shipped scenario the translation accepts gives a program Python can compile.
#[test]
fn every_translatable_scenario_compiles_as_python() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let out = std::env::temp_dir().join(format!("scen-translate-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("temp dir");
    let mut files = Vec::new();
    for e in std::fs::read_dir(&dir).expect("scenarios/").flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let s = load_file(&p).expect("loads");
        if crate::eligible::check_translatable(&s).is_err() {
            continue;
        }
        let text = std::fs::read_to_string(&p).ok();
        let f = out.join(format!("{}.py", s.name));
        std::fs::write(&f, program(&s, text.as_deref(), &Endpoints::default())).expect("write");
        files.push(f);
    }
    assert!(files.len() >= 30, "only {} translatable", files.len());
    let status = std::process::Command::new("python3")
        .arg("-m")
        .arg("py_compile")
        .args(&files)
        .status();
    let _ = std::fs::remove_dir_all(&out);
    match status {
        Ok(st) => assert!(st.success(), "python3 -m py_compile failed"),
        Err(e) => println!("skip: python3 not found ({e}); programs not compiled"),
    }
}

#[test]
fn raise_steps_become_real_raises_with_the_text_python_prints() {
    let src = "[world]\nranks_per_node = 1\nplatform = \"cpu\"\n\n[[step]]\nop = \"raise\"\nerror = \"ValueError: bad \\\"shape\\\"\"\n\n[[step]]\nop = \"raise\"\nerror = \"AssertionError\"\n\n[[step]]\nop = \"raise\"\nerror = \"KeyError: 'x'\"\n\n[[step]]\nop = \"raise\"\nerror = \"ShapeError: 3 != 4\"\n";
    let s = parse(src, "t.toml", "t").expect("parses");
    let p = program(&s, Some(src), &Endpoints::default());
    assert!(p.contains("raise ValueError(\"bad \\\"shape\\\"\")"), "{p}");
    assert!(p.contains("raise AssertionError()"));
    // KeyError's str() is a repr and ShapeError is the program's own: the prelude makes them.
    assert!(p.contains("raise exception(\"KeyError\", \"'x'\")"));
    assert!(p.contains("raise exception(\"ShapeError\", \"3 != 4\")"));
}
