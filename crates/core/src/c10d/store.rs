//! The TCPStore: the key-value service every rendezvous in c10d goes through (R10, R16, R17).
//!
//! Rank 0 serves it; every rank (rank 0 included) is a client. Blocking reads (`get`, the
//! workers count) wait on the server up to the caller's timeout, as PyTorch's store does, and
//! time out with PyTorch's texts. The server is a real TCP service on the [`Net`] it is given.
//!
//! Where the [`Net`] has a job token (hardware mode), every connection opens with a hello —
//! magic, protocol version, token — and the server refuses, with a reply naming itself, the
//! client and the reason, a client of another job, of an earlier run or of another protocol
//! version; a connection that does not open with a well-formed hello of bounded size is closed.
//!
//! The server also speaks PyTorch's own protocol ([`torch_wire`]) to a PyTorch client (told
//! apart by its first 5 bytes, VALIDATE and PyTorch's magic), and [`StoreClient::open_torch`]
//! speaks it to a store PyTorch hosts (torchrun's agent store). PyTorch's protocol has no job
//! token: where the [`Net`] has one, a PyTorch client is let in only if the [`Net`] allows it
//! ([`Net::store_accepts_torch_clients`]); a scen client of another job is refused either way.

use crate::c10d::error::{self, C10dError};
use crate::net::{Clock, Net};
use crate::wire::{
    read_frame, read_frame_max, write_built_frame, write_frame, Dec, Enc, WireError,
};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use tokio::io::AsyncReadExt;
use tokio::sync::{Mutex, Notify};

mod file;
mod numbered;
mod seq;
mod torch_client;
mod torch_serve;
pub mod torch_wire;
pub use file::{give_up_at_ms, FileClient, Files};
pub use seq::{KeySeq, Values};

const OP_SET: u8 = 1;
const OP_GET: u8 = 2;
const OP_ADD: u8 = 3;
const OP_CHECK: u8 = 4;
const OP_WAIT_GE: u8 = 5;
const OP_HELLO: u8 = 6;
const OP_SEQ: u8 = 7;
const OP_COMPARE_SET: u8 = 8;
const OP_DELETE: u8 = 9;
const OP_NUM_KEYS: u8 = 10;

/// [`OP_SEQ`] modes: a client's loop of `check`s, or of `get`s up to the first absent key.
const SEQ_CHECK: u8 = 0;
const SEQ_GET: u8 = 1;

const REPLY_OK: u8 = 0;
const REPLY_TIMEOUT: u8 = 1;
const REPLY_REFUSED: u8 = 2;

/// What a hello starts with.
pub const HELLO_MAGIC: &[u8] = b"scen-tcpstore";
/// The store protocol this build speaks; a hello with another version is refused.
pub const PROTOCOL_VERSION: u32 = 3;
/// The largest hello accepted (a token is 32 hex digits): a stranger cannot make the server
/// allocate more before it has proven to be of this job.
pub const MAX_HELLO_BYTES: usize = 4096;

/// How a store operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    /// The key did not appear in time (what a rank raises is the caller's: c10d/error.rs
    /// `store_wait_timeout`, `workers_timeout`, `store_barrier_timeout`, ...).
    #[error("key {key} did not appear within {timeout_ms} ms")]
    Timeout {
        key: String,
        timeout_ms: u64,
        value: i64,
    },
    /// The connection to the store broke (the server's process died, or the network).
    #[error("{0}")]
    Wire(#[from] WireError),
    /// A FileStore key written through a store freed since (file.rs): stale.
    #[error("key {key} of {path} was written through a store freed since")]
    Stale { key: String, path: String },
    /// A call this client does not make on this kind of store (scen's limit, named).
    #[error("{0}")]
    Unsupported(String),
}

