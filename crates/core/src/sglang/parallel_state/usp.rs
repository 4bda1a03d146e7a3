//! The Ulysses/Ring sub-groups of USP: V1/V2's split over the real SP groups and V0
//! yunchang's contiguous split (the pre-#16532 bug, R11), as pure rank lists.

use super::PlanError;

/// Which USP axis a sub-group belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UspAxis {
    /// Ulysses (all-to-all) group.
    Ulysses,
    /// Ring (ring-attention) group.
    Ring,
}

/// One USP sub-group in creation order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UspGroup {
    /// Axis.
    pub axis: UspAxis,
    /// Global ranks.
    pub ranks: Vec<usize>,
}

/// V1/V2 `set_seq_parallel_pg_by_sp_groups(u, r, sp_groups,
/// use_ulysses_low=True)`: per SP group, `r` contiguous Ulysses slices then
/// `u` strided Ring slices (docs/rules/sglang.md#s3-19).
pub fn usp_groups_by_sp_groups(
    ulysses: usize,
    ring: usize,
    sp_groups: &[Vec<usize>],
) -> Result<Vec<UspGroup>, PlanError> {
    let sp_degree = ulysses * ring;
    if sp_degree == 0 {
        return Err(PlanError::ZeroDegree {
            name: if ulysses == 0 { "ulysses" } else { "ring" },
        });
    }
    if sp_groups.iter().any(|g| g.len() != sp_degree) {
        return Err(PlanError::SpGroupSizeMismatch {
            sp_degree,
            sizes: sp_groups.iter().map(Vec::len).collect(),
            issued_calls: Vec::new(),
        });
    }
    let mut out = Vec::new();
    for sp in sp_groups {
        out.extend(usp_block(ulysses, ring, |i| sp[i]));
    }
    Ok(out)
}

/// V0 yunchang `set_seq_parallel_pg(u, r, rank, world_size=dit)`: the same
/// pattern over contiguous blocks `offset = dp_rank*u*r` (the pre-#16532 bug,
/// R11).
pub fn usp_groups_legacy_yunchang(
    ulysses: usize,
    ring: usize,
    world_size: usize,
) -> Result<Vec<UspGroup>, PlanError> {
    let sp_degree = ulysses * ring;
    if sp_degree == 0 {
        return Err(PlanError::ZeroDegree {
            name: if ulysses == 0 { "ulysses" } else { "ring" },
        });
    }
    if !world_size.is_multiple_of(sp_degree) {
        return Err(PlanError::LegacyWorldNotDivisible {
            world_size,
            ulysses,
            issued_calls: Vec::new(),
        });
    }
    let mut out = Vec::new();
    for dp_rank in 0..world_size / sp_degree {
        let offset = dp_rank * sp_degree;
        out.extend(usp_block(ulysses, ring, |i| i + offset));
    }
    Ok(out)
}

/// Ulysses-low layout of one SP block whose i-th member is `member(i)`.
fn usp_block(ulysses: usize, ring: usize, member: impl Fn(usize) -> usize) -> Vec<UspGroup> {
    let sp_degree = ulysses * ring;
    let ulysses_groups = (0..ring).map(|i| UspGroup {
        axis: UspAxis::Ulysses,
        ranks: (i * ulysses..(i + 1) * ulysses).map(&member).collect(),
    });
    let ring_groups = (0..ulysses).map(|i| UspGroup {
        axis: UspAxis::Ring,
        ranks: (i..sp_degree).step_by(ulysses).map(&member).collect(),
    });
    ulysses_groups.chain(ring_groups).collect()
}
