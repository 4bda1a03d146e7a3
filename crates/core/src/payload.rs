//! What a tensor holds and a collective's messages carry: real bytes, or a symbolic payload (its
//! length and a digest, no bytes) for worlds whose values nobody checks.
//!
//! The collective algorithms (algo/) are written once over [`Payload`], so both kinds run the
//! same message schedule: same messages, same order, same logical byte counts charged to the
//! timing model, same size headers (mismatch errors keep their texts). Only what a message
//! body holds differs: bytes, or a few segments of `{length, digest}`.
//!
//! A symbolic buffer is a list of segments, each a window onto a "base" (an input's digest, or a
//! reduction of several). Reductions add the bases' mixed digests (wrapping), so they are
//! independent of the order the ring folds chunks in: every rank of an all-reduce ends with one
//! digest, as every rank gets the same values in values mode. Copies and gathers keep order.

use crate::dtype::DType;
use crate::reduce::{finish_avg, reduce_into, ReduceOp};
use crate::trace::Fnv1a;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

/// A tensor's contents as the algorithms move them. Lengths and ranges are logical bytes.
pub trait Payload: Clone + Default + std::fmt::Debug + 'static {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `len` bytes of zeros (an output buffer before it is written).
    fn zeros(len: usize) -> Self;
    /// Bytes `r` as a payload of their own.
    fn slice(&self, r: Range<usize>) -> Self;
    /// Bytes `at` become `src` (of the same length).
    fn copy_in(&mut self, at: Range<usize>, src: &Self);
    /// Bytes `at` become their reduction with `src` (this side first).
    fn reduce_in(&mut self, at: Range<usize>, src: &Self, dtype: DType, op: ReduceOp);
    /// AVG's final division by the group size.
    fn finish_avg(&mut self, dtype: DType, n: usize);
    fn concat<'a>(parts: impl IntoIterator<Item = &'a Self>) -> Self;
    /// Bytes `r` as a message body.
    fn encode(&self, r: Range<usize>, out: &mut Vec<u8>);
    /// About how long [`Payload::encode`]'s body for `r` is (a buffer's capacity, not a rule).
    fn encoded_len_hint(&self, r: &Range<usize>) -> usize;
    /// A whole message body (what point-to-point sends).
    fn wire(&self) -> Cow<'_, [u8]>;
    /// The payload a body holds; `None` when it is not one.
    fn decode(body: &[u8]) -> Option<Self>;
}

impl Payload for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn zeros(len: usize) -> Self {
        vec![0; len]
    }
    fn slice(&self, r: Range<usize>) -> Self {
        self[r].to_vec()
    }
    fn copy_in(&mut self, at: Range<usize>, src: &Self) {
        self[at].copy_from_slice(src);
    }
    fn reduce_in(&mut self, at: Range<usize>, src: &Self, dtype: DType, op: ReduceOp) {
        reduce_into(dtype, op, &mut self[at], src);
    }
    fn finish_avg(&mut self, dtype: DType, n: usize) {
        finish_avg(dtype, self, n);
    }
    fn concat<'a>(parts: impl IntoIterator<Item = &'a Self>) -> Self {
        let mut out = Vec::new();
        for p in parts {
            out.extend_from_slice(p);
        }
        out
    }
    fn encode(&self, r: Range<usize>, out: &mut Vec<u8>) {
        out.extend_from_slice(&self[r]);
    }
    fn encoded_len_hint(&self, r: &Range<usize>) -> usize {
        r.len()
    }
    fn wire(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self)
    }
    fn decode(body: &[u8]) -> Option<Self> {
        Some(body.to_vec())
    }
}

/// What a segment is a window onto.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    /// An input's contents, by digest.
    Leaf(u64),
    /// A reduction by `op`: the wrapping sum of its operands' mixed digests.
    Sum(u8, u64),
}

impl Base {
    fn digest(self) -> u64 {
        match self {
            Base::Leaf(d) => d,
            Base::Sum(op, s) => {
                let mut h = Fnv1a::default();
                h.write(&[op]);
                h.write(&s.to_le_bytes());
                h.0
            }
        }
    }
}

/// Bytes `off..off + len` of a base `base_len` bytes long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seg {
    base: Base,
    base_len: usize,
    off: usize,
    len: usize,
}