/// The server's state: keys and, per key someone waits on, a notification of its changes.
///
/// Per key, not one for the whole store: with one, every `set` woke every waiting client, and a
/// rendezvous of W ranks cost W^2 wake-ups (issue 11's profile). A waiter only ever re-checks
/// its own key, so waking the others changed nothing but the cost.
///
/// Keys and watches live in hash maps: the store only looks them up (nothing iterates them, so
/// no hash order reaches any output), and in a large world its keys share long prefixes
/// (`default_pg/0//12//cpu//...`) that made every ordered-map comparison a long memcmp.
#[derive(Default)]
pub struct StoreState {
    keys: RefCell<HashMap<String, Vec<u8>>>,
    changed: RefCell<HashMap<String, Rc<Notify>>>,
    /// The keys `<prefix><i>` again, by prefix and index, for store loops (seq.rs).
    numbered: numbered::Numbered,
    /// Per key, how often a TCPStore server woke its readers without setting it
    /// ([`StoreState::wake_unset`]).
    woken_unset: RefCell<HashMap<String, u64>>,
}

impl StoreState {
    fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.keys.borrow().get(key).cloned()
    }

    fn contains(&self, key: &str) -> bool {
        self.keys.borrow().contains_key(key)
    }

    fn set(&self, key: String, value: Vec<u8>) {
        self.numbered.set(&key, &value);
        let waiting = self.changed.borrow_mut().remove(&key);
        self.keys.borrow_mut().insert(key, value);
        if let Some(n) = waiting {
            n.notify_waiters();
        }
    }

    /// The notification of `key`'s next change.
    fn watch(&self, key: &str) -> Rc<Notify> {
        let mut changed = self.changed.borrow_mut();
        if let Some(n) = changed.get(key) {
            return n.clone();
        }
        let n = Rc::new(Notify::new());
        changed.insert(key.to_string(), n.clone());
        n
    }

    fn counter(&self, key: &str) -> i64 {
        self.get(key)
            .and_then(|v| String::from_utf8(v).ok())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    fn add(&self, key: &str, delta: i64) -> i64 {
        let v = self.counter(key) + delta;
        self.set(key.to_string(), v.to_string().into_bytes());
        v
    }

    /// PyTorch's `compareSet`: sets `desired` where the key holds `expected` (an absent key
    /// counts as holding `""`) and returns the value the key then has; an absent key with
    /// another `expected` stays absent and `expected` is returned (measured, real torch 2.15).
    fn compare_set(&self, key: &str, expected: &[u8], desired: Vec<u8>) -> Vec<u8> {
        match self.get(key) {
            None if !expected.is_empty() => expected.to_vec(),
            Some(v) if v != expected => v,
            _ => {
                self.set(key.to_string(), desired.clone());
                desired
            }
        }
    }

    /// TCPStore's `compareSet` on an absent key with a non-empty expected value sets nothing
    /// but wakes the key's waiting readers all the same: a `wait` returns and a `get` reads an
    /// empty value (measured, real torch 2.15; a FileStore's readers poll the file instead).
    fn wake_unset(&self, key: &str) {
        *self
            .woken_unset
            .borrow_mut()
            .entry(key.to_string())
            .or_default() += 1;
        if let Some(n) = self.changed.borrow_mut().remove(key) {
            n.notify_waiters();
        }
    }

    fn woken_unset(&self, key: &str) -> u64 {
        self.woken_unset.borrow().get(key).copied().unwrap_or(0)
    }

    /// Removes `key`; whether it was there.
    fn delete(&self, key: &str) -> bool {
        self.numbered.remove(key);
        self.keys.borrow_mut().remove(key).is_some()
    }

    fn len(&self) -> usize {
        self.keys.borrow().len()
    }
}

/// Serves the store on `listener` until the task is dropped. Each connection gets its own task.
pub async fn serve<N: Net, C: Clock>(net: N, clock: C, listener: N::Listener) {
    serve_with(net, clock, listener, BTreeMap::new()).await
}

