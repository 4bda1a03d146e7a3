//! A program's own calls on a store: the default group's (scenario/store.rs), or one it made
//! (`TCPStore`, `PrefixStore`). Keys go under the store's prefixes; a blocking `get` or `wait`
//! is a wait on its key, so a rank stuck there is named with the key; and a store whose server
//! has gone raises what real torch 2.15 raises (measured, gloo, plain processes: the process
//! hosting the TCPStore exited):
//! - `get`, `add`, `check` and `wait` (and a `get` already waiting): `DistNetworkError: Failed
//!   to recv, got 0 bytes. ...`;
//! - `set` returns (it has no reply), and the request after it (or after any of the above)
//!   fails to write: `DistNetworkError: Broken pipe`.
//!
//! The store's client keeps that state (c10d/store.rs `StoreClient::call`), so c10d's own
//! store traffic meets the same texts.
//!
//! A store the program makes lives while the program holds it: a TCPStore master's server
//! closes when the program's globals are freed, early in its process's teardown (measured,
//! torch 2.15, gloo, plain processes: 0.2 s after the program's last line, 9 ms after a sentinel
//! object made before it was freed, where the process lived 0.7 s), unless
//! `init_process_group(store=)` made it the default group's store: then it goes with the group.
//! vLLM's `StatelessProcessGroup` keeps its store for the job; the recorder refuses a master
//! freed before the program's end, and measures when its globals were freed
//! (`globals_freed_ms`).

use super::tcp_store::Connect;
use super::{Proc, Res};
use crate::c10d::error::{self, C10dError};
use crate::c10d::store::{join_key, StoreClient, StoreError};
use crate::net::{Clock, Net};
use crate::probe::Probe;
use crate::scenario::model::{PortArg, StoreCall, StoreStep, TcpStoreSpec};
use crate::scenario::Launcher;
use crate::trace::{EventKind, EventTag, StoreUse};
use std::rc::Rc;

