//! What a collective call costs in the simulator's virtual time: what `scen bench` predicts for
//! the same call (`perf::model::ModelRef::predict_us`), so a scenario's step and `scen bench
//! --pattern` agree for any model. The prediction charges the algorithm the real library runs
//! at that size (oneCCL's selection for xccl, with the rank's `CCL_ALLREDUCE`; scen's own, the
//! gloo ones, for gloo and nccl), its rounds as bench counts them, and a calibrated model's
//! per-op `[[ops]]` costs. The call's messages move at no cost from the moment a member enters
//! it, and the member spends the cost once they are through, before the call returns: a call
//! that completes ends as it would with the cost spent first, while its messages reach peers
//! when real gloo's first ones do (at once), which decides whether a peer killed meanwhile had
//! read them (runtime/fabric.rs: closed or reset). Calls bench has no op for (gather, scatter,
//! barrier, uneven all-to-all) are charged per message instead (`Clock::charge`).

use super::coll::{Algo, Coll};
use crate::perf::model::{LinkClass, ModelRef};
use crate::perf::schedule::Library;
use crate::perf::{plan, BenchOp};
use crate::scenario::Scenario;
use std::collections::BTreeMap;

/// The call as bench names it: its op and nccl-tests' size of it in bytes, from the input of
/// `in_bytes` on each of `members`; `None` for calls bench does not measure.
fn bench_op(coll: &Coll, in_bytes: usize, members: usize) -> Option<(BenchOp, usize)> {
    Some(match &coll.algo {
        Algo::AllReduce(_) => (BenchOp::AllReduce, in_bytes),
        Algo::Reduce(..) => (BenchOp::Reduce, in_bytes),
        Algo::Broadcast(_) => (BenchOp::Broadcast, in_bytes),
        Algo::AllGather { .. } => (BenchOp::AllGather, in_bytes * members),
        Algo::ReduceScatter { .. } => (BenchOp::ReduceScatter, in_bytes),
        Algo::AllToAll {
            send_rows,
            recv_rows,
            ..
        } if even(send_rows) && even(recv_rows) => (BenchOp::AllToAll, in_bytes),
        Algo::AllToAll { .. } | Algo::Gather(_) | Algo::Scatter { .. } | Algo::Barrier => {
            return None
        }
    })
}

fn even(rows: &[usize]) -> bool {
    rows.windows(2).all(|w| w[0] == w[1])
}

/// The link class of a call on `members` (global ranks): the host link for gloo, else the
/// device fabric within a node or the scale-out network across nodes.
fn class(s: &Scenario, backend: &str, members: &[usize]) -> LinkClass {
    let node = |r: &usize| s.world.ranks.get(*r).map(|x| x.node);
    let one_node = members
        .iter()
        .all(|r| node(r) == members.first().and_then(node));
    LinkClass::of(backend != "gloo", one_node)
}

/// Microseconds the call costs each member, or `None` when it is charged per message.
pub(crate) fn call_us(
    s: &Scenario,
    env: &BTreeMap<String, String>,
    backend: &str,
    coll: &Coll,
    in_bytes: usize,
    members: &[usize],
) -> Option<f64> {
    let (op, bytes) = bench_op(coll, in_bytes, members.len())?;
    let host = backend != "xccl";
    let ccl = env.get("CCL_ALLREDUCE").map(String::as_str);
    let library = plan::library(host, ccl, false).unwrap_or(Library::Scen);
    let model = ModelRef {
        links: &s.world.links,
        ops: &s.world.op_costs,
    };
    let class = class(s, backend, members);
    Some(model.predict_us(op, bytes, members.len(), class, library))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduce::ReduceOp;

    fn coll(algo: Algo) -> Coll {
        Coll {
            name: "c",
            torch_op: "C",
            algo,
        }
    }

    #[test]
    fn calls_are_named_as_bench_names_them() {
        let ar = coll(Algo::AllReduce(ReduceOp::Sum));
        assert_eq!(bench_op(&ar, 1024, 4), Some((BenchOp::AllReduce, 1024)));
        // nccl-tests' all_gather size is the gathered output.
        let ag = coll(Algo::AllGather { count: 1 });
        assert_eq!(bench_op(&ag, 1024, 4), Some((BenchOp::AllGather, 4096)));
        let even = coll(Algo::AllToAll {
            send_rows: vec![2, 2],
            recv_rows: vec![2, 2],
            row_elems: 8,
        });
        assert_eq!(bench_op(&even, 64, 2), Some((BenchOp::AllToAll, 64)));
        // Calls bench has no op for are charged per message.
        let uneven = coll(Algo::AllToAll {
            send_rows: vec![1, 3],
            recv_rows: vec![2, 2],
            row_elems: 8,
        });
        assert_eq!(bench_op(&uneven, 64, 2), None);
        assert_eq!(bench_op(&coll(Algo::Barrier), 4, 2), None);
        assert_eq!(bench_op(&coll(Algo::Gather(0)), 4, 2), None);
    }

    #[test]
    fn a_call_costs_what_bench_predicts() {
        let s = crate::scenario::parse(
            "[world]\nnodes = 2\nranks_per_node = 2\n\n[[step]]\nop = \"barrier\"\n",
            "t.toml",
            "t",
        )
        .expect("parses");
        let env = BTreeMap::new();
        let ar = coll(Algo::AllReduce(ReduceOp::Sum));
        let bytes = 16 << 20;
        let model = crate::perf::model::ModelFile::default();
        // Device groups within a node: the fabric, oneCCL's selection.
        let intra = call_us(&s, &env, "xccl", &ar, bytes, &[0, 1]).unwrap();
        let want = model.predict_us(
            BenchOp::AllReduce,
            bytes,
            2,
            LinkClass::Intra,
            Library::OnecclCpu,
        );
        assert_eq!(intra, want);
        // Across nodes: the scale-out network; gloo: the host link with scen's own ring.
        let inter = call_us(&s, &env, "xccl", &ar, bytes, &[0, 2]).unwrap();
        assert!(inter > intra, "{inter} vs {intra}");
        let host = call_us(&s, &env, "gloo", &ar, bytes, &[0, 1]).unwrap();
        let want = model.predict_us(BenchOp::AllReduce, bytes, 2, LinkClass::Host, Library::Scen);
        assert_eq!(host, want);
    }
}
