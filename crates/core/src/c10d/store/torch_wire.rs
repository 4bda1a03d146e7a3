//! PyTorch's own TCPStore wire protocol: what `torch.distributed.TCPStore` (client and server)
//! puts on the socket, so scen's ranks can use a store PyTorch hosts (torchrun's agent store)
//! and PyTorch processes can use a store a scen rank hosts.
//!
//! Read from PyTorch's source (v2.15 headers as installed in the venv, and the .cpp files of
//! pytorch/pytorch main), and checked against bytes a real 2.15 client sent
//! (tests in this file and tests/hw/torch_store.rs):
//!
//! - `torch/csrc/distributed/c10d/store/TCPStoreBackend.hpp:20`: `validationMagicNumber =
//!   0x3C85F7CE`; `:22-42` `enum class QueryType : uint8_t { VALIDATE, SET, COMPARE_SET, GET,
//!   ADD, CHECK, WAIT, GETNUMKEYS, DELETE_KEY, APPEND, MULTI_GET, MULTI_SET, CANCEL_WAIT, PING,
//!   QUEUE_PUSH, QUEUE_POP, QUEUE_LEN, LIST_KEYS, BARRIER }` (so VALIDATE=0 ... PING=13);
//!   `:44` `CheckResponseType { READY, NOT_READY }`; `:46` `WaitResponseType { STOP_WAITING,
//!   WAIT_CANCELED }`. All one byte.
//! - `torch/csrc/distributed/c10d/Utils.hpp:674` `using SizeType = uint64_t`; `:801-805`
//!   `sendVector` and `:831-838` `sendString`: a `SizeType` length then the bytes; `sendValue`
//!   (`:819`) the value's raw bytes (little endian on every platform PyTorch ships).
//! - Queries (`TCPStoreLibUvBackend.cpp`, `UvClient::processBuf` and its `parse_*_command`; the
//!   client side in `TCPStore.cpp`): a query is its type byte then its arguments, with no
//!   framing around it. VALIDATE u32 magic (no reply); PING u32 nonce (reply: the nonce);
//!   SET key, value (no reply); GET key (reply: value vector); ADD key, i64 (reply: i64, the new
//!   value); CHECK u64 count, keys (reply: CheckResponseType, READY if all exist); WAIT u64 count,
//!   keys (reply STOP_WAITING once all exist); CANCEL_WAIT (reply WAIT_CANCELED; a STOP_WAITING
//!   sent before it arrived is read first, `TCPStore::doWait`); GETNUMKEYS (reply i64);
//!   MULTI_GET u64 count, keys (reply: one vector per key); MULTI_SET u64 count, (key, value)s.
//! - The client opens with VALIDATE then PING (`TCPStore.cpp`, `TCPClient::connect` /
//!   `ping`) and prefixes every user key with `"/"` (`TCPStore::keyPrefix_`), except the
//!   workers count `"init/"` that `waitForWorkers` adds to raw (`TCPStore::initKey_`).
//!   `TCPStore::get` is a WAIT for the key (with the store's timeout) and then a GET.
//! - Limits (`TCPStoreLibUvBackend.cpp:37-39`): `MAX_KEY_COUNT = 128 * 1024`, `MAX_STRING_LEN =
//!   8 * 1024` (a key), `MAX_PAYLOAD_LEN = 8 * 1024 * 1024` (a value). scen applies the same
//!   limits to what it reads, both as server and as client, so a malformed or hostile peer
//!   costs a bounded allocation and an error naming it, never a panic.

use crate::wire::WireError;
use tokio::io::{AsyncRead, AsyncReadExt};

/// `TCPStoreBackend.hpp:20`.
pub const VALIDATION_MAGIC: u32 = 0x3C85_F7CE;

/// `QueryType` values (`TCPStoreBackend.hpp:22-42`).
pub mod query {
    pub const VALIDATE: u8 = 0;
    pub const SET: u8 = 1;
    pub const COMPARE_SET: u8 = 2;
    pub const GET: u8 = 3;
    pub const ADD: u8 = 4;
    pub const CHECK: u8 = 5;
    pub const WAIT: u8 = 6;
    pub const GETNUMKEYS: u8 = 7;
    pub const DELETE_KEY: u8 = 8;
    pub const APPEND: u8 = 9;
    pub const MULTI_GET: u8 = 10;
    pub const MULTI_SET: u8 = 11;
    pub const CANCEL_WAIT: u8 = 12;
    pub const PING: u8 = 13;
}

/// `CheckResponseType` (`TCPStoreBackend.hpp:44`).
pub const CHECK_READY: u8 = 0;
pub const CHECK_NOT_READY: u8 = 1;
/// `WaitResponseType` (`TCPStoreBackend.hpp:46`).
pub const WAIT_STOP_WAITING: u8 = 0;
pub const WAIT_CANCELED: u8 = 1;

