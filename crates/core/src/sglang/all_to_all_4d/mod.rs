//! Reference data movement of sglang's Ulysses all-to-alls, as pure data.
//!
//! The simulator must know which bytes each rank sends to which peer and what
//! every rank ends up holding, to check sequence-parallel correctness (e.g.
//! the TP-mixed legacy Ulysses groups of R11) and the size assertions that
//! abort a run (docs/rules/sglang.md §5.33–§5.36: 12 heads cannot be split 8 ways). This module
//! mirrors, step by step, the tensor reshapes of
//! * `DistributedAutograd.AllToAll4D.forward` (`base_device_communicator.py`),
//!   both `(scatter_dim=2, gather_dim=1)` and `(1, 2)`;
//! * `_usp_input_all_to_all` / `_usp_output_all_to_all` (`layers/usp.py`),
//!   `head_dim` 1 or 2;
//!
//! split into [`pack`] (the per-destination chunks `all_to_all_single` sends)
//! and [`unpack`] (the receiver's reassembly), plus an independent
//! [`reference_global`] that computes every rank's expected output by index
//! arithmetic on the gathered global tensor. The 2-rank CUDA IPC fast paths
//! produce the same layout and are not modelled separately.
//!
//! World size 1 short-circuits before any check, as in the Python: no
//! collective is issued ([`issues_collective`]) and data passes through.

use thiserror::Error;

/// Which of sglang's 4-D all-to-alls to model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum A2aOp {
    /// `AllToAll4D(scatter_dim, gather_dim)`; only (2, 1) and (1, 2) exist.
    AllToAll4D {
        /// Dimension split across ranks.
        scatter_dim: usize,
        /// Dimension gathered from ranks.
        gather_dim: usize,
    },
    /// `_usp_input_all_to_all(x, head_dim)`: heads sharded, sequence gathered.
    UspInput {
        /// Head dimension index (1 or 2).
        head_dim: usize,
    },
    /// `_usp_output_all_to_all(x, head_dim)`: heads gathered, sequence sharded.
    UspOutput {
        /// Head dimension index (1 or 2).
        head_dim: usize,
    },
}

impl A2aOp {
    /// `[b, S/W, H, D] → [b, S, H/W, D]` (UlyssesAttention input side).
    pub const HEADS_TO_SEQUENCE: A2aOp = A2aOp::AllToAll4D {
        scatter_dim: 2,
        gather_dim: 1,
    };
    /// `[b, S, H/W, D] → [b, S/W, H, D]` (UlyssesAttention output side).
    pub const SEQUENCE_TO_HEADS: A2aOp = A2aOp::AllToAll4D {
        scatter_dim: 1,
        gather_dim: 2,
    };
}

/// Assertion / runtime failures with the Python texts, plus simulator guards.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum A2aError {
    /// `AllToAll4D` scatter 2 / gather 1: `AssertionError`.
    #[error(
        "head dimension ({heads}) must be divisible by sequence parallel world size ({world_size})"
    )]
    HeadsNotDivisible {
        /// `hn`.
        heads: usize,
        /// Group size.
        world_size: usize,
    },
    /// `AllToAll4D` scatter 1 / gather 2: `AssertionError`.
    #[error(
        "sequence dimension ({seq_len}) must be divisible by sequence parallel world size ({world_size})"
    )]
    SequenceNotDivisible {
        /// `seqlen`.
        seq_len: usize,
        /// Group size.
        world_size: usize,
    },
    /// `AllToAll4D` with another pair: `RuntimeError`.
    #[error(
        "Invalid scatter_dim={scatter_dim}, gather_dim={gather_dim}. Only (scatter_dim=2, \
         gather_dim=1) and (scatter_dim=1, gather_dim=2) are supported."
    )]
    InvalidDims {
        /// Requested scatter dim.
        scatter_dim: usize,
        /// Requested gather dim.
        gather_dim: usize,
    },
    /// USP `head_dim` not 1 or 2: `AssertionError`.
    #[error("head_dim must be 1 or 2, got {head_dim}")]
    InvalidHeadDim {
        /// Requested head dim.
        head_dim: usize,
    },
    /// `_usp_input_all_to_all`: `AssertionError`.
    #[error("h_global ({h_global}) must be divisible by world_size ({world_size})")]
    UspHeadsNotDivisible {
        /// Global heads.
        h_global: usize,
        /// Ulysses group size.
        world_size: usize,
    },
    /// `_usp_output_all_to_all`: `AssertionError`.
    #[error("s_global ({s_global}) must be divisible by world_size ({world_size})")]
    UspSequenceNotDivisible {
        /// Global sequence length.
        s_global: usize,
        /// Ulysses group size.
        world_size: usize,
    },
    /// Simulator guard: world size 0.
    #[error("world size must be at least 1")]
    ZeroWorld,
    /// Simulator guard: data length disagrees with the shape.
    #[error("buffer has {actual} elements but shape {shape:?} needs {expected}")]
    ShapeMismatch {
        /// Declared shape.
        shape: [usize; 4],
        /// Its element count (`usize::MAX` on overflow).
        expected: usize,
        /// Buffer length.
        actual: usize,
    },
    /// Simulator guard: a dimension (or the element count) times the world
    /// size overflows `usize`.
    #[error("shape {shape:?} times world size {world_size} overflows")]
    ShapeTooLarge {
        /// Declared shape.
        shape: [usize; 4],
        /// World size.
        world_size: usize,
    },
    /// Simulator guard: wrong number of chunks / per-rank inputs.
    #[error("expected {expected} per-rank buffers, got {actual}")]
    WrongRankCount {
        /// World size.
        expected: usize,
        /// Buffers given.
        actual: usize,
    },
}

