//! gloo's algorithms compute what collectives promise, on worlds of 1 to 7 members and sizes
//! that do not divide evenly, and follow gloo's size rule.

use super::super::testlink::{run_world, GlooLike};
use super::*;
use crate::dtype::DType;
use crate::reduce::ReduceOp;

fn t(me: usize, numel: usize) -> Tensor {
    Tensor::from_fn(DType::F32, vec![numel], |i| (me * 100 + i) as f64)
}

#[test]
fn all_reduce_and_reduce_sum_every_member() {
    for n in 1..=7 {
        for numel in [1, 3, 7, 16] {
            let got = run_world(n, move |l| async move {
                let mut x = t(l.rank(), numel);
                all_reduce(&l, &mut x, ReduceOp::Sum).await.map(|_| x)
            });
            let want: Vec<f64> = (0..numel)
                .map(|i| (0..n).map(|m| (m * 100 + i) as f64).sum())
                .collect();
            for (me, r) in got.into_iter().enumerate() {
                assert_eq!(
                    r.expect("ok").to_f64_vec(),
                    want,
                    "all_reduce n {n} numel {numel} rank {me}"
                );
            }
            for root in 0..n {
                let got = run_world(n, move |l| async move {
                    let mut x = t(l.rank(), numel);
                    reduce(&l, &mut x, ReduceOp::Sum, root).await.map(|_| x)
                });
                let r = got[root].clone().expect("ok").to_f64_vec();
                assert_eq!(r, want, "reduce n {n} numel {numel} root {root}");
            }
        }
    }
}

#[test]
fn all_gather_broadcast_gather_scatter_all_to_all() {
    for n in 1..=7 {
        let got = run_world(
            n,
            move |l| async move { all_gather(&l, &t(l.rank(), 3)).await },
        );
        for r in got {
            let parts = r.expect("ok");
            for (m, p) in parts.iter().enumerate() {
                assert_eq!(p.to_f64_vec(), t(m, 3).to_f64_vec(), "all_gather n {n}");
            }
        }
        for root in 0..n {
            let got = run_world(n, move |l| async move {
                let mut x = t(l.rank(), 5);
                broadcast(&l, &mut x, root).await.map(|_| x)
            });
            for r in got {
                assert_eq!(
                    r.expect("ok").to_f64_vec(),
                    t(root, 5).to_f64_vec(),
                    "bcast n {n}"
                );
            }
            let got = run_world(n, move |l| async move {
                gather(&l, &t(l.rank(), 2), root).await
            });
            let parts = got[root].clone().expect("ok").expect("root's parts");
            for (m, p) in parts.iter().enumerate() {
                assert_eq!(p.to_f64_vec(), t(m, 2).to_f64_vec(), "gather n {n}");
            }
            let got = run_world(n, move |l| async move {
                let parts = (l.rank() == root).then(|| (0..n).map(|m| t(m, 2)).collect());
                scatter(&l, parts, &t(0, 2), root).await
            });
            for (me, r) in got.into_iter().enumerate() {
                assert_eq!(
                    r.expect("ok").to_f64_vec(),
                    t(me, 2).to_f64_vec(),
                    "scatter n {n}"
                );
            }
        }
        let got = run_world(n, move |l| async move {
            let me = l.rank();
            let sends = (0..n)
                .map(|to| vec![(me * 10 + to) as u8; to + 1])
                .collect();
            let lens: Vec<usize> = vec![me + 1; n];
            all_to_all(&l, sends, &lens).await
        });
        for (me, r) in got.into_iter().enumerate() {
            let want: Vec<Vec<u8>> = (0..n)
                .map(|from| vec![(from * 10 + me) as u8; me + 1])
                .collect();
            assert_eq!(r.expect("ok"), want, "all_to_all n {n}");
        }
        let got = run_world(n, |l| async move { barrier(&l).await });
        assert!(got.iter().all(|r| r.is_ok()), "barrier n {n}");
    }
}

#[test]
fn a_shorter_part_lands_first_and_a_longer_one_aborts_its_receiver() {
    // 2 members: member 1's part is 2 elements where member 0's is 4. Member 0 posts halves of
    // 8 bytes and takes member 1's 4-byte halves; member 1 posts 4 and gets 8: it aborts.
    let got = run_world(2, |l| async move {
        let numel = if l.rank() == 0 { 4 } else { 2 };
        all_gather(&GlooLike(l), &t(0, numel)).await
    });
    assert!(got[0].is_ok(), "{:?}", got[0].as_ref().err());
    match &got[1] {
        Err(CollectiveError::TooLarge {
            from: 0,
            got: 8,
            posted: 4,
        }) => {}
        other => panic!("{:?}", other.as_ref().map(|_| ())),
    }
}
