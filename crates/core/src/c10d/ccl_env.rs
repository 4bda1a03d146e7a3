//! Which all-reduce algorithm a simulated oneCCL (xccl) group runs, from the rank's
//! environment as oneCCL reads it: `CCL_ALLREDUCE` (`<algo>` or
//! `<algo>:<lo>-<hi>[;<algo>:<lo>-<hi>...]`, sizes in bytes, `max` for no upper bound) and
//! `CCL_ALLREDUCE_SCALEOUT`. Each rank reads its own environment, as each oneCCL process does,
//! so ranks that disagree run different algorithms and hang or report a mismatch, as they
//! would for real.
//!
//! Without `CCL_ALLREDUCE` (or with `topo`), device buffers take oneCCL's hierarchical `topo`
//! algorithm on a group spanning several nodes (algo/topo.rs) and the ring on one node. A named
//! algorithm is run flat over the whole group, as oneCCL does for a non-`topo` choice ("it will
//! copy the GPU buffers to the Host (CPU) and will run the specified algorithm").

use super::error::{self, C10dError};
use crate::algo::{NodeLayout, ScaleOut};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The all-reduce a group member runs.
#[derive(Debug, Clone, PartialEq)]
pub enum AllReduceAlgo {
    Ring,
    Nreduce,
    RecursiveDoubling,
    /// The layout is shared by the thread's members of the group ([`NodeLayout::shared`]).
    Topo(Arc<NodeLayout>, ScaleOut),
}

/// The algorithm for an all-reduce of `bytes` on a device group whose members (by group rank)
/// run on nodes `node_of_member`.
pub fn all_reduce_algo(
    env: &BTreeMap<String, String>,
    bytes: usize,
    node_of_member: &[usize],
) -> Result<AllReduceAlgo, C10dError> {
    let named = match env.get("CCL_ALLREDUCE") {
        Some(v) => pick("CCL_ALLREDUCE", v, bytes)?,
        None => None,
    };
    Ok(match named {
        None | Some("topo") => match NodeLayout::shared(node_of_member) {
            Some(layout) => {
                let scale_out = scale_out(env, layout.node_count())?;
                AllReduceAlgo::Topo(layout, scale_out)
            }
            None => AllReduceAlgo::Ring,
        },
        Some("ring") => AllReduceAlgo::Ring,
        Some("nreduce") => AllReduceAlgo::Nreduce,
        Some("recursive_doubling") => AllReduceAlgo::RecursiveDoubling,
        Some(other) => {
            return Err(unsimulated(
                "CCL_ALLREDUCE",
                other,
                "topo, ring, nreduce, recursive_doubling",
            ))
        }
    })
}

fn scale_out(env: &BTreeMap<String, String>, nodes: usize) -> Result<ScaleOut, C10dError> {
    match env.get("CCL_ALLREDUCE_SCALEOUT").map(|s| s.trim()) {
        None | Some("") => Ok(ScaleOut::default_for(nodes)),
        Some("rabenseifner") => Ok(ScaleOut::Rabenseifner),
        Some("ring") => Ok(ScaleOut::Ring),
        Some(other) => Err(unsimulated(
            "CCL_ALLREDUCE_SCALEOUT",
            other,
            "rabenseifner, ring",
        )),
    }
}

fn unsimulated(var: &str, algo: &str, known: &str) -> C10dError {
    error::limit(format!(
        "{var}={algo}: scen does not simulate this oneCCL algorithm (it simulates {known})"
    ))
}

/// A part of a `CCL_<coll>` value that does not read as `<algo>:<lo>-<hi>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read `{part}` (expected <algo>:<lo>-<hi>, sizes in bytes or `max`)")]
pub struct RangesError {
    pub part: String,
}

/// Whether `value` of variable `name` reads as oneCCL's syntax (checked when a scenario loads,
/// in every mode: which algorithms the simulator runs is checked when it runs one). `Err` holds
/// the reason.
pub fn check_syntax(name: &str, value: &str) -> Result<(), RangesError> {
    match name {
        "CCL_ALLREDUCE" => ranges(value).map(|_| ()),
        _ => Ok(()),
    }
}

