//! A program's own calls on the default process group's store: what
//! `store = dist.distributed_c10d._get_default_store()` then `store.set(...)`, `get`, `add`,
//! `check` or `wait` do, as steps. Programs use them to hand each other small values and to wait
//! for one another beside their collectives (vLLM's `StatelessProcessGroup` is built on them);
//! a rank blocked in `get` or `wait` is one of the hangs scen explains.
//!
//! Keys are the program's: the store joins them under the default group's prefix
//! (`default_pg/0//KEY`, as real torch 2.15 names them in its timeout text), so they never meet
//! c10d's own.
//!
//! A program may also make stores of its own, as vLLM's `StatelessProcessGroup` does:
//! `TCPStore(host, port, world_size, is_master, timeout, wait_for_workers)` (a `tcp_store`
//! step: the master rank serves it on its host, every rank connects to it) and
//! `PrefixStore(prefix, store)` (a `prefix_store` step); a store step's `store` names the one
//! it calls, the default group's when absent.

/// A store step: the call and the store it goes to (`None`: the default group's).
#[derive(Debug, Clone)]
pub struct StoreStep {
    pub store: Option<String>,
    pub call: StoreCall,
}

/// `TCPStore(host_name, port, world_size, is_master, timeout, wait_for_workers)`, as torch 2.15
/// takes it.
#[derive(Debug, Clone)]
pub struct TcpStoreSpec {
    /// Where the clients connect (`${VAR}` expanded when the step runs).
    pub host: String,
    /// A number, or an environment value (`"${MASTER_PORT}"`) read when the step runs.
    pub port: PortArg,
    /// `None`: no count of workers, so nobody checks in or waits for them.
    pub world_size: Option<crate::scenario::model::IntArg>,
    pub is_master: bool,
    /// The connect timeout and every blocking call's (torch's default 300 s).
    pub timeout_ms: u64,
    pub wait_for_workers: bool,
}

/// A store's port: as written, or the rank's environment value it names.
#[derive(Debug, Clone)]
pub enum PortArg {
    Num(u16),
    Env(String),
}

/// TCPStore's default `timeout` (`datetime.timedelta(seconds=300)`).
pub const TCP_STORE_DEFAULT_TIMEOUT_MS: u64 = 300_000;

/// One call on the default group's store.
#[derive(Debug, Clone)]
pub enum StoreCall {
    /// `store = dist.distributed_c10d._get_default_store()`: the program holds the store, so
    /// it outlives `destroy_process_group` until the process ends (on the rank that hosts it,
    /// its server with it: other ranks' calls still reach it; real torch 2.15, user-path
    /// 7/1039, 7/1312).
    Take,
    /// `store.set(key, value)`.
    Set { key: String, value: String },
    /// `store.get(key)`: blocks until `key` is set, up to the store's timeout (the default
    /// group's, `init_process_group(timeout=)`).
    Get { key: String },
    /// `store.add(key, amount)`: the counter `key` plus `amount`.
    Add { key: String, amount: i64 },
    /// `store.check(keys)`: whether every key is set; never blocks.
    Check { keys: Vec<String> },
    /// `store.wait(keys[, timeout])`: blocks until every key is set, up to `timeout_ms` (the
    /// store's timeout without one).
    Wait {
        keys: Vec<String>,
        timeout_ms: Option<u64>,
    },
    /// `store.compare_set(key, expected_value, desired_value)`: sets `desired` where the key
    /// holds `expected` (an absent key counts as `""`); never blocks.
    CompareSet {
        key: String,
        expected: String,
        desired: String,
    },
    /// `store.delete_key(key)`: a later `get` of it waits again.
    DeleteKey { key: String },
    /// `store.num_keys()`: a count only (its value decides nothing here).
    NumKeys,
    /// `name = TCPStore(...)`: the master serves it; every rank connects (and, with a
    /// `world_size` and `wait_for_workers`, checks in; the master then waits for all).
    MakeTcp { name: String, spec: TcpStoreSpec },
    /// `name = PrefixStore(prefix, store)`: the step's store with its keys under `prefix/`.
    MakePrefix { name: String, prefix: String },
}

impl StoreCall {
    /// The step's `op`.
    pub fn op_name(&self) -> &'static str {
        match self {
            StoreCall::Take => "get_default_store",
            StoreCall::Set { .. } => "store_set",
            StoreCall::Get { .. } => "store_get",
            StoreCall::Add { .. } => "store_add",
            StoreCall::Check { .. } => "store_check",
            StoreCall::Wait { .. } => "store_wait",
            StoreCall::CompareSet { .. } => "store_compare_set",
            StoreCall::DeleteKey { .. } => "store_delete_key",
            StoreCall::NumKeys => "store_num_keys",
            StoreCall::MakeTcp { .. } => "tcp_store",
            StoreCall::MakePrefix { .. } => "prefix_store",
        }
    }

    /// The keys it names, in order.
    pub fn keys(&self) -> Vec<&str> {
        match self {
            StoreCall::Take
            | StoreCall::NumKeys
            | StoreCall::MakeTcp { .. }
            | StoreCall::MakePrefix { .. } => Vec::new(),
            StoreCall::Set { key, .. }
            | StoreCall::Get { key }
            | StoreCall::Add { key, .. }
            | StoreCall::CompareSet { key, .. }
            | StoreCall::DeleteKey { key } => {
                vec![key]
            }
            StoreCall::Check { keys } | StoreCall::Wait { keys, .. } => {
                keys.iter().map(String::as_str).collect()
            }
        }
    }
}