impl A2aError {
    /// The Python exception class (`SimulatorGuard` for guards).
    pub fn python_exception(&self) -> &'static str {
        match self {
            A2aError::InvalidDims { .. } => "RuntimeError",
            A2aError::ZeroWorld
            | A2aError::ShapeMismatch { .. }
            | A2aError::ShapeTooLarge { .. }
            | A2aError::WrongRankCount { .. } => "SimulatorGuard",
            _ => "AssertionError",
        }
    }
}

/// Whether the op issues an `all_to_all_single` at this world size (the
/// Python returns the input untouched when `world_size <= 1`).
pub fn issues_collective(world_size: usize) -> bool {
    world_size > 1
}

/// Output shape of `op` for a per-rank input of `shape`.
pub fn output_shape(shape: [usize; 4], world: usize, op: A2aOp) -> Result<[usize; 4], A2aError> {
    let recipe = Recipe::resolve(shape, world, op)?;
    Ok(recipe.out_shape)
}

/// The per-destination send chunks of this rank's `all_to_all_single`:
/// element `j` goes to group rank `j` (world 1: the input itself).
pub fn pack<T: Copy>(
    input: &[T],
    shape: [usize; 4],
    world: usize,
    op: A2aOp,
) -> Result<Vec<Vec<T>>, A2aError> {
    check_len(input.len(), shape)?;
    let recipe = Recipe::resolve(shape, world, op)?;
    if !issues_collective(world) {
        return Ok(vec![input.to_vec()]);
    }
    let (staged, _) = permute(input, &recipe.pack_shape, &recipe.pack_perm);
    let chunk = staged.len() / world;
    Ok((0..world)
        .map(|j| staged[j * chunk..(j + 1) * chunk].to_vec())
        .collect())
}

/// Reassembles what this rank received (`received[i]` from group rank `i`)
/// into its output tensor and shape. `shape` is the per-rank *input* shape
/// (identical on all ranks).
pub fn unpack<T: Copy>(
    received: Vec<Vec<T>>,
    shape: [usize; 4],
    world: usize,
    op: A2aOp,
) -> Result<(Vec<T>, [usize; 4]), A2aError> {
    let recipe = Recipe::resolve(shape, world, op)?;
    check_rank_count(received.len(), world)?;
    let numel = check_len(received.iter().map(Vec::len).sum(), shape)?;
    if received.iter().any(|c| c.len() * world != numel) {
        return Err(chunk_mismatch(shape, numel, &received, world));
    }
    let flat: Vec<T> = received.into_iter().flatten().collect();
    if !issues_collective(world) {
        return Ok((flat, shape));
    }
    let (out, _) = permute(&flat, &recipe.unpack_shape, &recipe.unpack_perm);
    Ok((out, recipe.out_shape))
}