/// The `(algorithm, lo, hi)` entries of a `CCL_<coll>` value; one name covers every size.
pub fn ranges(value: &str) -> Result<Vec<(&str, usize, usize)>, RangesError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(Vec::new());
    }
    if !value.contains(':') {
        return Ok(vec![(value, 0, usize::MAX)]);
    }
    let mut out = Vec::new();
    for part in value.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || RangesError {
            part: part.to_string(),
        };
        let (algo, range) = part.split_once(':').ok_or_else(bad)?;
        let (lo, hi) = range.split_once('-').ok_or_else(bad)?;
        let lo: usize = lo.trim().parse().map_err(|_| bad())?;
        let hi = match hi.trim() {
            "max" => usize::MAX,
            h => h.parse().map_err(|_| bad())?,
        };
        out.push((algo.trim(), lo, hi));
    }
    Ok(out)
}

/// The algorithm `value` names for a message of `bytes`: `None` when no range covers it (oneCCL
/// keeps its default there).
fn pick<'a>(var: &str, value: &'a str, bytes: usize) -> Result<Option<&'a str>, C10dError> {
    let entries = ranges(value).map_err(|why| error::limit(format!("{var}={value}: {why}")))?;
    Ok(entries
        .into_iter()
        .find(|(_, lo, hi)| (*lo..=*hi).contains(&bytes))
        .map(|(algo, _, _)| algo))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::c10d::test_env as env;

    const TWO_NODES: [usize; 4] = [0, 0, 1, 1];

    #[test]
    fn topo_by_default_on_several_nodes_ring_on_one() {
        let e = env(&[]);
        assert!(matches!(
            all_reduce_algo(&e, 4096, &TWO_NODES),
            Ok(AllReduceAlgo::Topo(_, ScaleOut::Rabenseifner))
        ));
        assert_eq!(
            all_reduce_algo(&e, 4096, &[0, 0, 0]),
            Ok(AllReduceAlgo::Ring)
        );
        // Three nodes: not a power of two, the scale-out phase is a ring.
        assert!(matches!(
            all_reduce_algo(&e, 4096, &[0, 1, 2]),
            Ok(AllReduceAlgo::Topo(_, ScaleOut::Ring))
        ));
    }

    #[test]
    fn a_named_algorithm_runs_flat() {
        let e = env(&[("CCL_ALLREDUCE", "nreduce")]);
        assert_eq!(
            all_reduce_algo(&e, 1, &TWO_NODES),
            Ok(AllReduceAlgo::Nreduce)
        );
        let e = env(&[("CCL_ALLREDUCE_SCALEOUT", "ring")]);
        assert!(matches!(
            all_reduce_algo(&e, 1, &TWO_NODES),
            Ok(AllReduceAlgo::Topo(_, ScaleOut::Ring))
        ));
    }

    #[test]
    fn ranges_pick_by_size() {
        let e = env(&[(
            "CCL_ALLREDUCE",
            "recursive_doubling:0-8192;nreduce:8193-1048576;ring:1048577-max",
        )]);
        let at = |b| all_reduce_algo(&e, b, &TWO_NODES).expect("known");
        assert_eq!(at(8192), AllReduceAlgo::RecursiveDoubling);
        assert_eq!(at(8193), AllReduceAlgo::Nreduce);
        assert_eq!(at(1 << 30), AllReduceAlgo::Ring);
        // A size no range covers keeps the default.
        let e = env(&[("CCL_ALLREDUCE", "ring:0-10")]);
        assert!(matches!(
            all_reduce_algo(&e, 11, &TWO_NODES),
            Ok(AllReduceAlgo::Topo(..))
        ));
    }

    #[test]
    fn the_loader_checks_the_syntax_not_the_algorithm() {
        assert!(check_syntax("CCL_ALLREDUCE", "double_tree").is_ok());
        assert!(check_syntax("CCL_ALLREDUCE", "ring:0-8192;direct:8193-max").is_ok());
        let e = check_syntax("CCL_ALLREDUCE", "ring:0-8k").expect_err("8k");
        assert_eq!(e.part, "ring:0-8k");
        assert!(e.to_string().starts_with("cannot read `ring:0-8k`"), "{e}");
        assert!(check_syntax("OTHER", "ring:0-8k").is_ok());
    }

    #[test]
    fn unknown_or_unreadable_values_are_limit_errors() {
        for (var, v) in [
            ("CCL_ALLREDUCE", "double_tree"),
            ("CCL_ALLREDUCE", "ring:0-x"),
            ("CCL_ALLREDUCE_SCALEOUT", "direct"),
        ] {
            let e = all_reduce_algo(&env(&[(var, v)]), 100, &TWO_NODES).expect_err(v);
            assert_eq!(e.kind, error::SCEN_LIMIT, "{e}");
            assert!(e.to_string().contains(var), "{e}");
        }
    }
}
