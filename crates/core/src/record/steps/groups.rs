//! The steps of the calls that make groups: `new_group` (its ranks, sorted unless told not to),
//! `split_group` (its lists, as global ranks in this rank's list's order) and `shrink_group`;
//! each remembers its handle's group for the calls that name it later.

use super::super::parse::Call;
use super::super::RecordError;
use super::{group_field, ints, list, quote, timeout, Ctx, Group};
use serde_json::Value;

/// new_group: its ranks, backend, timeout and handle; the group is remembered for later calls.
pub(super) fn new_group_fields(cx: &mut Ctx, c: &Call, f: &mut Vec<(String, String)>) {
    let a = &c.args;
    let ranks = ints(a.get("ranks"));
    if let Some(r) = &ranks {
        f.push(("ranks".into(), list(r)));
    }
    let backend = a.get("backend").and_then(Value::as_str).map(str::to_string);
    if let Some(b) = &backend {
        f.push(("backend".into(), quote(b)));
    }
    timeout(a, f);
    if a.get("use_local_synchronization").and_then(Value::as_bool) == Some(true) {
        f.push(("use_local_synchronization".into(), "true".into()));
    }
    // torch sorts the ranks unless told not to: the group's ranks are then the sorted list.
    let keep_order = a.get("sort_ranks").and_then(Value::as_bool) == Some(false);
    if keep_order {
        f.push(("sort_ranks".into(), "false".into()));
    }
    let (handle, member) = made_group(c, f);
    let ranks = ranks.filter(|r| !r.is_empty()).map(|mut r| {
        if !keep_order {
            r.sort_unstable();
        }
        r
    });
    cx.groups.insert(
        handle,
        Group {
            ranks,
            backend,
            member,
        },
    );
}

/// shrink_group: its group, the ranks to exclude and the flags (what torch checks before its
/// backend's shrink, which gloo cannot: runtime/rank/shrink.rs). A list that is not a list of
/// ints, or `pg_options`, has no field in the format: refused.
pub(super) fn shrink_group_fields(
    cx: &mut Ctx,
    c: &Call,
    group: &Option<String>,
    f: &mut Vec<(String, String)>,
) -> Result<(), RecordError> {
    let a = &c.args;
    let list: Option<Vec<i64>> = a
        .get("ranks_to_exclude")
        .and_then(Value::as_array)
        .and_then(|l| l.iter().map(Value::as_i64).collect());
    let (Some(list), None) = (list, a.get("pg_options")) else {
        return Err(cx.err(
            c,
            "shrink_group: ranks_to_exclude not a list of ints, or pg_options=..., has no field in the scenario format, and writing another call would run another program; not recorded".into(),
        ));
    };
    group_field(group, f);
    f.push(("ranks_to_exclude".into(), format!("{list:?}")));
    if let Some(flags) = a.get("shrink_flags").and_then(Value::as_i64) {
        f.push(("shrink_flags".into(), flags.to_string()));
    }
    if let Some(h) = c.result.get("handle").and_then(Value::as_str) {
        f.push(("as".into(), quote(h)));
        let member = c
            .result
            .get("member")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        cx.groups.insert(
            h.to_string(),
            Group {
                ranks: None,
                backend: None,
                member,
            },
        );
    }
    Ok(())
}

/// split_group: its parent, lists and timeout, and the handle of the group it made; the group is
/// remembered (its global ranks in this rank's list's order) for later calls. A `backend` or
/// `pg_options` argument has no field in the format: refused.
pub(super) fn split_group_fields(
    cx: &mut Ctx,
    c: &Call,
    parent: &Option<String>,
    f: &mut Vec<(String, String)>,
) -> Result<(), RecordError> {
    let a = &c.args;
    if let Some(k) = ["backend", "pg_options"]
        .into_iter()
        .find(|k| a.get(*k).is_some())
    {
        return Err(cx.err(
            c,
            format!("split_group({k}=...): the scenario format's split_group has no `{k}`, and leaving it out would run another program; not recorded"),
        ));
    }
    group_field(parent, f);
    let lists: Option<Vec<Vec<usize>>> = a.get("split_ranks").and_then(Value::as_array).map(|ls| {
        ls.iter()
            .map(|l| ints(Some(l)).unwrap_or_default())
            .collect()
    });
    if let Some(ls) = &lists {
        f.push(("split_ranks".into(), format!("{ls:?}")));
    }
    timeout(a, f);
    let (handle, member) = made_group(c, f);
    // This rank's list (the first holding its parent rank), as global ranks.
    let parent_ranks = |r: usize| cx.global(parent, r);
    let me_in_parent = (0..cx.group_size(parent)).find(|r| parent_ranks(*r) == cx.rank);
    let mine = lists
        .iter()
        .flatten()
        .find(|l| me_in_parent.is_some_and(|m| l.contains(&m)));
    let ranks = mine.map(|l| l.iter().map(|r| parent_ranks(*r)).collect());
    cx.groups.insert(
        handle,
        Group {
            ranks,
            backend: None,
            member,
        },
    );
    Ok(())
}

/// The handle and membership the recorder gave the group a call made (`as`, written to `f`).
fn made_group(c: &Call, f: &mut Vec<(String, String)>) -> (String, bool) {
    let handle = c
        .result
        .get("handle")
        .and_then(Value::as_str)
        .unwrap_or("g?");
    let member = c.result.get("member").and_then(Value::as_bool);
    f.push(("as".into(), quote(handle)));
    (handle.to_string(), member.unwrap_or(true))
}
