//! split_group's and shrink_group's argument checks, each failing every caller with torch
//! 2.15's own words in torch's order (docs/rules/c10d.md#r40). The split texts were measured
//! with real torch 2.15 (gloo, 3 ranks, 2026-11-28); shrink's come from torch 2.15's source
//! (`_validate_shrink_inputs`, `_prepare_shrink_target_group`), its gloo TypeError measured.

const HEAD: &str = "[world]\nranks_per_node = 3\nplatform = \"cpu\"\n\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\ntimeout_s = 30\n\n[[step]]\nop = \"new_group\"\nranks = [0, 1]\non = [0, 1, 2]\nas = \"g01\"\n\n[[step]]\nop = \"new_group\"\nranks = [0]\nas = \"g0\"\n";

/// Rank `r`'s failure text after `step` (the body of one more step).
fn error_of(r: usize, step: &str) -> String {
    crate::common::raised_text(&format!("{HEAD}\n[[step]]\n{step}"), r)
}

#[test]
fn split_group_checks_its_lists_as_torch_does() {
    let split = |lists: &str| error_of(0, &format!("op = \"split_group\"\n{lists}"));
    assert_eq!(split(""), "ValueError: split_ranks cannot be None or empty");
    assert_eq!(
        split("split_ranks = []\n"),
        "ValueError: split_ranks cannot be None or empty"
    );
    assert_eq!(
        split("split_ranks = [[]]\n"),
        "ValueError: the split group cannot be empty"
    );
    assert_eq!(
        split("split_ranks = [[0, 0]]\n"),
        "ValueError: the split group cannot have duplicate ranks"
    );
    assert_eq!(
        split("split_ranks = [[0, 1, 2, 0]]\n"),
        "ValueError: the split group's size should be less or equal to the world_size set by init_process_group"
    );
    // Longer than the parent (2 ranks), not than the world: ProcessGroup::splitGroup's check.
    assert_eq!(
        split("group = \"g01\"\nsplit_ranks = [[0, 1, 2]]\n"),
        "RuntimeError: the split group's size should be no larger than the world_size set by init_process_group"
    );
    // Rank 2 is not in g01: torch formats NON_GROUP_MEMBER.
    assert_eq!(
        error_of(
            2,
            "op = \"split_group\"\ngroup = \"g01\"\nsplit_ranks = [[0]]\n"
        ),
        "ValueError: Global rank 2 is not part of the parent group -100"
    );
}

#[test]
fn shrink_group_checks_its_arguments_before_its_backend() {
    let shrink = |r: usize, body: &str| error_of(r, &format!("op = \"shrink_group\"\n{body}"));
    assert_eq!(
        shrink(0, "ranks_to_exclude = []\n"),
        "ValueError: ranks_to_exclude cannot be empty. To shrink a group, you must specify at least one rank to exclude. Example: [failed_rank_id]"
    );
    assert!(shrink(0, "ranks_to_exclude = [1]\nshrink_flags = 2\n")
        .starts_with("ValueError: Invalid shrink_flags value: 2. Must be one of:"),);
    assert_eq!(
        shrink(2, "group = \"g01\"\nranks_to_exclude = [1]\n"),
        "AttributeError: 'int' object has no attribute 'size'"
    );
    assert_eq!(
        shrink(0, "group = \"g0\"\nranks_to_exclude = [0]\n"),
        "ValueError: Cannot shrink a process group with size 1. Group must have at least 2 ranks to support shrinking."
    );
    assert_eq!(
        shrink(1, "ranks_to_exclude = [0]\n"),
        "TypeError: Process group backend for '0' does not support shrinking operations."
    );
}