impl Seg {
    fn whole(&self) -> bool {
        self.off == 0 && self.len == self.base_len
    }

    /// The digest of these bytes: the base's when whole, else the base's digest and window.
    fn digest(&self) -> u64 {
        if self.whole() {
            return self.base.digest();
        }
        let mut h = Fnv1a::default();
        h.write(&self.base.digest().to_le_bytes());
        h.write(&(self.off as u64).to_le_bytes());
        h.write(&(self.len as u64).to_le_bytes());
        h.0
    }

    /// This segment as an operand of a reduction by `op`: a reduction by the same op contributes
    /// its sum (so folding is associative), anything else its mixed digest.
    fn summand(&self, op: u8) -> u64 {
        match self.base {
            Base::Sum(o, s) if o == op && self.whole() => s,
            _ => mix64(self.digest()),
        }
    }

    /// The base as an operand of a reduction by `op` of aligned windows (see [`reduced`]):
    /// what [`Seg::summand`] gives for the whole base.
    fn base_summand(&self, op: u8) -> u64 {
        Seg {
            off: 0,
            len: self.base_len,
            ..*self
        }
        .summand(op)
    }
}

/// The segment of `len` bytes that reducing `mine` with `theirs` by `op` leaves. Two windows at
/// the same place of equally long bases (every rank's chunk of an all-reduce of same-shaped
/// inputs) reduce to that window of the reduced bases: the chunks of one reduction are windows
/// of one base, so they merge back into one segment however an algorithm cut them (a ring's
/// chunks, a hierarchical algorithm's chunks of chunks). Other operands reduce to a whole
/// segment of their own.
fn reduced(mine: Option<Seg>, theirs: Option<Seg>, sums: (u64, u64), op: u8, len: usize) -> Seg {
    if let (Some(m), Some(t)) = (mine, theirs) {
        if m.base_len == t.base_len && m.off == t.off && m.len == len && t.len == len {
            return Seg {
                base: Base::Sum(op, m.base_summand(op).wrapping_add(t.base_summand(op))),
                ..m
            };
        }
    }
    Seg {
        base: Base::Sum(op, sums.0.wrapping_add(sums.1)),
        base_len: len,
        off: 0,
        len,
    }
}

/// A finaliser (splitmix64's): spreads a digest's bits before they are added.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// A symbolic payload: segments covering its bytes in order, by start offset, no data.
/// Adjacent segments that continue one window are always merged, so equal contents have one
/// form. A map, so a ring's chunk updates cost O(log segments), not a rebuild of the list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Symbolic {
    segs: BTreeMap<usize, Seg>,
    len: usize,
}

/// Bytes per encoded segment: base tag, base value, op, base length, offset, length.
const SEG_WIRE: usize = 1 + 8 + 1 + 8 + 8 + 8;

/// `b` continues `a`'s window (so the two are one segment).
fn continues(a: &Seg, b: &Seg) -> bool {
    a.base == b.base && a.base_len == b.base_len && a.off + a.len == b.off
}

impl Symbolic {
    /// `len` bytes whose contents `digest` identifies.
    pub fn leaf(len: usize, digest: u64) -> Symbolic {
        let mut s = Symbolic::default();
        s.push(Seg {
            base: Base::Leaf(digest),
            base_len: len,
            off: 0,
            len,
        });
        s
    }

    /// Appends `seg`, merging it with the last one when it continues the same window (so a
    /// buffer cut up and put back together digests as before).
    fn push(&mut self, seg: Seg) {
        if seg.len == 0 {
            return;
        }
        self.len += seg.len;
        if let Some(mut last) = self.segs.last_entry() {
            if continues(last.get(), &seg) {
                last.get_mut().len += seg.len;
                return;
            }
        }
        self.segs.insert(self.len - seg.len, seg);
    }

