//! A step's start line in the trace (`all_reduce group=WORLD f32[4] on cpu op=sum`): what the
//! step asks for, written once for every mode (part of the trace and its hash, so a change here
//! moves snapshots).

use crate::scenario::{CollStep, IntArg, Scenario, Splits, Step, StepKind, TensorSpec};
use std::cell::RefCell;
use std::rc::{Rc, Weak};

/// A scenario's start lines by step (`None`: not formatted yet).
type Lines = Option<(Weak<Scenario>, Vec<Option<Rc<str>>>)>;

thread_local! {
    /// The start lines of the scenario this thread's ranks run, by step: every rank prints the
    /// same line for a step, and one naming a W-rank list was formatted W times (issue 31: a
    /// tenth of a 1024-rank c10d run). The `Weak` keeps the scenario's allocation, so a later
    /// scenario can never take its address and read an earlier one's lines.
    static LINES: RefCell<Lines> = const { RefCell::new(None) };
}

/// [`describe`] of step `k` of `scenario`, formatted once per scenario and thread.
pub(super) fn start_line(scenario: &Rc<Scenario>, k: usize) -> String {
    LINES.with_borrow_mut(|cache| {
        let me = Rc::downgrade(scenario);
        if !cache.as_ref().is_some_and(|(s, _)| s.ptr_eq(&me)) {
            *cache = Some((me, vec![None; scenario.steps.len()]));
        }
        let lines = &mut cache.as_mut().expect("set").1;
        let line = lines[k].get_or_insert_with(|| describe(&scenario.steps[k]).into());
        line.to_string()
    })
}

/// ` tag=N` for a p2p tag other than the default 0.
fn tag_text(tag: u32) -> String {
    if tag == 0 {
        String::new()
    } else {
        format!(" tag={tag}")
    }
}

/// ` work=w1` for an isend/irecv or an async barrier (as a collective's ` async_op work=w1`).
fn work_text(work: &Option<String>) -> String {
    work.as_ref()
        .map(|w| format!(" work={w}"))
        .unwrap_or_default()
}

/// The step as its start event prints it.
pub(super) fn describe(step: &Step) -> String {
    let g = |g: &Option<String>| g.clone().unwrap_or_else(|| "WORLD".into());
    let t = |t: &TensorSpec| {
        format!(
            "{}{:?} on {}",
            t.dtype.name(),
            t.shape,
            t.device.clone().unwrap_or_else(|| "accelerator".into())
        )
    };
    let detail = match &step.kind {
        StepKind::InitProcessGroup { .. }
        | StepKind::NewGroup { .. }
        | StepKind::SplitGroup { .. }
        | StepKind::ShrinkGroup { .. } => describe_pg(&step.kind),
        StepKind::DestroyProcessGroup { group } => g(group),
        StepKind::SetDevice { device } => device.clone(),
        StepKind::SetTimeout { group, timeout_ms } => {
            format!("group={} timeout={timeout_ms}ms", g(group))
        }
        StepKind::Store(st) => describe_store_step(st),
        StepKind::Barrier { group, work } => format!("group={}{}", g(group), work_text(work)),
        StepKind::MonitoredBarrier {
            group,
            timeout_ms,
            wait_all_ranks,
        } => {
            let t = timeout_ms.map_or("default".into(), |t| format!("{t}ms"));
            format!(
                "group={} timeout={t} wait_all_ranks={wait_all_ranks}",
                g(group)
            )
        }
        StepKind::Collective(c) => describe_coll(c, &g(&c.group), &t(&c.tensor)),
        StepKind::Wait { work, timeout_ms } => match timeout_ms {
            Some(t) => format!("work={work} timeout={t}ms"),
            None => format!("work={work}"),
        },
        StepKind::BatchP2p {
            group, tensor, ops, ..
        } => format!(
            "group={} {} ops=[{}]",
            g(group),
            t(tensor),
            describe_ops(ops)
        ),
        StepKind::Send {
            group,
            tensor,
            dst,
            tag,
            work,
        } => format!(
            "group={} {} dst={dst}{}{}",
            g(group),
            t(tensor),
            tag_text(*tag),
            work_text(work)
        ),
        StepKind::Recv {
            group,
            tensor,
            src,
            tag,
            work,
            ..
        } => format!(
            "group={} {} src={src}{}{}",
            g(group),
            t(tensor),
            tag_text(*tag),
            work_text(work)
        ),
        StepKind::Log { .. } => String::new(),
        StepKind::Sleep { ms } => format!("{ms}ms"),
        StepKind::Raise { exception, message } => crate::outcome::Failure::Raised {
            exception: exception.clone(),
            message: message.clone(),
        }
        .text(),
        StepKind::Exit(crate::scenario::ProgramExit::Code { code, teardown }) => {
            format!(
                "{}({code})",
                if *teardown { "sys.exit" } else { "os._exit" }
            )
        }
        StepKind::Exit(crate::scenario::ProgramExit::Signal(sig)) => {
            format!("{} to itself", crate::outcome::signal_name(*sig))
        }
        StepKind::InitDistributedEnvironment { .. }
        | StepKind::InitializeModelParallel { .. }
        | StepKind::SpAllToAll { .. }
        | StepKind::BroadcastPyobj { .. }
        | StepKind::DenoiseStep { .. } => describe_sglang(&step.kind),
    };
    format!("{} {detail}", step.kind.op_name())
        .trim_end()
        .to_string()
}