/// `TCPStoreLibUvBackend.cpp:37-39`.
pub const MAX_KEY_COUNT: u64 = 128 * 1024;
pub const MAX_KEY_LEN: u64 = 8 * 1024;
pub const MAX_PAYLOAD_LEN: u64 = 8 * 1024 * 1024;
/// scen's own bound on one query's keys in all (PyTorch bounds count and length apart, which
/// allows 1 GiB of keys in one CHECK): a store request of the model is far below it.
pub const MAX_QUERY_KEY_BYTES: u64 = 16 * 1024 * 1024;

/// The key prefix PyTorch's client puts before every user key (`TCPStore::keyPrefix_`).
pub const KEY_PREFIX: &str = "/";
/// The workers count `waitForWorkers` adds to without the prefix (`TCPStore::initKey_`).
pub const INIT_KEY: &str = "init/";

/// The 5 bytes a PyTorch client opens every connection with: VALIDATE and the magic.
pub fn validate() -> [u8; 5] {
    let m = VALIDATION_MAGIC.to_le_bytes();
    [query::VALIDATE, m[0], m[1], m[2], m[3]]
}

/// Whether the first 5 bytes of a connection are PyTorch's VALIDATE. Unambiguous against
/// scen's framing: read as a scen frame's u32 length they say 0x85F7CE00, over
/// `wire::MAX_FRAME_BYTES`.
pub fn is_validate(head: &[u8; 5]) -> bool {
    *head == validate()
}

/// How a PyTorch-protocol exchange went wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TorchWireError {
    #[error("{what} of {len} is over PyTorch's limit of {max}")]
    TooLong {
        what: &'static str,
        len: u64,
        max: u64,
    },
    #[error("a key is not UTF-8")]
    KeyNotUtf8,
    #[error("reply {got} to {query} is not one PyTorch sends (expected {expected})")]
    UnexpectedReply {
        query: &'static str,
        got: u8,
        expected: &'static str,
    },
    #[error("PING reply {got:#010x} does not echo the nonce {sent:#010x}")]
    PingMismatch { sent: u32, got: u32 },
    #[error("VALIDATE with magic {0:#010x}, not PyTorch's {VALIDATION_MAGIC:#010x}")]
    BadMagic(u32),
    #[error("query type {0} is not one scen's store serves (PyTorch protocol)")]
    Unsupported(u8),
    #[error("{0}")]
    Wire(#[from] WireError),
}

impl From<std::io::Error> for TorchWireError {
    fn from(e: std::io::Error) -> Self {
        TorchWireError::Wire(e.into())
    }
}

/// One query as it goes on the wire (keys as sent: with the client's prefix).
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    Validate(u32),
    Ping(u32),
    Set(String, Vec<u8>),
    Get(String),
    Add(String, i64),
    Check(Vec<String>),
    Wait(Vec<String>),
    CancelWait,
    GetNumKeys,
    MultiGet(Vec<String>),
    MultiSet(Vec<(String, Vec<u8>)>),
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
    out.extend_from_slice(b);
}

fn put_keys(out: &mut Vec<u8>, keys: &[String]) {
    out.extend_from_slice(&(keys.len() as u64).to_le_bytes());
    for k in keys {
        put_bytes(out, k.as_bytes());
    }
}

impl Query {
    /// The query's bytes, as PyTorch's `SendBuffer` lays them out.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Query::Validate(m) => {
                out.push(query::VALIDATE);
                out.extend_from_slice(&m.to_le_bytes());
            }
            Query::Ping(n) => {
                out.push(query::PING);
                out.extend_from_slice(&n.to_le_bytes());
            }
            Query::Set(k, v) => {
                out.push(query::SET);
                put_bytes(&mut out, k.as_bytes());
                put_bytes(&mut out, v);
            }
            Query::Get(k) => {
                out.push(query::GET);
                put_bytes(&mut out, k.as_bytes());
            }
            Query::Add(k, d) => {
                out.push(query::ADD);
                put_bytes(&mut out, k.as_bytes());
                out.extend_from_slice(&d.to_le_bytes());
            }
            Query::Check(keys) => {
                out.push(query::CHECK);
                put_keys(&mut out, keys);
            }
            Query::Wait(keys) => {
                out.push(query::WAIT);
                put_keys(&mut out, keys);
            }
            Query::CancelWait => out.push(query::CANCEL_WAIT),
            Query::GetNumKeys => out.push(query::GETNUMKEYS),
            Query::MultiGet(keys) => {
                out.push(query::MULTI_GET);
                put_keys(&mut out, keys);
            }
            Query::MultiSet(kvs) => {
                out.push(query::MULTI_SET);
                out.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
                for (k, v) in kvs {
                    put_bytes(&mut out, k.as_bytes());
                    put_bytes(&mut out, v);
                }
            }
        }
        out
    }
}

