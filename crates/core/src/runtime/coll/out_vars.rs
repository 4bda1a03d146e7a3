//! Where each output element of a call sits (its list tensor, chunk and index), as the
//! variables an `expect` formula sees.

use super::build::CallShape;
use crate::c10d::collective::Layout;
use crate::scenario::CollStep;

/// The variables `expect` sees for each of the `total` output elements.
pub(crate) fn out_vars(c: &CollStep, call: &CallShape, total: usize) -> OutVars {
    let elems: usize = c.tensor.shape.iter().product();
    match c.op.layout() {
        Layout::Flat => OutVars::flat(total),
        Layout::Tensors => OutVars::new(Layout::Tensors, &[], elems, total),
        Layout::TensorChunks => OutVars::new(
            Layout::TensorChunks,
            &even_chunks(call.members, elems),
            call.members * elems,
            total,
        ),
        Layout::Chunks => {
            let chunks = match (&call.splits, c.op.splits()) {
                (Some((_, recv_rows)), _) => recv_rows.iter().map(|r| r * elems).collect(),
                (None, true) => even_chunks(call.members, total / call.members),
                (None, false) => even_chunks(call.members, elems),
            };
            OutVars::new(Layout::Chunks, &chunks, total, total)
        }
    }
}

/// Where output element `i` sits: the values of `k`, `chunk`, `j`, `i` and `n` for `expect`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OutVars {
    layout: Layout,
    /// Element offsets where each member's chunk starts (Chunks/TensorChunks), plus the end.
    starts: Vec<usize>,
    /// Elements per tensor of a list (Tensors/TensorChunks).
    per_tensor: usize,
    total: usize,
    /// Further variables with one value for every element (batch_isend_irecv's `peer`, `k`).
    extra: Vec<(&'static str, f64)>,
}

impl OutVars {
    pub fn new(layout: Layout, chunk_elems: &[usize], per_tensor: usize, total: usize) -> OutVars {
        let mut starts = vec![0];
        for c in chunk_elems {
            starts.push(starts.last().expect("non-empty") + c);
        }
        OutVars {
            layout,
            starts,
            per_tensor: per_tensor.max(1),
            total,
            extra: Vec::new(),
        }
    }

    pub fn with(mut self, var: &'static str, v: f64) -> OutVars {
        self.extra.push((var, v));
        self
    }

    /// One flat output: `i` is the element's index (and `n`, `k`, `chunk` one value each).
    pub fn is_flat(&self) -> bool {
        self.layout == Layout::Flat && self.extra.is_empty()
    }

    pub fn flat(total: usize) -> OutVars {
        OutVars::new(Layout::Flat, &[], total, total)
    }

    pub fn get(&self, i: usize, var: &str) -> Option<f64> {
        let (k, local, n) = match self.layout {
            Layout::Flat | Layout::Chunks => (0, i, self.total),
            Layout::Tensors | Layout::TensorChunks => {
                (i / self.per_tensor, i % self.per_tensor, self.per_tensor)
            }
        };
        let chunk_of = |x: usize| {
            let c = self.starts.partition_point(|s| *s <= x).saturating_sub(1);
            (c, x - self.starts[c.min(self.starts.len() - 1)])
        };
        if let Some((_, v)) = self.extra.iter().find(|(n, _)| *n == var) {
            return Some(*v);
        }
        Some(match var {
            "i" => local as f64,
            "n" => n as f64,
            "k" => k as f64,
            "chunk" => chunk_of(local).0 as f64,
            "j" => chunk_of(local).1 as f64,
            _ => return None,
        })
    }
}

/// `layout`'s chunk sizes for a gather-like output of `members` equal chunks of `elems`.
fn even_chunks(members: usize, elems: usize) -> Vec<usize> {
    vec![elems; members]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_vars_locate_uneven_chunks_and_tensors() {
        let v = OutVars::new(Layout::Chunks, &[2, 0, 3], 5, 5);
        let at = |i, var| v.get(i, var).expect("known");
        assert_eq!((at(1, "chunk"), at(1, "j")), (0.0, 1.0));
        assert_eq!((at(2, "chunk"), at(2, "j")), (2.0, 0.0));
        assert_eq!((at(4, "chunk"), at(4, "j")), (2.0, 2.0));
        let v = OutVars::new(Layout::TensorChunks, &[2, 2], 4, 8);
        let at = |i, var| v.get(i, var).expect("known");
        assert_eq!(
            (at(5, "k"), at(5, "i"), at(5, "chunk"), at(5, "j")),
            (1.0, 1.0, 0.0, 1.0)
        );
        assert_eq!(at(7, "chunk"), 1.0);
    }
}
