//! PyTorch c10d semantics (docs/rules/c10d.md, R1–R39), modelled by mechanism: store keys, group
//! counters, backend maps. The rank interpreter (runtime/rank.rs) drives these pieces.

pub mod backend;
pub mod ccl_env;
pub mod collective;
pub mod error;
pub mod naming;
pub mod rendezvous;
pub mod store;

/// An environment from `(name, value)` pairs, for tests.
#[cfg(test)]
pub(crate) fn test_env(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
