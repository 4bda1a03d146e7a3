//! The collectives' blocks of the generated program: each call with its inputs built as the
//! simulator builds them, and the `finish` that checks its result (now, or at `work.wait()` for
//! `async_op`). Split from mod.rs, which translates every other step kind; one function per
//! family of calls that build their inputs and read their results alike.

use super::{expect_fn, group, py, tensor};
use scen_core::c10d::collective::{CollOp, Layout};
use scen_core::scenario::{CollStep, Scenario, Splits, Step, TensorSpec};

/// What every family needs of the step, written once as the Python it becomes.
struct Ctx<'a> {
    s: &'a Scenario,
    step: &'a Step,
    c: &'a CollStep,
    /// The dtype's name as a literal.
    dt: String,
    numel: usize,
    /// The tensor's shape as a Python list.
    shape: String,
    /// `shape` with dim 0 times m (a scalar becomes [m]), as scen's `times`.
    times: String,
    /// `op=OPS["sum"]`.
    op: String,
    /// `, async_op=True` or nothing.
    asy: &'static str,
    /// The step's `expect` as the prelude's `expected(...)`, or `None`.
    expect: String,
    root: usize,
}

/// One call's translation: the lines that build its inputs, the call, and the lines of its
/// `finish` (computing `res` and checking it).
struct Block {
    pre: Vec<String>,
    call: String,
    fin: Vec<String>,
}

pub(super) fn collective(s: &Scenario, step: &Step, c: &CollStep, b: &mut Vec<String>) {
    let x = ctx(s, step, c);
    b.push(format!("G = {}", group(&c.group)));
    b.push("m = max(dist.get_world_size(group=G), 1)".into());
    b.push("member = G is None or dist.get_rank(group=G) >= 0".into());
    let block = match c.op {
        CollOp::AllReduce | CollOp::Broadcast | CollOp::Reduce => in_place(&x),
        CollOp::AllReduceCoalesced | CollOp::AllGatherCoalesced => coalesced(&x),
        CollOp::AllGather | CollOp::AllGatherIntoTensor | CollOp::Gather => gathered(&x),
        CollOp::Scatter => scatter(&x),
        CollOp::ReduceScatter | CollOp::ReduceScatterTensor => reduce_scatter(&x),
        CollOp::AllToAllSingle | CollOp::AllToAll => all_to_all(&x),
        CollOp::AllGatherIntoTensorCoalesced | CollOp::ReduceScatterTensorCoalesced => {
            b.push(format!(
                "raise NotImplementedError(\"{} is not public torch.distributed API\")",
                c.op.name()
            ));
            return;
        }
    };
    debug_assert!(matches!(
        c.op.layout(),
        Layout::Flat | Layout::Tensors | Layout::Chunks | Layout::TensorChunks
    ));
    emit(c, block, b);
}

fn ctx<'a>(s: &'a Scenario, step: &'a Step, c: &'a CollStep) -> Ctx<'a> {
    let shape = format!("{:?}", c.tensor.shape);
    let dim0 = c.tensor.shape.first();
    let times = format!(
        "([{}] + {shape}[1:] if {shape} else [m])",
        dim0.map(|d| format!("{d} * m")).unwrap_or("m".into())
    );
    Ctx {
        s,
        step,
        c,
        dt: py::str_lit(c.tensor.dtype.name()),
        numel: c.tensor.shape.iter().product(),
        shape,
        times,
        op: format!(
            "op=OPS[{}]",
            py::str_lit(&c.reduce_op.name().to_lowercase())
        ),
        asy: if c.work.is_some() {
            ", async_op=True"
        } else {
            ""
        },
        expect: expect_fn(&c.expect, c.tensor.expect_ulps),
        root: c.root.unwrap_or(0),
    }
}

/// The finish function, then the call (now, or enqueued as the step's work).
fn emit(c: &CollStep, block: Block, b: &mut Vec<String>) {
    let Block { pre, call, mut fin } = block;
    b.extend(pre);
    b.push("def finish(st):".into());
    b.push("    if not member:".into());
    b.push("        st.text = \"not a member: no-op\"".into());
    b.push("        return".into());
    if fin.is_empty() {
        fin.push("pass".into());
    }
    b.extend(fin.iter().map(|l| format!("    {l}")));
    match &c.work {
        Some(w) => {
            b.push(format!(
                "works[{}] = ({call}, bound(finish))",
                py::str_lit(w)
            ));
            b.push(format!(
                "st.text = {}",
                py::str_lit(&format!("enqueued (async_op, work \"{w}\")"))
            ));
        }
        None => {
            b.push(call);
            b.push("finish(st)".into());
        }
    }
}

