//! sglang's texts as a rank raises them: its own error enums (crates/core/src/sglang, each
//! variant with sglang's exception class and words) become Python exceptions here, plus the
//! assertion of its Ulysses all-to-all. They are sglang's words, not PyTorch's.

use super::{assertion, C10dError};

/// An error of sglang's code: `exception` is the Python class its source raises.
pub fn sglang(exception: &'static str, message: String) -> C10dError {
    C10dError {
        kind: exception,
        message,
    }
}

/// sglang's `SeqAllToAll4D`: the sequence must split evenly over the sequence-parallel ranks.
pub fn seq_not_divisible(seq: usize, sp_degree: usize) -> C10dError {
    assertion(format!(
        "sequence length {seq} is not divisible by sp_degree {sp_degree}"
    ))
}
