//! One rank's recorded calls as scenario steps (op and fields as docs/scenario-format.md
//! writes them), before ranks are merged: each call's tensor becomes `shape`/`dtype`/`device`,
//! its group a handle (`g1` is the rank's first `new_group`), `async_op` a `work` and its
//! `Work.wait()` a `wait` step. What the format cannot say is refused, naming the call and its
//! file:line. The collectives' own fields are in steps/collective.rs.

use super::parse::{Call, CallEnd, Proc};
use super::{Options, RecordError};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

mod collective;
mod groups;
mod store;
use collective::collective;
use groups::{new_group_fields, shrink_group_fields, split_group_fields};
use store::{freed_early, new_store_step, store_step};

/// One step as it will be written: `op`, then `fields` (key, TOML value) in order, and
/// where the user made the call. Ranks whose steps are equal share one `[[step]]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StepDesc {
    pub op: String,
    pub fields: Vec<(String, String)>,
    /// The user's `file:line`.
    pub at: String,
    /// What the recording changed to fit the format (comment lines).
    pub notes: Vec<String>,
}

/// One rank's steps, and for each recorded call the step it became (`None`: no step, e.g.
/// the wait of a call written as blocking).
pub struct RankSteps {
    pub steps: Vec<StepDesc>,
    pub of_call: Vec<Option<usize>>,
}

/// A `new_group` this rank made: its members and the backend it named.
#[derive(Debug, Clone)]
struct Group {
    ranks: Option<Vec<usize>>,
    backend: Option<String>,
    member: bool,
}

/// A TOML string (JSON's escapes are TOML basic-string escapes).
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn list(v: &[usize]) -> String {
    format!("{v:?}")
}

/// The device every tensor without `device` lives on in the written scenario.
pub fn default_device(o: &Options, recorded: &str) -> String {
    o.platform.clone().unwrap_or_else(|| recorded.to_string())
}

struct Ctx<'a> {
    o: &'a Options,
    /// The recorded platform's device (`cpu`, `xpu`, `cuda`).
    recorded: &'a str,
    rank: usize,
    world: usize,
    groups: BTreeMap<String, Group>,
    /// Works of async collectives (their wait is a step); other works' waits are dropped.
    async_works: BTreeSet<String>,
}