/// [`serve`] a store that already holds `keys` (another job's store, running before this one).
pub async fn serve_with<N: Net, C: Clock>(
    net: N,
    clock: C,
    listener: N::Listener,
    keys: BTreeMap<String, Vec<u8>>,
) {
    let state = Rc::new(StoreState::default());
    for (k, v) in keys {
        state.set(k, v);
    }
    // Connections live in a JoinSet: aborting the server closes them all, as a dying process does.
    let mut conns = tokio::task::JoinSet::new();
    let token = net.store_token();
    // PyTorch's protocol has no token: with one, a PyTorch client only if the Net allows it.
    let torch_ok = token.is_none() || net.store_accepts_torch_clients();
    let me = format!("{}:{}", net.host_name(), net.local_port(&listener));
    loop {
        let Ok((mut stream, peer)) = net.accept(&listener).await else {
            continue;
        };
        let state = state.clone();
        let clock = clock.clone();
        let (token, me) = (token.clone(), me.clone());
        conns.spawn_local(async move {
            // The first 5 bytes tell the protocols apart (every scen frame is longer).
            let mut head = [0u8; 5];
            if stream.read_exact(&mut head).await.is_err() {
                return;
            }
            if torch_wire::is_validate(&head) {
                if torch_ok {
                    let _ = torch_serve::serve(stream, state, clock).await;
                }
                // Refused: PyTorch's protocol has no refusal reply; the connection closes.
                return;
            }
            let mut stream = torch_serve::Replayed::new(head, stream);
            if let Some(t) = &token {
                if greet(&mut stream, t, &me, &peer).await.is_err() {
                    return;
                }
            }
            let _ = serve_conn(stream, state, clock).await;
        });
        while conns.try_join_next().is_some() {}
    }
}

/// The server's side of the hello: `Ok` lets the connection in; on `Err` it is closed (after a
/// refusal reply if the peer spoke the protocol far enough to read one).
async fn greet<S>(stream: &mut S, token: &str, me: &str, peer: &str) -> Result<(), WireError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let hello = read_frame_max(stream, MAX_HELLO_BYTES).await?;
    let why = match parse_hello(&hello) {
        Err(e) => format!("it did not open with a scen TCPStore hello ({e})"),
        Ok((v, _)) if v != PROTOCOL_VERSION => format!(
            "it speaks store protocol version {v}, this store version {PROTOCOL_VERSION} (another scen build)"
        ),
        Ok((_, t)) if t != token => {
            "it belongs to another job or an earlier run (its job token differs from this run's)"
                .to_string()
        }
        Ok(_) => {
            write_frame(stream, &Enc::default().u8(REPLY_OK).done()).await?;
            return Ok(());
        }
    };
    let text = format!("the TCPStore at {me} refused the connection from {peer}: {why}");
    let reply = Enc::default().u8(REPLY_REFUSED).str(&text).done();
    let _ = write_frame(stream, &reply).await;
    Err(WireError::Refused(text))
}

fn parse_hello(body: &[u8]) -> Result<(u32, String), WireError> {
    let mut d = Dec::new(body);
    if d.u8()? != OP_HELLO || d.bytes()? != HELLO_MAGIC {
        return Err(WireError::Malformed("no hello magic".into()));
    }
    let version = d.u64()?;
    let version = u32::try_from(version).unwrap_or(u32::MAX);
    Ok((version, d.str()?))
}

/// A hello frame's body.
pub fn hello(version: u32, token: &str) -> Vec<u8> {
    Enc::default()
        .u8(OP_HELLO)
        .bytes(HELLO_MAGIC)
        .u64(u64::from(version))
        .str(token)
        .done()
}

