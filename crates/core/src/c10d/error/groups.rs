//! PyTorch's texts for groups: `new_group`'s argument checks (R18), the handle a step names
//! (R13, R21) and a rank that is not in a call's group. Each function is one text, tagged with
//! its rule in docs/rules/c10d.md; the model calls these and never spells a text itself.

use super::{runtime, value, C10dError};

/// R18: `new_group(ranks)` with a rank twice.
pub fn duplicate_ranks(ranks: &[usize]) -> C10dError {
    value(format!(
        "ranks list must not contain duplicate entries, got {ranks:?}"
    ))
}

/// R18: more ranks than the world.
pub fn group_larger_than_world() -> C10dError {
    value("the new group's world size should be less or equal to the world size set by init_process_group")
}

/// R18 (and `init_process_group` with rank >= world_size): a rank outside the world.
pub fn rank_out_of_range(rank: usize, world_size: usize) -> C10dError {
    value(format!(
        "Rank {rank} is out of range. Valid ranks are 0 to {} (world_size={world_size})",
        world_size.saturating_sub(1)
    ))
}

/// R13: `destroy_process_group(g)` or a call on a group that was destroyed.
pub fn invalid_group() -> C10dError {
    value("Invalid process group specified")
}

/// A root, peer or destination that is not a member of the call's group
/// (`get_group_rank`).
pub fn not_in_group(rank: usize, group: &str) -> C10dError {
    value(format!("Global rank {rank} is not part of group {group}"))
}

/// scen's own text: a step names a group handle whose `new_group` step did not run on this
/// rank (a scenario whose ranks skip steps; Python would raise a NameError on the variable).
pub fn group_never_created(handle: &str) -> C10dError {
    runtime(format!(
        "group `{handle}` was never created on this rank (its new_group step did not run here)"
    ))
}

/// R27: the warning a call on a group this rank is not in prints (the call then does nothing).
/// A warning, not an exception: the text alone.
pub fn non_member_warning(op: &str, rank: usize) -> String {
    format!("Running {op} on global rank {rank} which does not belong to the given group.")
}

/// `split_group` without lists (real torch 2.15; scenarios/split_group_gloo.toml).
pub fn split_ranks_empty() -> C10dError {
    value("split_ranks cannot be None or empty")
}

/// `split_group`: one of `split_ranks`' lists is empty.
pub fn split_empty() -> C10dError {
    value("the split group cannot be empty")
}

/// `split_group`: a list longer than the world.
pub fn split_larger_than_world() -> C10dError {
    value("the split group's size should be less or equal to the world_size set by init_process_group")
}

/// `split_group`: a list naming a rank twice.
pub fn split_duplicates() -> C10dError {
    value("the split group cannot have duplicate ranks")
}

/// `split_group` on a rank outside the parent: torch formats the parent object, which on such
/// a rank is `GroupMember.NON_GROUP_MEMBER` (-100).
pub fn split_not_in_parent(rank: usize) -> C10dError {
    value(format!(
        "Global rank {rank} is not part of the parent group -100"
    ))
}

/// `split_group`: ProcessGroup::splitGroup's own check, a list longer than the parent group
/// (Python's checks only against the world).
pub fn split_larger_than_parent() -> C10dError {
    runtime(
        "the split group's size should be no larger than the world_size set by init_process_group",
    )
}

/// `shrink_group` with an empty list (real torch 2.15's `_validate_shrink_inputs`).
pub fn shrink_nothing_excluded() -> C10dError {
    value("ranks_to_exclude cannot be empty. To shrink a group, you must specify at least one rank to exclude. Example: [failed_rank_id]")
}

/// `shrink_group` with flags other than SHRINK_DEFAULT (0) and SHRINK_ABORT (1).
pub fn shrink_bad_flags(flags: i64) -> C10dError {
    value(format!(
        "Invalid shrink_flags value: {flags}. Must be one of: SHRINK_DEFAULT (0) or SHRINK_ABORT (1). Use SHRINK_ABORT to abort ongoing operations before shrinking."
    ))
}

/// `shrink_group` on a group of one rank.
pub fn shrink_too_small(size: usize) -> C10dError {
    value(format!(
        "Cannot shrink a process group with size {size}. Group must have at least 2 ranks to support shrinking."
    ))
}

/// `shrink_group(group=g)` on a rank outside `g`: torch calls `.size()` on
/// `GroupMember.NON_GROUP_MEMBER`, an int.
pub fn shrink_non_member() -> C10dError {
    C10dError {
        kind: "AttributeError",
        message: "'int' object has no attribute 'size'".into(),
    }
}

/// `shrink_group` on a group whose backend cannot shrink (gloo: real torch 2.15, 2026-11-29).
pub fn shrink_unsupported(group_name: &str) -> C10dError {
    C10dError {
        kind: "TypeError",
        message: format!(
            "Process group backend for '{group_name}' does not support shrinking operations."
        ),
    }
}
