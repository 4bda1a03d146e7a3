//! How a step's `fill` formula becomes a tensor's contents (real values or a symbolic digest),
//! and how a finished call's tensors are kept, by payload kind.

use crate::payload::{Payload, Symbolic};
use crate::runtime::reuse::{periodic_bytes, FillKey, Lent, Reuse, MAX_FORMULA_PERIOD};
use crate::scenario::TensorSpec;
use crate::tensor::Tensor;
use std::cell::RefCell;

/// A finished call's input (as left by in-place ops) and output, by payload kind.
pub(crate) enum Done {
    Values(Tensor, Option<Tensor>),
    Symbolic(Tensor<Symbolic>, Option<Tensor<Symbolic>>),
}

/// How a step's `fill` becomes a tensor's contents, and how a result is kept.
pub(crate) trait Fill: Payload {
    fn done(t: Tensor<Self>, out: Option<Tensor<Self>>) -> Done;
    /// The tensor as real bytes, for a device library (`None` when symbolic).
    fn values(t: &mut Tensor<Self>) -> Option<&mut Tensor>;
    fn values_ref(t: &Tensor<Self>) -> Option<&Tensor>;
    /// A result of real bytes as this kind (symbolic: their digest).
    fn from_values(t: Tensor) -> Tensor<Self>;

    /// A tensor of `shape` filled by `spec.fill`, element `i` of list tensor `k` of
    /// `per_tensor` elements.
    fn fill(
        spec: &TensorSpec,
        shape: Vec<usize>,
        per_tensor: usize,
        var: &dyn Fn(&str) -> f64,
    ) -> Tensor<Self>;

    /// [`Fill::fill`] through a rank's kept buffers (hardware mode; real values only): the
    /// token comes with a buffer the rank wants back unmodified.
    fn fill_reusing(
        spec: &TensorSpec,
        shape: Vec<usize>,
        per_tensor: usize,
        var: &dyn Fn(&str) -> f64,
        _reuse: Option<&RefCell<Reuse>>,
    ) -> (Tensor<Self>, Option<Lent>) {
        (Self::fill(spec, shape, per_tensor, var), None)
    }
}

impl Fill for Vec<u8> {
    fn done(t: Tensor, out: Option<Tensor>) -> Done {
        Done::Values(t, out)
    }
    fn values(t: &mut Tensor) -> Option<&mut Tensor> {
        Some(t)
    }
    fn values_ref(t: &Tensor) -> Option<&Tensor> {
        Some(t)
    }
    fn from_values(t: Tensor) -> Tensor {
        t
    }
    fn fill(
        spec: &TensorSpec,
        shape: Vec<usize>,
        per_tensor: usize,
        var: &dyn Fn(&str) -> f64,
    ) -> Tensor {
        fill_tensor(spec, shape, per_tensor, var)
    }
    fn fill_reusing(
        spec: &TensorSpec,
        shape: Vec<usize>,
        per_tensor: usize,
        var: &dyn Fn(&str) -> f64,
        reuse: Option<&RefCell<Reuse>>,
    ) -> (Tensor, Option<Lent>) {
        let Some(r) = reuse else {
            return (fill_tensor(spec, shape, per_tensor, var), None);
        };
        let key = FillKey {
            formula: spec.fill.source().to_string(),
            dtype: spec.dtype,
            shape: shape.clone(),
            per_tensor,
        };
        r.borrow_mut()
            .fill(key, || fill_tensor(spec, shape, per_tensor, var))
    }
}

/// Symbolic: no element is computed. The digest covers the dtype, the shape, the formula and
/// its value at the first and last element of the first and last list tensor, so ranks whose
/// fills differ (`rank + i`) start from different digests.
impl Fill for Symbolic {
    fn done(t: Tensor<Symbolic>, out: Option<Tensor<Symbolic>>) -> Done {
        Done::Symbolic(t, out)
    }
    fn values(_: &mut Tensor<Symbolic>) -> Option<&mut Tensor> {
        None
    }
    fn values_ref(_: &Tensor<Symbolic>) -> Option<&Tensor> {
        None
    }
    fn from_values(t: Tensor) -> Tensor<Symbolic> {
        let data = Symbolic::leaf(t.data.len(), t.digest());
        Tensor {
            dtype: t.dtype,
            shape: t.shape,
            data,
        }
    }
    fn fill(
        spec: &TensorSpec,
        shape: Vec<usize>,
        per_tensor: usize,
        var: &dyn Fn(&str) -> f64,
    ) -> Tensor<Symbolic> {
        let per = per_tensor.max(1);
        let numel: usize = shape.iter().product();
        let tensors = numel.div_ceil(per).max(1);
        let mut h = crate::trace::Fnv1a::default();
        h.write(spec.dtype.name().as_bytes());
        for d in &shape {
            h.write(&(*d as u64).to_le_bytes());
        }
        h.write(spec.fill.to_string().as_bytes());
        for k in [0, tensors - 1] {
            for i in [0, per - 1] {
                let v = spec.fill.eval(&|v| match v {
                    "i" => i as f64,
                    "n" => per as f64,
                    "k" => k as f64,
                    other => var(other),
                });
                h.write(&v.to_bits().to_le_bytes());
            }
        }
        let len = numel * spec.dtype.size_bytes();
        Tensor {
            dtype: spec.dtype,
            shape,
            data: Symbolic::leaf(len, h.0),
        }
    }
}

/// A tensor of `shape` filled by `spec.fill`, element `i` of list tensor `k` of
/// `per_tensor` elements.
fn fill_tensor(
    spec: &TensorSpec,
    shape: Vec<usize>,
    per_tensor: usize,
    var: &dyn Fn(&str) -> f64,
) -> Tensor {
    let per = per_tensor.max(1);
    if !spec.fill.uses("i") && !spec.fill.uses("k") {
        let v = spec.fill.eval(&|v| match v {
            "n" => per as f64,
            other => var(other),
        });
        return Tensor::filled(spec.dtype, shape, v);
    }
    // Everything but `i` and `k` has one value for the whole tensor: bound once.
    let f = spec.fill.bind(&|v| match v {
        "i" | "k" => None,
        "n" => Some(per as f64),
        other => Some(var(other)),
    });
    let numel: usize = shape.iter().product();
    // `i` read only as `i % m` (and one list tensor, or none read by `k`): one period, repeated.
    let period = f.period_in("i", MAX_FORMULA_PERIOD).map(|p| p as usize);
    if let Some(p) = period.filter(|p| numel <= per || (!f.uses("k") && per.is_multiple_of(*p))) {
        let data = periodic_bytes(spec.dtype, numel, p, |i| {
            f.eval(&|v| if v == "i" { i as f64 } else { 0.0 })
        });
        let dtype = spec.dtype;
        return Tensor { dtype, shape, data };
    }
    Tensor::from_fn(spec.dtype, shape, |i| {
        f.eval(&|v| match v {
            "i" => (i % per) as f64,
            _ => (i / per) as f64,
        })
    })
}