async fn serve_conn<S, C>(mut stream: S, state: Rc<StoreState>, clock: C) -> Result<(), WireError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    C: Clock,
{
    loop {
        let req = read_frame(&mut stream).await?;
        if req.first() == Some(&OP_SEQ) {
            let (frame, req_len) = seq::serve(&req, &state, &clock).await?;
            let reply_len = frame.len() - seq::FRAME_PREFIX;
            clock
                .spend_us(clock.store_round_trip_us(req_len + reply_len))
                .await;
            write_built_frame(&mut stream, &frame).await?;
            seq::recycle(frame);
            continue;
        }
        let mut reply = handle(&req, &state, &clock).await?;
        // The round trip's cost on the store link class (the simulator's timing model).
        let us = clock.store_round_trip_us(req.len() + reply.len());
        clock.spend_us(us).await;
        if req.first() == Some(&OP_SET) {
            // What the server itself spent on this set, so the client can tell the network's
            // share of the round trip it measured (`seq`).
            reply.extend_from_slice(&(us.round() as u64).to_le_bytes());
        }
        write_frame(&mut stream, &reply).await?;
    }
}

async fn handle<C: Clock>(req: &[u8], state: &StoreState, clock: &C) -> Result<Vec<u8>, WireError> {
    let mut d = Dec::new(req);
    let op = d.u8()?;
    let key = d.str_ref()?;
    Ok(match op {
        OP_SET => {
            state.set(key.to_string(), d.bytes()?);
            Enc::default().u8(REPLY_OK).done()
        }
        OP_ADD => {
            let v = state.add(key, d.i64()?);
            Enc::default().u8(REPLY_OK).i64(v).done()
        }
        OP_CHECK => Enc::default()
            .u8(REPLY_OK)
            .u8(state.contains(key) as u8)
            .done(),
        OP_COMPARE_SET => {
            let expected = d.bytes()?;
            let absent = !state.contains(key);
            let v = state.compare_set(key, &expected, d.bytes()?);
            if absent && !expected.is_empty() {
                state.wake_unset(key);
            }
            Enc::default().u8(REPLY_OK).bytes(&v).done()
        }
        OP_DELETE => Enc::default()
            .u8(REPLY_OK)
            .u8(state.delete(key) as u8)
            .done(),
        OP_NUM_KEYS => Enc::default().u8(REPLY_OK).i64(state.len() as i64).done(),
        OP_GET => {
            let timeout_ms = d.u64()?;
            let deadline = deadline_after(clock, timeout_ms);
            let woken = state.woken_unset(key);
            let ready = || {
                let lied = state.woken_unset(key) != woken;
                state.get(key).or_else(|| lied.then(Vec::new))
            };
            match wait_for(state, key, clock, deadline, ready).await {
                Some(v) => Enc::default().u8(REPLY_OK).bytes(&v).done(),
                None => Enc::default().u8(REPLY_TIMEOUT).i64(0).done(),
            }
        }
        OP_WAIT_GE => {
            let n = d.i64()?;
            let timeout_ms = d.u64()?;
            let deadline = deadline_after(clock, timeout_ms);
            let ready = || Some(state.counter(key)).filter(|v| *v >= n);
            match wait_for(state, key, clock, deadline, ready).await {
                Some(v) => Enc::default().u8(REPLY_OK).i64(v).done(),
                None => Enc::default()
                    .u8(REPLY_TIMEOUT)
                    .i64(state.counter(key))
                    .done(),
            }
        }
        other => return Err(WireError::Malformed(format!("unknown store op {other}"))),
    })
}

/// `timeout_ms == NO_TIMEOUT` waits forever (no timer is armed).
pub const NO_TIMEOUT: u64 = u64::MAX;

fn deadline_after<C: Clock>(clock: &C, timeout_ms: u64) -> Option<u64> {
    (timeout_ms != NO_TIMEOUT).then(|| clock.now_ms().saturating_add(timeout_ms))
}

