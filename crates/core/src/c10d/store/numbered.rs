//! The store's keys of the form `<prefix><i>`, also kept by prefix and index: a store loop
//! (seq.rs) reads every member's key under one prefix, W keys per request in a W-rank group,
//! and formatting, hashing and comparing each key string was most of serving it (issue 31:
//! sglang's 4096-rank start-up reads ~50 M such keys). The loop looks each up by index instead;
//! the keys and their values are the same, so replies and virtual times are too.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Indexes past this are only in the key map (a key like `p99999999999` takes no table).
const MAX_INDEX: usize = 1 << 20;

/// One prefix's values by index (`None`: not set).
pub(super) type Slots = Rc<RefCell<Vec<Option<Rc<[u8]>>>>>;

#[derive(Default)]
pub(super) struct Numbered {
    by_prefix: RefCell<HashMap<String, Slots>>,
}

/// `(prefix, i)` of a key `<prefix><i>` the table holds: `i` in decimal without leading zeros
/// (so one key has one split) and a prefix not ending in a digit.
fn split(key: &str) -> Option<(&str, usize)> {
    let digits = key.bytes().rev().take_while(u8::is_ascii_digit).count();
    let (prefix, number) = key.split_at(key.len() - digits);
    let canonical = !number.is_empty() && (number == "0" || !number.starts_with('0'));
    let i = number.parse::<usize>().ok().filter(|_| canonical)?;
    indexed(prefix, i).then_some((prefix, i))
}

/// Whether key `<prefix><i>` is held by index (else only in the key map).
pub(super) fn indexed(prefix: &str, i: usize) -> bool {
    i < MAX_INDEX && !prefix.ends_with(|c: char| c.is_ascii_digit())
}

impl Numbered {
    /// Records `key`'s new value if the key is of the indexed form.
    pub(super) fn set(&self, key: &str, value: &[u8]) {
        let Some((prefix, i)) = split(key) else {
            return;
        };
        let slots = self.slots(prefix);
        let mut slots = slots.borrow_mut();
        if slots.len() <= i {
            slots.resize(i + 1, None);
        }
        slots[i] = Some(value.into());
    }

    /// Forgets `key`'s value if the key is of the indexed form (a `delete_key`).
    pub(super) fn remove(&self, key: &str) {
        let Some((prefix, i)) = split(key) else {
            return;
        };
        if let Some(slot) = self.slots(prefix).borrow_mut().get_mut(i) {
            *slot = None;
        }
    }

    /// The values under `prefix` (an empty table if none is set yet: later sets fill it).
    pub(super) fn slots(&self, prefix: &str) -> Slots {
        let mut by_prefix = self.by_prefix.borrow_mut();
        if let Some(s) = by_prefix.get(prefix) {
            return s.clone();
        }
        let s = Slots::default();
        by_prefix.insert(prefix.to_string(), s.clone());
        s
    }
}

/// Key `i` of a loop's prefix, from its table.
pub(super) fn get(slots: &Slots, i: usize) -> Option<Rc<[u8]>> {
    slots.borrow().get(i).cloned().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_canonical_numbered_keys_are_indexed() {
        assert_eq!(
            split("default_pg/0//addr/12"),
            Some(("default_pg/0//addr/", 12))
        );
        assert_eq!(split("p/0"), Some(("p/", 0)));
        assert_eq!(split("p/012"), None);
        assert_eq!(split("p/"), None);
        assert_eq!(split("rank12"), Some(("rank", 12)));
        assert_eq!(split("p/99999999999999999999999"), None);
        assert!(!indexed("rank1", 2));
        let n = Numbered::default();
        n.set("a/3", b"x");
        n.set("a/03", b"y");
        let s = n.slots("a/");
        assert_eq!(get(&s, 3).as_deref(), Some(&b"x"[..]));
        assert_eq!(get(&s, 4), None);
        n.set("a/4", b"z");
        assert_eq!(get(&s, 4).as_deref(), Some(&b"z"[..]));
        // A deleted key leaves its slot empty: a store loop reads it as absent again.
        n.remove("a/4");
        n.remove("a/9");
        assert_eq!(get(&s, 4), None);
        assert_eq!(get(&s, 3).as_deref(), Some(&b"x"[..]));
    }
}
