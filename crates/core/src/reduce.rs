//! Reduction operators, computed natively per dtype, and which backend accepts which.
//!
//! Each combine step rounds to the dtype (bf16 sums are rounded after every add, as a ring
//! all-reduce does on real hardware), so results carry the rounding a real run has.

use crate::c10d::error::{self, C10dError};
use crate::dtype::DType;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReduceOp {
    Sum,
    Min,
    Max,
    Product,
    Avg,
    /// Bitwise and/or/xor: integer and bool tensors on gloo; XCCL refuses them (R36).
    Band,
    Bor,
    Bxor,
}

impl ReduceOp {
    /// Every reduce op, for tests that sweep them.
    pub const ALL: [ReduceOp; 8] = [
        ReduceOp::Sum,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Product,
        ReduceOp::Avg,
        ReduceOp::Band,
        ReduceOp::Bor,
        ReduceOp::Bxor,
    ];

    pub fn is_bitwise(self) -> bool {
        matches!(self, ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor)
    }

    /// The name PyTorch prints (`ReduceOp.SUM`).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "SUM",
            ReduceOp::Min => "MIN",
            ReduceOp::Max => "MAX",
            ReduceOp::Product => "PRODUCT",
            ReduceOp::Avg => "AVG",
            ReduceOp::Band => "BAND",
            ReduceOp::Bor => "BOR",
            ReduceOp::Bxor => "BXOR",
        }
    }
}

/// A reduce op name scen does not know (lower-cased, as matched).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown reduce op `{0}`")]
pub struct UnknownReduceOp(pub String);

impl FromStr for ReduceOp {
    type Err = UnknownReduceOp;
    fn from_str(s: &str) -> Result<Self, UnknownReduceOp> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "sum" => ReduceOp::Sum,
            "min" => ReduceOp::Min,
            "max" => ReduceOp::Max,
            "product" | "prod" => ReduceOp::Product,
            "avg" => ReduceOp::Avg,
            "band" => ReduceOp::Band,
            "bor" => ReduceOp::Bor,
            "bxor" => ReduceOp::Bxor,
            other => return Err(UnknownReduceOp(other.to_string())),
        })
    }
}

/// R35/R36: XCCL takes all nine dtypes and MIN, MAX, SUM, PRODUCT, AVG; bool SUM runs as MAX
/// (see [`reduce_into`]); any other op, and bool with AVG, is refused before any data moves.
pub fn check_xccl(dtype: DType, op: Option<ReduceOp>) -> Result<(), C10dError> {
    if let Some(o) = op.filter(|o| o.is_bitwise()) {
        return Err(error::xccl_bitwise_op(o));
    }
    if dtype == DType::Bool && op == Some(ReduceOp::Avg) {
        return Err(error::avg_of_bool());
    }
    Ok(())
}

/// Gloo (ProcessGroupGloo.cpp, `postReduce`): AVG is SUM then an in-place true division by the
/// group size; an integral tensor (bool included) cannot hold the float quotient, so the division
/// raises torch's cast error (real PyTorch 2.15: `result type Float can't be cast to the desired
/// output type Long` for i64; docs/torch.md). Every other dtype/op pair of the nine dtypes and five
/// ops is served (bool SUM is gloo::sum<bool>, a logical or). The error comes *after* the
/// reduction ran (the caller raises it once the data has moved).
///
/// Bitwise ops need an integral dtype (bool counts): floats raise gloo's `toFunction` error.
pub fn check_gloo(dtype: DType, op: Option<ReduceOp>) -> Result<(), C10dError> {
    if let Some(o) = op.filter(|o| o.is_bitwise() && dtype.is_float()) {
        return Err(error::gloo_bitwise_on_float(o));
    }
    if !dtype.is_float() && op == Some(ReduceOp::Avg) {
        return Err(error::gloo_avg_of_integral(dtype));
    }
    Ok(())
}

fn combine(dtype: DType, op: ReduceOp, a: f64, b: f64) -> f64 {
    if dtype == DType::Bool {
        let (a, b) = (a != 0.0, b != 0.0);
        let r = match op {
            ReduceOp::Sum | ReduceOp::Max | ReduceOp::Avg | ReduceOp::Bor => a || b,
            ReduceOp::Product | ReduceOp::Min | ReduceOp::Band => a && b,
            ReduceOp::Bxor => a ^ b,
        };
        return r as u8 as f64;
    }
    match op {
        ReduceOp::Sum | ReduceOp::Avg => a + b,
        ReduceOp::Product => a * b,
        ReduceOp::Min => a.min(b),
        ReduceOp::Max => a.max(b),
        // Refused for floats by every backend check before data moves.
        ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor => f64::NAN,
    }
}