/// Waits until `ready` (which reads `key`) yields a value or the deadline (if any) passes.
async fn wait_for<C: Clock, T>(
    state: &StoreState,
    key: &str,
    clock: &C,
    deadline_ms: Option<u64>,
    ready: impl Fn() -> Option<T>,
) -> Option<T> {
    loop {
        // Checked before a watch is made: most reads find their key (a rendezvous reads keys
        // set long before), and a watch made for them would stay in the map until the key's
        // next `set`, which never comes (W^2 entries in a large world). Nothing runs between
        // this check and the watch below (one thread, no await), so no `set` can be missed.
        if let Some(v) = ready() {
            return Some(v);
        }
        let watch = state.watch(key);
        let changed = watch.notified();
        let Some(deadline_ms) = deadline_ms else {
            changed.await;
            continue;
        };
        if clock.now_ms() >= deadline_ms {
            return None;
        }
        tokio::select! {
            _ = changed => {}
            _ = clock.sleep_until_ms(deadline_ms) => {}
        }
    }
}

/// A connection to a store server, or a FileStore ([`StoreClient::file`]). Requests are
/// sequential, like PyTorch's client.
pub struct StoreClient<N: Net> {
    /// `None` for a FileStore.
    conn: Option<Mutex<N::Stream>>,
    /// `host:port`, for messages.
    pub addr: String,
    /// `Some` when the store is PyTorch's ([`StoreClient::open_torch`]): requests go as PyTorch's
    /// queries, with timeouts kept on this clock.
    torch: Option<torch_client::TorchClock>,
    /// `Some` when the store is a file (`init_method="file://..."`): no server, no connection.
    file: Option<FileClient>,
    /// A request met the server gone (its reply never came): the server's host reset the
    /// connection, so the next request's write fails (`Broken pipe`, real torch 2.15).
    gone: std::cell::Cell<bool>,
}

impl<N: Net> StoreClient<N> {
    pub fn new(stream: N::Stream, addr: String) -> Self {
        StoreClient {
            conn: Some(Mutex::new(stream)),
            addr,
            torch: None,
            file: None,
            gone: Default::default(),
        }
    }

    /// A FileStore; `addr` is its `file://` URL, for messages.
    pub fn file(store: FileClient) -> Self {
        StoreClient {
            conn: None,
            addr: format!("file://{}", store.path()),
            torch: None,
            file: Some(store),
            gone: Default::default(),
        }
    }

    /// The FileStore this client is, if it is one.
    pub fn as_file(&self) -> Option<&FileClient> {
        self.file.as_ref()
    }

    /// Whether this client speaks PyTorch's own store protocol ([`StoreClient::open_torch`]).
    pub fn is_torch(&self) -> bool {
        self.torch.is_some()
    }

    /// When a blocking read of this store started at `now_ms` with `timeout_ms` gives up: a
    /// TCPStore at the timeout, a FileStore once the whole seconds exceed it.
    pub fn give_up_at_ms(&self, now_ms: u64, timeout_ms: u64) -> u64 {
        match &self.file {
            Some(_) => give_up_at_ms(now_ms, timeout_ms).unwrap_or(u64::MAX),
            None => now_ms.saturating_add(timeout_ms),
        }
    }

    /// What `wait([key])` past its timeout raises, in this store's words.
    pub fn wait_timeout_error(&self, timeout_ms: u64, key: &str) -> C10dError {
        match &self.file {
            Some(_) => error::file_store_wait_timeout(),
            None => error::store_wait_timeout(timeout_ms, key),
        }
    }

    /// What `get(key)` past its timeout raises, in this store's words.
    pub fn get_timeout_error(&self, timeout_ms: u64, key: &str) -> C10dError {
        match &self.file {
            Some(_) => error::file_store_get_timeout(key, timeout_ms),
            None => error::store_wait_timeout(timeout_ms, key),
        }
    }

    fn conn(&self) -> Result<&Mutex<N::Stream>, StoreError> {
        self.conn
            .as_ref()
            .ok_or(StoreError::Wire(WireError::Closed))
    }