impl Ctx<'_> {
    fn err(&self, c: &Call, message: String) -> RecordError {
        RecordError::Unsupported {
            rank: self.rank,
            at: c.at.clone(),
            message,
        }
    }

    /// The handle of a call's group; `NON_MEMBER` (torch's -100 for a group this rank is not
    /// in) is taken to be the latest such group this rank made.
    fn group(&self, c: &Call, g: Option<&Value>) -> Result<Option<String>, RecordError> {
        match g.and_then(Value::as_str).unwrap_or("WORLD") {
            "WORLD" => Ok(None),
            "NON_MEMBER" => self
                .groups
                .iter()
                .rev()
                .find(|(_, g)| !g.member)
                .map(|(h, _)| Some(h.clone()))
                .ok_or_else(|| self.err(c, "a group this rank is not in, but it made none".into())),
            "UNKNOWN" => Err(self.err(
                c,
                "a process group not made by dist.new_group or dist.split_group (a DeviceMesh's own, shrink_group): the scenario format has no such group".into(),
            )),
            h => Ok(Some(h.to_string())),
        }
    }

    /// Global rank of a group rank (`group_src`/`group_dst`).
    fn global(&self, group: &Option<String>, r: usize) -> usize {
        group
            .as_ref()
            .and_then(|h| self.groups.get(h))
            .and_then(|g| g.ranks.as_ref())
            .and_then(|rs| rs.get(r).copied())
            .unwrap_or(r)
    }

    /// Whether this rank is in group `group` (a non-member's call is a no-op, R27: torch checks
    /// nothing of its tensors).
    fn is_member(&self, group: &Option<String>) -> bool {
        group
            .as_ref()
            .and_then(|h| self.groups.get(h))
            .is_none_or(|g| g.member)
    }

    /// How many ranks group `group` has (WORLD: the world's).
    fn group_size(&self, group: &Option<String>) -> usize {
        group
            .as_ref()
            .and_then(|h| self.groups.get(h))
            .and_then(|g| g.ranks.as_ref())
            .map_or(self.world, Vec::len)
    }

    /// A `*_tensor` collective whose large side is not group size x its small side: the format
    /// writes only the small side (the large one follows from it), so the scenario would run a
    /// call real c10d refuses (gloo: `Check failed: outputShape[0] * worldSize ==
    /// inputShape[0]`) as one it accepts. Refused, naming the call.
    fn sizes_agree(
        &self,
        c: &Call,
        group: &Option<String>,
        small: &str,
        large: &str,
    ) -> Result<(), RecordError> {
        let numel = |k: &str| {
            c.args
                .get(k)
                .and_then(Value::as_object)
                .map(|t| dims(t).iter().product::<usize>())
        };
        let (Some(s), Some(l)) = (numel(small), numel(large)) else {
            return Ok(());
        };
        if !self.is_member(group) {
            return Ok(());
        }
        let n = self.group_size(group);
        if s.checked_mul(n) == Some(l) {
            return Ok(());
        }
        Err(self.err(
            c,
            format!(
                "{}: its {large} has {l} elements, not the group's {n} ranks x its {small}'s {s}: real c10d rejects the call, and the scenario format writes the {large} as {n} x the {small} (it would run a call that succeeds); not recorded",
                c.op
            ),
        ))
    }

    /// A list form whose list is not one tensor per group member, or whose tensors are not the
    /// call's own tensor's shape and dtype (`like`; `None`: any): the format writes the list
    /// from the group's size and that tensor, so the scenario would run a call real c10d
    /// rejects (gloo 2.15: `ProcessGroupGloo::allgather: invalid output tensor list at index 0
    /// (expected length 2, got 3)`, `Incorrect input list size 3`, `invalid tensor size at
    /// index 0`) as one it accepts. Refused, naming the call. A list not recorded (a non-root's
    /// `None`) passes.
    fn list_agrees(
        &self,
        c: &Call,
        group: &Option<String>,
        list: &str,
        like: Option<&str>,
    ) -> Result<(), RecordError> {
        let Some(items) = c.args.get(list).and_then(Value::as_array) else {
            return Ok(());
        };
        if !self.is_member(group) {
            return Ok(());
        }
        let n = self.group_size(group);
        if items.len() != n {
            return Err(self.err(
                c,
                format!(
                    "{}: its {list} has {} tensors, not one per member of its group of {n}: real c10d rejects the call, and the scenario format writes one per member (it would run a call that succeeds); not recorded",
                    c.op,
                    items.len()
                ),
            ));
        }
        let shape = |t: &Value| {
            t.as_object().map(|o| {
                (
                    dims(o),
                    o.get("dtype").and_then(Value::as_str).map(str::to_string),
                )
            })
        };
        let Some(want) = like.and_then(|k| c.args.get(k)).and_then(shape) else {
            return Ok(());
        };
        match items.iter().position(|t| shape(t).as_ref() != Some(&want)) {
            None => Ok(()),
            Some(i) => Err(self.err(
                c,
                format!(
                    "{}: tensor {i} of its {list} is not its {}'s shape and dtype ({:?} {}): real c10d rejects the call, and the scenario format writes every one like it (it would run a call that succeeds); not recorded",
                    c.op,
                    like.unwrap_or_default(),
                    want.0,
                    want.1.as_deref().unwrap_or("?")
                ),
            )),
        }
    }

    /// Whether tensors of this group stay on the CPU when re-targeted: a group made with
    /// an explicit gloo backend.
    fn cpu_group(&self, group: &Option<String>) -> bool {
        group
            .as_ref()
            .and_then(|h| self.groups.get(h))
            .and_then(|g| g.backend.as_deref())
            .is_some_and(|b| b == "gloo")
    }

    /// `shape`, `dtype` (not f32) and `device` (not the platform's) of a recorded tensor.
    fn tensor(&self, t: Option<&Value>, group: &Option<String>, f: &mut Vec<(String, String)>) {
        let Some(t) = t.and_then(Value::as_object) else {
            return;
        };
        let shape: Vec<usize> = dims(t);
        let dtype = t.get("dtype").and_then(Value::as_str).unwrap_or("f32");
        f.push(("shape".into(), list(&shape)));
        if dtype != "f32" {
            f.push(("dtype".into(), quote(dtype)));
        }
        let dev = t.get("device").and_then(Value::as_str).unwrap_or("cpu");
        let written = match &self.o.platform {
            Some(p) if dev == self.recorded && !self.cpu_group(group) => p.as_str(),
            _ => dev,
        };
        if written != default_device(self.o, self.recorded) {
            f.push(("device".into(), quote(written)));
        }
    }
}

fn dims(t: &Map<String, Value>) -> Vec<usize> {
    t.get("shape")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_u64)
                .map(|d| d as usize)
                .collect()
        })
        .unwrap_or_default()
}

fn int(v: Option<&Value>) -> Option<usize> {
    v.and_then(Value::as_u64).map(|x| x as usize)
}

