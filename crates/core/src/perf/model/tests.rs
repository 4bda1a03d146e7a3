//! The timing model's tests: link costs, predictions against the algorithms' real messages,
//! model files (old `max_bytes` and knees alike) and their errors.

use super::*;
use crate::algo::testlink::{run_world, ChanLink};
use crate::algo::{self, Link, LinkError};
use crate::dtype::DType;
use crate::perf::schedule::Algorithm;
use crate::reduce::ReduceOp;
use crate::tensor::Tensor;
use std::cell::RefCell;

#[test]
fn a_message_costs_alpha_plus_bytes_over_beta() {
    let l = LinkCost::new(10.0, 2.0);
    assert_eq!(l.message_us(0), 10.0);
    assert_eq!(l.message_us(2_000_000), 1010.0);
    let m = TimingModel::default();
    // Ring all_reduce of 4 MB on 4 ranks: 6 messages of 1 MB.
    let p = m.predict_us(BenchOp::AllReduce, 4_000_000, 4, LinkClass::Host);
    assert!((p - 6.0 * (50.0 + 500.0)).abs() < 1e-6, "{p}");
    assert_eq!(
        m.predict_us(BenchOp::AllReduce, 1 << 20, 1, LinkClass::Intra),
        0.0
    );
    // A reduction rate adds the reduced bytes: 3 MB at 1 GB/s = 3000 us more.
    let mut r = m;
    r.host.reduce_gbps = Some(1.0);
    let q = r.predict_us(BenchOp::AllReduce, 4_000_000, 4, LinkClass::Host);
    assert!((q - p - 3000.0).abs() < 1e-6, "{q}");
}

#[test]
fn predictions_use_the_library_algorithm_and_per_op_costs() {
    let mut f = ModelFile::default();
    f.links.intra = LinkCost::new(10.0, 1.0);
    // 16 KiB all_reduce on 4 ranks: oneCCL's nreduce, 6 messages of 4 KiB = 60 + 24.576 us.
    let p = f.predict_us(
        BenchOp::AllReduce,
        16384,
        4,
        LinkClass::Intra,
        Library::OnecclCpu,
    );
    assert!((p - 84.576).abs() < 1e-9, "{p}");
    // 8 KiB: recursive doubling, 2 exchanges of the whole buffer.
    let p = f.predict_us(
        BenchOp::AllReduce,
        8192,
        4,
        LinkClass::Intra,
        Library::OnecclCpu,
    );
    assert!((p - (20.0 + 16.384)).abs() < 1e-9, "{p}");
    f.ops.push(OpCost {
        class: LinkClass::Intra,
        op: BenchOp::AllReduce,
        algorithm: Algorithm::Nreduce,
        ranks: 2,
        max_bytes: None,
        alpha_us: 100.0,
        beta_gbps: 2.0,
        knees: Vec::new(),
    });
    // The 2-rank entry is the nearest for 4 ranks too.
    let p = f.predict_us(
        BenchOp::AllReduce,
        16384,
        4,
        LinkClass::Intra,
        Library::OnecclCpu,
    );
    assert!((p - (600.0 + 12.288)).abs() < 1e-9, "{p}");
    // The ring has no entry: the op's other algorithm's applies (same messages here); another
    // op falls back to the class link.
    let ring = f.predict_us(
        BenchOp::AllReduce,
        16384,
        4,
        LinkClass::Intra,
        Library::Scen,
    );
    assert!((ring - 612.288).abs() < 1e-9, "{ring}");
    let ag = f.predict_us(
        BenchOp::AllGather,
        16384,
        4,
        LinkClass::Intra,
        Library::Scen,
    );
    assert!((ag - (30.0 + 12.288)).abs() < 1e-9, "{ag}");
    // Size ranges: the bounded entry up to its bound, the unbounded one above.
    f.ops[0].max_bytes = Some(65536);
    f.ops.push(OpCost {
        max_bytes: None,
        alpha_us: 0.0,
        beta_gbps: 1.0,
        ..f.ops[0].clone()
    });
    let alpha = |f: &ModelFile, b| {
        f.op_cost(
            LinkClass::Intra,
            BenchOp::AllReduce,
            Algorithm::Nreduce,
            2,
            b,
        )
        .unwrap()
        .alpha_us
    };
    assert_eq!(alpha(&f, 65536), 100.0);
    assert_eq!(alpha(&f, 65537), 0.0);
    f.ops.pop();
    // Past the last bound, the largest range extrapolates.
    assert_eq!(alpha(&f, 1 << 20), 100.0);
}

