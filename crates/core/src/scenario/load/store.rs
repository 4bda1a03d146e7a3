//! The store steps' fields (scenario/store.rs): `key` or `keys`, `value`, `amount`,
//! `timeout_s`, the stores a program makes (`tcp_store`, `prefix_store`) and the `store` a
//! call goes to, each error naming file:line:col like the rest of load.rs.

use super::{Cx, R};
use crate::scenario::limits;
use crate::scenario::model::{
    PortArg, StepKind, StoreCall, StoreStep, TcpStoreSpec, TCP_STORE_DEFAULT_TIMEOUT_MS,
};
use crate::scenario::raw::{RawIntOrExpr, RawStep};
use toml::Spanned;

/// The fields of store step `op`, `None` for another op.
pub(super) fn op_fields(op: &str) -> Option<Vec<&'static str>> {
    let mut v = match op {
        "get_default_store" => return Some(vec![]),
        "tcp_store" => {
            return Some(vec![
                "as",
                "host",
                "port",
                "world_size",
                "is_master",
                "timeout_s",
                "wait_for_workers",
            ])
        }
        "prefix_store" => vec!["as", "prefix"],
        "store_set" => vec!["key", "value"],
        "store_get" => vec!["key"],
        "store_add" => vec!["key", "amount"],
        "store_check" => vec!["keys"],
        "store_wait" => vec!["keys", "timeout_s"],
        "store_compare_set" => vec!["key", "expected_value", "desired_value"],
        "store_delete_key" => vec!["key"],
        "store_num_keys" => vec![],
        _ => return None,
    };
    v.push("store");
    Some(v)
}

impl Cx<'_> {
    /// Store step `op` (one [`op_fields`] knows).
    pub(super) fn store_step(&self, op: &str, r: &RawStep, op_at: usize) -> R<StepKind> {
        // The store it calls is named before its own name is (`p = PrefixStore("x", p)`).
        let store = self.store_ref(&r.store)?;
        let call = match op {
            "get_default_store" => StoreCall::Take,
            "tcp_store" => StoreCall::MakeTcp {
                name: self.store_name(r, op, op_at)?,
                spec: self.tcp_store_spec(r, op_at)?,
            },
            "prefix_store" => StoreCall::MakePrefix {
                prefix: match &r.prefix {
                    Some(p) => self.key_text(p, p.get_ref())?,
                    None => return Err(self.err(op_at, "prefix_store needs `prefix` (a string)")),
                },
                name: self.store_name(r, op, op_at)?,
            },
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
        Ok(StepKind::Store(StoreStep { store, call }))
    }

    /// `store = "name"`: a store an earlier step made; `None` for the default group's.
    pub(super) fn store_ref(&self, v: &Option<Spanned<String>>) -> R<Option<String>> {
        let Some(v) = v else { return Ok(None) };
        if !self.stores.borrow().contains(v.get_ref()) {
            return Err(self.at(
                v,
                format!(
                    "no store named `{}` is made before this step (a tcp_store or prefix_store step's `as`)",
                    v.get_ref()
                ),
            ));
        }
        Ok(Some(v.get_ref().clone()))
    }

    /// The `as` of a step that makes a store, known to later steps from here on.
    fn store_name(&self, r: &RawStep, op: &str, op_at: usize) -> R<String> {
        let Some(name) = &r.as_name else {
            return Err(self.err(
                op_at,
                format!("{op} needs `as` (the name later store steps call it by)"),
            ));
        };
        let n = name.get_ref();
        if n.is_empty() || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(self.at(name, "a store's name is letters, digits and `_`"));
        }
        let mut known = self.stores.borrow_mut();
        if !known.contains(n) {
            known.push(n.clone());
        }
        Ok(n.clone())
    }

    /// `TCPStore(host, port, world_size, is_master, timeout, wait_for_workers)`.
    fn tcp_store_spec(&self, r: &RawStep, op_at: usize) -> R<TcpStoreSpec> {
        let host = match &r.host {
            Some(h) if !h.get_ref().is_empty() => h.get_ref().clone(),
            Some(h) => return Err(self.at(h, "host is empty")),
            None => return Err(self.err(op_at, "tcp_store needs `host` (a name or address)")),
        };
        let port = match r.port.as_ref().map(|p| (p, p.get_ref())) {
            Some((_, RawIntOrExpr::Int(n))) if (1..=65535).contains(n) => PortArg::Num(*n as u16),
            Some((_, RawIntOrExpr::Expr(s))) if s.starts_with("${") && s.ends_with('}') => {
                PortArg::Env(s.clone())
            }
            Some((p, _)) => {
                return Err(self.at(
                    p,
                    "port must be 1 to 65535 or an environment value such as \"${MASTER_PORT}\" (port 0 lets the master's OS pick one, which the other ranks cannot know)",
                ))
            }
            None => return Err(self.err(op_at, "tcp_store needs `port`")),
        };
        Ok(TcpStoreSpec {
            host,
            port,
            world_size: self.int_arg(&r.world_size)?,
            is_master: r.is_master.as_ref().is_some_and(|b| *b.get_ref()),
            timeout_ms: self
                .timeout(&r.timeout_s)?
                .unwrap_or(TCP_STORE_DEFAULT_TIMEOUT_MS),
            wait_for_workers: r.wait_for_workers.as_ref().is_none_or(|b| *b.get_ref()),
        })
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
