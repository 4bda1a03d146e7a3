//! The collectives' fields of a recorded call (split from steps.rs, whose other calls are
//! init, groups, point-to-point and waits): which recorded tensor is the step's `shape`, the
//! lists that must agree with the group, coalesced lists, roots, reduce ops and splits.

use super::{dims, int, ints, list, quote, Ctx};
use crate::record::parse::Call;
use crate::record::RecordError;
use serde_json::{Map, Value};

/// A coalesced call's list `k`: tensors of one shape are `shape` and `count`. Tensors of
/// different shapes (one dtype) on a gloo group are one tensor of their total size, as gloo
/// flattens the list into one buffer before it sends it (ProcessGroupGloo's
/// `AsyncAllreduceCoalescedWork`, `AsyncAllgatherCoalescedWork`); elsewhere they are refused.
fn coalesced(
    cx: &Ctx,
    c: &Call,
    (k, group): (&str, &Option<String>),
    f: &mut Vec<(String, String)>,
    notes: &mut Vec<String>,
) -> Result<(), RecordError> {
    let tensors: Vec<&Map<String, Value>> = c
        .args
        .get(k)
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default();
    let Some(head) = tensors.first() else {
        return Ok(());
    };
    let dtype = |t: &Map<String, Value>| t.get("dtype").cloned();
    if tensors
        .iter()
        .all(|t| dims(t) == dims(head) && dtype(t) == dtype(head))
    {
        cx.tensor(Some(&Value::Object((*head).clone())), group, f);
        f.push(("count".into(), tensors.len().to_string()));
        return Ok(());
    }
    // CPU tensors run on gloo, unless the recording is re-targeted and the group is not gloo's.
    let on_cpu = head.get("device").and_then(Value::as_str).unwrap_or("cpu") == "cpu";
    let gloo = on_cpu && (cx.o.platform.is_none() || cx.cpu_group(group));
    if !gloo || tensors.iter().any(|t| dtype(t) != dtype(head)) {
        return Err(cx.err(
            c,
            format!(
                "{}: a list of tensors of different shapes or dtypes has no step in the scenario format (a gloo group's list of one dtype is recorded as one flat tensor); not recorded",
                c.op
            ),
        ));
    }
    let shapes: Vec<String> = tensors.iter().map(|t| list(&dims(t))).collect();
    let total: usize = tensors
        .iter()
        .map(|t| dims(t).iter().product::<usize>())
        .sum();
    let mut flat = (*head).clone();
    flat.insert("shape".into(), serde_json::json!([total]));
    cx.tensor(Some(&Value::Object(flat)), group, f);
    f.push(("count".into(), "1".into()));
    notes.push(format!(
        "tensors of shapes {} as one of [{total}]: gloo flattens a coalesced list into one buffer",
        shapes.join(", ")
    ));
    Ok(())
}