fn ints(v: Option<&Value>) -> Option<Vec<usize>> {
    v.and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(Value::as_u64)
            .map(|x| x as usize)
            .collect()
    })
}

/// `timeout_s` from a recorded timedelta in ms.
fn timeout(a: &Map<String, Value>, f: &mut Vec<(String, String)>) {
    if let Some(ms) = a.get("timeout_ms").and_then(Value::as_u64) {
        let s = ms as f64 / 1000.0;
        f.push(("timeout_s".into(), format!("{s:?}")));
    }
}

/// The backend a re-targeted scenario gives a device group: `gloo` (or none) becomes
/// `--backend`; anything else stays.
fn retarget_backend(o: &Options, b: Option<&str>) -> Option<String> {
    match (o.backend.as_deref(), b) {
        (Some(t), None | Some("gloo")) => Some(t.to_string()),
        (_, b) => b.map(str::to_string),
    }
}

/// Translates one rank's calls.
pub fn rank_steps(p: &Proc, o: &Options, recorded: &str) -> Result<RankSteps, RecordError> {
    let mut cx = Ctx {
        o,
        recorded,
        rank: p.rank(),
        world: p.world_size(),
        groups: BTreeMap::new(),
        async_works: BTreeSet::new(),
    };
    let mut out = RankSteps {
        steps: vec![],
        of_call: vec![],
    };
    let mut prev_end_ms = None;
    for (n, c) in p.calls.iter().enumerate() {
        freed_early(&cx, p, n)?;
        out.steps.extend(super::timing::before_call(prev_end_ms, c));
        prev_end_ms = c.t_end_ms;
        let step = call_step(&mut cx, c)?;
        out.of_call.push(step.as_ref().map(|_| out.steps.len()));
        out.steps.extend(step);
    }
    Ok(out)
}

/// torch.distributed calls that can decide an outcome and that the scenario format has no step
/// for: the recorder wraps them so that a recording never drops them silently; each is refused,
/// naming the call (docs/api-coverage.md).
/// (new_subgroups and new_subgroups_by_enumeration are recorded as the new_group calls they make.)
const NO_STEP: [(&str, &str); 5] = [
    ("gather_single", "a gather into one tensor"),
    ("gather_into_tensor", "a gather into one tensor"),
    // torch 2.15: every group's timeout set to timeout_s (3600 s), the debugger on one rank
    // (what the program does next is the debugging session's), then a barrier of the world.
    (
        "breakpoint",
        "a debugger stop (every group's timeout set to 3600 s, pdb on one rank, then a barrier)",
    ),
    (
        "rendezvous",
        "a rendezvous the program drives itself (its store is the program's own)",
    ),
    (
        "register_rendezvous_handler",
        "a custom init_method scheme (its store is the program's own code)",
    ),
];

/// A program's own c10d Store: the recorder's names for making one (`TCPStore`, ...) and for
/// its methods (`Store.set`, ...; python/scen/recorder.py, STORE_CLASSES and STORE_METHODS).
/// Apart from a TCPStore or PrefixStore the program makes ([`new_store_step`]) and set, get,
/// add, check, wait, compare_set, delete_key and num_keys on such a store or the default
/// group's ([`store_step`]), no step in the format either: refused like [`NO_STEP`].
const STORES: [&str; 4] = ["TCPStore", "FileStore", "HashStore", "PrefixStore"];

/// What a call with no step in the scenario format is, if `op` names one.
fn no_step(op: &str) -> Option<&'static str> {
    if let Some((_, what)) = NO_STEP.iter().find(|(o, _)| *o == op) {
        return Some(what);
    }
    (STORES.contains(&op) || op.starts_with("Store.")).then_some(
        "a program's own c10d Store other than a TCPStore or PrefixStore (FileStore, HashStore, a store scen does not know: one torch made, a clone), or a method without a step (append, multi_get, multi_set, queue_push, set_timeout, ...),",
    )
}

/// A call whose step is not its op's own: the raise of an argument check (whatever its op), a
/// store call, or a refusal (`Err`). `None`: the op's own step.
fn step_not_by_op(cx: &Ctx, c: &Call) -> Result<Option<StepDesc>, RecordError> {
    if let Some(step) = local_check(c).or_else(|| store_step(c)) {
        return Ok(Some(step));
    }
    if let Some(step) = new_store_step(cx, c)? {
        return Ok(Some(step));
    }
    if c.op == "init_process_group" && c.args.get("store").is_some_and(Value::is_boolean) {
        return Err(cx.err(
            c,
            "init_process_group(store=...): a store the program did not make with TCPStore or PrefixStore (one torch made, a FileStore, a HashStore) has no step in the scenario format, and writing another would run another program; not recorded".into(),
        ));
    }
    match no_step(&c.op) {
        Some(what) => Err(cx.err(
            c,
            format!(
                "{}: {what} has no step in the scenario format, and leaving the call out would run another program; not recorded",
                c.op
            ),
        )),
        None => Ok(None),
    }
}

