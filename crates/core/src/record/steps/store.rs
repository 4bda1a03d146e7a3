//! The steps of a program's stores (scenario/store.rs): the default group's, and the
//! TCPStore and PrefixStore it makes (`tcp_store`, `prefix_store`), their calls (`store = ...`),
//! and the refusal of a master freed before its program ended.

use super::super::parse::{Call, Proc};
use super::super::RecordError;
use super::{quote, timeout, Ctx, StepDesc};
use serde_json::{Map, Value};

/// A master TCPStore (made by call `n`) that the program freed before it ended: scen holds a
/// program's stores until its process ends, so its server would outlive the real one. Refused,
/// naming the call that made it, unless the free is the program's end itself (no call after it
/// and its end within [`crate::record::timing::MIN_GAP_MS`], the time a recording counts as one
/// instant: a store local to a `main()` that returns).
pub(super) fn freed_early(cx: &Ctx, p: &Proc, n: usize) -> Result<(), RecordError> {
    let c = &p.calls[n];
    let Some(freed) = c.t_freed_ms else {
        return Ok(());
    };
    // A call in the free's own millisecond was made before it (the program's last call, then
    // its store freed as its function returned).
    let later_call = p.calls[n + 1..]
        .iter()
        .any(|l| l.t_call_ms.is_none_or(|t| t > freed));
    let end = p.own_end_ms().or(p.t_exit_ms);
    let at_end = end.is_some_and(|e| e.saturating_sub(freed) < crate::record::timing::MIN_GAP_MS);
    if !later_call && at_end {
        return Ok(());
    }
    let how = match end {
        Some(e) => format!("{} ms before its program ended", e.saturating_sub(freed)),
        None => "before its program ended".into(),
    };
    Err(cx.err(
        c,
        format!(
            "TCPStore: the master store made here was freed {how} (its server closed with it); scen holds a program's stores until its process ends, so the scenario would run another program; keep the store until the end; not recorded"
        ),
    ))
}

/// Which store a store call goes to: `Some(None)` the default group's, `Some(Some(handle))`
/// one the program made, `None` one the recorder did not know (it gave no arguments).
fn store_of(a: &Map<String, Value>) -> Option<Option<String>> {
    if let Some(h) = a.get("store").and_then(Value::as_str) {
        let ok = !h.is_empty() && h.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
        return ok.then(|| Some(h.to_string()));
    }
    (a.get("default_store").and_then(Value::as_bool) == Some(true)).then_some(None)
}

/// A TCPStore or PrefixStore the program made (the recorder gives its arguments and handle,
/// `as`): its `tcp_store` or `prefix_store` step. What the format cannot say is refused, naming
/// the call: port 0 (the OS picks the master's port, which the scenario cannot know),
/// `multi_tenant`, `master_listen_fd`, `use_libuv=False`, a PrefixStore on a store scen does
/// not know. `None` for any other call.
pub(super) fn new_store_step(cx: &Ctx, c: &Call) -> Result<Option<StepDesc>, RecordError> {
    if c.op != "TCPStore" && c.op != "PrefixStore" {
        return Ok(None);
    }
    let a = &c.args;
    let refuse = |why: &str| {
        Err(cx.err(
            c,
            format!(
                "{}: {why} has no step in the scenario format, and leaving the call out would run another program; not recorded",
                c.op
            ),
        ))
    };
    let Some(name) = a.get("as").and_then(Value::as_str) else {
        return refuse("a program's own c10d Store the recorder could not read");
    };
    let mut f = vec![("as".to_string(), quote(name))];
    if c.op == "PrefixStore" {
        let (Some(store), Some(prefix)) = (store_of(a), a.get("prefix").and_then(Value::as_str))
        else {
            return refuse("a PrefixStore on a store scen does not know (not a TCPStore or PrefixStore the program made, nor the default group's)");
        };
        f.push(("prefix".into(), quote(prefix)));
        if let Some(h) = store {
            f.push(("store".into(), quote(&h)));
        }
        return Ok(Some(StepDesc {
            op: "prefix_store".into(),
            fields: f,
            at: c.at.clone(),
            notes: vec![],
        }));
    }
    let flag = |k: &str| a.get(k).and_then(Value::as_bool);
    let port = a.get("port").and_then(Value::as_u64);
    let host = a
        .get("host")
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty());
    let (Some(host), Some(port)) = (host, port) else {
        return refuse("a TCPStore whose host and port the recorder could not read");
    };
    if port == 0 {
        return refuse("a TCPStore on port 0 (the master's OS picks the port, which the other ranks and the scenario cannot know)");
    }
    if port > 65535 {
        return refuse("a TCPStore on a port above 65535");
    }
    if flag("multi_tenant") == Some(true) {
        return refuse("a multi_tenant TCPStore (one server shared by stores in a process)");
    }
    if flag("master_listen_fd") == Some(true) {
        return refuse("a TCPStore serving on a socket the program passes (master_listen_fd)");
    }
    if flag("use_libuv") == Some(false) {
        return refuse("a TCPStore on the legacy server (use_libuv=False)");
    }
    f.push(("host".into(), quote(host)));
    f.push(("port".into(), port.to_string()));
    if let Some(ws) = a.get("world_size").and_then(Value::as_u64) {
        f.push(("world_size".into(), ws.to_string()));
    }
    let master = flag("is_master").unwrap_or(false);
    f.push(("is_master".into(), master.to_string()));
    timeout(a, &mut f);
    if flag("wait_for_workers") == Some(false) {
        f.push(("wait_for_workers".into(), "false".into()));
    }
    Ok(Some(StepDesc {
        op: "tcp_store".into(),
        fields: f,
        at: c.at.clone(),
        notes: vec![],
    }))
}

/// A `set`, `get`, `add`, `check`, `wait`, `compare_set`, `delete_key` or `num_keys` on the
/// default group's store or on one the program made (the recorder gives such a call its
/// arguments, and any other store call none): its store step, with the `store` it names.
pub(super) fn store_step(c: &Call) -> Option<StepDesc> {
    let a = &c.args;
    let method = c.op.strip_prefix("Store.")?;
    let store = store_of(a)?;
    let text = |name: &str| a.get(name).and_then(Value::as_str).map(quote);
    let keys = || {
        let keys: Vec<String> = a
            .get("keys")?
            .as_array()?
            .iter()
            .filter_map(|k| k.as_str().map(quote))
            .collect();
        Some(format!("[{}]", keys.join(", ")))
    };
    let mut f = Vec::new();
    if let Some(h) = &store {
        f.push(("store".to_string(), quote(h)));
    }
    match method {
        "set" => {
            f.push(("key".to_string(), text("key")?));
            f.push(("value".to_string(), text("value")?));
        }
        "get" => f.push(("key".to_string(), text("key")?)),
        "add" => {
            f.push(("key".to_string(), text("key")?));
            f.push(("amount".to_string(), a.get("amount")?.as_i64()?.to_string()));
        }
        "check" | "wait" => {
            f.push(("keys".to_string(), keys()?));
            timeout(a, &mut f);
        }
        "compare_set" => {
            f.push(("key".to_string(), text("key")?));
            f.push(("expected_value".to_string(), text("expected_value")?));
            f.push(("desired_value".to_string(), text("desired_value")?));
        }
        "delete_key" => f.push(("key".to_string(), text("key")?)),
        "num_keys" => {}
        _ => return None,
    }
    Some(StepDesc {
        op: format!("store_{method}"),
        fields: f,
        at: c.at.clone(),
        notes: Vec::new(),
    })
}