pub(crate) async fn read_u8<R: AsyncRead + Unpin>(r: &mut R) -> Result<u8, TorchWireError> {
    Ok(r.read_u8().await?)
}

pub(crate) async fn read_u32<R: AsyncRead + Unpin>(r: &mut R) -> Result<u32, TorchWireError> {
    Ok(r.read_u32_le().await?)
}

pub(crate) async fn read_i64<R: AsyncRead + Unpin>(r: &mut R) -> Result<i64, TorchWireError> {
    Ok(r.read_i64_le().await?)
}

async fn read_len<R: AsyncRead + Unpin>(
    r: &mut R,
    what: &'static str,
    max: u64,
) -> Result<u64, TorchWireError> {
    let len = r.read_u64_le().await?;
    if len > max {
        return Err(TorchWireError::TooLong { what, len, max });
    }
    Ok(len)
}

/// A `SizeType`-prefixed byte vector of at most `max` bytes.
pub(crate) async fn read_vec<R: AsyncRead + Unpin>(
    r: &mut R,
    what: &'static str,
    max: u64,
) -> Result<Vec<u8>, TorchWireError> {
    let len = read_len(r, what, max).await?;
    let mut v = vec![0u8; len as usize];
    r.read_exact(&mut v).await?;
    Ok(v)
}

async fn read_key<R: AsyncRead + Unpin>(r: &mut R) -> Result<String, TorchWireError> {
    let v = read_vec(r, "a key's length", MAX_KEY_LEN).await?;
    String::from_utf8(v).map_err(|_| TorchWireError::KeyNotUtf8)
}

async fn read_keys<R: AsyncRead + Unpin>(r: &mut R) -> Result<Vec<String>, TorchWireError> {
    let n = read_len(r, "a query's key count", MAX_KEY_COUNT).await?;
    let (mut keys, mut total) = (Vec::new(), 0u64);
    for _ in 0..n {
        let k = read_key(r).await?;
        total += k.len() as u64;
        if total > MAX_QUERY_KEY_BYTES {
            return Err(TorchWireError::TooLong {
                what: "a query's keys in bytes",
                len: total,
                max: MAX_QUERY_KEY_BYTES,
            });
        }
        keys.push(k);
    }
    Ok(keys)
}