/// all_reduce, broadcast and reduce: one tensor, changed in place.
fn in_place(x: &Ctx) -> Block {
    let Ctx {
        op,
        asy,
        root,
        dt,
        expect,
        ..
    } = x;
    let call = match x.c.op {
        CollOp::AllReduce => format!("dist.all_reduce(t, {op}, group=G{asy})"),
        CollOp::Broadcast => format!("dist.broadcast(t, {root}, group=G{asy})"),
        _ => format!("dist.reduce(t, {root}, {op}, group=G{asy})"),
    };
    let fin = if x.c.op == CollOp::Reduce {
        vec![
            format!("if RANK != {root}:"),
            format!("    st.text = summarize(t, {dt}) + \" (not dst: tensor unchanged)\""),
            "else:".into(),
            format!("    check(st, t, {dt}, {expect})"),
        ]
    } else {
        vec![format!("check(st, t, {dt}, {expect})")]
    };
    Block {
        pre: vec![format!("t = {}", tensor(x.s, x.step, &x.c.tensor, None))],
        call,
        fin,
    }
}

/// all_reduce_coalesced and all_gather_coalesced: a list of `count` tensors.
fn coalesced(x: &Ctx) -> Block {
    let Ctx {
        op,
        asy,
        dt,
        expect,
        numel,
        ..
    } = x;
    let n = x.c.count;
    let mut pre = coalesced_inputs(x.s, x.step, &x.c.tensor, n, *numel, &x.shape).to_vec();
    if x.c.op == CollOp::AllReduceCoalesced {
        return Block {
            pre,
            call: format!("dist.all_reduce_coalesced(ts, {op}, group=G{asy})"),
            fin: vec![
                "res = torch.cat([x.reshape(-1) for x in ts])".into(),
                format!("check(st, res, {dt}, {expect}, outvars(\"tensors\", per_tensor={numel}))"),
            ],
        };
    }
    pre.push("outs = [[torch.empty_like(x) for x in ts] for _ in range(m)]".into());
    Block {
        pre,
        call: format!("dist.all_gather_coalesced(outs, ts, group=G{asy})"),
        fin: vec![
            format!(
                "res = torch.cat([outs[r][k].reshape(-1) for k in range({n}) for r in range(m)])"
            ),
            format!(
                "check(st, res, {dt}, {expect}, outvars(\"tensor_chunks\", [{numel}] * m, m * {numel}))"
            ),
        ],
    }
}

/// all_gather, all_gather_into_tensor and gather: every member's tensor, one chunk each.
fn gathered(x: &Ctx) -> Block {
    let Ctx {
        asy,
        root,
        dt,
        expect,
        times,
        numel,
        ..
    } = x;
    const CAT: &str = "res = torch.cat([x.reshape([-1] + list(x.shape[1:])) if x.dim() else x.reshape(1) for x in outs])";
    let mut pre = vec![format!("t = {}", tensor(x.s, x.step, &x.c.tensor, None))];
    let mut fin = Vec::new();
    let call = match x.c.op {
        CollOp::AllGather => {
            pre.push("outs = [torch.empty_like(t) for _ in range(m)]".into());
            fin.push(CAT.into());
            format!("dist.all_gather(outs, t, group=G{asy})")
        }
        CollOp::AllGatherIntoTensor => {
            pre.push(format!(
                "res = torch.empty({times}, dtype=t.dtype, device=t.device)"
            ));
            format!("dist.all_gather_into_tensor(res, t, group=G{asy})")
        }
        _ => {
            pre.push(format!(
                "outs = [torch.empty_like(t) for _ in range(m)] if RANK == {root} else None"
            ));
            fin.push(format!("if RANK != {root}:"));
            fin.push(format!(
                "    st.text = summarize(t, {dt}) + \" (not dst: sent)\""
            ));
            fin.push("    return".into());
            fin.push(CAT.into());
            format!("dist.gather(t, outs, {root}, group=G{asy})")
        }
    };
    fin.push(format!(
        "check(st, res, {dt}, {expect}, outvars(\"chunks\", [{numel}] * m))"
    ));
    Block { pre, call, fin }
}

