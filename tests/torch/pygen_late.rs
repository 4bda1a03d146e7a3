//! The generator's rows added after the first slices were measured: each draws from a stream
//! of its own (seeded by the program's number), so a program that draws none of them is the
//! same text as before and the program numbers in docs/userpath.md keep naming the same
//! programs.

use super::super::gen::Rng;
use super::{Kind, B, USE_CUT, USE_DEFAULT_STORE, USE_OWN_STORE, USE_SLEEP, USE_VALUES};

/// The rows a first 2,000-program run drew under 20 times or never: a query, a value the
/// program's control flow reads, a job cut by `--timeout-s`. Returns the cut, if drawn.
pub(super) fn late_rows(more: &mut Rng, b: &mut B) -> Option<u64> {
    if b.all().is_empty() {
        return None;
    }
    if more.chance(3) {
        let live = b.all();
        b.line(&live, "_ = dist.get_backend_impl(GA)", Kind::Other);
        b.row("get_backend_impl");
    }
    if more.chance(3) {
        // Every rank's X is r + 1: the sum over the world. A recording fills each tensor with
        // its rank and takes the path the real run took (the row's approximation).
        let sum = b.w * (b.w + 1) / 2;
        let live = b.all();
        b.line(
            &live,
            &format!("_v = X(1); dist.all_reduce(_v); assert float(_v[0]) == {sum}, \"sum\""),
            Kind::Call,
        );
        b.row("all_reduce");
        b.row(USE_VALUES);
    }
    if !more.chance(3) {
        return None;
    }
    // One rank sleeps past the cut while the others wait in the world's barrier (60 s).
    let live = b.all();
    let a = *more.pick(&live);
    b.line(&[a], "time.sleep(60)", Kind::Sleep);
    b.line(&live, "dist.barrier()", Kind::Call);
    b.row(USE_SLEEP);
    b.row("barrier");
    b.row(USE_CUT);
    Some(25)
}

/// Calls on the default group's store (steps since 2026-11-28), from a stream of their own: a
/// key one rank sets, maybe late, and another gets; a `wait` with a timeout on keys one rank
/// sets and one nobody does; a counter every live rank adds to, then checks; then maybe a
/// compare_set, delete_key or num_keys. The store's host
/// (rank 0, as plain processes) may have finished by then: the calls then meet it gone.
pub(super) fn store_rows(st: &mut Rng, b: &mut B) {
    let live = b.all();
    if live.len() < 2 || !st.chance(5) {
        return;
    }
    let a = *st.pick(&live);
    let others: Vec<usize> = live.iter().copied().filter(|r| *r != a).collect();
    let o = *st.pick(&others);
    b.line(
        &live,
        "S = dist.distributed_c10d._get_default_store()",
        Kind::Other,
    );
    match st.below(3) {
        0 => {
            if st.chance(2) {
                b.line(&[a], "time.sleep(1)", Kind::Sleep);
                b.row(USE_SLEEP);
            }
            b.line(&[a], "S.set(\"h\", \"%d\" % r)", Kind::Call);
            b.line(&[o], "S.get(\"h\")", Kind::Call);
        }
        1 => {
            b.line(&[a], "S.set(\"w\", b\"1\")", Kind::Call);
            let keys = *st.pick(&["[\"w\"]", "[\"w\", \"never\"]"]);
            b.line(&[o], &format!("S.wait({keys}, T(2))"), Kind::Call);
        }
        _ => {
            b.line(&live, "S.add(\"c\", 1)", Kind::Call);
            b.line(&[o], "dist.Store.check(S, [\"c\", \"h\"])", Kind::Call);
        }
    }
    // The other methods with steps (since the three patterns above were first measured: drawn
    // after them, so a program that draws none keeps its text).
    if st.chance(40) {
        let line = *st.pick(&[
            "S.compare_set(\"h\", \"\", \"%d\" % r)",
            "S.compare_set(\"w\", \"x\", \"y\")",
            "S.delete_key(\"h\")",
            "S.num_keys()",
        ]);
        b.line(&[a], line, Kind::Call);
    }
    b.row(USE_DEFAULT_STORE);
}

