//! scen's store server answering a PyTorch client (`torch.distributed.TCPStore(...,
//! is_master=False)`) in PyTorch's protocol ([`super::torch_wire`]), over the same keys its scen
//! clients use. The server tells the protocols apart by a connection's first 5 bytes
//! ([`torch_wire::is_validate`]); see [`super::serve_with`] for who is let in.
//!
//! Keys: PyTorch's client sends its keys with its `"/"` prefix; the server drops it, so a key a
//! PyTorch process sets as `k` is the key a scen rank reads as `k` (and the raw workers count
//! `init/` is the same counter for both).

use super::torch_wire::{self, Query, TorchWireError};
use super::{wait_for, StoreState};
use crate::net::Clock;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// A PyTorch client's key as scen's store holds it.
fn store_key(k: &str) -> &str {
    k.strip_prefix(torch_wire::KEY_PREFIX).unwrap_or(k)
}

fn vec_reply(out: &mut Vec<u8>, v: &[u8]) {
    out.extend_from_slice(&(v.len() as u64).to_le_bytes());
    out.extend_from_slice(v);
}

/// Serves a PyTorch client whose VALIDATE (with the right magic) was already read.
pub(super) async fn serve<S, C>(
    mut stream: S,
    state: Rc<StoreState>,
    clock: C,
) -> Result<(), TorchWireError>
where
    S: AsyncRead + AsyncWrite + Unpin,
    C: Clock,
{
    loop {
        let mut out = Vec::new();
        match torch_wire::read_query(&mut stream).await? {
            Query::Validate(m) if m == torch_wire::VALIDATION_MAGIC => continue,
            Query::Validate(m) => return Err(TorchWireError::BadMagic(m)),
            Query::Ping(n) => out.extend_from_slice(&n.to_le_bytes()),
            Query::Set(k, v) => {
                state.set(store_key(&k).to_string(), v);
                continue;
            }
            Query::MultiSet(kvs) => {
                for (k, v) in kvs {
                    state.set(store_key(&k).to_string(), v);
                }
                continue;
            }
            // PyTorch's client only GETs after a WAIT for the key: an absent key is an empty
            // value, as the libuv server's `get` of a missing key gives.
            Query::Get(k) => vec_reply(&mut out, &state.get(store_key(&k)).unwrap_or_default()),
            Query::MultiGet(keys) => {
                for k in keys {
                    vec_reply(&mut out, &state.get(store_key(&k)).unwrap_or_default());
                }
            }
            Query::Add(k, d) => out.extend_from_slice(&state.add(store_key(&k), d).to_le_bytes()),
            Query::Check(keys) => out.push(if keys.iter().all(|k| state.contains(store_key(k))) {
                torch_wire::CHECK_READY
            } else {
                torch_wire::CHECK_NOT_READY
            }),
            Query::GetNumKeys => {
                out.extend_from_slice(&(state.keys.borrow().len() as i64).to_le_bytes())
            }
            Query::CancelWait => out.push(torch_wire::WAIT_CANCELED),
            Query::Wait(keys) => {
                // Until every key exists, or the client gives up and sends CANCEL_WAIT (the only
                // query PyTorch's client sends while it waits: `TCPStore::doWait`).
                let all = async {
                    for k in &keys {
                        let k = store_key(k);
                        wait_for(&state, k, &clock, None, || state.get(k).map(|_| ())).await;
                    }
                };
                tokio::select! {
                    _ = all => out.push(torch_wire::WAIT_STOP_WAITING),
                    q = stream.read_u8() => match q? {
                        torch_wire::query::CANCEL_WAIT => out.push(torch_wire::WAIT_CANCELED),
                        other => return Err(TorchWireError::UnexpectedReply {
                            query: "WAIT (the client's next query while it waits)",
                            got: other,
                            expected: "CANCEL_WAIT",
                        }),
                    },
                }
            }
        }
        stream.write_all(&out).await?;
    }
}

/// A stream whose first bytes were already read (to tell the protocols apart): they are read
/// again first.
pub(super) struct Replayed<S> {
    head: [u8; 5],
    at: usize,
    inner: S,
}

impl<S> Replayed<S> {
    pub(super) fn new(head: [u8; 5], inner: S) -> Self {
        Replayed { head, at: 0, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replayed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.head.len() {
            let n = (self.head.len() - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.head[at..at + n]);
            self.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replayed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
