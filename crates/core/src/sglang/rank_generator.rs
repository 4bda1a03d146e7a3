//! Port of sglang's `RankGenerator` and `generate_masked_orthogonal_rank_groups`
//! (`python/sglang/multimodal_gen/runtime/utils/distributed.py@09eaaf15`).
//!
//! Every rank list that `initialize_model_parallel` hands to `new_group` comes
//! from here, and the *order* of those lists is what decides whether all ranks
//! issue identical `new_group` sequences (spec R1). So this is a line-by-line
//! port of the code, not of its docstring (docs/rules/sglang.md#s3-17): groups are enumerated
//! by group index decomposed over the unmasked axes, lowest axis first.
//!
//! Python quirks kept on purpose:
//! * a missing order name is detected by *substring* test (`name not in order`);
//! * the "size > 1 but not in order" error reads `self.order` before it is
//!   assigned, so Python raises `AttributeError`, not the intended
//!   `RuntimeError` (see [`RankGeneratorError::UnspecifiedAxis`]);
//! * unknown tokens surface as `KeyError` / `ValueError` like the dict/list
//!   lookups that raise them.

use thiserror::Error;

/// The order string sglang passes in `initialize_model_parallel` (docs/rules/sglang.md#s3-16).
pub const SGLANG_ORDER: &str = "tp-sp-pp-cfg-dp";

/// Simulator guard: largest rank space enumerated (Python would just grind).
pub const MAX_RANKS: usize = 1 << 20;

/// Axis names in the order sglang iterates `name_to_size` (dict order).
const AXIS_NAMES: [&str; 5] = ["tp", "sp", "pp", "cfg", "dp"];

/// Errors of the port; each `Display` is the Python exception's `str()`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RankGeneratorError {
    /// An axis absent from `order` has size > 1. sglang *intends*
    /// `RuntimeError("The size of (<name>) is (<size>), but you haven't
    /// specified the order (<order>).")` but the f-string evaluates
    /// `self.order` before it exists, so Python raises this `AttributeError`.
    /// [`RankGeneratorError::intended_message`] gives the intended text.
    #[error("'RankGenerator' object has no attribute 'order'")]
    UnspecifiedAxis {
        /// Axis name (`tp`, `sp`, `pp`, `cfg`, `dp`).
        name: &'static str,
        /// Its size (> 1).
        size: usize,
        /// The lower-cased order string as given.
        order: String,
    },
    /// An order token that is not an axis name: `KeyError` from
    /// `self.name_to_size[token]`.
    #[error("'{token}'")]
    UnknownOrderToken {
        /// The offending token.
        token: String,
    },
    /// A `get_ranks` token that is not in the order: `ValueError` from
    /// `list.index`.
    #[error("'{token}' is not in list")]
    UnknownRankToken {
        /// The offending token.
        token: String,
    },
    /// A zero axis size reaches `//` or `%`: `ZeroDivisionError`.
    #[error("integer division or modulo by zero")]
    ZeroSize,
    /// Simulator guard: more than [`MAX_RANKS`] ranks to enumerate.
    #[error("world size {world_size} exceeds the simulator limit of {MAX_RANKS} ranks")]
    TooLarge {
        /// Requested world size.
        world_size: usize,
    },
    /// `decompose`'s assertion: `index` is not representable in `shape`
    /// (only reachable through the free function with a world size that is
    /// not the product of the sizes).
    #[error("idx {index} with shape {shape} mismatch the return idx {idx}")]
    DecomposeMismatch {
        /// The index being decomposed.
        index: usize,
        /// Python repr of the shape, e.g. `[2, 3]`.
        shape: String,
        /// Python repr of the computed idx.
        idx: String,
    },
}

