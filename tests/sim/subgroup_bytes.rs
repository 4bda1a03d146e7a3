//! The tensor-size limit counts a collective's group, not the world (issue 25 item 6): a
//! 4-member 256 KiB all_gather in a 64-rank world once was refused as "needs about 1.0 GiB"
//! (every rank holding 65 chunks); it holds 5 chunks per rank and runs. A group collective
//! that really is over the limit is still refused.

use scen_core::scenario::parse;

fn world64(program: &str) -> String {
    format!(
        "[world]\nnodes = 8\nranks_per_node = 8\nplatform = \"cpu\"\n\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n\n[[step]]\nop = \"new_group\"\nranks = [0, 1, 2, 3]\nas = \"four\"\n{program}"
    )
}

#[test]
fn four_member_all_gather_in_64_ranks_runs() {
    // 65536 f32 = 256 KiB per rank.
    let text = world64(
        "\n[[step]]\nop = \"all_gather\"\non = \"rank < 4\"\ngroup = \"four\"\ndtype = \"f32\"\nshape = [65536]\nfill = \"rank\"\nexpect = \"chunk\"\n\n[[expect]]\noutcome = \"completes\"\n",
    );
    let s = parse(&text, "w64.toml", "w64").unwrap_or_else(|e| panic!("refused: {e}"));
    let r = scen_sim::simulate(&s, Some(0)).expect("runs");
    assert_eq!(r.ranks.len(), 64);
    assert!(r.expectations_hold(), "{:?}", r.ranks);
}

#[test]
fn over_limit_group_collective_still_refused() {
    // 64 MiB per rank in a 4-member group: 5 x 64 MiB = 320 MiB per rank, over 256 MiB.
    let text = world64(
        "\n[[step]]\nop = \"all_gather\"\non = \"rank < 4\"\ngroup = \"four\"\ndtype = \"f32\"\nshape = [16777216]\n",
    );
    let e = parse(&text, "w64.toml", "w64").expect_err("over the per-rank limit");
    let msg = e.to_string();
    assert!(
        msg.contains("all_gather needs about 320.0 MiB of tensors per rank")
            && msg.contains("group of 4, world 64"),
        "{msg}"
    );
    // The same tensor over WORLD: 65 chunks per rank.
    let text = world64(
        "\n[[step]]\nop = \"all_gather\"\ndtype = \"f32\"\nshape = [65536]\n[sim]\npayloads = \"values\"\n",
    );
    let e = parse(&text, "w64.toml", "w64").expect_err("over the total limit");
    assert!(e.to_string().contains("of tensors over all ranks"), "{e}");
}