fn call_step(cx: &mut Ctx, c: &Call) -> Result<Option<StepDesc>, RecordError> {
    if let Some(step) = step_not_by_op(cx, c)? {
        return Ok(Some(step));
    }
    let a = &c.args;
    let mut f: Vec<(String, String)> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut op = c.op.clone();
    let group = match op.as_str() {
        "init_process_group" | "new_group" | "wait" | "batch_isend_irecv" | "get_default_store" => {
            None
        }
        _ => cx.group(c, a.get("group"))?,
    };
    let is_async = a.get("async_op").and_then(Value::as_bool).unwrap_or(false);
    match op.as_str() {
        "init_process_group" => init_fields(cx, a, &mut f),
        "new_group" => new_group_fields(cx, c, &mut f),
        "split_group" => split_group_fields(cx, c, &group, &mut f)?,
        "shrink_group" => shrink_group_fields(cx, c, &group, &mut f)?,
        "destroy_process_group" => group_field(&group, &mut f),
        "monitored_barrier" => {
            group_field(&group, &mut f);
            timeout(a, &mut f);
            if a.get("wait_all_ranks").and_then(Value::as_bool) == Some(true) {
                f.push(("wait_all_ranks".into(), "true".into()));
            }
        }
        "barrier" => group_field(&group, &mut f),
        // The program takes the default group's store: it holds it from now on.
        "get_default_store" => {}
        "set_timeout" => {
            group_field(&group, &mut f);
            timeout(a, &mut f);
        }
        "wait" => {
            let w = a.get("work").and_then(Value::as_str).unwrap_or("");
            if !cx.async_works.contains(w) {
                return Ok(None);
            }
            f.push(("work".into(), quote(w)));
            timeout(a, &mut f);
        }
        "send" | "isend" | "recv" | "irecv" => p2p_fields(cx, c, (&op, &group), &mut f)?,
        "batch_isend_irecv" => batch_fields(cx, c, &mut f)?,
        _ => collective(cx, c, &mut op, &group, &mut f, &mut notes)?,
    }
    if is_async && !matches!(op.as_str(), "send" | "recv" | "isend" | "irecv") {
        if let Some(w) = works(c).first() {
            f.push(("async_op".into(), "true".into()));
            f.push(("work".into(), quote(w)));
            timeout(a, &mut f);
            cx.async_works.insert(w.clone());
        }
    }
    let _ = cx.world;
    Ok(Some(StepDesc {
        op,
        fields: f,
        at: c.at.clone(),
        notes,
    }))
}

/// A call that failed an argument check of c10d or ProcessGroupGloo, raised at the call before
/// anything is sent, as the raise it was: the scenario format cannot always say the arguments
/// that fail it (an all_gather_coalesced output list sized unlike the input, a
/// reduce_scatter_tensor input that is not the group's size times its output, a call gloo has
/// no implementation of), and the rank raises there without joining the collective either
/// way. The checks, as real torch 2.15 words them:
/// - `ProcessGroupGloo::<op>: ...` (its list and size checks);
/// - `[rankN]:[F... ProcessGroupGloo.cpp:L] Check failed: ...` (its CHECKs, e.g.
///   `outputShape[0] * worldSize == inputShape[0] (10 vs. 8)`; user-path 7/1002);
/// - `Backend gloo does not support <op>` (gather_into_tensor, gather_single; 7/1077);
/// - `TypeError: Invalid function argument. Expected parameter ...` (c10d's own type check: a
///   non-root passing `None` where a tensor goes; 7/1056).
fn local_check(c: &Call) -> Option<StepDesc> {
    let CallEnd::Error { exc, msg } = &c.end else {
        return None;
    };
    let first = msg.lines().next().unwrap_or(msg);
    if !is_local_check(exc, first) {
        return None;
    }
    Some(StepDesc {
        op: "raise".into(),
        fields: vec![("error".into(), quote(&format!("{exc}: {first}")))],
        at: c.at.clone(),
        notes: vec![format!(
            "{}: an argument check raised at the call, before it sent anything",
            c.op
        )],
    })
}

