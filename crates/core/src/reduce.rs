//! Reduction operators, computed natively per dtype, and which backend accepts which.
//!
//! Each combine step rounds to the dtype (bf16 sums are rounded after every add, as a ring
//! all-reduce does on real hardware), so results carry the rounding a real run has.

use crate::dtype::DType;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReduceOp {
    Sum,
    Min,
    Max,
    Product,
    Avg,
}

impl ReduceOp {
    /// The name PyTorch prints (`ReduceOp.SUM`).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "SUM",
            ReduceOp::Min => "MIN",
            ReduceOp::Max => "MAX",
            ReduceOp::Product => "PRODUCT",
            ReduceOp::Avg => "AVG",
        }
    }
}

impl FromStr for ReduceOp {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "sum" => ReduceOp::Sum,
            "min" => ReduceOp::Min,
            "max" => ReduceOp::Max,
            "product" | "prod" => ReduceOp::Product,
            "avg" => ReduceOp::Avg,
            other => return Err(format!("unknown reduce op `{other}`")),
        })
    }
}

/// A backend refusing a dtype/op combination, as PyTorch raises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendOpError {
    pub kind: &'static str,
    pub message: String,
}

impl std::fmt::Display for BackendOpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// R35/R36: XCCL takes all nine dtypes; bool with AVG is refused.
pub fn check_xccl(dtype: DType, op: Option<ReduceOp>) -> Result<(), BackendOpError> {
    if dtype == DType::Bool && op == Some(ReduceOp::Avg) {
        return Err(BackendOpError {
            kind: "TypeError",
            message: "Cannot use ReduceOp.AVG with boolean inputs".into(),
        });
    }
    Ok(())
}

/// Gloo has no AVG.
pub fn check_gloo(_dtype: DType, op: Option<ReduceOp>) -> Result<(), BackendOpError> {
    if op == Some(ReduceOp::Avg) {
        return Err(BackendOpError {
            kind: "ValueError",
            message: "Cannot use ReduceOp.AVG with Gloo".into(),
        });
    }
    Ok(())
}

fn combine(dtype: DType, op: ReduceOp, a: f64, b: f64) -> f64 {
    if dtype == DType::Bool {
        let (a, b) = (a != 0.0, b != 0.0);
        let r = match op {
            ReduceOp::Sum | ReduceOp::Max | ReduceOp::Avg => a || b,
            ReduceOp::Product | ReduceOp::Min => a && b,
        };
        return r as u8 as f64;
    }
    match op {
        ReduceOp::Sum | ReduceOp::Avg => a + b,
        ReduceOp::Product => a * b,
        ReduceOp::Min => a.min(b),
        ReduceOp::Max => a.max(b),
    }
}

/// `acc[i] = acc[i] op other[i]`, rounded to `dtype` per element (integers wrap like torch).
pub fn reduce_into(dtype: DType, op: ReduceOp, acc: &mut [u8], other: &[u8]) {
    let w = dtype.size_bytes();
    for (a, b) in acc.chunks_mut(w).zip(other.chunks(w)) {
        let v = match dtype {
            DType::I64 => {
                let (x, y) = (dtype.decode(a) as i64, dtype.decode(b) as i64);
                let r = match op {
                    ReduceOp::Sum | ReduceOp::Avg => x.wrapping_add(y),
                    ReduceOp::Product => x.wrapping_mul(y),
                    ReduceOp::Min => x.min(y),
                    ReduceOp::Max => x.max(y),
                };
                a.copy_from_slice(&r.to_le_bytes());
                continue;
            }
            _ => combine(dtype, op, dtype.decode(a), dtype.decode(b)),
        };
        let v = match dtype {
            DType::I32 => (v as i64 as i32) as f64,
            DType::I8 => (v as i64 as i8) as f64,
            DType::U8 => (v as i64 as u8) as f64,
            _ => v,
        };
        dtype.encode(v, a);
    }
}

/// AVG's final division by the number of contributors.
pub fn finish_avg(dtype: DType, buf: &mut [u8], n: usize) {
    let w = dtype.size_bytes();
    for e in buf.chunks_mut(w) {
        let v = dtype.decode(e) / n as f64;
        let v = if dtype.is_float() { v } else { v.trunc() };
        dtype.encode(v, e);
    }
}