/// Independent reference: concatenates all ranks' inputs into the global
/// tensor along the gathered axis and slices the scattered axis, returning
/// each rank's expected output.
pub fn reference_global(
    inputs_per_rank: &[Vec<f32>],
    shape: [usize; 4],
    world: usize,
    op: A2aOp,
) -> Result<Vec<Vec<f32>>, A2aError> {
    let recipe = Recipe::resolve(shape, world, op)?;
    check_rank_count(inputs_per_rank.len(), world)?;
    for input in inputs_per_rank {
        check_len(input.len(), shape)?;
    }
    if !issues_collective(world) {
        return Ok(inputs_per_rank.to_vec());
    }
    let (global, global_shape) = concat_4d(inputs_per_rank, shape, recipe.concat_dim);
    Ok((0..world)
        .map(|j| slice_4d(&global, global_shape, recipe.slice_dim, j, world))
        .collect())
}

/// Everything an op needs, derived (and validated) from shape and world.
struct Recipe {
    /// Shape viewed before the send-side permute (4 or 5 dims).
    pack_shape: Vec<usize>,
    /// Permutation producing the destination-major send buffer.
    pack_perm: Vec<usize>,
    /// Shape of the concatenated receive buffer.
    unpack_shape: Vec<usize>,
    /// Permutation producing the output.
    unpack_perm: Vec<usize>,
    /// Output shape.
    out_shape: [usize; 4],
    /// Reference: axis of the per-rank input gathered across ranks.
    concat_dim: usize,
    /// Reference: axis of the global tensor scattered across ranks.
    slice_dim: usize,
}

impl Recipe {
    fn resolve(shape: [usize; 4], world: usize, op: A2aOp) -> Result<Self, A2aError> {
        if world == 0 {
            return Err(A2aError::ZeroWorld);
        }
        check_scalable(shape, world)?;
        match op {
            // World 1 returns before any check, so any op is accepted.
            _ if world == 1 => Ok(Self::identity(shape)),
            A2aOp::AllToAll4D {
                scatter_dim: 2,
                gather_dim: 1,
            } => Self::heads_to_sequence(shape, world),
            A2aOp::AllToAll4D {
                scatter_dim: 1,
                gather_dim: 2,
            } => Self::sequence_to_heads(shape, world),
            A2aOp::AllToAll4D {
                scatter_dim,
                gather_dim,
            } => Err(A2aError::InvalidDims {
                scatter_dim,
                gather_dim,
            }),
            A2aOp::UspInput { head_dim } => Self::usp_input(shape, world, head_dim),
            A2aOp::UspOutput { head_dim } => Self::usp_output(shape, world, head_dim),
        }
    }

    fn identity(shape: [usize; 4]) -> Self {
        Self {
            pack_shape: shape.to_vec(),
            pack_perm: vec![0, 1, 2, 3],
            unpack_shape: shape.to_vec(),
            unpack_perm: vec![0, 1, 2, 3],
            out_shape: shape,
            concat_dim: 1,
            slice_dim: 2,
        }
    }

    /// scatter 2 / gather 1: `transpose(0,2)` → a2a on heads →
    /// `cat(split(H/W), dim=1)` → `transpose(0,2)`.
    fn heads_to_sequence(shape: [usize; 4], w: usize) -> Result<Self, A2aError> {
        let [b, s_l, h, d] = shape;
        if h % w != 0 {
            return Err(A2aError::HeadsNotDivisible {
                heads: h,
                world_size: w,
            });
        }
        let h_l = h / w;
        Ok(Self {
            pack_shape: shape.to_vec(),
            pack_perm: vec![2, 1, 0, 3],
            // recv [W, H/W, s_l, b, D] → [H/W, W, s_l, b, D] ≡ [H/W, S, b, D]
            // → transpose(0,2) ≡ one permute to [b, W, s_l, H/W, D].
            unpack_shape: vec![w, h_l, s_l, b, d],
            unpack_perm: vec![3, 0, 2, 1, 4],
            out_shape: [b, s_l * w, h_l, d],
            concat_dim: 1,
            slice_dim: 2,
        })
    }