    /// A client over a connected `stream`; with a job token (`Net::store_token`), after the
    /// hello the server accepted. A refusal is `WireError::Refused` with the server's text.
    pub async fn open(net: &N, mut stream: N::Stream, addr: String) -> Result<Self, StoreError> {
        if let Some(token) = net.store_token() {
            write_frame(&mut stream, &hello(PROTOCOL_VERSION, &token)).await?;
            let reply = read_frame_max(&mut stream, MAX_HELLO_BYTES).await?;
            let mut d = Dec::new(&reply);
            if d.u8()? != REPLY_OK {
                return Err(WireError::Refused(d.str()?).into());
            }
        }
        Ok(StoreClient::new(stream, addr))
    }

    /// One request and its reply. A request whose reply never comes, the server gone, is
    /// `WireError::Closed` (PyTorch's client: `Failed to recv, got 0 bytes`), and every request
    /// after it `WireError::BrokenPipe`.
    async fn call(&self, req: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        if self.gone.get() {
            return Err(WireError::BrokenPipe.into());
        }
        let mut conn = self.conn()?.lock().await;
        let reply = match write_frame(&mut *conn, &req).await {
            Ok(()) => read_frame(&mut *conn).await,
            Err(e) => Err(e),
        };
        if let Err(WireError::Closed) = reply {
            self.gone.set(true);
        }
        Ok(reply?)
    }

    pub async fn set(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.set_timed(key, value).await.map(|_| ())
    }

    /// [`Self::set`], returning the microseconds the server spent on it (its share of the round
    /// trip; the rest is the network's).
    pub async fn set_timed(&self, key: &str, value: &[u8]) -> Result<u64, StoreError> {
        if let Some(f) = &self.file {
            f.set(key, value);
            return Ok(0);
        }
        if self.torch.is_some() {
            return self.torch_set(key, value).await;
        }
        let req = Enc::default().u8(OP_SET).str(key).bytes(value).done();
        let reply = match self.call(req).await {
            // PyTorch's set has no reply: on a gone server it returns, and the next request
            // fails to write (real torch 2.15).
            Err(StoreError::Wire(WireError::Closed)) if self.gone.get() => return Ok(0),
            r => r?,
        };
        let mut d = Dec::new(&reply);
        d.u8()?;
        Ok(d.u64()?)
    }

    pub async fn add(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        if let Some(f) = &self.file {
            return Ok(f.add(key, delta));
        }
        if self.torch.is_some() {
            return self.torch_add(key, delta).await;
        }
        let reply = self
            .call(Enc::default().u8(OP_ADD).str(key).i64(delta).done())
            .await?;
        let mut d = Dec::new(&reply);
        d.u8()?;
        Ok(d.i64()?)
    }

    pub async fn check(&self, key: &str) -> Result<bool, StoreError> {
        if let Some(f) = &self.file {
            return Ok(f.check(key));
        }
        if self.torch.is_some() {
            return self.torch_check(key).await;
        }
        let reply = self
            .call(Enc::default().u8(OP_CHECK).str(key).done())
            .await?;
        let mut d = Dec::new(&reply);
        d.u8()?;
        Ok(d.u8()? != 0)
    }

    /// PyTorch's `compare_set` ([`StoreState::compare_set`]): the value the key then has.
    pub async fn compare_set(
        &self,
        key: &str,
        expected: &[u8],
        desired: &[u8],
    ) -> Result<Vec<u8>, StoreError> {
        if let Some(f) = &self.file {
            return Ok(f.compare_set(key, expected, desired));
        }
        if self.torch.is_some() {
            return Err(self.torch_unsupported("compare_set"));
        }
        let req = Enc::default()
            .u8(OP_COMPARE_SET)
            .str(key)
            .bytes(expected)
            .bytes(desired)
            .done();
        let reply = self.call(req).await?;
        let mut d = Dec::new(&reply);
        d.u8()?;
        Ok(d.bytes()?)
    }

