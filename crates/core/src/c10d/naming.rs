//! Process-group names (docs/rules/c10d.md#r19): the global counter, and hashed names for
//! `use_local_synchronization=True`.
//!
//! Names are what every later rendezvous key is built from, so two ranks that disagree on a
//! name never meet: the mechanism behind "one rank called new_group in another order".

/// `_process_group_name` for a normal group: the counter's value as a string.
pub fn counter_name(group_count: u64) -> String {
    group_count.to_string()
}

/// The hashed name (`_hash_ranks_to_str`, torch 2.15): SHA-1 of the ranks and the counter
/// joined by `_` (`"0_1_2_2"` for ranks [0, 1, 2] at counter 2). Used by
/// `use_local_synchronization=True` groups and `split_group`, whose ranks are the list as given.
pub fn hashed_name(ranks: &[usize], group_count: u64) -> String {
    let mut joined = ranks
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join("_");
    joined.push_str(&format!("_{group_count}"));
    sha1_hex(joined.as_bytes())
}

/// SHA-1 (FIPS 180-1), enough for group names; not for security.
pub fn sha1_hex(data: &[u8]) -> String {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, v) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(v);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_known_vectors() {
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }

    #[test]
    fn r19_names() {
        assert_eq!(counter_name(3), "3");
        // Real torch 2.15's name of `split_group(GA, [[0, 1, 2]])` at group counter 2.
        assert_eq!(
            hashed_name(&[0, 1, 2], 2),
            "3dc4379ea45616caf0e9b9623ef0b53784fb4ef5"
        );
    }
}