    /// scatter 1 / gather 2: `transpose(0,2)` → view `[H/W, W, S/W, b, D]`
    /// → `transpose(0,1)` → a2a → `transpose(0,2)`.
    fn sequence_to_heads(shape: [usize; 4], w: usize) -> Result<Self, A2aError> {
        let [b, s, h_l, d] = shape;
        if s % w != 0 {
            return Err(A2aError::SequenceNotDivisible {
                seq_len: s,
                world_size: w,
            });
        }
        let s_l = s / w;
        Ok(Self {
            // [b, W, s_l, h_l, D] → [W, h_l, s_l, b, D] (both transposes at once)
            pack_shape: vec![b, w, s_l, h_l, d],
            pack_perm: vec![1, 3, 2, 0, 4],
            // recv [W*h_l, s_l, b, D] → transpose(0,2) → [b, s_l, W*h_l, D]
            unpack_shape: vec![w * h_l, s_l, b, d],
            unpack_perm: vec![2, 1, 0, 3],
            out_shape: [b, s_l, w * h_l, d],
            concat_dim: 2,
            slice_dim: 1,
        })
    }

    /// `_usp_input_all_to_all`: heads to dim 0, a2a, view
    /// `[W, h/W, b, s_l, d]`, move `W` next to `s_l`.
    fn usp_input(shape: [usize; 4], w: usize, head_dim: usize) -> Result<Self, A2aError> {
        let (b, h, s_l, d, pack_perm, unpack_perm) = match head_dim {
            1 => (
                shape[0],
                shape[1],
                shape[2],
                shape[3],
                [1, 0, 2, 3],
                [2, 1, 0, 3, 4],
            ),
            2 => (
                shape[0],
                shape[2],
                shape[1],
                shape[3],
                [2, 0, 1, 3],
                [2, 0, 3, 1, 4],
            ),
            _ => return Err(A2aError::InvalidHeadDim { head_dim }),
        };
        if h % w != 0 {
            return Err(A2aError::UspHeadsNotDivisible {
                h_global: h,
                world_size: w,
            });
        }
        let h_l = h / w;
        let out_shape = if head_dim == 1 {
            [b, h_l, s_l * w, d]
        } else {
            [b, s_l * w, h_l, d]
        };
        Ok(Self {
            pack_shape: shape.to_vec(),
            pack_perm: pack_perm.to_vec(),
            unpack_shape: vec![w, h_l, b, s_l, d],
            unpack_perm: unpack_perm.to_vec(),
            out_shape,
            concat_dim: 3 - head_dim,
            slice_dim: head_dim,
        })
    }

    /// `_usp_output_all_to_all`: sequence to dim 0, a2a, view
    /// `[W, s/W, b, h_l, d]`, move `W` next to `h_l`.
    fn usp_output(shape: [usize; 4], w: usize, head_dim: usize) -> Result<Self, A2aError> {
        let (b, h_l, s, d, pack_perm, unpack_perm) = match head_dim {
            1 => (
                shape[0],
                shape[1],
                shape[2],
                shape[3],
                [2, 0, 1, 3],
                [2, 0, 3, 1, 4],
            ),
            2 => (
                shape[0],
                shape[2],
                shape[1],
                shape[3],
                [1, 0, 2, 3],
                [2, 1, 0, 3, 4],
            ),
            _ => return Err(A2aError::InvalidHeadDim { head_dim }),
        };
        if s % w != 0 {
            return Err(A2aError::UspSequenceNotDivisible {
                s_global: s,
                world_size: w,
            });
        }
        let s_l = s / w;
        let out_shape = if head_dim == 1 {
            [b, w * h_l, s_l, d]
        } else {
            [b, s_l, w * h_l, d]
        };
        Ok(Self {
            pack_shape: shape.to_vec(),
            pack_perm: pack_perm.to_vec(),
            unpack_shape: vec![w, s_l, b, h_l, d],
            unpack_perm: unpack_perm.to_vec(),
            out_shape,
            concat_dim: head_dim,
            slice_dim: 3 - head_dim,
        })
    }
}

fn numel(shape: [usize; 4]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, d| acc.checked_mul(*d))
}

