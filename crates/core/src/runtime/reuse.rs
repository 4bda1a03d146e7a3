//! What a rank keeps from one step to the next when it runs on a device library (hardware
//! mode), so that a scenario repeating a large collective costs about what the library call
//! costs (issue 32: a 16 MiB all_reduce step spent 17-25 ms outside oneCCL, in per-element
//! formula evaluation, a byte-at-a-time FNV-1a digest and fresh 16 MiB allocations).
//!
//! Nothing kept here changes a value or skips a check:
//! * a fill's bytes are reused only for the same formula, dtype, shape and list layout on the
//!   same rank (a fill's other variables are the rank's, fixed for the run), and only while
//!   unmodified: the buffer is lent to one call and comes back from an out-of-place all_reduce
//!   (which only reads it), otherwise it is computed again;
//! * expected values are computed once per formula and output layout; every step still
//!   compares every byte of its result with them (a difference falls back to the element-wise
//!   check, which applies `expect_ulps` and names the element);
//! * a digest is reused only for bytes compared equal to the bytes it was computed from, or
//!   for a tensor whose every element equals one value (its digest depends on nothing else);
//! * spare buffers are results already checked, overwritten before use.
//!
//! The simulator keeps none of this: its ranks share one process and its memory budget.

use crate::dtype::DType;
use crate::runtime::coll::OutVars;
use crate::tensor::Tensor;

/// Tensors smaller than this are not worth keeping (their work is microseconds).
pub(crate) const MIN_BYTES: usize = 64 * 1024;
/// Nor larger than this: a rank process keeps at most a fill, expected values, a digested
/// result and two spares of this size (320 MiB) beyond its live tensors (scen's limit is
/// 256 MiB of tensors per rank).
pub(crate) const MAX_BYTES: usize = 64 << 20;
/// Spare buffers kept at most.
const MAX_SPARES: usize = 2;

/// Whether a buffer of `len` bytes is kept across steps.
pub(crate) fn keeps(len: usize) -> bool {
    (MIN_BYTES..=MAX_BYTES).contains(&len)
}

/// What a fill's bytes depend on (the rank's variables are fixed for the run).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FillKey {
    pub formula: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub per_tensor: usize,
}

/// A fill buffer lent to a call: it comes back to [`Reuse::give_back`] when unmodified.
#[derive(Debug)]
pub(crate) struct Lent(FillKey);

/// Bytes of a known tensor and its digest.
struct Known<K> {
    key: K,
    bytes: Vec<u8>,
    digest: u64,
}

/// Expected values: their bytes, or, when they repeat with a short period (`rank + i % 7`),
/// one block of whole periods that a result is compared with block by block (half the memory
/// traffic of comparing two 16 MiB buffers); and their digest.
struct Expected {
    key: ExpectKey,
    bytes: Vec<u8>,
    block: Option<Vec<u8>>,
    digest: u64,
}

impl Expected {
    fn matches(&self, data: &[u8]) -> bool {
        match &self.block {
            Some(b) => data.chunks(b.len()).all(|c| c == &b[..c.len()]),
            None => data == self.bytes.as_slice(),
        }
    }
}

/// The longest period looked for, in bytes.
const MAX_PERIOD: usize = 4096;
/// A periodic expectation's block: whole periods, at least this long.
const BLOCK: usize = 16 * 1024;

/// A block of whole periods of `bytes` when they repeat every `p` bytes (`p` a multiple of the
/// element width `w`, at most [`MAX_PERIOD`]); the smallest such `p` is found by a cheap test
/// of each candidate, then at most four full comparisons.
fn period_block(bytes: &[u8], w: usize) -> Option<Vec<u8>> {
    let n = bytes.len();
    let mut full_checks = 0;
    for p in (w.max(1)..=MAX_PERIOD.min(n / 2)).step_by(w.max(1)) {
        let probe = (n - p).min(256);
        if bytes[p..p + probe] != bytes[..probe]
            || bytes[n - probe..] != bytes[n - p - probe..n - p]
        {
            continue;
        }
        if bytes[p..] == bytes[..n - p] {
            return Some(bytes[..p].repeat(BLOCK.div_ceil(p)));
        }
        full_checks += 1;
        if full_checks == 4 {
            return None;
        }
    }
    None
}

/// What an expected tensor depends on: the formula, the dtype it is cast to and where each
/// output element sits (its variables), plus the output's shape (the digest's). The rank's
/// own variables are fixed for the run.
#[derive(Clone, PartialEq)]
pub(crate) struct ExpectKey {
    pub formula: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub vars: OutVars,
}

#[derive(Default)]
pub(crate) struct Reuse {
    /// The last cacheable fill; `None` bytes while lent to a call.
    fill: Option<(FillKey, Option<Vec<u8>>)>,
    expect: Option<Expected>,
    /// The last large result without an `expect` (its digest, for the next equal one).
    last: Option<Known<(DType, Vec<usize>)>>,
    /// Digests of constant tensors: (dtype, shape, the element's bytes).
    constant: Option<Known<(DType, Vec<usize>)>>,
    spares: Vec<Vec<u8>>,
}