impl RankGeneratorError {
    /// The Python exception class that the original code raises.
    pub fn python_exception(&self) -> &'static str {
        match self {
            Self::UnspecifiedAxis { .. } => "AttributeError",
            Self::UnknownOrderToken { .. } => "KeyError",
            Self::UnknownRankToken { .. } => "ValueError",
            Self::ZeroSize => "ZeroDivisionError",
            Self::TooLarge { .. } => "SimulatorGuard",
            Self::DecomposeMismatch { .. } => "AssertionError",
        }
    }

    /// For [`RankGeneratorError::UnspecifiedAxis`], the `RuntimeError` text
    /// the code was written to raise; `None` for other variants.
    pub fn intended_message(&self) -> Option<String> {
        match self {
            Self::UnspecifiedAxis { name, size, order } => Some(format!(
                "The size of ({name}) is ({size}), but you haven't specified the order ({order})."
            )),
            _ => None,
        }
    }
}

/// Python `repr` of a list of ints: `[0, 1, 2]`.
pub fn py_list(values: &[usize]) -> String {
    let parts: Vec<String> = values.iter().map(usize::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// Python `repr` of a list of int lists: `[[0, 1], [2, 3]]`.
pub fn py_nested_list(groups: &[Vec<usize>]) -> String {
    let parts: Vec<String> = groups.iter().map(|g| py_list(g)).collect();
    format!("[{}]", parts.join(", "))
}

/// sglang's `RankGenerator(tp, sp, pp, cfg, dp, order, rank_offset=0)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankGenerator {
    sizes: [usize; 5],
    rank_offset: usize,
    world_size: usize,
    order: String,
    ordered_size: Vec<usize>,
}

impl RankGenerator {
    /// Builds the generator; missing axis names of size 1 are appended to
    /// `order` (in tp, sp, pp, cfg, dp order).
    pub fn new(
        tp: usize,
        sp: usize,
        pp: usize,
        cfg: usize,
        dp: usize,
        order: &str,
    ) -> Result<Self, RankGeneratorError> {
        let sizes = [tp, sp, pp, cfg, dp];
        let order = complete_order(&sizes, order)?;
        let ordered_size = ordered_sizes(&sizes, &order)?;
        Ok(Self {
            sizes,
            rank_offset: 0,
            world_size: saturating_product(&sizes),
            order,
            ordered_size,
        })
    }

    /// Same generator with sglang's `rank_offset` (added when > 0).
    pub fn with_rank_offset(mut self, rank_offset: usize) -> Self {
        self.rank_offset = rank_offset;
        self
    }

    /// `tp*sp*pp*cfg*dp` — the product, not the real world size (docs/rules/sglang.md#s3-15).
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The completed, lower-cased order string.
    pub fn order(&self) -> &str {
        &self.order
    }

    /// Axis sizes in order-string order.
    pub fn ordered_size(&self) -> &[usize] {
        &self.ordered_size
    }

    /// Size of a named axis (`None` for an unknown name).
    pub fn size_of(&self, name: &str) -> Option<usize> {
        axis_size(&self.sizes, name)
    }

    /// `get_mask(order, token)`: true for every order position named in the
    /// `-`-separated token.
    pub fn get_mask(&self, token: &str) -> Result<Vec<bool>, RankGeneratorError> {
        let ordered: Vec<&str> = self.order.split('-').collect();
        let mut mask = vec![false; ordered.len()];
        for t in token.split('-') {
            let pos = ordered.iter().position(|o| *o == t).ok_or_else(|| {
                RankGeneratorError::UnknownRankToken {
                    token: t.to_string(),
                }
            })?;
            mask[pos] = true;
        }
        Ok(mask)
    }

    /// `get_ranks(token)`: the rank groups of the axes named in `token`, in
    /// the code's enumeration order.
    pub fn get_ranks(&self, token: &str) -> Result<Vec<Vec<usize>>, RankGeneratorError> {
        let mask = self.get_mask(token)?;
        let mut ranks =
            generate_masked_orthogonal_rank_groups(self.world_size, &self.ordered_size, &mask)?;
        if self.rank_offset > 0 {
            ranks
                .iter_mut()
                .flatten()
                .for_each(|r| *r += self.rank_offset);
        }
        Ok(ranks)
    }
}

fn axis_size(sizes: &[usize; 5], name: &str) -> Option<usize> {
    AXIS_NAMES.iter().position(|n| *n == name).map(|i| sizes[i])
}

/// Lower-cases `order` and appends size-1 axes it does not mention.
fn complete_order(sizes: &[usize; 5], order: &str) -> Result<String, RankGeneratorError> {
    let mut order = order.to_lowercase();
    for (name, &size) in AXIS_NAMES.iter().zip(sizes.iter()) {
        // Python: `name not in order` is a substring test on the string.
        if order.contains(name) {
            continue;
        }
        if size != 1 {
            return Err(RankGeneratorError::UnspecifiedAxis { name, size, order });
        }
        order.push('-');
        order.push_str(name);
    }
    Ok(order)
}

fn ordered_sizes(sizes: &[usize; 5], order: &str) -> Result<Vec<usize>, RankGeneratorError> {
    order
        .split('-')
        .map(|token| {
            axis_size(sizes, token).ok_or_else(|| RankGeneratorError::UnknownOrderToken {
                token: token.to_string(),
            })
        })
        .collect()
}

fn saturating_product(values: &[usize]) -> usize {
    values.iter().fold(1usize, |acc, v| acc.saturating_mul(*v))
}

/// `prefix_product(a)`: `[1, a0, a0*a1, …]` (length `a.len() + 1`).
fn prefix_product(values: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(values.len() + 1);
    let mut acc = 1usize;
    out.push(acc);
    for v in values {
        acc = acc.saturating_mul(*v);
        out.push(acc);
    }
    out
}

fn inner_product(a: &[usize], b: &[usize]) -> usize {
    a.iter().zip(b.iter()).fold(0usize, |acc, (x, y)| {
        acc.saturating_add(x.saturating_mul(*y))
    })
}

/// `decompose(index, shape)` with its assertion.
fn decompose(index: usize, shape: &[usize]) -> Result<Vec<usize>, RankGeneratorError> {
    let stride = prefix_product(shape);
    let mut idx = Vec::with_capacity(shape.len());
    for (s, d) in shape.iter().zip(stride.iter()) {
        if *s == 0 || *d == 0 {
            return Err(RankGeneratorError::ZeroSize);
        }
        idx.push((index / d) % s);
    }
    if inner_product(&idx, &stride[..stride.len() - 1]) != index {
        return Err(RankGeneratorError::DecomposeMismatch {
            index,
            shape: py_list(shape),
            idx: py_list(&idx),
        });
    }
    Ok(idx)
}

fn select(values: &[usize], mask: &[bool], keep: bool) -> Vec<usize> {
    values
        .iter()
        .zip(mask.iter())
        .filter(|(_, m)| **m == keep)
        .map(|(v, _)| *v)
        .collect()
}

/// Faithful port of `generate_masked_orthogonal_rank_groups(world_size,
/// parallel_size, mask)`: one group per index of the unmasked axes (lowest
/// axis fastest), members in ascending masked-axis index order.
pub fn generate_masked_orthogonal_rank_groups(
    world_size: usize,
    parallel_size: &[usize],
    mask: &[bool],
) -> Result<Vec<Vec<usize>>, RankGeneratorError> {
    let masked_shape = select(parallel_size, mask, true);
    let unmasked_shape = select(parallel_size, mask, false);
    let global_stride = prefix_product(parallel_size);
    let masked_stride = select(&global_stride, mask, true);
    let unmasked_stride = select(&global_stride, mask, false);

    if world_size > MAX_RANKS {
        return Err(RankGeneratorError::TooLarge { world_size });
    }
    let group_size = saturating_product(&masked_shape);
    if group_size == 0 {
        return Err(RankGeneratorError::ZeroSize);
    }
    let num_of_group = world_size / group_size;

    let mut ranks = Vec::with_capacity(num_of_group);
    for group_index in 0..num_of_group {
        let group_idx = decompose(group_index, &unmasked_shape)?;
        let base = inner_product(&group_idx, &unmasked_stride);
        let mut group = Vec::with_capacity(group_size.min(world_size));
        for rank_in_group in 0..group_size {
            let rank_idx = decompose(rank_in_group, &masked_shape)?;
            group.push(inner_product(&rank_idx, &masked_stride) + base);
        }
        ranks.push(group);
    }
    Ok(ranks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_example_pp_groups_follow_code_order() {
        // docs/rules/sglang.md §3.17: w16, sizes [1,2,2,2,2], "pp".
        let g = RankGenerator::new(1, 2, 2, 2, 2, SGLANG_ORDER).unwrap();
        let pp = g.get_ranks("pp").unwrap();
        assert_eq!(pp[..4], [vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]]);
        assert_eq!(pp.len(), 8);
    }

    #[test]
    fn docstring_examples_match() {
        let dp =
            generate_masked_orthogonal_rank_groups(24, &[2, 3, 4], &[false, true, false]).unwrap();
        assert_eq!(dp[0], vec![0, 2, 4]);
        assert_eq!(dp[1], vec![1, 3, 5]);
        assert_eq!(dp[7], vec![19, 21, 23]);
        let dp2 =
            generate_masked_orthogonal_rank_groups(8, &[2, 2, 2], &[false, false, true]).unwrap();
        assert_eq!(dp2, vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
    }

    #[test]
    fn missing_names_are_appended_when_size_one() {
        let g = RankGenerator::new(2, 1, 1, 1, 1, "tp").unwrap();
        assert_eq!(g.order(), "tp-sp-pp-cfg-dp");
        assert_eq!(g.ordered_size(), &[2, 1, 1, 1, 1]);
        let g = RankGenerator::new(1, 1, 1, 2, 1, "CFG-tp").unwrap();
        assert_eq!(g.order(), "cfg-tp-sp-pp-dp");
    }

    #[test]
    fn missing_name_with_size_above_one_is_attribute_error() {
        let err = RankGenerator::new(1, 2, 1, 1, 1, "tp-pp-cfg-dp").unwrap_err();
        assert_eq!(err.python_exception(), "AttributeError");
        assert_eq!(
            err.to_string(),
            "'RankGenerator' object has no attribute 'order'"
        );
        assert_eq!(
            err.intended_message().unwrap(),
            "The size of (sp) is (2), but you haven't specified the order (tp-pp-cfg-dp)."
        );
    }

    #[test]
    fn unknown_tokens_raise_python_errors() {
        let err = RankGenerator::new(1, 1, 1, 1, 1, "tp-ep").unwrap_err();
        assert_eq!(
            (err.python_exception(), err.to_string()),
            ("KeyError", "'ep'".into())
        );
        let g = RankGenerator::new(1, 1, 1, 1, 1, SGLANG_ORDER).unwrap();
        let err = g.get_ranks("ep").unwrap_err();
        assert_eq!(err.to_string(), "'ep' is not in list");
    }

    #[test]
    fn zero_size_is_zero_division() {
        let g = RankGenerator::new(0, 1, 1, 1, 1, SGLANG_ORDER).unwrap();
        assert_eq!(g.get_ranks("tp"), Err(RankGeneratorError::ZeroSize));
    }

    #[test]
    fn decompose_assertion_when_world_exceeds_product() {
        let err = generate_masked_orthogonal_rank_groups(8, &[2, 2], &[true, false]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "idx 2 with shape [2] mismatch the return idx [0]"
        );
    }

    #[test]
    fn huge_sizes_are_refused_not_enumerated() {
        let g = RankGenerator::new(usize::MAX, 2, 1, 1, 1, SGLANG_ORDER).unwrap();
        assert_eq!(g.world_size(), usize::MAX);
        let err = g.get_ranks("tp").unwrap_err();
        assert_eq!(err.python_exception(), "SimulatorGuard");
    }

    #[test]
    fn rank_offset_is_added() {
        let g = RankGenerator::new(2, 1, 1, 1, 1, SGLANG_ORDER)
            .unwrap()
            .with_rank_offset(4);
        assert_eq!(g.get_ranks("tp").unwrap(), vec![vec![4, 5]]);
    }

    #[test]
    fn python_list_repr() {
        assert_eq!(py_nested_list(&[vec![0, 1], vec![2]]), "[[0, 1], [2]]");
        assert_eq!(py_nested_list(&[]), "[]");
    }
}