/// Bounds every product the recipes and index maths form: the non-zero
/// dimensions times the world size must fit in `usize`.
fn check_scalable(shape: [usize; 4], world: usize) -> Result<(), A2aError> {
    let scaled = shape
        .iter()
        .filter(|d| **d != 0)
        .try_fold(world, |acc, d| acc.checked_mul(*d));
    match scaled {
        Some(_) => Ok(()),
        None => Err(A2aError::ShapeTooLarge {
            shape,
            world_size: world,
        }),
    }
}

fn check_len(actual: usize, shape: [usize; 4]) -> Result<usize, A2aError> {
    match numel(shape) {
        Some(expected) if expected == actual => Ok(expected),
        expected => Err(A2aError::ShapeMismatch {
            shape,
            expected: expected.unwrap_or(usize::MAX),
            actual,
        }),
    }
}

fn check_rank_count(actual: usize, world: usize) -> Result<(), A2aError> {
    if actual == world {
        Ok(())
    } else {
        Err(A2aError::WrongRankCount {
            expected: world,
            actual,
        })
    }
}

fn chunk_mismatch<T>(
    shape: [usize; 4],
    numel: usize,
    received: &[Vec<T>],
    world: usize,
) -> A2aError {
    let bad = received
        .iter()
        .find(|c| c.len() * world != numel)
        .map_or(0, Vec::len);
    A2aError::ShapeMismatch {
        shape,
        expected: numel / world,
        actual: bad,
    }
}

fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

/// `data.view(shape).permute(perm).contiguous()`.
fn permute<T: Copy>(data: &[T], shape: &[usize], perm: &[usize]) -> (Vec<T>, Vec<usize>) {
    let src_strides = row_major_strides(shape);
    let out_shape: Vec<usize> = perm.iter().map(|p| shape[*p]).collect();
    let gather_strides: Vec<usize> = perm.iter().map(|p| src_strides[*p]).collect();
    let mut out = Vec::with_capacity(data.len());
    let mut coord = vec![0usize; out_shape.len()];
    for _ in 0..data.len() {
        let offset: usize = coord.iter().zip(&gather_strides).map(|(c, s)| c * s).sum();
        out.push(data[offset]);
        advance(&mut coord, &out_shape);
    }
    (out, out_shape)
}

/// Row-major odometer increment of `coord` within `shape`.
fn advance(coord: &mut [usize], shape: &[usize]) {
    for i in (0..coord.len()).rev() {
        coord[i] += 1;
        if coord[i] < shape[i] {
            return;
        }
        coord[i] = 0;
    }
}

fn offset_4d(c: [usize; 4], shape: [usize; 4]) -> usize {
    ((c[0] * shape[1] + c[1]) * shape[2] + c[2]) * shape[3] + c[3]
}

fn each_index(shape: [usize; 4], mut f: impl FnMut([usize; 4])) {
    if shape.contains(&0) {
        return;
    }
    for a in 0..shape[0] {
        for b in 0..shape[1] {
            for c in 0..shape[2] {
                for d in 0..shape[3] {
                    f([a, b, c, d]);
                }
            }
        }
    }
}

/// `torch.cat(inputs, dim)` by index arithmetic.
fn concat_4d(inputs: &[Vec<f32>], shape: [usize; 4], dim: usize) -> (Vec<f32>, [usize; 4]) {
    let mut global_shape = shape;
    global_shape[dim] *= inputs.len();
    let mut global = Vec::with_capacity(inputs.len() * inputs.first().map_or(0, Vec::len));
    each_index(global_shape, |g| {
        let (src, mut local) = (g[dim] / shape[dim], g);
        local[dim] = g[dim] % shape[dim];
        global.push(inputs[src][offset_4d(local, shape)]);
    });
    (global, global_shape)
}

/// Part `part` of `parts` equal slices of `global` along `dim`.
fn slice_4d(
    global: &[f32],
    global_shape: [usize; 4],
    dim: usize,
    part: usize,
    parts: usize,
) -> Vec<f32> {
    let mut shape = global_shape;
    shape[dim] /= parts;
    let mut out = Vec::with_capacity(global.len() / parts);
    each_index(shape, |c| {
        let mut g = c;
        g[dim] += part * shape[dim];
        out.push(global[offset_4d(g, global_shape)]);
    });
    out
}

#[cfg(test)]
mod tests;