/// The collectives: which recorded tensor is the step's `shape`, roots, reduce op, splits.
pub(super) fn collective(
    cx: &Ctx,
    c: &Call,
    op: &mut String,
    group: &Option<String>,
    f: &mut Vec<(String, String)>,
    notes: &mut Vec<String>,
) -> Result<(), RecordError> {
    let a = &c.args;
    if let Some(g) = group {
        f.push(("group".into(), quote(g)));
    }
    let first = |k: &str| {
        a.get(k)
            .and_then(Value::as_array)
            .and_then(|l| l.first().cloned())
    };
    match op.as_str() {
        "all_gather" => cx.list_agrees(c, group, "tensor_list", Some("tensor"))?,
        "gather" => cx.list_agrees(c, group, "gather_list", Some("tensor"))?,
        "scatter" => cx.list_agrees(c, group, "scatter_list", Some("tensor"))?,
        "reduce_scatter" => cx.list_agrees(c, group, "input_list", Some("output"))?,
        "all_to_all" => {
            cx.list_agrees(c, group, "output_tensor_list", None)?;
            cx.list_agrees(c, group, "input_tensor_list", None)?;
        }
        _ => {}
    }
    match op.as_str() {
        "all_reduce" | "broadcast" | "reduce" | "all_gather" | "gather" | "scatter" => {
            cx.tensor(a.get("tensor"), group, f)
        }
        "all_gather_into_tensor" => {
            cx.sizes_agree(c, group, "input_tensor", "output_tensor")?;
            cx.tensor(a.get("input_tensor"), group, f)
        }
        "reduce_scatter_tensor" => {
            cx.sizes_agree(c, group, "output", "input")?;
            cx.tensor(a.get("output"), group, f)
        }
        "reduce_scatter" => cx.tensor(a.get("output"), group, f),
        "all_reduce_coalesced" | "all_gather_coalesced" => {
            let k = if op == "all_reduce_coalesced" {
                "tensors"
            } else {
                "input_tensor_list"
            };
            coalesced(cx, c, (k, group), f, notes)?;
        }
        "all_to_all_single" => {
            let input = a.get("input").and_then(Value::as_object);
            let (i, o) = (
                ints(a.get("input_split_sizes")),
                ints(a.get("output_split_sizes")),
            );
            match (input, i, o) {
                (Some(t), Some(i), Some(o)) => {
                    let row: Vec<usize> = dims(t).into_iter().skip(1).collect();
                    let mut row_t = t.clone();
                    row_t.insert(
                        "shape".into(),
                        serde_json::json!(if row.is_empty() { vec![1] } else { row }),
                    );
                    cx.tensor(Some(&Value::Object(row_t)), group, f);
                    f.push(("input_split_sizes".into(), list(&i)));
                    f.push(("output_split_sizes".into(), list(&o)));
                }
                (Some(_), None, None) => cx.tensor(a.get("input"), group, f),
                _ => {
                    return Err(cx.err(
                        c,
                        "all_to_all_single with only one of input_split_sizes / output_split_sizes"
                            .into(),
                    ))
                }
            }
        }
        "all_to_all" => {
            let rows = |k: &str| -> Vec<(usize, Vec<usize>)> {
                a.get(k)
                    .and_then(Value::as_array)
                    .map(|l| {
                        l.iter()
                            .filter_map(Value::as_object)
                            .map(|t| {
                                let d = dims(t);
                                (
                                    d.first().copied().unwrap_or(1),
                                    d.into_iter().skip(1).collect(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let (ins, outs) = (rows("input_tensor_list"), rows("output_tensor_list"));
            let Some(t) = first("input_tensor_list").and_then(|v| v.as_object().cloned()) else {
                return Err(cx.err(c, "all_to_all without an input list".into()));
            };
            let even = ins.iter().chain(&outs).all(|r| r == &ins[0]);
            let mut t = t;
            if even {
                let mut shape = vec![ins[0].0 * ins.len()];
                shape.extend(ins[0].1.iter().copied());
                t.insert("shape".into(), serde_json::json!(shape));
                cx.tensor(Some(&Value::Object(t)), group, f);
            } else {
                let row = if ins[0].1.is_empty() {
                    vec![1]
                } else {
                    ins[0].1.clone()
                };
                t.insert("shape".into(), serde_json::json!(row));
                cx.tensor(Some(&Value::Object(t)), group, f);
                let i: Vec<usize> = ins.iter().map(|r| r.0).collect();
                let o: Vec<usize> = outs.iter().map(|r| r.0).collect();
                f.push(("input_split_sizes".into(), list(&i)));
                f.push(("output_split_sizes".into(), list(&o)));
            }
        }
        other => return Err(cx.err(c, format!("`{other}` is not a call scen records"))),
    }
    if let Some(r) = a.get("reduce_op").and_then(Value::as_str) {
        if !["sum", "min", "max", "product", "avg", "band", "bor", "bxor"].contains(&r) {
            return Err(cx.err(c, format!("reduce op `{r}` has no scenario equivalent")));
        }
        if r != "sum" {
            f.push(("reduce_op".into(), quote(r)));
        }
    }
    for (k, gk) in [("src", "group_src"), ("dst", "group_dst")] {
        let v = int(a.get(k)).or_else(|| int(a.get(gk)).map(|r| cx.global(group, r)));
        if let Some(v) = v {
            if matches!(
                (op.as_str(), k),
                ("broadcast" | "scatter", "src") | ("reduce" | "gather", "dst")
            ) {
                f.push((k.into(), v.to_string()));
            }
        }
    }
    let _ = notes;
    Ok(())
}
