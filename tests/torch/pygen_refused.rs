//! The calls `scen record` refuses, as the generator draws them (docs/api-coverage.md:
//! refused): each program that draws one checks that the recording exits 2 naming the call
//! and its line. Calls recorded since they were first drawn keep their lines, so every
//! program keeps its text.

use super::super::gen::Rng;
use super::{Kind, B, USE_DEFAULT_STORE, USE_STORE};

/// A call `scen record` refuses, from the rows a first 2,000-program run drew least (indices
/// into [`REFUSED`]).
pub(super) fn refused_more(more: &mut Rng, b: &mut B) -> &'static str {
    let i = *more.pick(&[7, 8, 9, 0, 4, 2, 1, 3]);
    refused_line(b, i)
}

/// Entries of [`REFUSED`] that `scen record` records now (set_timeout, the default store's set
/// and split_group: 2026-11-28; shrink_group: 2026-11-29): still drawn
/// from the table, so every program keeps its text and number.
pub(super) const RECORDED_SINCE: [&str; 4] =
    ["set_timeout", "Store.set", "split_group", "shrink_group"];

/// The calls `scen record` refuses (docs/api-coverage.md: refused): the name the refusal gives,
/// the coverage row, the line. The first seven are the first draw's (`refused_call`); the
/// order is the programs' text, so entries go at the end (and stay when a call is recorded
/// since: [`RECORDED_SINCE`]).
const REFUSED: [(&str, &str, &str); 10] = [
    (
        "gather_into_tensor",
        "gather_into_tensor",
        "dist.gather_into_tensor(X(2 * dist.get_world_size()) if r == 0 else None, X(2), dst=0)",
    ),
    (
        "gather_single",
        "gather_single",
        "dist.gather_single(X(2), X(2 * dist.get_world_size()) if r == 0 else None, dst=0)",
    ),
    (
        "set_timeout",
        "set_timeout",
        "dist.set_timeout(T(5), group=GA)",
    ),
    (
        "split_group",
        "split_group",
        "dist.split_group(GA, [list(range(dist.get_world_size()))], timeout=T(3))",
    ),
    (
        "shrink_group",
        "shrink_group",
        "dist.shrink_group([0], group=GA)",
    ),
    ("HashStore", USE_STORE, "_hs = dist.HashStore()"),
    (
        "Store.set",
        USE_DEFAULT_STORE,
        "dist.Store.set(dist.distributed_c10d._get_default_store(), \"k%d\" % r, \"1\")",
    ),
    ("breakpoint", "breakpoint", "dist.breakpoint()"),
    (
        "rendezvous",
        "rendezvous",
        "_rv = dist.rendezvous(\"env://\")",
    ),
    (
        "register_rendezvous_handler",
        "register_rendezvous_handler",
        "dist.register_rendezvous_handler(\"mine\", lambda url, **kw: iter(()))",
    ),
];

/// Refused call `REFUSED[i]` by every live rank: its name (as the refusal names it).
fn refused_line(b: &mut B, i: usize) -> &'static str {
    let (name, row, body) = REFUSED[i];
    let live = b.all();
    b.line(&live, body, Kind::Call);
    b.row(row);
    name
}

/// A call `scen record` refuses, from the first seven of [`REFUSED`].
pub(super) fn refused_call(rng: &mut Rng, b: &mut B) -> &'static str {
    let i = rng.below(7);
    refused_line(b, i)
}