/// Whether a call's error is one of [`local_check`]'s.
fn is_local_check(exc: &str, first: &str) -> bool {
    let gloo_method = first
        .strip_prefix("ProcessGroupGloo::")
        .is_some_and(|rest| {
            rest.split_once(": ").is_some_and(|(op, _)| {
                !op.is_empty() && op.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
            })
        });
    let gloo_check = first.contains("ProcessGroupGloo.cpp:") && first.contains("] Check failed: ");
    let unsupported = first.starts_with("Backend gloo does not support ");
    let type_check =
        exc == "TypeError" && first.starts_with("Invalid function argument. Expected parameter");
    gloo_method || gloo_check || unsupported || type_check
}

/// The work handles a call returned (an async call's first is its `work`).
fn works(c: &Call) -> Vec<String> {
    c.result
        .get("works")
        .and_then(Value::as_array)
        .map(|w| {
            w.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `group = "..."` when the call names one.
fn group_field(group: &Option<String>, f: &mut Vec<(String, String)>) {
    if let Some(g) = group {
        f.push(("group".into(), quote(g)));
    }
}

/// init_process_group: its backend (re-targeted when asked), init_method, device_id, timeout,
/// rank and world_size.
fn init_fields(cx: &Ctx, a: &Map<String, Value>, f: &mut Vec<(String, String)>) {
    let backend = a.get("backend").and_then(Value::as_str);
    let backend = if cx.o.platform.is_some() {
        retarget_backend(cx.o, backend)
    } else {
        backend.map(str::to_string)
    };
    if let Some(b) = backend {
        f.push(("backend".into(), quote(&b)));
    }
    if let Some(m) = a.get("init_method").and_then(Value::as_str) {
        f.push(("init_method".into(), quote(m)));
    }
    if let Some(d) = a.get("device_id").and_then(Value::as_str) {
        if cx.o.platform.is_none() {
            f.push(("device_id".into(), quote(d)));
        }
    }
    timeout(a, f);
    for k in ["rank", "world_size"] {
        if let Some(v) = int(a.get(k)) {
            f.push((k.into(), v.to_string()));
        }
    }
    if let Some(s) = a.get("store").and_then(Value::as_str) {
        f.push(("store".into(), quote(s)));
    }
}

/// send/recv and isend/irecv (with the Work a later `wait` names): group, tensor and the
/// peer, which must be known.
fn p2p_fields(
    cx: &mut Ctx,
    c: &Call,
    (op, group): (&str, &Option<String>),
    f: &mut Vec<(String, String)>,
) -> Result<(), RecordError> {
    let a = &c.args;
    let send = op.ends_with("send");
    group_field(group, f);
    cx.tensor(a.get("tensor"), group, f);
    let (k, gk) = if send {
        ("dst", "group_dst")
    } else {
        ("src", "group_src")
    };
    let peer = int(a.get(k))
        .or_else(|| int(a.get(gk)).map(|r| cx.global(group, r)))
        .or_else(|| int(c.result.get("src")));
    match peer {
        Some(p) => f.push((k.into(), p.to_string())),
        None => {
            return Err(cx.err(
                c,
                format!("{op} without a {k} that completed: the peer is unknown"),
            ))
        }
    }
    if let Some(t) = int(a.get("tag")).filter(|t| *t != 0) {
        f.push(("tag".into(), t.to_string()));
    }
    if op.starts_with('i') {
        // A non-member's isend returns None: a name no `wait` of its uses.
        let w = works(c)
            .first()
            .cloned()
            .unwrap_or_else(|| format!("none at {}", c.at));
        f.push(("work".into(), quote(&w)));
        cx.async_works.insert(w);
    }
    Ok(())
}

/// batch_isend_irecv: the first op's group and tensor, and every op with its peer and tag.
fn batch_fields(cx: &Ctx, c: &Call, f: &mut Vec<(String, String)>) -> Result<(), RecordError> {
    let ops = c
        .args
        .get("ops")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let first = ops.first().and_then(Value::as_object);
    let g = cx.group(c, first.and_then(|o| o.get("group")))?;
    group_field(&g, f);
    cx.tensor(first.and_then(|o| o.get("tensor")), &g, f);
    let items: Vec<String> = ops
        .iter()
        .filter_map(Value::as_object)
        .map(|o| {
            let tag = int(o.get("tag"))
                .filter(|t| *t != 0)
                .map(|t| format!(", tag = {t}"))
                .unwrap_or_default();
            format!(
                "{{ op = {}, peer = {}{tag} }}",
                quote(o.get("op").and_then(Value::as_str).unwrap_or("isend")),
                int(o.get("peer")).unwrap_or(0)
            )
        })
        .collect();
    f.push(("ops".into(), format!("[{}]", items.join(", "))));
    Ok(())
}