    /// Removes `key`: whether it was there (a FileStore says `true` either way, as real torch
    /// 2.15's does).
    pub async fn delete_key(&self, key: &str) -> Result<bool, StoreError> {
        if let Some(f) = &self.file {
            return Ok(f.delete_key(key));
        }
        if self.torch.is_some() {
            return Err(self.torch_unsupported("delete_key"));
        }
        let reply = self
            .call(Enc::default().u8(OP_DELETE).str(key).done())
            .await?;
        let mut d = Dec::new(&reply);
        d.u8()?;
        Ok(d.u8()? != 0)
    }

    /// How many keys the store holds (c10d's own among them).
    pub async fn num_keys(&self) -> Result<i64, StoreError> {
        if let Some(f) = &self.file {
            return Ok(f.num_keys());
        }
        if self.torch.is_some() {
            return self.torch_num_keys().await;
        }
        let reply = self
            .call(Enc::default().u8(OP_NUM_KEYS).str("").done())
            .await?;
        let mut d = Dec::new(&reply);
        d.u8()?;
        Ok(d.i64()?)
    }

    /// Blocks until `key` exists, up to `timeout_ms`.
    pub async fn get(&self, key: &str, timeout_ms: u64) -> Result<Vec<u8>, StoreError> {
        if let Some(f) = &self.file {
            return f.get(key, timeout_ms).await;
        }
        if self.torch.is_some() {
            return self.torch_get(key, timeout_ms).await;
        }
        let req = Enc::default().u8(OP_GET).str(key).u64(timeout_ms).done();
        let reply = self.call(req).await?;
        let mut d = Dec::new(&reply);
        match d.u8()? {
            REPLY_OK => Ok(d.bytes()?),
            _ => Err(StoreError::Timeout {
                key: key.to_string(),
                timeout_ms,
                value: 0,
            }),
        }
    }

    /// [`Self::get`] for a wait of the model's that stands for another mechanism than the
    /// store's own (DETAIL's monitoredBarrier): up to exactly `timeout_ms` on any store.
    pub async fn get_exact(&self, key: &str, timeout_ms: u64) -> Result<Vec<u8>, StoreError> {
        match &self.file {
            Some(f) => f.get_exact(key, timeout_ms).await,
            None => self.get(key, timeout_ms).await,
        }
    }

    /// Blocks until the counter `key` reaches `n`, up to `timeout_ms`; returns its value.
    pub async fn wait_ge(&self, key: &str, n: i64, timeout_ms: u64) -> Result<i64, StoreError> {
        if let Some(f) = &self.file {
            return f.wait_ge(key, n, timeout_ms).await;
        }
        if self.torch.is_some() {
            return self.torch_wait_ge(key, n, timeout_ms).await;
        }
        let req = Enc::default()
            .u8(OP_WAIT_GE)
            .str(key)
            .i64(n)
            .u64(timeout_ms)
            .done();
        let reply = self.call(req).await?;
        let mut d = Dec::new(&reply);
        let status = d.u8()?;
        let v = d.i64()?;
        match status {
            REPLY_OK => Ok(v),
            _ => Err(StoreError::Timeout {
                key: key.to_string(),
                timeout_ms,
                value: v,
            }),
        }
    }
}

/// PrefixStore key composition (R10): `joinKey(prefix, key) = prefix + "/" + key`, nested.
pub fn join_key(prefixes: &[String], key: &str) -> String {
    prefixes
        .iter()
        .rev()
        .fold(key.to_string(), |acc, p| format!("{p}/{acc}"))
}

#[cfg(test)]
mod tests {
    use super::join_key;

    #[test]
    fn prefix_store_keys_match_pytorch() {
        // R22: the first XCCL communicator of group "2" (spec example).
        let p: Vec<String> = ["default_pg", "0/", "2/", "xpu/"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(join_key(&p, "0"), "default_pg/0//2//xpu//0");
    }
}