/// Reads the next query a PyTorch client sends (the server's side). Every length is checked
/// against PyTorch's limits before anything is allocated for it.
pub async fn read_query<R: AsyncRead + Unpin>(r: &mut R) -> Result<Query, TorchWireError> {
    let q = read_u8(r).await?;
    Ok(match q {
        query::VALIDATE => Query::Validate(read_u32(r).await?),
        query::PING => Query::Ping(read_u32(r).await?),
        query::SET => {
            let k = read_key(r).await?;
            Query::Set(k, read_vec(r, "a value's length", MAX_PAYLOAD_LEN).await?)
        }
        query::GET => Query::Get(read_key(r).await?),
        query::ADD => {
            let k = read_key(r).await?;
            Query::Add(k, read_i64(r).await?)
        }
        query::CHECK => Query::Check(read_keys(r).await?),
        query::WAIT => Query::Wait(read_keys(r).await?),
        query::CANCEL_WAIT => Query::CancelWait,
        query::GETNUMKEYS => Query::GetNumKeys,
        query::MULTI_GET => Query::MultiGet(read_keys(r).await?),
        query::MULTI_SET => {
            let n = read_len(r, "a query's key count", MAX_KEY_COUNT).await?;
            let mut kvs = Vec::new();
            let mut total = 0u64;
            for _ in 0..n {
                let k = read_key(r).await?;
                let v = read_vec(r, "a value's length", MAX_PAYLOAD_LEN).await?;
                total += (k.len() + v.len()) as u64;
                if total > MAX_PAYLOAD_LEN {
                    return Err(TorchWireError::TooLong {
                        what: "a MULTI_SET's keys and values in bytes",
                        len: total,
                        max: MAX_PAYLOAD_LEN,
                    });
                }
                kvs.push((k, v));
            }
            Query::MultiSet(kvs)
        }
        other => return Err(TorchWireError::Unsupported(other)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Byte sequences a real PyTorch 2.15 client sent (captured with a recording socket):
    /// `TCPStore(host, port, 2, False)` then `set("ab", b"xyz")`, `add("ab", 5)`,
    /// `check(["ab", "cd"])`, the WAIT of `get("ab")`, the WAIT and MULTI_GET of
    /// `multi_get(["ab", "c"])`, `num_keys()`.
    const CAPTURED: &[(&str, &str)] = &[
        ("validate+ping", "00cef7853c0d391d0000"),
        ("init add", "040500000000000000696e69742f0100000000000000"),
        ("set", "0103000000000000002f6162030000000000000078797a"),
        ("add", "0403000000000000002f61620500000000000000"),
        (
            "check",
            "05020000000000000003000000000000002f616203000000000000002f6364",
        ),
        ("wait", "06010000000000000003000000000000002f6162"),
        (
            "multi_get",
            "0a020000000000000003000000000000002f616202000000000000002f63",
        ),
        ("num_keys", "07"),
    ];

    fn captured(name: &str) -> Vec<u8> {
        hex(CAPTURED.iter().find(|(n, _)| *n == name).unwrap().1)
    }

    fn k(s: &str) -> String {
        s.to_string()
    }

    #[test]
    fn queries_encode_as_pytorchs_client_sends_them() {
        let mut vp = Query::Validate(VALIDATION_MAGIC).encode();
        vp.extend(Query::Ping(0x1d39).encode());
        assert_eq!(vp, captured("validate+ping"));
        assert_eq!(validate().to_vec(), vp[..5]);
        assert_eq!(Query::Add(k(INIT_KEY), 1).encode(), captured("init add"));
        assert_eq!(
            Query::Set(k("/ab"), b"xyz".to_vec()).encode(),
            captured("set")
        );
        assert_eq!(Query::Add(k("/ab"), 5).encode(), captured("add"));
        assert_eq!(
            Query::Check(vec![k("/ab"), k("/cd")]).encode(),
            captured("check")
        );
        assert_eq!(Query::Wait(vec![k("/ab")]).encode(), captured("wait"));
        assert_eq!(
            Query::MultiGet(vec![k("/ab"), k("/c")]).encode(),
            captured("multi_get")
        );
        assert_eq!(Query::GetNumKeys.encode(), captured("num_keys"));
        assert_eq!(
            Query::Get(k("/ab")).encode(),
            hex("0303000000000000002f6162")
        );
        assert_eq!(Query::CancelWait.encode(), vec![12]);
    }

    fn decode(bytes: &[u8]) -> Result<Query, TorchWireError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut r = bytes;
            read_query(&mut r).await
        })
    }

    #[test]
    fn every_query_decodes_back() {
        let all = [
            Query::Validate(VALIDATION_MAGIC),
            Query::Ping(7),
            Query::Set(k("/a"), vec![1, 2]),
            Query::Get(k("/a")),
            Query::Add(k("/a"), -3),
            Query::Check(vec![k("/a"), k("/b")]),
            Query::Wait(vec![k("/a")]),
            Query::CancelWait,
            Query::GetNumKeys,
            Query::MultiGet(vec![k("/a")]),
            Query::MultiSet(vec![(k("/a"), vec![9])]),
        ];
        for q in all {
            assert_eq!(decode(&q.encode()).unwrap(), q);
        }
        for name in ["set", "add", "check", "wait", "multi_get", "num_keys"] {
            let bytes = captured(name);
            assert_eq!(decode(&bytes).unwrap().encode(), bytes, "{name}");
        }
    }

    #[test]
    fn malformed_queries_are_errors_not_allocations() {
        // A key length of 2^63: refused before any allocation.
        let mut huge = vec![query::GET];
        huge.extend_from_slice(&(1u64 << 63).to_le_bytes());
        assert!(matches!(
            decode(&huge),
            Err(TorchWireError::TooLong {
                max: MAX_KEY_LEN,
                ..
            })
        ));
        let mut many = vec![query::CHECK];
        many.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            decode(&many),
            Err(TorchWireError::TooLong {
                max: MAX_KEY_COUNT,
                ..
            })
        ));
        // Truncated: the peer closed mid-query.
        assert_eq!(
            decode(&captured("set")[..7]),
            Err(TorchWireError::Wire(WireError::Closed))
        );
        assert_eq!(decode(&[99]), Err(TorchWireError::Unsupported(99)));
        assert_eq!(
            decode(&[query::DELETE_KEY]),
            Err(TorchWireError::Unsupported(8))
        );
        assert!(is_validate(&[0, 0xce, 0xf7, 0x85, 0x3c]));
        // As a scen frame length the magic is over scen's largest frame.
        let as_len = u32::from_le_bytes([0, 0xce, 0xf7, 0x85]) as usize;
        assert!(as_len > crate::wire::MAX_FRAME_BYTES);
    }
}