/// A program's own TCPStore (steps since 2026-11-28), vLLM's `StatelessProcessGroup` way, from a
/// stream of its own: on MASTER_PORT + 1, rank 0 its master, made by every live rank or by all
/// but one (the master then times out waiting for clients, or, without it, the clients time out
/// connecting); then a key one rank sets, maybe late, and another gets, or a wait through a
/// PrefixStore on a key nobody sets. Rank 0's program may end first: the calls then meet its
/// server gone.
pub(super) fn own_store_rows(st: &mut Rng, b: &mut B) {
    let live = b.all();
    if live.len() < 2 || !st.chance(6) {
        return;
    }
    let makers: Vec<usize> = if st.chance(4) {
        let skip = *st.pick(&live);
        live.iter().copied().filter(|r| *r != skip).collect()
    } else {
        live.clone()
    };
    let ws = if st.chance(3) {
        "None".to_string()
    } else {
        b.w.to_string()
    };
    b.line(
        &makers,
        &format!(
            "OS = dist.TCPStore(os.environ[\"MASTER_ADDR\"], int(os.environ[\"MASTER_PORT\"]) + 1, {ws}, r == 0, timeout=T(3))"
        ),
        Kind::Call,
    );
    let a = *st.pick(&makers);
    let others: Vec<usize> = makers.iter().copied().filter(|r| *r != a).collect();
    if others.is_empty() {
        b.row(USE_OWN_STORE);
        return;
    }
    let o = *st.pick(&others);
    if st.chance(2) {
        if st.chance(2) {
            b.line(&[a], "time.sleep(1)", Kind::Sleep);
            b.row(USE_SLEEP);
        }
        b.line(&[a], "OS.set(\"o\", \"%d\" % r)", Kind::Call);
        b.line(&[o], "OS.get(\"o\")", Kind::Call);
    } else {
        b.line(&[a, o], "PS = dist.PrefixStore(\"p\", OS)", Kind::Call);
        b.line(&[a], "PS.add(\"n\", 1)", Kind::Call);
        let keys = *st.pick(&["[\"n\"]", "[\"n\", \"never\"]"]);
        b.line(&[o], &format!("PS.wait({keys}, T(2))"), Kind::Call);
    }
    b.row(USE_OWN_STORE);
}

/// `split_group` (recorded since 2026-11-28), from a stream of its own: GA or the world split
/// into halves, into one list (the others non-members) or into all ranks in another order; made
/// by every live rank or by all but one (the others then time out in gloo's mesh after the
/// split's 3 s); then an all_reduce, or an all_gather, on the split group by its members.
pub(super) fn split_rows(st: &mut Rng, b: &mut B) {
    let live = b.all();
    if live.len() < 2 || !st.chance(8) {
        return;
    }
    let w = b.w;
    let parent = *st.pick(&["GA", "None"]);
    let half = w / 2;
    let lists: Vec<Vec<usize>> = match st.below(3) {
        0 => vec![(0..half).collect(), (half..w).collect()],
        1 => vec![(0..w).filter(|r| r % 2 == 0).collect()],
        _ => vec![(0..w).rev().collect()],
    };
    let callers: Vec<usize> = if st.chance(4) {
        let skip = *st.pick(&live);
        live.iter().copied().filter(|r| *r != skip).collect()
    } else {
        live.clone()
    };
    let text: Vec<String> = lists.iter().map(|l| format!("{l:?}")).collect();
    b.line(
        &callers,
        &format!(
            "SG = dist.split_group({parent}, [{}], timeout=T(3))",
            text.join(", ")
        ),
        Kind::Call,
    );
    b.row("split_group");
    let members: Vec<usize> = callers
        .iter()
        .copied()
        .filter(|r| lists.iter().any(|l| l.contains(r)))
        .collect();
    if members.is_empty() {
        return;
    }
    let call = if st.chance(2) {
        b.row("all_reduce");
        "dist.all_reduce(X(2), group=SG)".to_string()
    } else {
        b.row("all_gather");
        "dist.all_gather([X(2) for _ in range(dist.get_world_size(SG))], X(2), group=SG)"
            .to_string()
    };
    b.line(&members, &call, Kind::Call);
}

/// `new_group(..., sort_ranks=False)` (recorded since 2026-11-29), from the split stream after
/// its own draws: the world in reverse order, so group rank 0 is the last rank; then a
/// broadcast from group rank 0, whose root is that rank (late or not).
pub(super) fn ordered_group_rows(st: &mut Rng, b: &mut B) {
    let live = b.all();
    if live.len() < b.w || !st.chance(6) {
        return;
    }
    let w = b.w;
    let list: Vec<usize> = (0..w).rev().collect();
    b.line(
        &live,
        &format!("GO = dist.new_group({list:?}, sort_ranks=False, timeout=T(3))"),
        Kind::Call,
    );
    b.row("new_group");
    if st.chance(2) {
        b.line(&[w - 1], "time.sleep(4.5)", Kind::Sleep);
        b.row(USE_SLEEP);
    }
    b.line(
        &live,
        "dist.broadcast(X(2), group_src=0, group=GO)",
        Kind::Call,
    );
    b.row("broadcast");
}
