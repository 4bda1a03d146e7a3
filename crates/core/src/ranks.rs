//! A group's member list, shared instead of copied: in a W-rank world every member of a
//! world-sized group holds its list (in its process group and in each call record), and a copy
//! each made W^2 integers — at 4096 ranks over 500 MiB of a start-up's peak (docs/scale.md).
//! Lists are immutable once made, so ranks of one simulator thread share one allocation per
//! distinct long list. Their text (as a step's result or sglang's done line prints a group) is
//! made once per thread too: every member prints it. A long list's text writes its evenly
//! spaced runs by their ends (`[0, 2, ..., 1022] (512 ranks)`): printed in full by each of its
//! members it made a W-rank trace W^2 numbers long (23 MB at 1024 ranks, docs/scale.md).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// Global ranks of a group, in group-rank order.
pub type Ranks = Arc<[usize]>;

/// Lists shorter than this are copied: sharing them saves little.
const SHARED_MIN_LEN: usize = 64;
/// Distinct long lists kept for sharing on one thread (a world has few: the world, its halves,
/// its data-parallel groups); the cache starts over past it.
const SHARED_MAX_LISTS: usize = 256;

thread_local! {
    /// Long lists made on this thread, by a hash of their contents. Only which allocation a
    /// list uses depends on it, never what it holds, so it cannot change a run's output.
    static SHARED: RefCell<HashMap<u64, Ranks>> = RefCell::new(HashMap::new());
    /// Long lists' text, by a hash of their contents, with the list it is the text of.
    static LISTED: RefCell<HashMap<u64, (Ranks, Rc<str>)>> = RefCell::new(HashMap::new());
}

/// A list's text: `format!("{ranks:?}")` for a short list, [`compact`] for a long one (made
/// once per thread).
pub fn listed(ranks: &[usize]) -> Rc<str> {
    if ranks.len() < SHARED_MIN_LEN {
        return format!("{ranks:?}").into();
    }
    let key = content_hash(ranks);
    LISTED.with_borrow_mut(|cache| {
        if let Some((_, text)) = cache.get(&key).filter(|(r, _)| r[..] == *ranks) {
            return text.clone();
        }
        if cache.len() >= SHARED_MAX_LISTS {
            cache.clear();
        }
        let text: Rc<str> = compact(ranks).into();
        cache.insert(key, (ranks.into(), text.clone()));
        text
    })
}

/// Shortest evenly spaced run written by its ends.
const RUN_MIN_LEN: usize = 4;

/// `[0, 1, ..., 511, 600, 602, ..., 700, 5] (572 ranks)`: each run of [`RUN_MIN_LEN`] or more
/// evenly spaced ranks as its first two and its last, other ranks as they are, then the count.
/// Exact: the list can be read back from it.
pub fn compact(ranks: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let end = run_end(ranks, i);
        if end - i >= RUN_MIN_LEN {
            let (a, b, z) = (ranks[i], ranks[i + 1], ranks[end - 1]);
            parts.push(format!("{a}, {b}, ..., {z}"));
            i = end;
        } else {
            parts.push(ranks[i].to_string());
            i += 1;
        }
    }
    format!("[{}] ({} ranks)", parts.join(", "), ranks.len())
}

/// The end of the evenly spaced run that starts at `i` (at least `i + 1`).
fn run_end(ranks: &[usize], i: usize) -> usize {
    let Some(step) = ranks.get(i + 1).and_then(|b| b.checked_sub(ranks[i])) else {
        return i + 1;
    };
    let mut end = i + 2;
    while end < ranks.len() && ranks[end].checked_sub(ranks[end - 1]) == Some(step) {
        end += 1;
    }
    end
}

/// `ranks` as a shared list: the allocation of an equal long list made before on this thread
/// if there is one.
pub fn shared(ranks: Vec<usize>) -> Ranks {
    if ranks.len() < SHARED_MIN_LEN {
        return ranks.into();
    }
    of(&ranks)
}

/// [`shared`] from a borrowed list: copied only when no equal long list was made before.
pub fn of(ranks: &[usize]) -> Ranks {
    if ranks.len() < SHARED_MIN_LEN {
        return ranks.into();
    }
    let key = content_hash(ranks);
    SHARED.with_borrow_mut(|cache| {
        if let Some(hit) = cache.get(&key).filter(|r| r[..] == *ranks) {
            return hit.clone();
        }
        if cache.len() >= SHARED_MAX_LISTS {
            cache.clear();
        }
        let list: Ranks = ranks.into();
        cache.insert(key, list.clone());
        list
    })
}

/// `0..n` as a shared list (the world's members), made once per thread and size.
pub fn world(n: usize) -> Ranks {
    thread_local! {
        static WORLD: RefCell<Option<Ranks>> = const { RefCell::new(None) };
    }
    WORLD.with_borrow_mut(|w| match w {
        Some(r) if r.len() == n => r.clone(),
        _ => {
            let r: Ranks = (0..n).collect::<Vec<_>>().into();
            *w = Some(r.clone());
            r
        }
    })
}

/// A word-wise FNV-style hash: one multiply per rank (the list is hashed by every member).
fn content_hash(ranks: &[usize]) -> u64 {
    ranks.iter().fold(0xcbf29ce484222325, |h, r| {
        (h ^ *r as u64).wrapping_mul(0x100000001b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_long_lists_share_one_allocation_and_short_ones_are_copied() {
        let a = shared((0..100).collect());
        let b = shared((0..100).collect());
        assert!(Arc::ptr_eq(&a, &b));
        let c = shared((1..101).collect());
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(&*c, &(1..101).collect::<Vec<_>>()[..]);
        assert!(Arc::ptr_eq(&a, &of(&(0..100).collect::<Vec<_>>())));
        assert!(Arc::ptr_eq(&world(100), &world(100)));
        assert_eq!(&*world(3), &[0, 1, 2]);
        let (d, e) = (shared(vec![0, 1]), shared(vec![0, 1]));
        assert_eq!(d, e);
        assert!(!Arc::ptr_eq(&d, &e));
    }

    #[test]
    fn a_short_list_is_listed_as_debug_prints_it() {
        for n in [0, 3, 63] {
            let r: Vec<usize> = (0..n).collect();
            assert_eq!(&*listed(&r), format!("{r:?}"));
            assert_eq!(&*listed(&r), format!("{r:?}"));
        }
    }

    #[test]
    fn a_long_list_is_listed_by_its_runs_and_its_length() {
        let all: Vec<usize> = (0..1024).collect();
        assert_eq!(&*listed(&all), "[0, 1, ..., 1023] (1024 ranks)");
        assert_eq!(&*listed(&all), "[0, 1, ..., 1023] (1024 ranks)");
        let even: Vec<usize> = (0..1024).step_by(2).collect();
        assert_eq!(&*listed(&even), "[0, 2, ..., 1022] (512 ranks)");
        let mut mixed: Vec<usize> = (0..64).collect();
        mixed.extend([100, 7, 300, 310, 320, 330, 5, 4]);
        assert_eq!(
            &*listed(&mixed),
            "[0, 1, ..., 63, 100, 7, 300, 310, ..., 330, 5, 4] (72 ranks)"
        );
    }
}
