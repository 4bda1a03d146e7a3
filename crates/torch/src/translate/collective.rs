//! The collectives' blocks of the generated program: each call with its inputs built as the
//! simulator builds them, and the `finish` that checks its result (now, or at `work.wait()` for
//! `async_op`). Split from mod.rs, which translates every other step kind.

use super::{expect_fn, group, py, tensor};
use scen_core::c10d::collective::{CollOp, Layout};
use scen_core::scenario::{CollStep, Scenario, Splits, Step, TensorSpec};

pub(super) fn collective(s: &Scenario, step: &Step, c: &CollStep, b: &mut Vec<String>) {
    let g = group(&c.group);
    let dt = py::str_lit(c.tensor.dtype.name());
    let numel: usize = c.tensor.shape.iter().product();
    let shape = format!("{:?}", c.tensor.shape);
    // `shape` with dim 0 times m (a scalar becomes [m]), as scen's `times`.
    let times = format!("([{}] + {shape}[1:] if {shape} else [m])", {
        c.tensor
            .shape
            .first()
            .map(|d| format!("{d} * m"))
            .unwrap_or("m".into())
    });
    let op = format!(
        "op=OPS[{}]",
        py::str_lit(&c.reduce_op.name().to_lowercase())
    );
    let asy = if c.work.is_some() {
        ", async_op=True"
    } else {
        ""
    };
    b.push(format!("G = {g}"));
    b.push("m = max(dist.get_world_size(group=G), 1)".into());
    b.push("member = G is None or dist.get_rank(group=G) >= 0".into());
    let expect = expect_fn(&c.expect, c.tensor.expect_ulps);
    let root = c.root.unwrap_or(0);
    // (the call, how to finish: lines computing `res` and checking it)
    let mut fin: Vec<String> = Vec::new();
    let call: String;
    let chunked = |elems: &str| format!("outvars(\"chunks\", [{elems}] * m)");
    match c.op {
        CollOp::AllReduce | CollOp::Broadcast | CollOp::Reduce => {
            b.push(format!("t = {}", tensor(s, step, &c.tensor, None)));
            call = match c.op {
                CollOp::AllReduce => format!("dist.all_reduce(t, {op}, group=G{asy})"),
                CollOp::Broadcast => format!("dist.broadcast(t, {root}, group=G{asy})"),
                _ => format!("dist.reduce(t, {root}, {op}, group=G{asy})"),
            };
            if c.op == CollOp::Reduce {
                fin.push(format!("if RANK != {root}:"));
                fin.push(format!(
                    "    st.text = summarize(t, {dt}) + \" (not dst: tensor unchanged)\""
                ));
                fin.push("else:".into());
                fin.push(format!("    check(st, t, {dt}, {expect})"));
            } else {
                fin.push(format!("check(st, t, {dt}, {expect})"));
            }
        }
        CollOp::AllReduceCoalesced => {
            let n = c.count;
            b.extend(coalesced_inputs(s, step, &c.tensor, n, numel, &shape));
            call = format!("dist.all_reduce_coalesced(ts, {op}, group=G{asy})");
            fin.push("res = torch.cat([x.reshape(-1) for x in ts])".into());
            fin.push(format!(
                "check(st, res, {dt}, {expect}, outvars(\"tensors\", per_tensor={numel}))"
            ));
        }
        CollOp::AllGather | CollOp::AllGatherIntoTensor | CollOp::Gather => {
            b.push(format!("t = {}", tensor(s, step, &c.tensor, None)));
            match c.op {
                CollOp::AllGather => {
                    b.push("outs = [torch.empty_like(t) for _ in range(m)]".into());
                    call = format!("dist.all_gather(outs, t, group=G{asy})");
                    fin.push("res = torch.cat([x.reshape([-1] + list(x.shape[1:])) if x.dim() else x.reshape(1) for x in outs])".into());
                }
                CollOp::AllGatherIntoTensor => {
                    b.push(format!(
                        "res = torch.empty({times}, dtype=t.dtype, device=t.device)"
                    ));
                    call = format!("dist.all_gather_into_tensor(res, t, group=G{asy})");
                }
                _ => {
                    b.push(format!(
                        "outs = [torch.empty_like(t) for _ in range(m)] if RANK == {root} else None"
                    ));
                    call = format!("dist.gather(t, outs, {root}, group=G{asy})");
                    fin.push(format!("if RANK != {root}:"));
                    fin.push(format!(
                        "    st.text = summarize(t, {dt}) + \" (not dst: sent)\"",
                    ));
                    fin.push("    return".into());
                    fin.push("res = torch.cat([x.reshape([-1] + list(x.shape[1:])) if x.dim() else x.reshape(1) for x in outs])".into());
                }
            }
            fin.push(format!(
                "check(st, res, {dt}, {expect}, {})",
                chunked(&numel.to_string())
            ));
        }
        CollOp::AllGatherCoalesced => {
            let n = c.count;
            b.extend(coalesced_inputs(s, step, &c.tensor, n, numel, &shape));
            b.push("outs = [[torch.empty_like(x) for x in ts] for _ in range(m)]".into());
            call = format!("dist.all_gather_coalesced(outs, ts, group=G{asy})");
            fin.push(format!(
                "res = torch.cat([outs[r][k].reshape(-1) for k in range({n}) for r in range(m)])"
            ));
            fin.push(format!(
                "check(st, res, {dt}, {expect}, outvars(\"tensor_chunks\", [{numel}] * m, m * {numel}))"
            ));
        }
        CollOp::Scatter => {
            b.push(format!("if RANK == {root}:"));
            b.push(format!(
                "    inp = {}",
                tensor(s, step, &c.tensor, Some((&times, "None")))
            ));
            b.push("    parts = [x.clone() for x in inp.chunk(m)]".into());
            b.push(format!(
                "    res = torch.zeros({shape}, dtype=DTYPES[{dt}])"
            ));
            b.push("else:".into());
            b.push("    parts = None".into());
            b.push(format!("    res = {}", tensor(s, step, &c.tensor, None)));
            call = format!("dist.scatter(res, parts, {root}, group=G{asy})");
            fin.push(format!("check(st, res, {dt}, {expect})"));
        }
        CollOp::ReduceScatter | CollOp::ReduceScatterTensor => {
            b.push(format!(
                "inp = {}",
                tensor(s, step, &c.tensor, Some((&times, "None")))
            ));
            b.push(format!("res = torch.empty({shape}, dtype=inp.dtype)"));
            call = if c.op == CollOp::ReduceScatter {
                format!("dist.reduce_scatter(res, [x.clone() for x in inp.chunk(m)], {op}, group=G{asy})")
            } else {
                format!("dist.reduce_scatter_tensor(res, inp, {op}, group=G{asy})")
            };
            fin.push(format!("check(st, res, {dt}, {expect})"));
        }
        CollOp::AllToAllSingle | CollOp::AllToAll => {
            let elems = numel;
            match &c.splits {
                Some((i, o)) => {
                    b.push(format!(
                        "ins, outs_rows = {}, {}",
                        splits_py(i),
                        splits_py(o)
                    ));
                    b.push(format!(
                        "inp = {}",
                        tensor(
                            s,
                            step,
                            &c.tensor,
                            Some((&format!("[sum(ins)] + {shape}"), "None"))
                        )
                    ));
                    b.push(format!(
                        "res = torch.zeros([sum(outs_rows)] + {shape}, dtype=inp.dtype)"
                    ));
                }
                None => {
                    b.push(format!("inp = {}", tensor(s, step, &c.tensor, None)));
                    b.push("res = torch.zeros_like(inp)".into());
                    b.push("rows = inp.shape[0] if inp.dim() else 1".into());
                    b.push("ins = outs_rows = [rows // m] * m".into());
                }
            }
            let per_row = if c.splits.is_some() {
                elems.to_string()
            } else {
                "(inp.numel() // max(rows, 1))".to_string()
            };
            if c.op == CollOp::AllToAllSingle {
                call = if c.splits.is_some() {
                    format!("dist.all_to_all_single(res, inp, outs_rows, ins, group=G{asy})")
                } else {
                    format!("dist.all_to_all_single(res, inp, group=G{asy})")
                };
            } else {
                b.push("in_list = [x.clone() for x in torch.split(inp, ins)]".into());
                b.push("out_list = [x.clone() for x in torch.split(res, outs_rows)]".into());
                call = format!("dist.all_to_all(out_list, in_list, group=G{asy})");
                fin.push("res = torch.cat(out_list)".into());
            }
            fin.push(format!(
                "check(st, res, {dt}, {expect}, outvars(\"chunks\", [r * {per_row} for r in outs_rows]))"
            ));
        }
        CollOp::AllGatherIntoTensorCoalesced | CollOp::ReduceScatterTensorCoalesced => {
            b.push(format!(
                "raise NotImplementedError(\"{} is not public torch.distributed API\")",
                c.op.name()
            ));
            return;
        }
    }
    debug_assert!(matches!(
        c.op.layout(),
        Layout::Flat | Layout::Tensors | Layout::Chunks | Layout::TensorChunks
    ));
    b.push("def finish(st):".into());
    b.push("    if not member:".into());
    b.push("        st.text = \"not a member: no-op\"".into());
    b.push("        return".into());
    if fin.is_empty() {
        fin.push("pass".into());
    }
    for l in &fin {
        b.push(format!("    {l}"));
    }
    match &c.work {
        Some(w) => {
            b.push(format!("works[{}] = ({call}, finish)", py::str_lit(w)));
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
