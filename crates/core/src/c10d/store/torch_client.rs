//! [`StoreClient`] speaking PyTorch's protocol ([`super::torch_wire`]) to a store PyTorch
//! hosts (torchrun's agent store). The model's store operations map onto PyTorch's queries:
//!
//! | scen            | PyTorch queries                                                  |
//! |-----------------|------------------------------------------------------------------|
//! | set             | SET                                                              |
//! | get (timeout)   | WAIT (client-side timeout, then CANCEL_WAIT), GET: `TCPStore::get` |
//! | add             | ADD                                                              |
//! | check           | CHECK of one key                                                 |
//! | wait_ge (count) | ADD 0, polled until the count is reached (PyTorch's own `waitForWorkers` polls too) |
//! | check_seq       | one CHECK per key (PyTorch's CHECK answers for all keys at once) |
//! | get_seq         | per key: CHECK, then GET if present, up to the first absent key  |
//!
//! Keys get PyTorch's client prefix `"/"`, except the raw workers count `init/`.
//! Timeouts run on the model's [`Clock`]: PyTorch's server has no timeout of its own.

use super::torch_wire::{self, Query, TorchWireError};
use super::{StoreClient, StoreError, NO_TIMEOUT};
use crate::net::{Clock, Net};
use crate::wire::WireError;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use tokio::io::AsyncWriteExt;
use tokio::sync::Mutex;

type Sleep = Pin<Box<dyn Future<Output = ()>>>;

/// The model's clock, type-erased so [`StoreClient`] stays generic over the network only.
#[derive(Clone)]
pub(super) struct TorchClock {
    now_ms: Rc<dyn Fn() -> u64>,
    sleep_until_ms: Rc<dyn Fn(u64) -> Sleep>,
}

impl TorchClock {
    pub(super) fn of<C: Clock>(clock: C) -> Self {
        let c = clock.clone();
        TorchClock {
            now_ms: Rc::new(move || c.now_ms()),
            sleep_until_ms: Rc::new(move |t| {
                let c = clock.clone();
                Box::pin(async move { c.sleep_until_ms(t).await })
            }),
        }
    }
}

/// The erased clock is a clock again (the file store's blocking reads wait on it).
impl Clock for TorchClock {
    fn now_ms(&self) -> u64 {
        (self.now_ms)()
    }
    fn sleep_until_ms(&self, t_ms: u64) -> impl Future<Output = ()> {
        (self.sleep_until_ms)(t_ms)
    }
}

/// How often [`StoreClient::wait_ge`] re-reads a count on a PyTorch store.
const COUNT_POLL_MS: u64 = 10;

fn wire_key(key: &str) -> String {
    if key == torch_wire::INIT_KEY {
        key.to_string()
    } else {
        format!("{}{key}", torch_wire::KEY_PREFIX)
    }
}

impl<N: Net> StoreClient<N> {
    /// A client over a connected `stream` to a PyTorch TCPStore: VALIDATE, then a PING it must
    /// echo (what PyTorch's client does on connect).
    pub async fn open_torch<C: Clock>(
        mut stream: N::Stream,
        addr: String,
        clock: C,
    ) -> Result<Self, StoreError> {
        let nonce = std::process::id();
        let hello = [
            Query::Validate(torch_wire::VALIDATION_MAGIC).encode(),
            Query::Ping(nonce).encode(),
        ]
        .concat();
        let r = async {
            stream.write_all(&hello).await?;
            let got = torch_wire::read_u32(&mut stream).await?;
            if got != nonce {
                return Err(TorchWireError::PingMismatch { sent: nonce, got });
            }
            Ok(())
        }
        .await;
        r.map_err(|e| peer_err(&addr, e))?;
        Ok(StoreClient {
            conn: Some(Mutex::new(stream)),
            addr,
            torch: Some(TorchClock::of(clock)),
            file: None,
            gone: Default::default(),
        })
    }

    fn torch_err(&self, e: TorchWireError) -> StoreError {
        peer_err(&self.addr, e)
    }