    /// The segments' windows that fall in `r`, in order.
    fn windows(&self, r: Range<usize>) -> impl Iterator<Item = Seg> + '_ {
        let first = self
            .segs
            .range(..=r.start)
            .next_back()
            .map_or(0, |(k, _)| *k);
        let end = r.end.max(first);
        self.segs.range(first..end).filter_map(move |(&a, s)| {
            let b = a + s.len;
            let (lo, hi) = (a.max(r.start), b.min(r.end));
            (lo < hi).then(|| Seg {
                off: s.off + (lo - a),
                len: hi - lo,
                ..*s
            })
        })
    }

    /// Makes `x` a segment boundary.
    fn split_at(&mut self, x: usize) {
        let Some((&a, &s)) = self.segs.range(..x).next_back() else {
            return;
        };
        if a + s.len > x {
            let left = x - a;
            self.segs.insert(a, Seg { len: left, ..s });
            self.segs.insert(
                x,
                Seg {
                    off: s.off + left,
                    len: s.len - left,
                    ..s
                },
            );
        }
    }

    /// Merges segments that continue each other, from the one before `from` to `to`.
    fn merge_between(&mut self, from: usize, to: usize) {
        let mut k = self
            .segs
            .range(..from)
            .next_back()
            .map_or(from, |(k, _)| *k);
        while let Some((&a, &s)) = self.segs.range(k..).next() {
            if a > to {
                break;
            }
            let next = a + s.len;
            match self.segs.get(&next).copied() {
                Some(n) if continues(&s, &n) => {
                    self.segs.remove(&next);
                    self.segs.get_mut(&a).expect("present").len += n.len;
                }
                _ => k = next,
            }
        }
    }

    /// Bytes `at` replaced by `mid`'s segments (as long as `at` together).
    fn splice(&mut self, at: Range<usize>, mid: impl IntoIterator<Item = Seg>) {
        self.split_at(at.start);
        self.split_at(at.end);
        let gone: Vec<usize> = self.segs.range(at.clone()).map(|(k, _)| *k).collect();
        for k in gone {
            self.segs.remove(&k);
        }
        let mut pos = at.start;
        for s in mid.into_iter().filter(|s| s.len > 0) {
            self.segs.insert(pos, s);
            pos += s.len;
        }
        self.len = self.len - at.len() + (pos - at.start);
        self.merge_between(at.start, pos);
    }

    /// The segment that spans exactly `at`, if one does (a ring's chunk after its first
    /// update): updating it in place skips the splits and merges of [`Symbolic::splice`].
    fn exact_mut(&mut self, at: &Range<usize>) -> Option<&mut Seg> {
        self.segs
            .get_mut(&at.start)
            .filter(|s| s.len == at.len() && !at.is_empty())
    }

    /// The segment (by start) whose bytes include all of `at` (non-empty), if one does.
    fn within(&self, at: &Range<usize>) -> Option<(usize, Seg)> {
        let (&a, &s) = self.segs.range(..=at.start).next_back()?;
        (!at.is_empty() && a + s.len >= at.end).then_some((a, s))
    }

    /// Bytes `at`, all inside segment `(a, s)`, become the segment `seg`: the pieces of `s` left
    /// on either side stay as they were. A whole segment continues no neighbour (its window
    /// starts at 0 and ends at its base's end), so the form stays canonical unmerged; the caller
    /// merges around any other.
    fn replace_within(&mut self, (a, s): (usize, Seg), at: &Range<usize>, seg: Seg) {
        debug_assert!(seg.len == at.len());
        if a < at.start {
            self.segs.get_mut(&a).expect("present").len = at.start - a;
        }
        self.segs.insert(at.start, seg);
        if a + s.len > at.end {
            let cut = at.end - a;
            self.segs.insert(
                at.end,
                Seg {
                    off: s.off + cut,
                    len: s.len - cut,
                    ..s
                },
            );
        }
    }

    /// How many segments the buffer has (tests: that a result merged back into one).
    #[cfg(test)]
    pub(crate) fn segments(&self) -> usize {
        self.segs.len()
    }

    /// The buffer's only segment, if it has exactly one.
    fn single(&self) -> Option<Seg> {
        match (self.segs.len(), self.segs.values().next()) {
            (1, Some(one)) => Some(*one),
            _ => None,
        }
    }

    /// The buffer as an operand of a reduction by `op`.
    fn summand(&self, op: u8) -> u64 {
        self.single()
            .map_or_else(|| mix64(self.digest()), |one| one.summand(op))
    }

    /// The digest of the buffer's contents.
    pub fn digest(&self) -> u64 {
        let mut h = Fnv1a::default();
        for s in self.segs.values() {
            h.write(&(s.len as u64).to_le_bytes());
            h.write(&s.digest().to_le_bytes());
        }
        h.0
    }
}