/// An sglang step's start line.
fn describe_sglang(kind: &StepKind) -> String {
    match kind {
        // V0..V2 by their enum names (as in every snapshot), a release by its number.
        StepKind::InitDistributedEnvironment { version, .. } => match version {
            crate::scenario::SglangVersion::V0_5_23 => format!("version={}", version.name()),
            _ => format!("version={version:?}"),
        },
        StepKind::InitializeModelParallel {
            degrees: d,
            usp_fallback,
            ..
        } => {
            let fallback = if *usp_fallback {
                " (parallel_groups import fails)"
            } else {
                ""
            };
            format!(
                "tp={} ulysses={} ring={} sp={} cfg={} dp={} pp={}{fallback}",
                d.tp, d.ulysses, d.ring, d.sp, d.cfg, d.dp, d.pp
            )
        }
        StepKind::SpAllToAll {
            op, group, shape, ..
        } => format!(
            "group={} {shape:?} {op:?}",
            group.clone().unwrap_or_else(|| "WORLD".into())
        ),
        StepKind::BroadcastPyobj { payload_bytes } => format!("{payload_bytes} bytes"),
        StepKind::DenoiseStep { model: m, .. } => format!(
            "seq={} heads={}x{} layers={}",
            m.seq, m.heads, m.head_dim, m.layers
        ),
        _ => String::new(),
    }
}

/// An init_process_group or new_group step's start line.
fn describe_pg(kind: &StepKind) -> String {
    let device = |d: &Option<String>| {
        d.as_ref()
            .map(|d| format!(" device_id={d}"))
            .unwrap_or_default()
    };
    match kind {
        StepKind::InitProcessGroup {
            backend,
            init_method,
            device_id,
            store: Some(store),
            ..
        } => format!(
            "backend={} store={store}{}{}",
            backend.clone().unwrap_or_else(|| "None".into()),
            init_method
                .as_ref()
                .map(|m| format!(" init_method={m}"))
                .unwrap_or_default(),
            device(device_id)
        ),
        StepKind::InitProcessGroup {
            backend,
            init_method,
            device_id,
            ..
        } => format!(
            "backend={} init_method={}{}",
            backend.clone().unwrap_or_else(|| "None".into()),
            init_method.clone().unwrap_or_else(|| "env://".into()),
            device(device_id)
        ),
        StepKind::NewGroup {
            ranks,
            backend,
            handle,
            device_id,
            use_local_synchronization,
            sort_ranks,
            ..
        } => {
            let handle = handle
                .as_ref()
                .map(|h| format!("{h}: "))
                .unwrap_or_default();
            let ranks = ranks.as_ref().map(|r| crate::ranks::listed(r).to_string());
            let local = match (*use_local_synchronization, *sort_ranks) {
                (true, true) => " use_local_synchronization",
                (true, false) => " use_local_synchronization sort_ranks=False",
                (false, false) => " sort_ranks=False",
                (false, true) => "",
            };
            format!(
                "{handle}ranks={} backend={}{}{local}",
                ranks.unwrap_or_else(|| "all".into()),
                backend.clone().unwrap_or_else(|| "default".into()),
                device(device_id),
            )
        }
        StepKind::SplitGroup {
            parent,
            split_ranks,
            handle,
            ..
        } => format!(
            "{}parent={} split_ranks={}",
            handle
                .as_ref()
                .map(|h| format!("{h}: "))
                .unwrap_or_default(),
            parent.as_deref().unwrap_or("WORLD"),
            split_ranks
                .as_ref()
                .map_or("None".into(), |s| format!("{s:?}"))
        ),
        StepKind::ShrinkGroup {
            group,
            ranks_to_exclude,
            shrink_flags,
            ..
        } => format!(
            "group={} ranks_to_exclude={ranks_to_exclude:?} shrink_flags={shrink_flags}",
            group.as_deref().unwrap_or("WORLD")
        ),
        _ => String::new(),
    }
}

