//! A client's loop of store reads, sent as one request and charged as the loop it stands for.
//!
//! gloo's connectFullMesh reads every peer's address key one request at a time (real gloo's
//! default; `multi_get` only with `GLOO_ENABLE_STORE_V2_API=1`), and device communicators read
//! every member's, so a start-up of W ranks makes W^2 store round trips. Simulating each as
//! turmoil messages made that the cost of a large world (issue 11). Here the client sends the
//! loop's keys at once; the server evaluates key `i` at the virtual time the loop's `i`-th
//! request would have reached it — the first at arrival, each next one a round trip later (the
//! network's share the client measured, plus the store class's modelled cost) — and replies
//! when the loop would have ended. A key already present stays present (keys are never removed),
//! so only an absent key needs the clock moved to its time. The modelled count and timing of
//! round trips are kept; only the messages that carried them are saved. Where the clock is
//! real (hardware mode) nothing is charged: the loop simply costs one round trip.
//!
//! The keys go as a [`KeySeq`] (a prefix and a range of indexes): every rank of a W-rank world
//! group reads W keys, and sending (and holding) them as strings made the world group's
//! start-up hold W^2 key strings at once (issue 11: most of a 4096-rank run's memory). The
//! store class is charged for the request the loop's keys would have made as strings.

use super::numbered;
use super::{StoreClient, StoreError, StoreState, OP_SEQ, REPLY_OK, SEQ_CHECK, SEQ_GET};
use crate::net::{Clock, Net};
use crate::wire::{Dec, Enc, WireError};
use std::cell::RefCell;
use std::rc::Rc;

/// The bytes around a key in one request and its reply of the loop a batch stands for (frame
/// lengths, op, key length, timeout, status): what the store class charges besides the key.
const PER_KEY_FRAMING_BYTES: usize = 21;

/// The keys of one store loop, in order: `<prefix><i>` for `i` in `start..end` except `skip`
/// (gloo's connectFullMesh and a device communicator's bootstrap read every other member's
/// key under one prefix).
#[derive(Debug, Clone, PartialEq)]
pub struct KeySeq {
    pub prefix: String,
    pub start: usize,
    pub end: usize,
    pub skip: Option<usize>,
}

impl KeySeq {
    /// The indexes of the keys, in order.
    pub fn indexes(&self) -> impl Iterator<Item = usize> + '_ {
        (self.start..self.end).filter(move |i| Some(*i) != self.skip)
    }

    pub fn len(&self) -> usize {
        let skipped = self
            .skip
            .is_some_and(|s| (self.start..self.end).contains(&s));
        self.end.saturating_sub(self.start) - skipped as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `k`-th key.
    pub fn key(&self, k: usize) -> String {
        format!("{}{}", self.prefix, self.index(k))
    }

    /// The keys from the `k`-th on.
    pub fn from(&self, k: usize) -> KeySeq {
        KeySeq {
            start: self.index(k).min(self.end),
            ..self.clone()
        }
    }

    fn index(&self, k: usize) -> usize {
        let i = self.start + k;
        i + self.skip.is_some_and(|s| s >= self.start && s <= i) as usize
    }

    /// The length of the request the loop's keys make as strings (the old wire form: a
    /// 4-byte length and the key each, after an 18-byte header): what the store class charges.
    pub(super) fn request_len(&self) -> usize {
        18 + self
            .indexes()
            .map(|i| 4 + self.prefix.len() + digits(i))
            .sum::<usize>()
    }
}

