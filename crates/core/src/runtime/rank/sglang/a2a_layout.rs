//! What a sglang sequence-parallel all-to-all must produce: where each element of a rank's
//! input and output lives in the global [b, s, h, d] tensor, so a denoise step's all-to-all can
//! be filled with position-coding values and its output checked element by element.

use crate::scenario::expr::{format_number, Expr};
use crate::scenario::{A2aOp, RANK_VARS};
use crate::tensor::Tensor;

pub(super) fn a2a_vars() -> Vec<&'static str> {
    [&RANK_VARS[..], &["b", "s", "h", "d"]].concat()
}

/// Where an element of a sglang all-to-all lives in the global tensor: the input holds sequence
/// shard `shard` (heads→sequence) or head slice `shard % w` of block `shard / w`
/// (sequence→heads); the output must hold what the intended layout puts there.
pub(super) struct Layout {
    heads_to_seq: bool,
    pub(super) shard: usize,
    w: usize,
    shape: [usize; 4],
    out_shape: [usize; 4],
}

fn coords(i: usize, shape: [usize; 4]) -> [usize; 4] {
    let d = i % shape[3];
    let h = (i / shape[3]) % shape[2];
    let s = (i / (shape[3] * shape[2])) % shape[1];
    let b = i / (shape[3] * shape[2] * shape[1]);
    [b, s, h, d]
}

impl Layout {
    pub(super) fn new(
        op: A2aOp,
        shard: usize,
        w: usize,
        shape: [usize; 4],
        out: [usize; 4],
    ) -> Self {
        let heads_to_seq = matches!(
            op,
            A2aOp::UspInput { .. }
                | A2aOp::AllToAll4D {
                    scatter_dim: 2,
                    gather_dim: 1
                }
        );
        Layout {
            heads_to_seq,
            shard,
            w,
            shape,
            out_shape: out,
        }
    }

    pub(super) fn input_coords(&self, i: usize) -> [usize; 4] {
        let [b, s, h, d] = coords(i, self.shape);
        let (p, w) = (self.shard, self.w);
        if self.heads_to_seq {
            [b, p * self.shape[1] + s, h, d]
        } else {
            [
                b,
                (p / w) * self.shape[1] + s,
                (p % w) * self.shape[2] + h,
                d,
            ]
        }
    }

    pub(super) fn expected_coords(&self, i: usize) -> [usize; 4] {
        let [b, s, h, d] = coords(i, self.out_shape);
        let (p, w) = (self.shard, self.w);
        if self.heads_to_seq {
            let block = (p / w) * w * self.shape[1];
            [b, block + s, (p % w) * self.out_shape[2] + h, d]
        } else {
            [b, p * self.out_shape[1] + s, h, d]
        }
    }

    pub(super) fn value(&self, fill: &Expr, c: [usize; 4], lookup: &dyn Fn(&str) -> f64) -> f64 {
        fill.eval(&|v| match v {
            "b" => c[0] as f64,
            "s" => c[1] as f64,
            "h" => c[2] as f64,
            "d" => c[3] as f64,
            other => lookup(other),
        })
    }

    pub(super) fn check(
        &self,
        out: &Tensor,
        fill: &Expr,
        lookup: &dyn Fn(&str) -> f64,
    ) -> Result<(), String> {
        for i in 0..out.numel() {
            let want_coords = self.expected_coords(i);
            let want = self.value(fill, want_coords, lookup);
            let want = out.dtype.stored(want);
            let got = out.get_f64(i);
            if got != want {
                return Err(format!(
                    "output element {:?}: got {}, expected {} (global sequence position {}, head {})",
                    coords(i, self.out_shape),
                    format_number(got),
                    format_number(want),
                    want_coords[1],
                    want_coords[2]
                ));
            }
        }
        Ok(())
    }
}