    /// Sends `q` and reads its reply with `read`.
    async fn query<T, F>(&self, q: Query, read: F) -> Result<T, StoreError>
    where
        F: for<'a> AsyncFnOnce(&'a mut N::Stream) -> Result<T, TorchWireError>,
    {
        let mut conn = self.conn()?.lock().await;
        let r = async {
            conn.write_all(&q.encode()).await?;
            read(&mut *conn).await
        }
        .await;
        r.map_err(|e| self.torch_err(e))
    }

    pub(super) async fn torch_set(&self, key: &str, value: &[u8]) -> Result<u64, StoreError> {
        let q = Query::Set(wire_key(key), value.to_vec());
        self.query(q, async |_| Ok(())).await?;
        Ok(0)
    }

    pub(super) async fn torch_add(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        self.query(Query::Add(wire_key(key), delta), async |s| {
            torch_wire::read_i64(s).await
        })
        .await
    }

    pub(super) async fn torch_num_keys(&self) -> Result<i64, StoreError> {
        self.query(Query::GetNumKeys, async |s| torch_wire::read_i64(s).await)
            .await
    }

    /// A store call scen's client of PyTorch's protocol does not speak (hw mode, torchrun's
    /// agent hosting a real TCPStore): a named limit, never a request in scen's own protocol.
    pub(super) fn torch_unsupported(&self, method: &str) -> StoreError {
        StoreError::Unsupported(format!(
            "store {method} on PyTorch's own TCPStore at {} (torchrun's agent store in hw mode): scen's client of PyTorch's store protocol does not make this call",
            self.addr
        ))
    }

    async fn torch_check_keys(&self, keys: Vec<String>) -> Result<bool, StoreError> {
        self.query(Query::Check(keys), async |s| {
            match torch_wire::read_u8(s).await? {
                torch_wire::CHECK_READY => Ok(true),
                torch_wire::CHECK_NOT_READY => Ok(false),
                got => Err(TorchWireError::UnexpectedReply {
                    query: "CHECK",
                    got,
                    expected: "READY (0) or NOT_READY (1)",
                }),
            }
        })
        .await
    }

    pub(super) async fn torch_check(&self, key: &str) -> Result<bool, StoreError> {
        self.torch_check_keys(vec![wire_key(key)]).await
    }

    async fn torch_get_now(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        self.query(Query::Get(wire_key(key)), async |s| {
            torch_wire::read_vec(s, "a value's length", torch_wire::MAX_PAYLOAD_LEN).await
        })
        .await
    }

    /// `TCPStore::get`: WAIT for the key up to `timeout_ms`, then GET it.
    pub(super) async fn torch_get(
        &self,
        key: &str,
        timeout_ms: u64,
    ) -> Result<Vec<u8>, StoreError> {
        let clock = self.torch.clone().expect("a PyTorch store client");
        let deadline =
            (timeout_ms != NO_TIMEOUT).then(|| (clock.now_ms)().saturating_add(timeout_ms));
        let stopped = {
            let mut conn = self.conn()?.lock().await;
            let r: Result<bool, TorchWireError> = async {
                conn.write_all(&Query::Wait(vec![wire_key(key)]).encode())
                    .await?;
                let reply = match deadline {
                    None => Some(torch_wire::read_u8(&mut *conn).await?),
                    Some(d) => {
                        tokio::select! {
                            b = torch_wire::read_u8(&mut *conn) => Some(b?),
                            _ = (clock.sleep_until_ms)(d) => None,
                        }
                    }
                };
                match reply {
                    Some(torch_wire::WAIT_STOP_WAITING) => Ok(true),
                    Some(got) => Err(wait_reply("WAIT", got)),
                    None => {
                        // `TCPStore::doWait`: cancel; a STOP_WAITING sent before the cancel
                        // arrived comes first.
                        conn.write_all(&Query::CancelWait.encode()).await?;
                        let mut got = torch_wire::read_u8(&mut *conn).await?;
                        if got == torch_wire::WAIT_STOP_WAITING {
                            got = torch_wire::read_u8(&mut *conn).await?;
                        }
                        if got != torch_wire::WAIT_CANCELED {
                            return Err(wait_reply("CANCEL_WAIT", got));
                        }
                        Ok(false)
                    }
                }
            }
            .await;
            r.map_err(|e| self.torch_err(e))?
        };
        if !stopped {
            return Err(StoreError::Timeout {
                key: key.to_string(),
                timeout_ms,
                value: 0,
            });
        }
        self.torch_get_now(key).await
    }

    /// The workers count: ADD 0 until it reaches `n` or the deadline passes.
    pub(super) async fn torch_wait_ge(
        &self,
        key: &str,
        n: i64,
        timeout_ms: u64,
    ) -> Result<i64, StoreError> {
        let clock = self.torch.clone().expect("a PyTorch store client");
        let deadline = (clock.now_ms)().saturating_add(timeout_ms);
        loop {
            let v = self.torch_add(key, 0).await?;
            if v >= n {
                return Ok(v);
            }
            let now = (clock.now_ms)();
            if now >= deadline {
                return Err(StoreError::Timeout {
                    key: key.to_string(),
                    timeout_ms,
                    value: v,
                });
            }
            (clock.sleep_until_ms)((now + COUNT_POLL_MS).min(deadline)).await;
        }
    }

    pub(super) async fn torch_check_seq(
        &self,
        keys: &super::KeySeq,
    ) -> Result<Vec<bool>, StoreError> {
        let mut out = Vec::with_capacity(keys.len());
        for k in 0..keys.len() {
            out.push(self.torch_check(&keys.key(k)).await?);
        }
        Ok(out)
    }

    pub(super) async fn torch_get_seq(
        &self,
        keys: &super::KeySeq,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut out = Vec::new();
        for k in 0..keys.len() {
            let key = keys.key(k);
            if !self.torch_check(&key).await? {
                break;
            }
            out.push(self.torch_get_now(&key).await?);
        }
        Ok(out)
    }
}

fn wait_reply(query: &'static str, got: u8) -> TorchWireError {
    TorchWireError::UnexpectedReply {
        query,
        got,
        expected: "STOP_WAITING (0) or WAIT_CANCELED (1)",
    }
}

/// An error of the exchange with the PyTorch store at `addr`: a closed connection stays
/// [`WireError::Closed`]; anything else names the store.
fn peer_err(addr: &str, e: TorchWireError) -> StoreError {
    StoreError::Wire(match e {
        TorchWireError::Wire(WireError::Closed) => WireError::Closed,
        TorchWireError::Wire(WireError::Io(t)) => {
            WireError::Io(format!("the PyTorch TCPStore at {addr}: {t}"))
        }
        other => WireError::Malformed(format!("the PyTorch TCPStore at {addr}: {other}")),
    })
}
