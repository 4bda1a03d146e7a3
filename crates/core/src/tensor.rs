//! Tensors: dtype, shape and contents, by default real little-endian bytes.
//!
//! Collectives compute on these for real, so a scenario can check values and a hardware run
//! can be compared with the simulator by [`Tensor::digest`]. A [`Tensor<Symbolic>`] carries
//! only lengths and digests (payload.rs), for worlds whose values nobody checks.

use crate::dtype::DType;
use crate::payload::{Payload, Symbolic};
use crate::trace::Fnv1a;

#[derive(Debug, Clone, PartialEq)]
pub struct Tensor<D = Vec<u8>> {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: D,
}

impl<D: Payload> Tensor<D> {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Concatenation along dim 0 (all_gather's output as one tensor).
    pub fn concat(parts: &[Tensor<D>]) -> Tensor<D> {
        let Some(first) = parts.first() else {
            return Tensor {
                dtype: DType::F32,
                shape: vec![0],
                data: D::default(),
            };
        };
        let mut shape = first.shape.clone();
        if shape.is_empty() {
            shape.push(1);
        }
        shape[0] *= parts.len();
        Tensor {
            dtype: first.dtype,
            shape,
            data: D::concat(parts.iter().map(|p| &p.data)),
        }
    }
}

impl Tensor<Symbolic> {
    /// FNV-1a of dtype, shape and the symbolic contents' digest.
    pub fn digest(&self) -> u64 {
        let mut h = Fnv1a::default();
        h.write(self.dtype.name().as_bytes());
        for d in &self.shape {
            h.write(&(*d as u64).to_le_bytes());
        }
        h.write(&self.data.digest().to_le_bytes());
        h.0
    }

    /// The done text of a symbolic result: `[262144 x f32] symbolic, digest 0123abcd...`.
    pub fn summary(&self) -> String {
        format!(
            "[{} x {}] symbolic, digest {:016x}",
            self.numel(),
            self.dtype.name(),
            self.digest()
        )
    }
}

impl Tensor {
    /// A tensor whose element `i` (flat index) is `f(i)` cast to `dtype`.
    pub fn from_fn(dtype: DType, shape: Vec<usize>, f: impl Fn(usize) -> f64) -> Tensor {
        let n: usize = shape.iter().product();
        let w = dtype.size_bytes();
        let mut data = vec![0u8; n * w];
        for (i, e) in data.chunks_mut(w).enumerate() {
            dtype.encode(f(i), e);
        }
        Tensor { dtype, shape, data }
    }

    /// Every element `v` (encoded once, copied: a constant fill of a large tensor).
    pub fn filled(dtype: DType, shape: Vec<usize>, v: f64) -> Tensor {
        let n: usize = shape.iter().product();
        let mut one = vec![0u8; dtype.size_bytes()];
        dtype.encode(v, &mut one);
        Tensor {
            dtype,
            shape,
            data: one.repeat(n),
        }
    }

    pub fn get_f64(&self, i: usize) -> f64 {
        let w = self.dtype.size_bytes();
        self.dtype.decode(&self.data[i * w..(i + 1) * w])
    }

    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.head_f64(self.numel())
    }

    /// The first `k` elements (fewer if the tensor is smaller): what a summary shows, without
    /// decoding the rest.
    pub fn head_f64(&self, k: usize) -> Vec<f64> {
        (0..self.numel().min(k)).map(|i| self.get_f64(i)).collect()
    }

    /// FNV-1a of dtype, shape and bytes: equal digests mean equal results (sim vs hardware).
    /// Streamed over the three parts, so the data is not copied first (the value equals FNV-1a
    /// of their concatenation, which torch mode computes in Python).
    pub fn digest(&self) -> u64 {
        let mut h = Fnv1a::default();
        h.write(self.dtype.name().as_bytes());
        for d in &self.shape {
            h.write(&(*d as u64).to_le_bytes());
        }
        h.write(&self.data);
        h.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::fnv1a;

    #[test]
    fn digest_is_fnv1a_of_dtype_shape_and_bytes_concatenated() {
        let t = Tensor::from_fn(DType::BF16, vec![3, 5], |i| i as f64 * 0.5 - 2.0);
        let mut bytes = b"bf16".to_vec();
        for d in [3u64, 5] {
            bytes.extend_from_slice(&d.to_le_bytes());
        }
        bytes.extend_from_slice(&t.data);
        assert_eq!(t.digest(), fnv1a(&bytes));
        assert_eq!(t.head_f64(4), t.to_f64_vec()[..4].to_vec());
        assert_eq!(t.head_f64(100).len(), 15);
    }
}
