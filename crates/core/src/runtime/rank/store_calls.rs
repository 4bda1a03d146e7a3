//! A program's own calls on the default group's store (scenario/store.rs). Its keys go under
//! the default group's prefix; a blocking `get` or `wait` is a wait on its key, so a rank stuck
//! there is named with the key; and a store whose server has gone raises what real torch 2.15
//! raises (measured, gloo, plain processes: rank 0 hosts the TCPStore and exited):
//! - `get`, `add`, `check` and `wait` (and a `get` already waiting): `DistNetworkError: Failed
//!   to recv, got 0 bytes. ...`;
//! - `set` returns (it has no reply), and the request after it (or after any of the above)
//!   fails to write: `DistNetworkError: Broken pipe`.
//!
//! The store's client keeps that state (c10d/store.rs `StoreClient::call`), so c10d's own
//! store traffic meets the same texts.

use super::{Proc, Res};
use crate::c10d::error::{self, C10dError};
use crate::c10d::store::{join_key, StoreError};
use crate::net::{Clock, Net};
use crate::probe::Probe;
use crate::scenario::model::StoreCall;
use crate::trace::StoreUse;

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// Runs `call` on the default group's store.
    pub(super) async fn store_call(&mut self, call: &StoreCall) -> Res<String> {
        let store = self.world()?.store.clone();
        let pg = self.pgs.get("0").ok_or_else(error::not_initialized)?;
        let (prefixes, store_timeout_ms) = (pg.prefixes.clone(), pg.timeout_ms);
        let full = |k: &str| join_key(&prefixes, k);
        let wait_ms = match call {
            StoreCall::Wait {
                timeout_ms: Some(t),
                ..
            } => *t,
            _ => store_timeout_ms,
        };
        let full_keys: Vec<String> = call.keys().into_iter().map(full).collect();
        let on_timeout = match (call, store.as_file()) {
            (StoreCall::Get { key }, _) => store.get_timeout_error(wait_ms, &full(key)),
            (_, Some(_)) => error::file_store_wait_timeout(),
            _ => error::store_wait_timeout_keys(wait_ms, &full_keys),
        };
        let r = match call {
            StoreCall::Take => {
                self.holds_store = true;
                Ok("the program holds the default group's store: it outlives destroy_process_group".into())
            }
            StoreCall::Set { key, value } => store
                .set(&full_keys[0], value.as_bytes())
                .await
                .map(|_| format!("{key} set ({} bytes)", value.len())),
            StoreCall::Add { key, amount } => store
                .add(&full_keys[0], *amount)
                .await
                .map(|v| format!("{key} = {v}")),
            StoreCall::Check { .. } => self.store_check_keys(&full_keys).await,
            StoreCall::CompareSet {
                key,
                expected,
                desired,
            } => store
                .compare_set(&full_keys[0], expected.as_bytes(), desired.as_bytes())
                .await
                .map(|v| format!("{key}: {} bytes", v.len())),
            StoreCall::DeleteKey { key } => store
                .delete_key(&full_keys[0])
                .await
                .map(|gone| format!("{key} deleted: {gone}")),
            StoreCall::NumKeys => store.num_keys().await.map(|n| format!("{n} keys")),
            StoreCall::Get { key } => self
                .store_wait_key(&full_keys[0], wait_ms, on_timeout.clone())
                .await
                .map(|v| format!("{key}: {} bytes", v.len())),
            StoreCall::Wait { keys, .. } => self
                .store_wait_keys(&full_keys, wait_ms, on_timeout.clone())
                .await
                .map(|_| format!("{} key(s) set", keys.len())),
        };
        r.or_else(|e| self.store_call_failed(e, on_timeout))
    }

    /// Whether every key is set, asked in order (TCPStore's `check` of a list).
    async fn store_check_keys(&self, keys: &[String]) -> Result<String, StoreError> {
        let store = self.world.as_ref().expect("world").store.clone();
        let mut all = true;
        for k in keys {
            all &= store.check(k).await?;
        }
        Ok(format!("check: {all}"))
    }

    /// Every key of `keys`, within one deadline `timeout_ms` from now; past it, `timeout`.
    async fn store_wait_keys(
        &self,
        keys: &[String],
        timeout_ms: u64,
        timeout: C10dError,
    ) -> Result<(), StoreError> {
        let end_ms = self.now().saturating_add(timeout_ms);
        for k in keys {
            let left_ms = end_ms.saturating_sub(self.now()).max(1);
            self.store_wait_key(k, left_ms, timeout.clone()).await?;
        }
        Ok(())
    }

    /// A blocking read of `key` up to `timeout_ms`, raising `timeout` past it.
    async fn store_wait_key(
        &self,
        key: &str,
        timeout_ms: u64,
        timeout: C10dError,
    ) -> Result<Vec<u8>, StoreError> {
        let store = self.world.as_ref().expect("world").store.clone();
        let what = format!("the program's store wait for key {key}");
        self.store_get_on(
            &store,
            key,
            Some(timeout_ms),
            Vec::new(),
            (StoreUse::Program, what),
            None,
            Some(timeout),
        )
        .await
    }

    /// What the program sees of a failed call: the timeout error it was given, or what the
    /// store's failure raises (a gone server's texts among them: [`Proc::store_err`]).
    fn store_call_failed(&self, e: StoreError, on_timeout: C10dError) -> Res<String> {
        match e {
            StoreError::Timeout { .. } => Err(on_timeout),
            other => Err(self.store_err(other)),
        }
    }
}
