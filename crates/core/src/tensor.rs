//! Tensors with real data: dtype, shape and little-endian bytes.
//!
//! Collectives compute on these for real, so a scenario can check values and a hardware run
//! can be compared with the simulator by [`Tensor::digest`].

use crate::dtype::DType;
use crate::trace::fnv1a;

#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

impl Tensor {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

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
        (0..self.numel()).map(|i| self.get_f64(i)).collect()
    }

    /// Concatenation along dim 0 (all_gather's output as one tensor).
    pub fn concat(parts: &[Tensor]) -> Tensor {
        let Some(first) = parts.first() else {
            return Tensor {
                dtype: DType::F32,
                shape: vec![0],
                data: vec![],
            };
        };
        let mut shape = first.shape.clone();
        if shape.is_empty() {
            shape.push(1);
        }
        shape[0] *= parts.len();
        let data = parts.iter().flat_map(|p| p.data.iter().copied()).collect();
        Tensor {
            dtype: first.dtype,
            shape,
            data,
        }
    }

    /// FNV-1a of dtype, shape and bytes: equal digests mean equal results (sim vs hardware).
    pub fn digest(&self) -> u64 {
        let mut bytes = self.dtype.name().as_bytes().to_vec();
        for d in &self.shape {
            bytes.extend_from_slice(&(*d as u64).to_le_bytes());
        }
        bytes.extend_from_slice(&self.data);
        fnv1a(&bytes)
    }
}
