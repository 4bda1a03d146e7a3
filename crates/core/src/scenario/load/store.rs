//! The store steps' fields (scenario/store.rs): `key` or `keys`, `value`, `amount`,
//! `timeout_s`, each error naming file:line:col like the rest of load.rs.

use super::{Cx, R};
use crate::scenario::limits;
use crate::scenario::model::{StepKind, StoreCall};
use crate::scenario::raw::RawStep;
use toml::Spanned;

/// The fields of store step `op`, `None` for another op.
pub(super) fn op_fields(op: &str) -> Option<Vec<&'static str>> {
    Some(match op {
        "get_default_store" => vec![],
        "store_set" => vec!["key", "value"],
        "store_get" => vec!["key"],
        "store_add" => vec!["key", "amount"],
        "store_check" => vec!["keys"],
        "store_wait" => vec!["keys", "timeout_s"],
        _ => return None,
    })
}

impl Cx<'_> {
    /// Store step `op` (one [`op_fields`] knows).
    pub(super) fn store_step(&self, op: &str, r: &RawStep, op_at: usize) -> R<StepKind> {
        let call = match op {
            "get_default_store" => StoreCall::Take,
            "store_set" => StoreCall::Set {
                key: self.store_key(r, op, op_at)?,
                value: match &r.value {
                    Some(v) if v.get_ref().len() <= limits::MAX_STORE_VALUE_BYTES => {
                        v.get_ref().clone()
                    }
                    Some(v) => {
                        return Err(self.at(
                            v,
                            format!(
                                "value is longer than {} bytes (scen's limit for a store value)",
                                limits::MAX_STORE_VALUE_BYTES
                            ),
                        ))
                    }
                    None => return Err(self.err(op_at, "store_set needs `value` (a string)")),
                },
            },
            "store_get" => StoreCall::Get {
                key: self.store_key(r, op, op_at)?,
            },
            "store_add" => StoreCall::Add {
                key: self.store_key(r, op, op_at)?,
                amount: match &r.amount {
                    Some(a) => *a.get_ref(),
                    None => {
                        return Err(self.err(op_at, "store_add needs `amount` (an integer)"));
                    }
                },
            },
            "store_check" => StoreCall::Check {
                keys: self.store_keys(r, op, op_at)?,
            },
            _ => StoreCall::Wait {
                keys: self.store_keys(r, op, op_at)?,
                timeout_ms: self.timeout(&r.timeout_s)?,
            },
        };
        Ok(StepKind::Store(call))
    }

    fn store_key(&self, r: &RawStep, op: &str, op_at: usize) -> R<String> {
        match &r.key {
            Some(k) => self.key_text(k, k.get_ref()),
            None => Err(self.err(op_at, format!("{op} needs `key` (a string)"))),
        }
    }

    fn store_keys(&self, r: &RawStep, op: &str, op_at: usize) -> R<Vec<String>> {
        let Some(keys) = &r.keys else {
            return Err(self.err(op_at, format!("{op} needs `keys` (a list of strings)")));
        };
        if keys.get_ref().is_empty() || keys.get_ref().len() > limits::MAX_STORE_KEYS {
            return Err(self.at(
                keys,
                format!(
                    "keys must name 1 to {} keys (scen's limit for one call)",
                    limits::MAX_STORE_KEYS
                ),
            ));
        }
        keys.get_ref()
            .iter()
            .map(|k| self.key_text(keys, k))
            .collect()
    }

    fn key_text<T>(&self, at: &Spanned<T>, key: &str) -> R<String> {
        if key.len() > limits::MAX_STORE_KEY_BYTES {
            return Err(self.at(
                at,
                format!(
                    "a key is longer than {} bytes (scen's limit for a store key)",
                    limits::MAX_STORE_KEY_BYTES
                ),
            ));
        }
        Ok(key.to_string())
    }
}