impl Reuse {
    /// The fill of `key`: the kept bytes (lent: give them back with the returned token), else
    /// `make`'s, kept from now on when large.
    pub fn fill(&mut self, key: FillKey, make: impl FnOnce() -> Tensor) -> (Tensor, Option<Lent>) {
        if let Some((k, slot)) = &mut self.fill {
            if *k == key {
                if let Some(bytes) = slot.take() {
                    let t = Tensor {
                        dtype: key.dtype,
                        shape: key.shape.clone(),
                        data: bytes,
                    };
                    return (t, Some(Lent(key)));
                }
            }
        }
        let t = make();
        if !keeps(t.data.len()) {
            return (t, None);
        }
        if let Some((_, Some(old))) = self.fill.take() {
            self.put_spare(old);
        }
        self.fill = Some((key.clone(), None));
        (t, Some(Lent(key)))
    }

    /// A lent fill buffer, unmodified, back (or any buffer, as a spare).
    pub fn give_back(&mut self, bytes: Vec<u8>, lent: Option<Lent>) {
        if let (Some(Lent(key)), Some((k, slot @ None))) = (lent, &mut self.fill) {
            if *k == key {
                *slot = Some(bytes);
                return;
            }
        }
        self.put_spare(bytes);
    }

    /// A buffer of `len` bytes whose contents the caller overwrites: the one given back last
    /// (a loop of steps then writes one buffer, as a bare loop does, not two in turn).
    pub fn spare(&mut self, len: usize) -> Vec<u8> {
        if let Some(i) = self.spares.iter().rposition(|b| b.len() == len) {
            return self.spares.remove(i);
        }
        vec![0u8; len]
    }

    /// Keeps a buffer no one reads any more.
    pub fn put_spare(&mut self, bytes: Vec<u8>) {
        if keeps(bytes.len()) {
            if self.spares.len() >= MAX_SPARES {
                self.spares.remove(0);
            }
            self.spares.push(bytes);
        }
    }

    /// Whether `out` holds exactly the expected values of `key` (computed by `make` the first
    /// time), with their digest when it does.
    pub fn matches_expected(
        &mut self,
        key: ExpectKey,
        out: &Tensor,
        make: impl FnOnce() -> Vec<u8>,
    ) -> Option<u64> {
        if self.expect.as_ref().is_none_or(|k| k.key != key) {
            let bytes = make();
            let t = Tensor {
                dtype: key.dtype,
                shape: key.shape.clone(),
                data: bytes,
            };
            let digest = t.digest();
            let block = period_block(&t.data, key.dtype.size_bytes());
            let bytes = if block.is_some() { Vec::new() } else { t.data };
            self.expect = Some(Expected {
                key,
                bytes,
                block,
                digest,
            });
        }
        let k = self.expect.as_ref().expect("set");
        let same = out.dtype == k.key.dtype && out.shape == k.key.shape;
        (same && k.matches(&out.data)).then_some(k.digest)
    }

    /// `t`'s digest, reusing the last one when `t`'s bytes equal the bytes it was computed from.
    pub fn digest(&mut self, t: &Tensor) -> u64 {
        if !keeps(t.data.len()) {
            return t.digest();
        }
        let key = (t.dtype, t.shape.clone());
        if let Some(k) = &self.last {
            if k.key == key && k.bytes == t.data {
                return k.digest;
            }
        }
        let digest = t.digest();
        let mut bytes = match self.last.take() {
            Some(k) if k.bytes.len() == t.data.len() => k.bytes,
            _ => Vec::new(),
        };
        bytes.clear();
        bytes.extend_from_slice(&t.data);
        self.last = Some(Known { key, bytes, digest });
        digest
    }

    /// The digest of `t`, whose every element is `one` (the caller compared them).
    pub fn constant_digest(&mut self, t: &Tensor, one: &[u8]) -> u64 {
        let key = (t.dtype, t.shape.clone());
        if let Some(k) = &self.constant {
            if k.key == key && k.bytes == one {
                return k.digest;
            }
        }
        let digest = t.digest();
        self.constant = Some(Known {
            key,
            bytes: one.to_vec(),
            digest,
        });
        digest
    }
}

/// The longest period of a formula evaluated once and repeated ([`periodic_bytes`]).
pub(crate) const MAX_FORMULA_PERIOD: u64 = 1 << 16;

