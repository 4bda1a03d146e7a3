//! No crash from size (issue 11): the 10 × 8 gloo world that once panicked inside turmoil runs
//! to its verdict, and world shapes from 1 to 4096 ranks on 1 to 512 nodes either run or are
//! refused with a clear error, never a panic (an internal error). Every small shape is run;
//! large ones are a fixed sample, so the test stays cheap on CI's 2 cores.

use scen_core::scenario::parse;
use scen_core::verdict::RankVerdict;
use scen_sim::SimError;

fn world(nodes: usize, per_node: usize, platform: &str, program: &str) -> String {
    format!(
        "[scenario]\ndescription = \"{nodes} x {per_node}\"\n\n[world]\nnodes = {nodes}\nranks_per_node = {per_node}\nplatform = \"{platform}\"\n{program}"
    )
}

/// Every rank checks in to rank 0's TCPStore: the traffic every shape has, all at once on one
/// listener (the accept queue that overflowed) and one connection per rank from each node.
const RENDEZVOUS: &str = r#"
[[step]]
op = "init_process_group"
backend = "xccl"
"#;

/// Runs one shape; `Ok(true)`: every rank completed.
fn run(nodes: usize, per_node: usize, seed: u64) -> Result<bool, String> {
    let text = world(nodes, per_node, "xpu", RENDEZVOUS);
    let s = parse(&text, "shape.toml", "shape").map_err(|e| e.to_string())?;
    match scen_sim::simulate(&s, Some(seed)) {
        Ok(r) => Ok(r
            .ranks
            .iter()
            .all(|v| matches!(v, RankVerdict::Completed { .. }))),
        Err(e @ SimError::Internal { .. }) => panic!("{nodes} x {per_node}, seed {seed}: {e}"),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn ten_nodes_of_eight_with_gloo_groups_reach_their_verdict() {
    // Per-node gloo groups (made by every rank, as new_group requires), an all_reduce in each
    // and one over the world: gloo full meshes on 80 ranks, 10 nodes.
    let mut program = String::from("\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n");
    for n in 0..10 {
        let ranks: Vec<String> = (n * 8..n * 8 + 8).map(|r| r.to_string()).collect();
        program.push_str(&format!(
            "\n[[step]]\nop = \"new_group\"\nranks = [{}]\nbackend = \"gloo\"\nas = \"node{n}\"\n",
            ranks.join(", ")
        ));
    }
    for n in 0..10 {
        // Sum of the node's ranks: 8 * 8n + 28.
        program.push_str(&format!(
            "\n[[step]]\nop = \"all_reduce\"\non = \"node == {n}\"\ngroup = \"node{n}\"\nexpect = \"{}\"\n",
            64 * n + 28
        ));
    }
    program.push_str(
        "\n[[step]]\nop = \"all_reduce\"\nexpect = \"3160\"\n\n[[step]]\nop = \"barrier\"\n\n[[expect]]\noutcome = \"completes\"\n",
    );
    let text = world(10, 8, "cpu", &program);
    let s = parse(&text, "w80.toml", "w80").expect("parses");
    for seed in [0, 1] {
        let r = scen_sim::simulate(&s, Some(seed)).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(r.ranks.len(), 80);
        assert!(
            r.expectations_hold(),
            "seed {seed}: {:?}",
            r.ranks
                .iter()
                .filter(|v| !matches!(v, RankVerdict::Completed { .. }))
                .collect::<Vec<_>>()
        );
        // No connection was silently dropped and retried: one check-in per rank, no retry.
        let text = r.trace.render();
        assert_eq!(text.matches("checked in to TCPStore").count(), 80);
        assert!(
            !text.contains("retrying"),
            "seed {seed}: a connect was retried"
        );
    }
}

#[test]
fn every_small_world_shape_runs() {
    // Every (nodes, ranks per node) with at most 24 ranks, under the reference schedule and a
    // perturbed one.
    for nodes in 1..=24 {
        for per_node in 1..=24 / nodes {
            for seed in [0, 3] {
                assert_eq!(
                    run(nodes, per_node, seed),
                    Ok(true),
                    "{nodes} x {per_node}, seed {seed}"
                );
            }
        }
    }
}

#[test]
fn sampled_large_world_shapes_run_or_are_refused_cleanly() {
    // The corners (4096 ranks on 1 node and on 512 nodes) and shapes in between,
    // uneven ones included. A shape either runs to completion or is refused with an error
    // naming a limit; a panic fails the test (in `run`).
    let shapes = [
        (1, 4096),
        (512, 8),
        (2, 2048),
        (64, 64),
        (3, 1365),
        (128, 32),
        (17, 241),
    ];
    for (nodes, per_node) in shapes {
        match run(nodes, per_node, 0) {
            Ok(done) => assert!(done, "{nodes} x {per_node}: a rank did not complete"),
            Err(e) => assert!(e.contains("limit"), "{nodes} x {per_node}: {e}"),
        }
    }
}

#[test]
fn shapes_past_the_world_limit_are_refused_when_loaded() {
    for (nodes, per_node) in [(1, 4097), (512, 9), (4097, 1), (64, 65)] {
        let text = world(nodes, per_node, "xpu", RENDEZVOUS);
        let e = parse(&text, "shape.toml", "shape").expect_err("too large");
        let e = e.to_string();
        assert!(
            e.contains("world too large") || e.contains("between 1 and 4096"),
            "{nodes} x {per_node}: {e}"
        );
    }
}