/// `acc[i] = acc[i] op other[i]`, rounded to `dtype` per element (integers wrap like torch).
pub fn reduce_into(dtype: DType, op: ReduceOp, acc: &mut [u8], other: &[u8]) {
    let w = dtype.size_bytes();
    for (a, b) in acc.chunks_mut(w).zip(other.chunks(w)) {
        if dtype.is_float() || dtype == DType::Bool {
            let v = combine(dtype, op, dtype.decode(a), dtype.decode(b));
            dtype.encode(v, a);
            continue;
        }
        // Integers exactly, in wrapping i64 arithmetic (f64 would lose bits past 2^53).
        let (x, y) = (int_of(dtype, a), int_of(dtype, b));
        let r = match op {
            ReduceOp::Sum | ReduceOp::Avg => x.wrapping_add(y),
            ReduceOp::Product => x.wrapping_mul(y),
            ReduceOp::Min => x.min(y),
            ReduceOp::Max => x.max(y),
            ReduceOp::Band => x & y,
            ReduceOp::Bor => x | y,
            ReduceOp::Bxor => x ^ y,
        };
        put_int(dtype, r, a);
    }
}

/// An integer element, read exactly.
fn int_of(dtype: DType, b: &[u8]) -> i64 {
    match dtype {
        DType::I64 => i64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
        DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        DType::I8 => b[0] as i8 as i64,
        _ => b[0] as i64,
    }
}

/// Writes an integer element, wrapping to the dtype's width.
fn put_int(dtype: DType, v: i64, out: &mut [u8]) {
    match dtype {
        DType::I64 => out.copy_from_slice(&v.to_le_bytes()),
        DType::I32 => out.copy_from_slice(&(v as i32).to_le_bytes()),
        _ => out[0] = v as u8,
    }
}

/// AVG's final division by the number of contributors (integers truncate toward zero).
pub fn finish_avg(dtype: DType, buf: &mut [u8], n: usize) {
    let w = dtype.size_bytes();
    for e in buf.chunks_mut(w) {
        if dtype.is_float() || dtype == DType::Bool {
            let v = dtype.decode(e) / n as f64;
            dtype.encode(v, e);
        } else {
            put_int(dtype, int_of(dtype, e) / n as i64, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DTYPES: [DType; 9] = DType::ALL;
    const OPS: [ReduceOp; 8] = ReduceOp::ALL;

    /// R35/R36: XCCL refuses the bitwise ops (ValueError) and bool AVG (TypeError), nothing else
    /// of the nine dtypes and five ops.
    #[test]
    fn r35_r36_xccl_refuses_bitwise_ops_and_bool_avg() {
        for d in DTYPES {
            assert_eq!(check_xccl(d, None), Ok(()), "data movement takes {d:?}");
            for op in OPS {
                let r = check_xccl(d, Some(op));
                if op.is_bitwise() {
                    assert_eq!(
                        r.expect_err("refused").to_string(),
                        format!("ValueError: Cannot use ReduceOp.{} with XCCL", op.name())
                    );
                } else if d == DType::Bool && op == ReduceOp::Avg {
                    let e = r.expect_err("refused");
                    assert_eq!(
                        e.to_string(),
                        "TypeError: Cannot use ReduceOp.AVG with boolean inputs"
                    );
                } else {
                    assert_eq!(r, Ok(()), "{d:?} {op:?}");
                }
            }
        }
    }

    #[test]
    fn gloo_refuses_integral_avg_and_bitwise_floats() {
        for d in DTYPES {
            for op in OPS {
                let r = check_gloo(d, Some(op));
                if op.is_bitwise() && d.is_float() {
                    assert_eq!(
                        r.expect_err("refused").to_string(),
                        format!(
                            "RuntimeError: Cannot use ReduceOp.{} with non-integral dtype",
                            op.name()
                        )
                    );
                } else if !d.is_float() && op == ReduceOp::Avg {
                    assert_eq!(
                        r.expect_err("refused").to_string(),
                        format!(
                            "RuntimeError: result type Float can't be cast to the desired output type {}",
                            d.torch_name()
                        )
                    );
                } else {
                    assert_eq!(r, Ok(()), "{d:?} {op:?}");
                }
            }
        }
    }

    /// R35: bool SUM runs as MAX (logical or); integer AVG truncates toward zero.
    #[test]
    fn r35_bool_sum_is_or_and_integer_avg_truncates() {
        let mut acc = vec![0u8, 1, 0];
        reduce_into(DType::Bool, ReduceOp::Sum, &mut acc, &[1, 1, 0]);
        assert_eq!(acc, vec![1, 1, 0]);
        let mut v = (-7i32).to_le_bytes().to_vec();
        finish_avg(DType::I32, &mut v, 2);
        assert_eq!(i32::from_le_bytes(v.try_into().expect("4")), -3);
    }
}