/// Serves an [`OP_SEQ`] request. Returns the reply as a frame (`crate::wire::frame_buf`'s
/// form: its length, then the reply) and the request length the store class charges (the
/// keys as strings).
pub(super) async fn serve<C: Clock>(
    req: &[u8],
    state: &StoreState,
    clock: &C,
) -> Result<(Vec<u8>, usize), WireError> {
    let mut d = Dec::new(req);
    d.u8()?;
    let mode = d.u8()?;
    let net_rtt_us = d.u64()?;
    let seq = KeySeq {
        prefix: d.str()?,
        start: d.u64()? as usize,
        end: d.u64()? as usize,
        skip: Some(d.u64()?)
            .filter(|s| *s != u64::MAX)
            .map(|s| s as usize),
    };
    let start_us = clock.now_us();
    // Time since `start_us` at which the loop's current request reaches the server.
    let mut cursor_us = 0.0;
    let mut answered = 0u64;
    // The reply in one buffer, as the frame it goes in (a W-key loop's reply is large: no copy
    // into a frame): length prefix and count of keys answered (both written at the end),
    // status, body.
    let mut body = Enc(reply_buf(
        FRAME_PREFIX + HEADER + body_capacity(mode, &seq, state),
    ));
    body = body.u8(0).u8(0).u8(0).u8(0).u8(REPLY_OK).u64(0);
    let lookup = Lookup::new(&seq.prefix, state);
    // The store class's cost of a request by its key's length (keys of one loop differ only in
    // their digits): asked of the model once per length, the same value each time.
    let mut round_trip = (usize::MAX, 0.0);
    for (i, index) in seq.indexes().enumerate() {
        if i > 0 {
            let key_len = seq.prefix.len() + digits(index);
            if round_trip.0 != key_len {
                let us = clock.store_round_trip_us(key_len + PER_KEY_FRAMING_BYTES);
                round_trip = (key_len, us);
            }
            cursor_us += net_rtt_us as f64 + round_trip.1;
        }
        let mut value = lookup.get(index);
        let ahead_us = start_us as f64 + cursor_us - clock.now_us() as f64;
        if value.is_none() && ahead_us >= 1.0 {
            clock.spend_us(ahead_us).await;
            value = lookup.get(index);
        }
        match (mode, value) {
            (SEQ_CHECK, v) => body = body.u8(v.is_some() as u8),
            (SEQ_GET, Some(v)) => body = body.bytes(&v),
            (SEQ_GET, None) => break,
            (other, _) => return Err(WireError::Malformed(format!("unknown seq mode {other}"))),
        }
        answered += 1;
    }
    // The loop ends a round trip after its last request: the caller charges that one.
    let ahead_us = start_us as f64 + cursor_us - clock.now_us() as f64;
    if ahead_us >= 1.0 {
        clock.spend_us(ahead_us).await;
    }
    let mut frame = body.done();
    frame[FRAME_PREFIX + 1..FRAME_PREFIX + HEADER].copy_from_slice(&answered.to_le_bytes());
    let reply_len = (frame.len() - FRAME_PREFIX) as u32;
    frame[..FRAME_PREFIX].copy_from_slice(&reply_len.to_le_bytes());
    Ok((frame, seq.request_len()))
}

/// Reply buffers written and given back ([`recycle`]) on this thread: a W-key loop's reply is
/// large, and a fresh one for each of W members' loops made the kernel zero new pages for
/// each (issue 31). Which buffer a reply uses never shows in what it holds.
const SPARE_BUFS: usize = 4;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer with room for `len` bytes, a spare one if there is.
fn reply_buf(len: usize) -> Vec<u8> {
    let mut buf = SPARE.with_borrow_mut(Vec::pop).unwrap_or_default();
    buf.reserve(len);
    buf
}

/// Gives a reply buffer back once written (kept up to [`SPARE_BUFS`], larger ones first).
pub(super) fn recycle(mut buf: Vec<u8>) {
    buf.clear();
    SPARE.with_borrow_mut(|spare| {
        if spare.len() < SPARE_BUFS {
            spare.push(buf);
        } else if let Some(small) = spare.iter_mut().min_by_key(|b| b.capacity()) {
            if small.capacity() < buf.capacity() {
                *small = buf;
            }
        }
    });
}

/// Decimal digits of `i` (the length it adds to a key).
fn digits(i: usize) -> usize {
    i.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// How a loop reads its keys: by index where the store keeps them so (numbered.rs), else by
/// name. Both see the same keys and values.
struct Lookup<'a> {
    prefix: &'a str,
    state: &'a StoreState,
    slots: Option<numbered::Slots>,
}

impl<'a> Lookup<'a> {
    fn new(prefix: &'a str, state: &'a StoreState) -> Self {
        let slots = numbered::indexed(prefix, 0).then(|| state.numbered.slots(prefix));
        Lookup {
            prefix,
            state,
            slots,
        }
    }

    fn get(&self, index: usize) -> Option<Rc<[u8]>> {
        match &self.slots {
            Some(s) if numbered::indexed(self.prefix, index) => numbered::get(s, index),
            _ => (self.state.get(&format!("{}{index}", self.prefix))).map(Rc::from),
        }
    }
}

/// A loop's reply before its body: status and the count of keys answered.
const HEADER: usize = 1 + 8;

/// A frame's length prefix.
pub(super) const FRAME_PREFIX: usize = 4;