#[test]
fn model_files_parse_and_name_the_file_line_and_column_on_error() {
    let m = ModelFile::parse("m.toml", "[links.intra]\nalpha_us = 5.0\nbeta_gbps = 7.0\n").unwrap();
    assert_eq!(m.links.intra.beta_gbps, 7.0);
    assert_eq!(m.links.host, TimingModel::default().host);
    let e = ModelFile::parse("m.toml", "[links.intra]\nalpha = 5\n").unwrap_err();
    assert!(e.to_string().starts_with("m.toml:2:1: "), "{e}");
    let e = ModelFile::parse("m.toml", "[links.intra]\nalpha_us = 5\nbeta_gbps = 0\n").unwrap_err();
    assert!(e.to_string().starts_with("m.toml:3:13: "), "{e}");
    assert!(
        e.to_string()
            .contains("beta_gbps must be a number from 0.000001"),
        "{e}"
    );
    let e = ModelFile::parse("m.toml", "[links.intra\n").unwrap_err();
    assert!(e.to_string().starts_with("m.toml:1:"), "{e}");
    let e = ModelFile::parse(
        "m.toml",
        "[[ops]]\nclass = \"intra\"\nop = \"all_reduce\"\nalgorithm = \"magic\"\nranks = 2\nalpha_us = 1\nbeta_gbps = 1\n",
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("m.toml:4:13: "), "{e}");
    // The shape --calibrate writes (tests/hw/bench.rs round-trips a real one).
    let text = "notes = [\"n\"]\n[links.intra]\nalpha_us = 10.0\nbeta_gbps = 100.0\nreduce_gbps = 2.5\n\n[[ops]]\nclass = \"intra\"\nop = \"all_to_all\"\nalgorithm = \"pairwise\"\nranks = 4\nalpha_us = 12.5\nbeta_gbps = 0.75\n";
    let f = ModelFile::parse("x", text).unwrap();
    assert_eq!(f.links.intra.reduce_gbps, Some(2.5));
    assert_eq!(
        f.ops,
        vec![OpCost {
            class: LinkClass::Intra,
            op: BenchOp::AllToAll,
            algorithm: Algorithm::Pairwise,
            ranks: 4,
            max_bytes: None,
            alpha_us: 12.5,
            beta_gbps: 0.75,
            knees: Vec::new(),
        }]
    );
    let missing = ModelFile::load(std::path::Path::new("/nonexistent/m.toml")).unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("/nonexistent/m.toml: cannot read"),
        "{missing}"
    );
}

/// An `[[ops]]` entry of an all_to_all pairwise cost on 2 ranks, with `extra` lines.
fn pairwise_entry(extra: &str) -> String {
    format!("[[ops]]\nclass = \"intra\"\nop = \"all_to_all\"\nalgorithm = \"pairwise\"\nranks = 2\nalpha_us = 50.0\nbeta_gbps = 1.0\n{extra}")
}

fn a2a_us(f: &ModelFile, bytes: usize) -> f64 {
    f.predict_us(
        BenchOp::AllToAll,
        bytes,
        2,
        LinkClass::Intra,
        Library::OnecclCpu,
    )
}

#[test]
fn files_with_max_bytes_ranges_still_load_and_predict_as_before() {
    // What --calibrate wrote before knees: two ranges, a jump at the bound.
    let text = format!(
        "{}max_bytes = 1048576\n\n{}",
        pairwise_entry(""),
        pairwise_entry("")
            .replace("alpha_us = 50.0", "alpha_us = 0.0")
            .replace("beta_gbps = 1.0", "beta_gbps = 0.25")
    );
    let f = ModelFile::parse("old.toml", &text).unwrap();
    assert_eq!(f.ops.len(), 2);
    assert!(f.ops.iter().all(|o| o.knees.is_empty()));
    // 2 ranks pairwise: one message of half the size. Up to 1 MiB the first range's cost,
    // above it the second's.
    assert!((a2a_us(&f, 1 << 20) - (50.0 + 524.288)).abs() < 1e-9);
    assert!((a2a_us(&f, 2 << 20) - 4194.304).abs() < 1e-9);
}

