//! The diagnosis as users read it: each mismatch scenario's report names both ranks, both
//! fingerprints and both scenario lines (docs/rules/c10d.md#r32, with root and reduce op beyond it); the
//! wait-for graph finds the two-group cycle; `--graph` writes well-formed DOT and `--timeline`
//! a Trace Event Format document; a 16-rank hang fits one screen.

use crate::common::scen;
use scen::render::human::render as render_human;
use scen_core::diagnose::check::{Consequence, MismatchKind};
use scen_core::diagnose::CallState;
use scen_core::report::Report;
use scen_core::scenario::{load_file, Scenario};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn run(file: &str) -> (Scenario, Report) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut s = load_file(&root.join(file)).unwrap_or_else(|e| panic!("{e}"));
    s.file = file.to_string();
    let r = scen_sim::simulate(&s, None).expect("simulation runs");
    (s, r)
}

/// The scenario line of the step with `id`, read from the loaded scenario.
fn line_of(s: &Scenario, id: &str) -> usize {
    s.steps
        .iter()
        .find(|st| st.id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no step {id}"))
        .loc
        .line
}

/// The line of the `n`-th step (0-based) whose `on` selects `rank`, among collective steps.
fn nth_call_line(s: &Scenario, rank: usize, n: usize) -> usize {
    let spec = &s.world.ranks[rank];
    s.steps
        .iter()
        .filter(|st| st.on.matches(spec, &s.world))
        .filter(|st| {
            matches!(
                st.kind.op_name(),
                "all_reduce" | "broadcast" | "all_gather" | "barrier" | "send" | "recv"
            )
        })
        .nth(n)
        .expect("call step")
        .loc
        .line
}

/// Checks the first mismatch names both ranks, fingerprints and lines; returns the line text.
fn assert_mismatch(file: &str, a: usize, b: usize, want_aspect: &str, want: Consequence) -> String {
    let (s, r) = run(file);
    let m = r
        .diagnosis
        .mismatches
        .first()
        .unwrap_or_else(|| panic!("{file}: no mismatch found"));
    assert_eq!(m.kind, MismatchKind::Fingerprint, "{file}");
    let bside = m.b.as_ref().expect("two sides");
    assert_eq!((m.a.rank, bside.rank), (a, b), "{file}");
    assert_eq!(m.a.line, nth_call_line(&s, a, 0), "{file}");
    assert_eq!(bside.line, nth_call_line(&s, b, 0), "{file}");
    assert_eq!(m.consequence, want, "{file}");
    let text = m.render(&s.file);
    for needle in [
        format!("rank {a} ran"),
        format!("rank {b} ran"),
        m.a.fp.to_string(),
        bside.fp.to_string(),
        format!("{}:{}", s.file, m.a.line),
        format!("{}:{}", s.file, bside.line),
        want_aspect.to_string(),
    ] {
        assert!(
            text.contains(&needle),
            "{file}: {needle:?} missing in {text}"
        );
    }
    assert_ne!(m.a.fp, bside.fp);
    // The human report carries the same line.
    assert!(render_human(&s, &r).contains(&text));
    text
}

#[test]
fn op_type_mismatch_on_xccl_hangs_and_names_both_calls() {
    let t = assert_mismatch(
        "scenarios/mismatch_op_type_xccl.toml",
        0,
        1,
        "op type: all_reduce vs broadcast",
        Consequence::Hangs,
    );
    let (_, r) = run("scenarios/mismatch_op_type_xccl.toml");
    let real = r.diagnosis.mismatches[0].real();
    assert!(real.starts_with("real xccl: hangs"), "{t}\n{real}");
    assert!(r.ranks.iter().all(|v| v.kind() == "hangs"));
}

#[test]
fn dtype_mismatch_of_equal_width_corrupts_silently() {
    assert_mismatch(
        "scenarios/mismatch_dtype_xccl.toml",
        0,
        1,
        "dtype: f32 vs i32",
        Consequence::CorruptsSilently,
    );
    let (_, r) = run("scenarios/mismatch_dtype_xccl.toml");
    assert!(r.ranks.iter().all(|v| v.kind() == "completes"));
}

#[test]
fn shape_mismatch_on_gloo_errors() {
    assert_mismatch(
        "scenarios/mismatch_shape_gloo.toml",
        0,
        1,
        "shape: [4] vs [8]",
        Consequence::Errors,
    );
    let (_, r) = run("scenarios/mismatch_shape_gloo.toml");
    assert!(r.ranks.iter().all(|v| v.kind() == "fails"));
}

#[test]
fn root_mismatch_is_reported_though_detail_misses_it() {
    assert_mismatch(
        "scenarios/mismatch_root_xccl.toml",
        0,
        3,
        "root: 0 vs 3",
        Consequence::CorruptsOrHangs,
    );
}

#[test]
fn reduce_op_mismatch_is_reported_though_detail_misses_it() {
    assert_mismatch(
        "scenarios/mismatch_reduce_op_xccl.toml",
        0,
        1,
        "reduce op: SUM vs MAX",
        Consequence::CorruptsSilently,
    );
}

#[test]
fn count_mismatch_names_the_extra_call_and_the_absent_rank() {
    let file = "scenarios/mismatch_count_gloo.toml";
    let (s, r) = run(file);
    let m = &r.diagnosis.mismatches[0];
    assert_eq!(m.kind, MismatchKind::Count);
    assert_eq!((m.a.rank, m.absent), (1, Some(0)));
    assert_eq!(m.a.line, line_of(&s, "extra_metric"));
    assert_eq!(m.seq, 2);
    let t = m.render(&s.file);
    assert!(
        t.contains("rank 0 finished its program without calling #2"),
        "{t}"
    );
}

#[test]
fn send_without_recv_is_named_with_its_line() {
    let file = "scenarios/p2p_send_without_recv.toml";
    let (s, r) = run(file);
    let m = &r.diagnosis.mismatches[0];
    assert_eq!(m.kind, MismatchKind::P2pUnmatched);
    assert_eq!((m.a.rank, m.absent, m.seq), (0, Some(1), 2));
    assert_eq!(m.a.line, line_of(&s, "second_send"));
    // gloo's send waits for its recv: real PyTorch 2.15 times it out (not a lost message).
    assert_eq!(m.consequence, Consequence::Hangs);
    assert!(
        m.why.contains("waits until its receiver posts"),
        "{}",
        m.why
    );
    assert_eq!(r.diagnosis.mismatches.len(), 1, "send #1 is matched");
}

#[test]
fn lagging_rank_joined_its_recv_but_never_finished() {
    let (s, r) = run("scenarios/lagging_rank_recv_xccl.toml");
    let h = r.diagnosis.hang.as_ref().expect("a hang");
    let r3 = h.stuck.iter().find(|x| x.rank == 3).expect("rank 3 stuck");
    assert_eq!(r3.line, line_of(&s, "activation"));
    assert_eq!(r3.joined_not_finished, vec![3]);
    assert_eq!(r3.never_joined, vec![2]);
    // NCCL's desync report says "finished #1 but didn't join #2" (R31); scen says it with lines.
    let a3 = h
        .absent
        .iter()
        .find(|a| a.rank == 3)
        .expect("rank 3 absent");
    assert_eq!(a3.call, "all_reduce #2 on WORLD");
    let warmup = nth_call_line(&s, 3, 0);
    assert_eq!(
        a3.last.as_deref(),
        Some(format!("all_reduce #1, completed, line {warmup}").as_str())
    );
    let a2 = h
        .absent
        .iter()
        .find(|a| a.rank == 2)
        .expect("rank 2 absent");
    assert_eq!(a2.call, "recv #2 2->3 on WORLD");
    assert!(a2
        .last
        .as_deref()
        .is_some_and(|l| l.starts_with("send #1, completed")));
    for k in 0..3 {
        let x = h.stuck.iter().find(|x| x.rank == k).expect("stuck");
        assert_eq!(x.never_joined, vec![3], "rank {k}");
        assert_eq!(x.line, line_of(&s, "grads"));
        assert_eq!(x.call.as_ref().map(|c| c.seq), Some(2));
    }
}

#[test]
fn two_group_cycle_is_reported_as_a_cycle() {
    let (s, r) = run("scenarios/two_group_cycle_xccl.toml");
    let h = r.diagnosis.hang.as_ref().expect("a hang");
    assert!(h.cycle.len() >= 3, "{:?}", h.cycle);
    assert_eq!(h.cycle.first(), h.cycle.last());
    let halves: BTreeSet<bool> = h.cycle.iter().map(|r| *r < 2).collect();
    assert_eq!(
        halves.len(),
        2,
        "the cycle crosses both halves: {:?}",
        h.cycle
    );
    let groups: BTreeSet<String> = h
        .stuck
        .iter()
        .filter_map(|x| x.call.as_ref().map(|c| c.group_label.clone()))
        .collect();
    assert_eq!(
        groups,
        BTreeSet::from(["WORLD".to_string(), "dp".to_string()])
    );
    let text = render_human(&s, &r);
    assert!(text.contains("cycle: rank 0"), "{text}");
    assert!(text.contains("ranks 0, 1: stuck in"), "{text}");
}

#[test]
fn snapshot_records_follow_the_flight_recorder_states() {
    let (_, r) = run("scenarios/missing_rank_all_reduce.toml");
    let started: Vec<usize> = r
        .calls
        .iter()
        .filter(|c| c.state == CallState::Started)
        .map(|c| c.rank)
        .collect();
    assert_eq!(started, vec![0, 1, 2]);
    assert!(r.calls.iter().all(|c| c.group == "0"));
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("diagnosis");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A tiny DOT reader: node ids with attributes, and edges with attributes.
struct Dot {
    nodes: BTreeMap<String, String>,
    edges: Vec<(String, String, String)>,
}

fn parse_dot(text: &str) -> Dot {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    assert_eq!(lines.first(), Some(&"digraph scen {"), "{text}");
    assert_eq!(lines.last(), Some(&"}"), "{text}");
    let mut d = Dot {
        nodes: BTreeMap::new(),
        edges: vec![],
    };
    let mut depth = 0;
    for l in &lines[1..lines.len() - 1] {
        if l.starts_with("subgraph cluster_") && l.ends_with('{') {
            depth += 1;
            continue;
        }
        if *l == "}" {
            depth -= 1;
            assert!(depth >= 0, "unbalanced braces");
            continue;
        }
        assert!(
            l.ends_with("];") || l.ends_with(';'),
            "statement ends with ';': {l}"
        );
        let (head, attrs) = match l.find(" [") {
            Some(i) => (&l[..i], &l[i + 2..l.len() - 2]),
            None => (&l[..l.len() - 1], ""),
        };
        // Quotes in attributes are balanced once escaped quotes are removed.
        assert_eq!(attrs.replace("\\\"", "").matches('"').count() % 2, 0, "{l}");
        if let Some((a, b)) = head.split_once(" -> ") {
            d.edges
                .push((a.to_string(), b.to_string(), attrs.to_string()));
        } else if head.starts_with('r') && head[1..].chars().all(|c| c.is_ascii_digit()) {
            d.nodes.insert(head.to_string(), attrs.to_string());
        }
    }
    assert_eq!(depth, 0, "unbalanced braces");
    d
}

#[test]
fn graph_flag_writes_the_cycle_as_dot() {
    let out = tmp("cycle.dot");
    let (code, stdout, err) = scen(&[
        "run",
        "scenarios/two_group_cycle_xccl.toml",
        "--graph",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{err}");
    let d = parse_dot(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(d.nodes.len(), 4);
    for (a, b, _) in &d.edges {
        assert!(
            d.nodes.contains_key(a) && d.nodes.contains_key(b),
            "{a} -> {b}"
        );
    }
    // Every stuck rank waits for the two ranks of the other half that never joined.
    assert_eq!(d.edges.len(), 8);
    assert!(d.edges.iter().all(|(_, _, at)| at.contains("never joined")));
    let red: Vec<(String, String)> = d
        .edges
        .iter()
        .filter(|(_, _, at)| at.contains("color=red"))
        .map(|(a, b, _)| (a.clone(), b.clone()))
        .collect();
    assert!(red.len() >= 2);
    // The red edges close a cycle.
    let (a0, _) = &red[0];
    let mut at = a0.clone();
    for _ in 0..red.len() {
        at = red
            .iter()
            .find(|(a, _)| *a == at)
            .expect("continues")
            .1
            .clone();
    }
    assert_eq!(&at, a0);
}

#[test]
fn timeline_flag_writes_a_trace_event_document() {
    let out = tmp("lagging.json");
    let (code, stdout, err) = scen(&[
        "run",
        "scenarios/lagging_rank_recv_xccl.toml",
        "--timeline",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).expect("valid JSON");
    let evs = v["traceEvents"].as_array().expect("traceEvents array");
    let mut ranks_named = BTreeSet::new();
    let mut flows: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut stuck = 0;
    for e in evs {
        let ph = e["ph"].as_str().expect("ph");
        assert!(e["pid"].is_u64() && e["name"].is_string(), "{e}");
        match ph {
            "M" => {
                if e["name"] == "process_name" {
                    ranks_named.insert(e["pid"].as_u64().unwrap());
                }
            }
            "X" => {
                assert!(
                    e["ts"].is_u64() && e["dur"].is_u64() && e["tid"].is_u64(),
                    "{e}"
                );
                if e["args"]["stuck"] == true {
                    stuck += 1;
                }
            }
            "s" | "f" => {
                assert!(e["ts"].is_u64() && e["id"].is_u64(), "{e}");
                flows
                    .entry(e["id"].as_u64().unwrap())
                    .or_default()
                    .push(ph.to_string());
            }
            "i" => assert!(e["ts"].is_u64()),
            other => panic!("unexpected phase {other}"),
        }
    }
    assert_eq!(ranks_named, (0..4).collect());
    // Four stuck steps and four stuck calls (ranks 0-2 in all_reduce, rank 3 in its recv).
    assert_eq!(stuck, 8);
    // The warm-up activation 2->3 is one flow arrow; the never-sent one has none.
    assert_eq!(flows.len(), 1);
    assert!(flows.values().all(|p| p == &["s", "f"]));
}

#[test]
fn export_to_an_unwritable_path_is_a_clear_error() {
    let (code, _, err) = scen(&[
        "run",
        "scenarios/two_group_cycle_xccl.toml",
        "--graph",
        "/nonexistent-dir/x.dot",
    ]);
    assert_eq!(code, 2);
    // The path the user gave and the OS's reason, not the temporary file's name.
    assert!(
        err.contains("cannot write /nonexistent-dir/x.dot: No such file or directory"),
        "{err}"
    );
}

#[test]
fn a_16_rank_hang_fits_one_screen() {
    let path = tmp("missing16.toml");
    std::fs::write(
        &path,
        "[world]\nranks_per_node = 16\n\n[[step]]\nop = \"init_process_group\"\nbackend = \"xccl\"\n\n\
         [[step]]\nop = \"all_reduce\"\nfill = \"1\"\n\n[[step]]\nop = \"all_reduce\"\non = \"rank != 7\"\nfill = \"1\"\n\n\
         [[expect]]\non = \"rank != 7\"\noutcome = \"hangs\"\n",
    )
    .unwrap();
    let (code, out, err) = scen(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() <= 24, "{} lines:\n{out}", lines.len());
    assert!(out.contains("never joined: 7"), "{out}");
    assert!(
        out.contains("rank 7: never joined all_reduce #2 on WORLD (its last call there: all_reduce #1, completed"),
        "{out}"
    );
    assert!(out.contains("; finished its program"), "{out}");
}

#[test]
fn disagreeing_all_to_all_splits_name_the_bytes_on_xccl() {
    // c10d compares no split sizes (R32); the device backend does not either (docs/diagnosis.md).
    let (s, r) = run("scenarios/all_to_all_single_split_mismatch_xccl.toml");
    let text = render_human(&s, &r);
    let hang = r.diagnosis.hang.as_ref().expect("a wait-for graph");
    assert_eq!(
        hang.stuck.iter().map(|x| x.rank).collect::<Vec<_>>(),
        vec![2]
    );
    assert!(
        text.contains("group rank 0 sent 8 bytes of all_to_all while this rank expects 16 bytes"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            ":{}), in all_to_all_single #1 on WORLD",
            line_of(&s, "dispatch")
        )),
        "{text}"
    );
}

#[test]
fn a_skipped_new_group_is_named_at_the_first_diverging_name_r18() {
    let (s, r) = run("scenarios/sglang_rank_skips_usp_split.toml");
    let g = r.diagnosis.groups.as_ref().expect("group names diverge");
    assert_eq!(g.minority, vec![3]);
    assert_eq!(g.majority, vec![0, 1, 2, 4, 5, 6, 7]);
    assert_eq!(g.majority_call.label, "ulysses");
    assert_eq!(g.minority_call.label, "sp");
    assert_eq!(g.minority_call.line, line_of(&s, "model_parallel_fallback"));
    let text = render_human(&s, &r);
    assert!(
        text.contains("group names diverge at new_group call #43"),
        "{text}"
    );
}

/// A scatter's root holds one chunk per member and every member receives one: the members
/// agree on the chunk, so a correct scatter is no mismatch (it was reported as one, with
/// "real gloo: errors", until the fingerprint compared the chunk), while chunks of different
/// sizes still are.
#[test]
fn scatter_members_are_compared_by_the_chunk_they_receive() {
    let program = |shape_1: &str| {
        format!(
            "[world]\nranks_per_node = 3\nplatform = \"cpu\"\n\
             [[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\ntimeout_s = 5\n\
             [[step]]\nop = \"scatter\"\nsrc = 1\nshape = [4]\non = \"rank != 1\"\n\
             [[step]]\nop = \"scatter\"\nsrc = 1\nshape = {shape_1}\non = [1]\n"
        )
    };
    let run_text = |text: &str| {
        let s = scen_core::scenario::parse(text, "scatter.toml", "scatter").expect("parses");
        scen_sim::simulate(&s, None).expect("runs")
    };
    let same = run_text(&program("[4]"));
    assert!(same.diagnosis.mismatches.is_empty(), "{:?}", same.diagnosis);
    assert!(same.ranks.iter().all(|v| v.kind() == "completes"));
    let differ = run_text(&program("[8]"));
    let m = differ
        .diagnosis
        .mismatches
        .iter()
        .find(|m| m.kind == MismatchKind::Fingerprint)
        .unwrap_or_else(|| panic!("no mismatch: {:?}", differ.diagnosis));
    assert!(
        m.aspects
            .iter()
            .any(|a| a.contains("[4] vs [8]") || a.contains("[8] vs [4]")),
        "{:?}",
        m.aspects
    );
}