/// A store the program made: its connection, the prefixes its keys go under and its timeout
/// (a PrefixStore's is its store's).
#[derive(Clone)]
pub(super) struct OwnStore<N: Net> {
    pub(super) client: Rc<StoreClient<N>>,
    pub(super) prefixes: Vec<String>,
    pub(super) timeout_ms: u64,
    /// The server of a TCPStore this rank made as master (shared by the PrefixStores over it):
    /// freed with the program's globals in its teardown ([`Proc::free_globals`]).
    pub(super) server: Option<Rc<tokio::task::AbortHandle>>,
}

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// Runs a store step on its store.
    pub(super) async fn store_step(&mut self, step: &StoreStep) -> Res<String> {
        if let StoreCall::MakeTcp { name, spec } = &step.call {
            return self.make_tcp_store(name, spec).await;
        }
        let target = self.store_named(&step.store)?;
        match &step.call {
            StoreCall::MakePrefix { name, prefix } => {
                let mut made = target;
                made.prefixes.push(prefix.clone());
                self.stores.insert(name.clone(), made);
                Ok(format!("{name} = PrefixStore({prefix:?})"))
            }
            call => self.store_call(&target, call).await,
        }
    }

    /// The store a step names, the default group's when none.
    pub(super) fn store_named(&self, name: &Option<String>) -> Res<OwnStore<N>> {
        match name {
            Some(n) => (self.stores.get(n).cloned()).ok_or_else(|| error::store_not_made(n)),
            None => {
                let world = self.world()?;
                let pg = self.pgs.get("0").ok_or_else(error::not_initialized)?;
                Ok(OwnStore {
                    client: world.store.clone(),
                    prefixes: pg.prefixes.clone(),
                    timeout_ms: world.store_timeout_ms.unwrap_or(pg.timeout_ms),
                    server: None,
                })
            }
        }
    }

    /// `name = TCPStore(...)`: the master serves it on its host; every rank connects within the
    /// timeout; with a world size and `wait_for_workers` each counts in and the master waits
    /// for all (TCPStore.cpp, as init's own store: docs/rules/c10d.md#r16).
    async fn make_tcp_store(&mut self, name: &str, spec: &TcpStoreSpec) -> Res<String> {
        let host = self.expand(&spec.host);
        let port = match &spec.port {
            PortArg::Num(p) => *p,
            PortArg::Env(v) => {
                let text = self.expand(v);
                text.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| error::port_value(&text))?
            }
        };
        let world_size = self.int_arg(&spec.world_size);
        let mut server = None;
        if spec.is_master {
            match self.serve_store(port).await {
                Ok(handle) => server = Some(Rc::new(handle)),
                Err(e) => {
                    // TCPStore.cpp: a master that cannot listen where torchrun's agent hosts the
                    // store (TORCHELASTIC_USE_AGENT_STORE, its MASTER_PORT) logs "The server socket
                    // on <port> has failed to bind. TORCHELASTIC_USE_AGENT_STORE is enabled so
                    // ignoring the error." and goes on as a client of the agent's store.
                    if !self.on_agent_store_port(port) {
                        return Err(e);
                    }
                    self.tagged_event(
                        EventKind::Warn,
                        format!("The server socket on {port} has failed to bind. TORCHELASTIC_USE_AGENT_STORE is enabled so ignoring the error."),
                        Some(EventTag::AgentPortBind),
                    );
                }
            }
        }
        let timeout_ms = spec.timeout_ms;
        // On the agent's port the server is the agent's store (in hw mode a real PyTorch
        // TCPStore: its protocol).
        let how = Connect {
            agent: self.on_agent_store_port(port),
            check_in: world_size.is_some() && spec.wait_for_workers,
        };
        let deadline = self.now() + timeout_ms;
        let joined = self
            .connect_store(&host, port, timeout_ms, deadline, how)
            .await;
        let joined = match (joined, world_size) {
            (Ok((client, n)), Some(ws)) if how.check_in && spec.is_master => self
                .wait_for_clients(&client, n, ws, timeout_ms)
                .await
                .map(|_| (client, n)),
            (r, _) => r,
        };
        // A constructor that raises frees its store: the master's server with it.
        let (client, _) = joined.inspect_err(|_| {
            if let Some(s) = &server {
                s.abort();
            }
        })?;
        let made = OwnStore {
            client: Rc::new(client),
            prefixes: Vec::new(),
            timeout_ms,
            server,
        };
        self.stores.insert(name.to_string(), made);
        let role = if spec.is_master { "serving" } else { "client" };
        Ok(format!("{name} = TCPStore {host}:{port} ({role})"))
    }

    /// Whether `port` is the store torchrun's agent hosts for this rank (its MASTER_PORT).
    fn on_agent_store_port(&self, port: u16) -> bool {
        self.env.scenario.world.launcher == Launcher::Torchrun
            && self
                .spec
                .env
                .get("MASTER_PORT")
                .and_then(|p| p.parse().ok())
                == Some(port)
    }

    /// Runs `call` on `target`.
    async fn store_call(&mut self, target: &OwnStore<N>, call: &StoreCall) -> Res<String> {
        let store = &target.client;
        let full = |k: &str| join_key(&target.prefixes, k);
        let wait_ms = match call {
            StoreCall::Wait {
                timeout_ms: Some(t),
                ..
            } => *t,
            _ => target.timeout_ms,
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
            StoreCall::Check { .. } => store_check_keys(store, &full_keys).await,
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
                .store_wait_key(store, &full_keys[0], wait_ms, on_timeout.clone())
                .await
                .map(|v| format!("{key}: {} bytes", v.len())),
            StoreCall::Wait { keys, .. } => self
                .store_wait_keys(store, &full_keys, wait_ms, on_timeout.clone())
                .await
                .map(|_| format!("{} key(s) set", keys.len())),
            StoreCall::MakeTcp { .. } | StoreCall::MakePrefix { .. } => {
                unreachable!("store_step makes stores")
            }
        };
        r.or_else(|e| self.store_call_failed(e, on_timeout))
    }

    /// Every key of `keys`, within one deadline `timeout_ms` from now; past it, `timeout`.
    async fn store_wait_keys(
        &self,
        store: &Rc<StoreClient<N>>,
        keys: &[String],
        timeout_ms: u64,
        timeout: C10dError,
    ) -> Result<(), StoreError> {
        let end_ms = self.now().saturating_add(timeout_ms);
        for k in keys {
            let left_ms = end_ms.saturating_sub(self.now()).max(1);
            self.store_wait_key(store, k, left_ms, timeout.clone())
                .await?;
        }
        Ok(())
    }

    /// A blocking read of `key` up to `timeout_ms`, raising `timeout` past it.
    async fn store_wait_key(
        &self,
        store: &Rc<StoreClient<N>>,
        key: &str,
        timeout_ms: u64,
        timeout: C10dError,
    ) -> Result<Vec<u8>, StoreError> {
        let what = format!("the program's store wait for key {key}");
        self.store_get_on(
            store,
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

/// Whether every key is set, asked in order (TCPStore's `check` of a list).
async fn store_check_keys<N: Net>(
    store: &StoreClient<N>,
    keys: &[String],
) -> Result<String, StoreError> {
    let mut all = true;
    for k in keys {
        all &= store.check(k).await?;
    }
    Ok(format!("check: {all}"))
}

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// The teardown of a program that ended at `end_ms` frees its globals first
    /// ([`World::globals_freed_ms_of`](crate::scenario::model::World::globals_freed_ms_of)):
    /// the TCPStores it made as master close their servers then.
    pub(super) async fn free_globals(&self, end_ms: u64) {
        let servers = self.servers_of_globals();
        if servers.is_empty() {
            return;
        }
        let globals_ms = self
            .env
            .scenario
            .world
            .globals_freed_ms_of(self.env.proc_rank);
        self.env.clock.sleep_until_ms(end_ms + globals_ms).await;
        close_servers(&servers.iter().map(|s| &**s).collect::<Vec<_>>()).await;
        let what = match servers.len() {
            1 => "the TCPStore it made as master closed its server".to_string(),
            n => format!("the {n} TCPStores it made as master closed their servers"),
        };
        self.event(
            EventKind::Info,
            format!("its program's globals freed in its teardown: {what}"),
        );
    }

    /// The servers of the TCPStores the program made as master and holds in its globals at its
    /// end: those no group holds (each once, a PrefixStore shares its store's).
    fn servers_of_globals(&self) -> Vec<Rc<tokio::task::AbortHandle>> {
        let mut out: Vec<Rc<tokio::task::AbortHandle>> = Vec::new();
        let held = self.group_holds_server.as_ref();
        for s in self.stores.values().filter_map(|s| s.server.as_ref()) {
            if !out.iter().chain(held).any(|o| Rc::ptr_eq(o, s)) {
                out.push(s.clone());
            }
        }
        out
    }
}

/// Closes store servers (their tasks): each is dropped, its listener and connections closed,
/// at its next poll, and this returns once all are.
pub(super) async fn close_servers(servers: &[&tokio::task::AbortHandle]) {
    for s in servers {
        s.abort();
    }
    while !servers.iter().all(|s| s.is_finished()) {
        tokio::task::yield_now().await;
    }
}
