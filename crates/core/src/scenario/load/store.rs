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
        "store_compare_set" => vec!["key", "expected_value", "desired_value"],
        "store_delete_key" => vec!["key"],
        "store_num_keys" => vec![],
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
                value: self.store_value(&r.value, "value", op, op_at)?,
            },
            "store_compare_set" => StoreCall::CompareSet {
                key: self.store_key(r, op, op_at)?,
                expected: self.store_value(&r.expected_value, "expected_value", op, op_at)?,
                desired: self.store_value(&r.desired_value, "desired_value", op, op_at)?,
            },
            "store_delete_key" => StoreCall::DeleteKey {
                key: self.store_key(r, op, op_at)?,
            },
            "store_num_keys" => StoreCall::NumKeys,
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

    /// A value field (`name`), required, at most scen's limit.
    fn store_value(
        &self,
        v: &Option<Spanned<String>>,
        name: &str,
        op: &str,
        op_at: usize,
    ) -> R<String> {
        match v {
            Some(v) if v.get_ref().len() <= limits::MAX_STORE_VALUE_BYTES => {
                Ok(v.get_ref().clone())
            }
            Some(v) => Err(self.at(
                v,
                format!(
                    "{name} is longer than {} bytes (scen's limit for a store value)",
                    limits::MAX_STORE_VALUE_BYTES
                ),
            )),
            None => Err(self.err(op_at, format!("{op} needs `{name}` (a string)"))),
        }
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