/// `numel` elements of `dtype` whose element `i` is `f(i % period)`: one period evaluated and
/// its bytes repeated (a fill or `expect` that reads `i` only as `i % m`, Expr::period_in).
pub(crate) fn periodic_bytes(
    dtype: DType,
    numel: usize,
    period: usize,
    f: impl Fn(usize) -> f64,
) -> Vec<u8> {
    let w = dtype.size_bytes();
    let mut one = vec![0u8; period.clamp(1, numel.max(1)) * w];
    for (i, e) in one.chunks_exact_mut(w).enumerate() {
        dtype.encode(f(i), e);
    }
    let mut out = one.repeat(numel.div_ceil(one.len() / w).max(1));
    out.truncate(numel * w);
    out
}

/// Whether every element of `data` is `one` (compared in blocks, not one element at a time).
pub(crate) fn all_equal(data: &[u8], one: &[u8]) -> bool {
    let w = one.len();
    if w == 0 || !data.len().is_multiple_of(w) {
        return false;
    }
    let block = one.repeat((4096 / w).max(1));
    let mut chunks = data.chunks_exact(block.len());
    let whole = chunks.by_ref().all(|c| c == block.as_slice());
    whole && chunks.remainder().chunks_exact(w).all(|e| e == one)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(formula: &str) -> FillKey {
        FillKey {
            formula: formula.into(),
            dtype: DType::F32,
            shape: vec![MIN_BYTES],
            per_tensor: MIN_BYTES,
        }
    }

    #[test]
    fn a_fill_comes_back_only_under_its_own_key_and_only_once_lent() {
        let mut r = Reuse::default();
        let make = || Tensor::filled(DType::F32, vec![MIN_BYTES], 1.0);
        let (t, lent) = r.fill(key("1"), make);
        assert!(lent.is_some());
        // Lent: a second fill of the same key computes again.
        let mut made = false;
        let (t2, lent2) = r.fill(key("1"), || {
            made = true;
            make()
        });
        assert!(made);
        r.give_back(t.data, lent);
        r.give_back(t2.data.clone(), lent2);
        let (t3, _) = r.fill(key("1"), || unreachable!("kept"));
        assert_eq!(t3.data, t2.data);
        // Another formula misses.
        let (_, l) = r.fill(key("2"), || {
            Tensor::filled(DType::F32, vec![MIN_BYTES], 2.0)
        });
        assert!(l.is_some());
    }

    #[test]
    fn periodic_bytes_equal_the_element_wise_tensor() {
        for (n, p) in [(100, 7), (7, 7), (5, 7), (0, 3), (64, 1)] {
            let f = |i: usize| (i % p) as f64 * 1.5 - 2.0;
            let want = Tensor::from_fn(DType::BF16, vec![n], f).data;
            assert_eq!(
                periodic_bytes(DType::BF16, n, p, |i| f(i % p)),
                want,
                "{n} {p}"
            );
        }
    }

    #[test]
    fn periods_are_found_and_a_block_compares_like_the_whole() {
        let w = 4;
        let t = Tensor::from_fn(DType::F32, vec![100_003], |i| (i % 7) as f64);
        let b = period_block(&t.data, w).expect("period 7");
        assert_eq!(b.len() % (7 * w), 0);
        let e = Expected {
            key: ExpectKey {
                formula: String::new(),
                dtype: DType::F32,
                shape: t.shape.clone(),
                vars: OutVars::flat(0),
            },
            bytes: Vec::new(),
            block: Some(b),
            digest: 0,
        };
        assert!(e.matches(&t.data));
        let mut bad = t.data.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(!e.matches(&bad));
        let ramp = Tensor::from_fn(DType::F32, vec![100_000], |i| i as f64);
        assert!(period_block(&ramp.data, w).is_none());
        let mut almost = Tensor::filled(DType::F32, vec![100_000], 1.0).data;
        almost[200_000] = 7;
        assert!(period_block(&almost, w).is_none());
    }

    #[test]
    fn expected_values_and_digests_are_reused_only_for_equal_bytes() {
        let mut r = Reuse::default();
        let t = Tensor::from_fn(DType::F32, vec![MIN_BYTES], |i| (i % 7) as f64);
        let k = ExpectKey {
            formula: "i % 7".into(),
            dtype: DType::F32,
            shape: t.shape.clone(),
            vars: OutVars::flat(MIN_BYTES),
        };
        assert_eq!(
            r.matches_expected(k.clone(), &t, || t.data.clone()),
            Some(t.digest())
        );
        let mut bad = t.clone();
        bad.data[5] ^= 1;
        assert_eq!(r.matches_expected(k, &bad, || unreachable!("kept")), None);
        assert_eq!(r.digest(&t), t.digest());
        assert_eq!(r.digest(&bad), bad.digest());
        assert_eq!(r.digest(&t), t.digest());
        let one = 3f32.to_le_bytes();
        let c = Tensor::filled(DType::F32, vec![MIN_BYTES + 1], 3.0);
        assert!(all_equal(&c.data, &one));
        assert!(!all_equal(&bad.data, &one));
        assert_eq!(r.constant_digest(&c, &one), c.digest());
        assert_eq!(r.constant_digest(&c, &one), c.digest());
    }
}