/// scatter: the root's input cut into one chunk per member; a non-root member's output is its
/// own tensor (bytes past a shorter chunk keep their values, as in gloo).
fn scatter(x: &Ctx) -> Block {
    let Ctx {
        asy,
        root,
        dt,
        expect,
        times,
        shape,
        ..
    } = x;
    let (s, step, t) = (x.s, x.step, &x.c.tensor);
    Block {
        pre: vec![
            format!("if RANK == {root}:"),
            format!("    inp = {}", tensor(s, step, t, Some((times, "None")))),
            "    parts = [x.clone() for x in inp.chunk(m)]".into(),
            format!("    res = torch.zeros({shape}, dtype=DTYPES[{dt}])"),
            "else:".into(),
            "    parts = None".into(),
            format!("    res = {}", tensor(s, step, t, None)),
        ],
        call: format!("dist.scatter(res, parts, {root}, group=G{asy})"),
        fin: vec![format!("check(st, res, {dt}, {expect})")],
    }
}

/// reduce_scatter (a list of chunks) and reduce_scatter_tensor (one tensor of m chunks).
fn reduce_scatter(x: &Ctx) -> Block {
    let Ctx {
        op,
        asy,
        dt,
        expect,
        times,
        shape,
        ..
    } = x;
    let call = if x.c.op == CollOp::ReduceScatter {
        format!("dist.reduce_scatter(res, [x.clone() for x in inp.chunk(m)], {op}, group=G{asy})")
    } else {
        format!("dist.reduce_scatter_tensor(res, inp, {op}, group=G{asy})")
    };
    Block {
        pre: vec![
            format!(
                "inp = {}",
                tensor(x.s, x.step, &x.c.tensor, Some((times, "None")))
            ),
            format!("res = torch.empty({shape}, dtype=inp.dtype)"),
        ],
        call,
        fin: vec![format!("check(st, res, {dt}, {expect})")],
    }
}

/// all_to_all_single and all_to_all, with the step's split sizes or even ones.
fn all_to_all(x: &Ctx) -> Block {
    let Ctx {
        asy,
        dt,
        expect,
        shape,
        numel,
        ..
    } = x;
    let mut pre = match &x.c.splits {
        Some((i, o)) => {
            let sized = format!("[sum(ins)] + {shape}");
            vec![
                format!("ins, outs_rows = {}, {}", splits_py(i), splits_py(o)),
                format!(
                    "inp = {}",
                    tensor(x.s, x.step, &x.c.tensor, Some((&sized, "None")))
                ),
                format!("res = torch.zeros([sum(outs_rows)] + {shape}, dtype=inp.dtype)"),
            ]
        }
        None => vec![
            format!("inp = {}", tensor(x.s, x.step, &x.c.tensor, None)),
            "res = torch.zeros_like(inp)".into(),
            "rows = inp.shape[0] if inp.dim() else 1".into(),
            "ins = outs_rows = [rows // m] * m".into(),
        ],
    };
    let per_row = if x.c.splits.is_some() {
        numel.to_string()
    } else {
        "(inp.numel() // max(rows, 1))".to_string()
    };
    let mut fin = Vec::new();
    let call = if x.c.op == CollOp::AllToAllSingle {
        if x.c.splits.is_some() {
            format!("dist.all_to_all_single(res, inp, outs_rows, ins, group=G{asy})")
        } else {
            format!("dist.all_to_all_single(res, inp, group=G{asy})")
        }
    } else {
        pre.push("in_list = [x.clone() for x in torch.split(inp, ins)]".into());
        pre.push("out_list = [x.clone() for x in torch.split(res, outs_rows)]".into());
        fin.push("res = torch.cat(out_list)".into());
        format!("dist.all_to_all(out_list, in_list, group=G{asy})")
    };
    fin.push(format!(
        "check(st, res, {dt}, {expect}, outvars(\"chunks\", [r * {per_row} for r in outs_rows]))"
    ));
    Block { pre, call, fin }
}

/// The `ts` list of a coalesced call: one flat tensor filled as the simulator fills it, cut
/// into `n` tensors of `shape` (`numel` elements each).
fn coalesced_inputs(
    s: &Scenario,
    step: &Step,
    t: &TensorSpec,
    n: usize,
    numel: usize,
    shape: &str,
) -> [String; 2] {
    let per = numel.to_string();
    [
        format!(
            "flat = {}",
            tensor(s, step, t, Some((&format!("[{}]", n * numel), &per)))
        ),
        format!("ts = [x.clone().reshape({shape}) for x in flat.chunk({n})]"),
    ]
}

fn splits_py(sp: &Splits) -> String {
    match sp {
        Splits::List(v) => format!("{v:?}"),
        Splits::Expr(e) => format!("splits({}, m)", py::str_lit(&e.to_python())),
    }
}