/// An integer argument as written: `4` or `{world_size}`.
fn int_text(a: &IntArg) -> String {
    match a {
        IntArg::Int(i) => i.to_string(),
        IntArg::Expr(e) => format!("{{{e}}}"),
    }
}

/// A batch_isend_irecv's ops: `isend 1, irecv 0`.
fn describe_ops(ops: &[crate::scenario::P2pOp]) -> String {
    let op = |o: &crate::scenario::P2pOp| {
        let peer = match &o.peer {
            IntArg::Int(i) => i.to_string(),
            IntArg::Expr(e) => e.to_string(),
        };
        let verb = if o.send { "isend" } else { "irecv" };
        format!("{verb} {peer}{}", tag_text(o.tag))
    };
    ops.iter().map(op).collect::<Vec<_>>().join(", ")
}

/// A collective step's start line: group, tensor, then only the arguments the op takes.
fn describe_coll(c: &CollStep, group: &str, tensor: &str) -> String {
    let mut s = format!("group={group} {tensor}");
    if c.op.reduces() {
        s += &format!(" op={}", c.reduce_op.name());
    }
    if let (Some(f), Some(r)) = (c.op.root_field(), c.root) {
        s += &format!(" {f}={r}");
    }
    if c.op.coalesced() {
        s += &format!(" count={}", c.count);
    }
    if let Some((i, o)) = &c.splits {
        let show = |x: &Splits| match x {
            Splits::List(v) => format!("{v:?}"),
            Splits::Expr(e) => format!("\"{e}\""),
        };
        s += &format!(
            " input_split_sizes={} output_split_sizes={}",
            show(i),
            show(o)
        );
    }
    if let Some(w) = &c.work {
        s += &format!(" async_op work={w}");
    }
    s
}

/// A store step's arguments: its keys and what it sets or adds (a value by its length: it may
/// be long).
/// A store step: its call, and the store it goes to when not the default group's.
fn describe_store_step(st: &crate::scenario::model::StoreStep) -> String {
    match &st.store {
        None => describe_store(&st.call),
        Some(s) => format!("{} store={s}", describe_store(&st.call))
            .trim_start()
            .to_string(),
    }
}

fn describe_store(call: &crate::scenario::model::StoreCall) -> String {
    use crate::scenario::model::StoreCall;
    match call {
        StoreCall::Take | StoreCall::NumKeys => String::new(),
        StoreCall::MakeTcp { name, spec } => format!(
            "{name} = TCPStore({}:{}, world_size={}, is_master={}, timeout={}ms, wait_for_workers={})",
            spec.host,
            match &spec.port {
                crate::scenario::model::PortArg::Num(p) => p.to_string(),
                crate::scenario::model::PortArg::Env(v) => v.clone(),
            },
            spec.world_size.as_ref().map_or("None".into(), int_text),
            spec.is_master,
            spec.timeout_ms,
            spec.wait_for_workers
        ),
        StoreCall::MakePrefix { name, prefix } => format!("{name} = PrefixStore({prefix:?})"),
        StoreCall::CompareSet {
            key,
            expected,
            desired,
        } => format!(
            "key={key:?} expected={} bytes desired={} bytes",
            expected.len(),
            desired.len()
        ),
        StoreCall::DeleteKey { key } => format!("key={key:?}"),
        StoreCall::Set { key, value } => format!("key={key:?} value={} bytes", value.len()),
        StoreCall::Get { key } => format!("key={key:?}"),
        StoreCall::Add { key, amount } => format!("key={key:?} amount={amount}"),
        StoreCall::Check { keys } => format!("keys={keys:?}"),
        StoreCall::Wait { keys, timeout_ms } => match timeout_ms {
            Some(t) => format!("keys={keys:?} timeout={t}ms"),
            None => format!("keys={keys:?}"),
        },
    }
}
