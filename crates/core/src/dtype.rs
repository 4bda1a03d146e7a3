//! Element types of tensors, as scenario files name them and PyTorch prints them.
//!
//! Values travel as little-endian bytes; conversion to and from f64 is the one place where a
//! formula's value meets a dtype (bf16/fp16 through `half`, integers with `as` casts).

use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DType {
    F32,
    BF16,
    F16,
    F64,
    I64,
    I32,
    I8,
    U8,
    Bool,
}

impl DType {
    /// Every dtype, for tests that sweep them.
    pub const ALL: [DType; 9] = [
        DType::F32,
        DType::BF16,
        DType::F16,
        DType::F64,
        DType::I64,
        DType::I32,
        DType::I8,
        DType::U8,
        DType::Bool,
    ];

    pub fn size_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::BF16 | DType::F16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// The name scenario files use.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::F64 => "f64",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }

    /// The name PyTorch prints (CollectiveFingerPrint, error texts).
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::F32 => "Float",
            DType::BF16 => "BFloat16",
            DType::F16 => "Half",
            DType::F64 => "Double",
            DType::I64 => "Long",
            DType::I32 => "Int",
            DType::I8 => "Char",
            DType::U8 => "Byte",
            DType::Bool => "Bool",
        }
    }

    /// A floating dtype's (explicit mantissa bits, smallest normal exponent); None for integers.
    /// [`DType::ulp`] is built on it (torch mode's program gets the same table).
    pub fn float_format(self) -> Option<(i32, i32)> {
        match self {
            DType::BF16 => Some((7, -126)),
            DType::F16 => Some((10, -14)),
            DType::F32 => Some((23, -126)),
            DType::F64 => Some((52, -1022)),
            _ => None,
        }
    }

    /// The spacing of this dtype's values at `v` (one unit in the last place); 0 for integers.
    /// Below the smallest normal the subnormal spacing applies.
    pub fn ulp(self, v: f64) -> f64 {
        let Some((mantissa_bits, min_exp)) = self.float_format() else {
            return 0.0;
        };
        let e = if v == 0.0 || !v.is_finite() {
            min_exp
        } else {
            (v.abs().log2().floor() as i32).max(min_exp)
        };
        2f64.powi(e - mantissa_bits)
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::BF16 | DType::F16 | DType::F64)
    }

    /// Writes `v` as one element into `out` (which has `size_bytes()` bytes).
    pub fn encode(self, v: f64, out: &mut [u8]) {
        match self {
            DType::F32 => out.copy_from_slice(&(v as f32).to_le_bytes()),
            DType::F64 => out.copy_from_slice(&v.to_le_bytes()),
            DType::BF16 => out.copy_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
            DType::F16 => out.copy_from_slice(&half::f16::from_f64(v).to_le_bytes()),
            DType::I64 => out.copy_from_slice(&(v as i64).to_le_bytes()),
            DType::I32 => out.copy_from_slice(&(v as i64 as i32).to_le_bytes()),
            DType::I8 => out[0] = v as i64 as i8 as u8,
            DType::U8 => out[0] = v as i64 as u8,
            DType::Bool => out[0] = (v != 0.0) as u8,
        }
    }

    /// `v` as an element of this dtype holds it (encoded, then read back), without a tensor.
    pub fn stored(self, v: f64) -> f64 {
        let mut b = [0u8; 8];
        let b = &mut b[..self.size_bytes()];
        self.encode(v, b);
        self.decode(b)
    }

    /// Reads one element.
    pub fn decode(self, b: &[u8]) -> f64 {
        match self {
            DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DType::F64 => f64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            DType::BF16 => half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
            DType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
            DType::I64 => i64::from_le_bytes(b[..8].try_into().expect("8 bytes")) as f64,
            DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DType::I8 => b[0] as i8 as f64,
            DType::U8 => b[0] as f64,
            DType::Bool => (b[0] != 0) as u8 as f64,
        }
    }
}

/// A dtype name scen does not know (the name as given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype `{0}`")]
pub struct UnknownDType(pub String);

impl FromStr for DType {
    type Err = UnknownDType;
    fn from_str(s: &str) -> Result<Self, UnknownDType> {
        Ok(match s {
            "f32" | "float32" | "float" => DType::F32,
            "bf16" | "bfloat16" => DType::BF16,
            "f16" | "float16" | "half" => DType::F16,
            "f64" | "float64" | "double" => DType::F64,
            "i64" | "int64" | "long" => DType::I64,
            "i32" | "int32" | "int" => DType::I32,
            "i8" | "int8" => DType::I8,
            "u8" | "uint8" => DType::U8,
            "bool" => DType::Bool,
            other => return Err(UnknownDType(other.to_string())),
        })
    }
}

#[cfg(test)]
mod ulp_tests {
    use super::*;

    #[test]
    fn ulp_is_the_spacing_of_the_dtype_at_the_value() {
        assert_eq!(DType::BF16.ulp(1.0), 1.0 / 128.0);
        assert_eq!(DType::BF16.ulp(3.0), 2.0 / 128.0);
        assert_eq!(DType::F16.ulp(1.0), 1.0 / 1024.0);
        assert_eq!(DType::F32.ulp(1.0), f64::from(f32::EPSILON));
        assert_eq!(DType::I32.ulp(5.0), 0.0);
    }
}