fn op_tag(op: ReduceOp) -> u8 {
    ReduceOp::ALL
        .iter()
        .position(|o| *o == op)
        .map_or(u8::MAX, |p| p as u8)
}

impl Payload for Symbolic {
    fn len(&self) -> usize {
        self.len
    }
    fn zeros(len: usize) -> Self {
        Symbolic::leaf(len, 0)
    }
    fn slice(&self, r: Range<usize>) -> Self {
        let mut out = Symbolic::default();
        for s in self.windows(r) {
            out.push(s);
        }
        out
    }
    fn copy_in(&mut self, at: Range<usize>, src: &Self) {
        if let (1, Some(one)) = (src.segs.len(), src.segs.values().next()) {
            if let Some(seg) = self.exact_mut(&at) {
                *seg = *one;
                if !one.whole() {
                    self.merge_between(at.start, at.end);
                }
                return;
            }
        }
        self.splice(at, src.segs.values().copied());
    }
    fn reduce_in(&mut self, at: Range<usize>, src: &Self, _dtype: DType, op: ReduceOp) {
        let op = op_tag(op);
        let len = at.len();
        if let Some((a, s)) = self.within(&at) {
            // The common case (a ring's chunk): the bytes lie in one segment, whose window
            // over `at` is this side's operand.
            let mine = Seg {
                off: s.off + (at.start - a),
                len,
                ..s
            };
            let seg = reduced(
                Some(mine),
                src.single(),
                (mine.summand(op), src.summand(op)),
                op,
                len,
            );
            self.replace_within((a, s), &at, seg);
            if !seg.whole() {
                self.merge_between(at.start, at.end);
            }
            return;
        }
        let mine = self.slice(at.clone());
        let sums = (mine.summand(op), src.summand(op));
        self.splice(at, [reduced(mine.single(), src.single(), sums, op, len)]);
    }
    fn finish_avg(&mut self, _dtype: DType, _n: usize) {
        // The reduction's op (AVG) is already in its digest.
    }
    fn concat<'a>(parts: impl IntoIterator<Item = &'a Self>) -> Self {
        let mut out = Symbolic::default();
        for p in parts {
            for s in p.segs.values() {
                out.push(*s);
            }
        }
        out
    }
    fn encode(&self, r: Range<usize>, out: &mut Vec<u8>) {
        for s in self.windows(r) {
            let (tag, v, op) = match s.base {
                Base::Leaf(d) => (0u8, d, 0u8),
                Base::Sum(op, sum) => (1, sum, op),
            };
            out.push(tag);
            out.extend_from_slice(&v.to_le_bytes());
            out.push(op);
            for x in [s.base_len, s.off, s.len] {
                out.extend_from_slice(&(x as u64).to_le_bytes());
            }
        }
    }
    fn encoded_len_hint(&self, _r: &Range<usize>) -> usize {
        // Most messages are one or two windows (a chunk, or a chunk across a boundary).
        2 * SEG_WIRE
    }
    fn wire(&self) -> Cow<'_, [u8]> {
        let mut out = Vec::with_capacity(self.segs.len() * SEG_WIRE);
        self.encode(0..self.len(), &mut out);
        Cow::Owned(out)
    }
    fn decode(body: &[u8]) -> Option<Self> {
        if !body.len().is_multiple_of(SEG_WIRE) {
            return None;
        }
        let mut out = Symbolic::default();
        for c in body.chunks(SEG_WIRE) {
            let u = |at: usize| u64::from_le_bytes(c[at..at + 8].try_into().expect("8 bytes"));
            let base = match c[0] {
                0 => Base::Leaf(u(1)),
                1 => Base::Sum(c[9], u(1)),
                _ => return None,
            };
            let (base_len, off, len) = (u(10) as usize, u(18) as usize, u(26) as usize);
            if off.checked_add(len)? > base_len {
                return None;
            }
            out.push(Seg {
                base,
                base_len,
                off,
                len,
            });
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_up_and_putting_back_keeps_the_digest() {
        let a = Symbolic::leaf(100, 7);
        let parts = [a.slice(0..30), a.slice(30..31), a.slice(31..100)];
        assert_eq!(Symbolic::concat(&parts), a);
        let mut b = Symbolic::zeros(100);
        b.copy_in(0..50, &a.slice(0..50));
        b.copy_in(50..100, &a.slice(50..100));
        assert_eq!(b.digest(), a.digest());
        assert_ne!(Symbolic::leaf(100, 8).digest(), a.digest());
    }

    #[test]
    fn splices_keep_one_form_for_equal_contents() {
        // Reduce chunks 1 and 2 of four, then copy the originals back: the leaf again.
        let a = Symbolic::leaf(40, 3);
        let mut b = a.clone();
        for c in [10..20, 20..30, 0..10, 30..40] {
            b.reduce_in(c, &Symbolic::leaf(10, 4), DType::F32, ReduceOp::Sum);
        }
        assert_eq!(b.segs.len(), 4);
        assert_eq!(b.len(), 40);
        for c in [20..30, 0..10, 30..40, 10..20] {
            b.copy_in(c.clone(), &a.slice(c));
        }
        assert_eq!(b, a);
        b.copy_in(5..5, &Symbolic::default());
        assert_eq!(b, a);
        assert_eq!(a.slice(15..15), Symbolic::default());
    }

    #[test]
    fn reductions_are_order_independent_and_know_their_op() {
        let (x, y, z) = (
            Symbolic::leaf(8, 1),
            Symbolic::leaf(8, 2),
            Symbolic::leaf(8, 3),
        );
        let fold = |order: [&Symbolic; 3], op| {
            let mut acc = order[0].clone();
            acc.reduce_in(0..8, order[1], DType::F32, op);
            acc.reduce_in(0..8, order[2], DType::F32, op);
            acc
        };
        let s = fold([&x, &y, &z], ReduceOp::Sum);
        assert_eq!(s, fold([&z, &x, &y], ReduceOp::Sum));
        // (x + y) folded into z equals z folded with x then y.
        let mut xy = x.clone();
        xy.reduce_in(0..8, &y, DType::F32, ReduceOp::Sum);
        let mut zxy = z.clone();
        zxy.reduce_in(0..8, &xy, DType::F32, ReduceOp::Sum);
        assert_eq!(zxy, s);
        assert_ne!(fold([&x, &y, &z], ReduceOp::Max).digest(), s.digest());
    }

    /// The in-place paths of `reduce_in` / `copy_in` against the general splice they shortcut:
    /// random chunk-aligned and unaligned updates give the same segments.
    #[test]
    fn in_place_updates_equal_the_general_splice() {
        fn slow_reduce(b: &mut Symbolic, at: Range<usize>, src: &Symbolic, op: ReduceOp) {
            let op = op_tag(op);
            let mine = b.slice(at.clone());
            let sums = (mine.summand(op), src.summand(op));
            let seg = reduced(mine.single(), src.single(), sums, op, at.len());
            b.splice(at, [seg]);
        }
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % m
        };
        for round in 0..200 {
            let n = 1 + next(64);
            let mut fast = Symbolic::leaf(n, round);
            let mut slow = fast.clone();
            let other = Symbolic::leaf(n, 1000 + round);
            for _ in 0..40 {
                let a = next(n + 1);
                let b = a + next(n + 1 - a);
                let src = if next(2) == 0 {
                    other.slice(a..b)
                } else {
                    fast.slice(a..b)
                };
                if next(2) == 0 {
                    fast.reduce_in(a..b, &src, DType::F32, ReduceOp::Sum);
                    slow_reduce(&mut slow, a..b, &src, ReduceOp::Sum);
                } else {
                    fast.copy_in(a..b, &src);
                    slow.splice(a..b, src.segs.values().copied());
                }
                assert_eq!(fast, slow, "round {round}, {a}..{b}");
            }
        }
    }

    #[test]
    fn bodies_round_trip_and_bad_ones_are_refused() {
        let mut a = Symbolic::leaf(64, 5);
        a.reduce_in(16..32, &Symbolic::leaf(16, 9), DType::F32, ReduceOp::Sum);
        let mut body = Vec::new();
        a.encode(8..40, &mut body);
        assert_eq!(Symbolic::decode(&body), Some(a.slice(8..40)));
        assert_eq!(Symbolic::decode(&body[1..]), None);
        assert_eq!(Symbolic::decode(&[9; SEG_WIRE]), None);
    }
}