/// The reply body's size, about: one byte per key checked, a value and its length per key got
/// (values of one loop are addresses of about one length: room for a few more bytes each).
fn body_capacity(mode: u8, seq: &KeySeq, state: &StoreState) -> usize {
    if mode != SEQ_GET {
        return seq.len();
    }
    let lookup = Lookup::new(&seq.prefix, state);
    let first = seq.indexes().next().and_then(|i| lookup.get(i));
    seq.len() * (4 + first.map_or(16, |v| v.len()) + 4)
}

impl<N: Net> StoreClient<N> {
    /// `check` of every key in order, as one request: whether each existed when the loop's
    /// request for it would have reached the server. `net_rtt_us`: the network's share of one
    /// round trip on this connection, as the caller measured it ([`StoreClient::set_timed`]).
    pub async fn check_seq(&self, keys: &KeySeq, net_rtt_us: u64) -> Result<Vec<bool>, StoreError> {
        if let Some(f) = &self.file {
            return Ok(f.check_seq(keys));
        }
        if self.torch.is_some() {
            return self.torch_check_seq(keys).await;
        }
        let reply = self.call(request(SEQ_CHECK, keys, net_rtt_us)).await?;
        let mut d = Dec::new(&reply);
        d.u8()?;
        let n = d.u64()?;
        (0..n).map(|_| Ok(d.u8()? != 0)).collect()
    }

    /// `get` of the keys in order, as one request, up to the first key absent when its request
    /// would have reached the server: the values of the keys before it (all, if none is absent).
    /// The caller waits for the absent key with a blocking [`StoreClient::get`] of its own.
    pub async fn get_seq(&self, keys: &KeySeq, net_rtt_us: u64) -> Result<Values, StoreError> {
        if let Some(f) = &self.file {
            return f.get_seq(keys);
        }
        if self.torch.is_some() {
            return Ok(Values::of(self.torch_get_seq(keys).await?));
        }
        let reply = self.call(request(SEQ_GET, keys, net_rtt_us)).await?;
        let mut d = Dec::new(&reply);
        d.u8()?;
        let n = d.u64()? as usize;
        let at = d.pos();
        // Every value is checked here, so that reading them later cannot fail.
        for _ in 0..n {
            d.bytes_ref()?;
        }
        Ok(Values { buf: reply, at, n })
    }
}

/// The values a loop of gets returned, in order, kept in the reply they came in (each as its
/// length and bytes): one allocation for a loop's W values, not one each, nor a table of
/// where each is (W^2 in a W-rank world's start-up). The reply's buffer goes back to this
/// thread's spares when the values are dropped.
#[derive(Debug, Default)]
pub struct Values {
    buf: Vec<u8>,
    /// Where the first value's length starts.
    at: usize,
    n: usize,
}

impl Values {
    /// Values got one by one.
    pub fn of(values: Vec<Vec<u8>>) -> Values {
        let n = values.len();
        let buf = values.iter().fold(Enc::default(), |e, v| e.bytes(v)).done();
        Values { buf, at: 0, n }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut d = Dec::new(&self.buf[self.at..]);
        (0..self.n).map(move |_| d.bytes_ref().expect("checked when received"))
    }
}

impl Drop for Values {
    fn drop(&mut self) {
        if self.buf.capacity() > 0 {
            recycle(std::mem::take(&mut self.buf));
        }
    }
}

fn request(mode: u8, keys: &KeySeq, net_rtt_us: u64) -> Vec<u8> {
    Enc::default()
        .u8(OP_SEQ)
        .u8(mode)
        .u64(net_rtt_us)
        .str(&keys.prefix)
        .u64(keys.start as u64)
        .u64(keys.end as u64)
        .u64(keys.skip.map_or(u64::MAX, |s| s as u64))
        .done()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_seq_skips_its_own_index_and_charges_the_keys_as_strings() {
        let s = KeySeq {
            prefix: "p/".into(),
            start: 0,
            end: 12,
            skip: Some(3),
        };
        let keys: Vec<String> = (0..s.len()).map(|k| s.key(k)).collect();
        assert_eq!(keys.len(), 11);
        assert_eq!((keys[2].as_str(), keys[3].as_str()), ("p/2", "p/4"));
        assert_eq!(s.from(3).key(0), "p/4");
        assert_eq!(s.from(2).len(), 9);
        assert_eq!(s.from(11).len(), 0);
        let old = 18 + keys.iter().map(|k| 4 + k.len()).sum::<usize>();
        assert_eq!(s.request_len(), old);
    }
}