#[test]
fn knees_change_the_slope_without_a_jump_and_round_trip() {
    let text = pairwise_entry("knees = [{ bytes = 1048576, beta_gbps = 0.25 }]\n");
    let f = ModelFile::parse("new.toml", &text).unwrap();
    assert_eq!(
        f.ops[0].knees,
        vec![Knee {
            bytes: 1 << 20,
            beta_gbps: 0.25
        }]
    );
    let at = a2a_us(&f, 1 << 20);
    assert!((at - (50.0 + 524.288)).abs() < 1e-9, "{at}");
    // 1 MiB more: half of it on the wire, at 0.25 GB/s instead of 1.
    assert!((a2a_us(&f, 2 << 20) - (at + 2097.152)).abs() < 1e-9);
    assert!((a2a_us(&f, (1 << 20) + 2) - at).abs() < 1e-2);
    // (core writes no TOML; the same serde derive through JSON, src writes the file.)
    let back: ModelFile = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
    assert_eq!(back, f);
    assert!(
        f.ops[0].to_string().ends_with(", 0.250GB/s above 1M"),
        "{}",
        f.ops[0]
    );
    // Knees out of order, an unknown key in one, a zero rate: refused with their place.
    let e = ModelFile::parse(
        "m.toml",
        &pairwise_entry("knees = [{ bytes = 2, beta_gbps = 1 }, { bytes = 1, beta_gbps = 1 }]\n"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("increasing"), "{e}");
    let e = ModelFile::parse(
        "m.toml",
        &pairwise_entry("knees = [{ bytes = 2, gbps = 1 }]\n"),
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("m.toml:8:"), "{e}");
    let e = ModelFile::parse(
        "m.toml",
        &pairwise_entry("knees = [{ bytes = 2, beta_gbps = 0 }]\n"),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("beta_gbps must be a number from 0.000001"),
        "{e}"
    );
}

/// Counts rank 0's messages and their largest payload.
struct Counting {
    inner: ChanLink,
    sent: RefCell<(usize, usize)>,
}

impl Link for Counting {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    async fn send(&self, to: usize, data: Vec<u8>, bytes: usize) -> Result<(), LinkError> {
        {
            let mut s = self.sent.borrow_mut();
            s.0 += 1;
            s.1 = s.1.max(bytes - 9);
        }
        self.inner.send(to, data, bytes).await
    }
    async fn recv(&self, from: usize) -> Result<Vec<u8>, LinkError> {
        self.inner.recv(from).await
    }
}

/// (messages, largest payload) of the member that sends most, running core's
/// implementation of `alg`.
fn measured(op: BenchOp, alg: Algorithm, n: usize, bytes: usize) -> (usize, usize) {
    let per_rank = run_world(n, move |l| async move {
        let c = Counting {
            inner: l,
            sent: RefCell::new((0, 0)),
        };
        let count = op.send_count(bytes, 4, n);
        let mut t = Tensor::from_fn(DType::F32, vec![count], |i| i as f64);
        match (op, alg) {
            (BenchOp::AllReduce, Algorithm::Nreduce) => {
                algo::all_reduce_nreduce(&c, &mut t, ReduceOp::Sum).await
            }
            (BenchOp::AllReduce, Algorithm::RecursiveDoubling) => {
                algo::all_reduce_recursive_doubling(&c, &mut t, ReduceOp::Sum).await
            }
            (BenchOp::AllReduce, _) => algo::all_reduce(&c, &mut t, ReduceOp::Sum)
                .await
                .map(|_| ()),
            (BenchOp::AllGather, Algorithm::Direct) => {
                algo::all_gather_direct(&c, &t).await.map(|_| ())
            }
            (BenchOp::AllGather, _) => algo::all_gather(&c, &t).await.map(|_| ()),
            (BenchOp::ReduceScatter, _) => {
                algo::reduce_scatter(&c, &t, ReduceOp::Sum, &[count / n])
                    .await
                    .map(|_| ())
            }
            (BenchOp::AllToAll, _) => {
                let chunk = bytes / n;
                let sends = vec![vec![0u8; chunk]; n];
                algo::all_to_all(&c, sends, &vec![chunk; n])
                    .await
                    .map(|_| ())
            }
            (BenchOp::Broadcast, _) => algo::broadcast(&c, &mut t, 0).await,
            (BenchOp::Reduce, _) => algo::reduce(&c, &mut t, ReduceOp::Sum, 0).await,
        }
        .expect("collective");
        c.sent.into_inner()
    });
    // The critical path: the most messages any member sends or (trees) the depth.
    let msgs = per_rank.iter().map(|p| p.0).max().unwrap_or(0);
    let big = per_rank.iter().map(|p| p.1).max().unwrap_or(0);
    (msgs, big)
}

#[test]
fn schedules_match_the_algorithms_real_messages() {
    for n in [2usize, 3, 4, 5, 8] {
        let bytes = 4 * 8 * 9 * 7 * 5; // divisible by every n and by the f32 width
        let mut algs: Vec<(BenchOp, Algorithm)> = BenchOp::ALL
            .iter()
            .map(|&op| (op, Library::Scen.select(op, bytes, n)))
            .collect();
        algs.extend([
            (BenchOp::AllReduce, Algorithm::Nreduce),
            (BenchOp::AllReduce, Algorithm::RecursiveDoubling),
            (BenchOp::AllGather, Algorithm::Direct),
        ]);
        for (op, alg) in algs {
            let s = schedule(op, alg, bytes, n);
            let (msgs, big) = measured(op, alg, n, bytes);
            let want_big = (s.wire_bytes / s.messages as f64).round() as usize;
            match op {
                // Reduce: every member sends once; the root receives log2(n) in sequence.
                BenchOp::Reduce => assert_eq!(msgs, 1, "{op} {alg} n={n}"),
                // A binomial tree's root sends log2(n) messages (its critical path).
                _ => assert_eq!(msgs, s.messages, "{op} {alg} n={n}"),
            }
            assert_eq!(big, want_big, "{op} {alg} n={n}");
        }
    }
}
