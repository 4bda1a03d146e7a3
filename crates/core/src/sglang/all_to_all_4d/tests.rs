//! Unit tests of the 4-D all-to-all layouts: shapes, packing, round trips, errors.

use super::*;

/// Distinct, exactly representable values: rank-tagged indices.
fn inputs(shape: [usize; 4], world: usize) -> Vec<Vec<f32>> {
    let n = numel(shape).unwrap();
    (0..world)
        .map(|r| (0..n).map(|i| (r * 100_000 + i) as f32).collect())
        .collect()
}

/// Packs on every rank, exchanges chunks, unpacks on every rank.
fn simulate(
    inputs: &[Vec<f32>],
    shape: [usize; 4],
    world: usize,
    op: A2aOp,
) -> Vec<(Vec<f32>, [usize; 4])> {
    let sent: Vec<Vec<Vec<f32>>> = inputs
        .iter()
        .map(|x| pack(x, shape, world, op).unwrap())
        .collect();
    (0..world)
        .map(|dst| {
            let received = (0..world).map(|src| sent[src][dst].clone()).collect();
            unpack(received, shape, world, op).unwrap()
        })
        .collect()
}

fn check_against_reference(shape: [usize; 4], world: usize, op: A2aOp) {
    let xs = inputs(shape, world);
    let got = simulate(&xs, shape, world, op);
    let want = reference_global(&xs, shape, world, op).unwrap();
    let out_shape = output_shape(shape, world, op).unwrap();
    for (rank, (data, s)) in got.iter().enumerate() {
        assert_eq!(*s, out_shape, "{op:?} w{world} {shape:?}");
        assert_eq!(data, &want[rank], "{op:?} w{world} {shape:?} rank {rank}");
    }
}

const WORLDS: [usize; 3] = [1, 2, 4];

#[test]
fn all_to_all_4d_matches_reference() {
    for w in WORLDS {
        for shape in [[1, 3, 4, 2], [2, 2, 8, 3], [3, 1, 4, 1]] {
            check_against_reference(shape, w, A2aOp::HEADS_TO_SEQUENCE);
        }
        for shape in [[1, 4, 3, 2], [2, 8, 2, 3], [3, 4, 1, 1]] {
            check_against_reference(shape, w, A2aOp::SEQUENCE_TO_HEADS);
        }
    }
}

#[test]
fn usp_matches_reference_both_head_dims() {
    for w in WORLDS {
        for head_dim in [1, 2] {
            for shape in [[1, 4, 4, 2], [2, 8, 4, 3], [3, 4, 8, 1]] {
                check_against_reference(shape, w, A2aOp::UspInput { head_dim });
                check_against_reference(shape, w, A2aOp::UspOutput { head_dim });
            }
        }
    }
}

#[test]
fn rank_j_gets_heads_block_j_in_source_rank_sequence_order() {
    // docs/rules/sglang.md §5.33: out_j[b, i*s_l + s, h, d] = in_i[b, s, j*H/W + h, d].
    let (shape, w) = ([1, 2, 4, 1], 2);
    let xs = inputs(shape, w);
    let out = simulate(&xs, shape, w, A2aOp::HEADS_TO_SEQUENCE);
    assert_eq!(out[1].1, [1, 4, 2, 1]);
    assert_eq!(
        out[1].0,
        vec![2.0, 3.0, 6.0, 7.0, 100_002.0, 100_003.0, 100_006.0, 100_007.0]
    );
}

#[test]
fn round_trips_restore_the_input() {
    for w in WORLDS {
        let shape = [2, 3, 4 * w, 2];
        let xs = inputs(shape, w);
        let mid = simulate(&xs, shape, w, A2aOp::HEADS_TO_SEQUENCE);
        let mid_shape = mid[0].1;
        let mid_data: Vec<Vec<f32>> = mid.into_iter().map(|(d, _)| d).collect();
        let back = simulate(&mid_data, mid_shape, w, A2aOp::SEQUENCE_TO_HEADS);
        for (rank, (data, s)) in back.iter().enumerate() {
            assert_eq!((s, data), (&shape, &xs[rank]));
        }
        for head_dim in [1, 2] {
            let mid = simulate(
                &xs,
                shape_for(head_dim, shape),
                w,
                A2aOp::UspInput { head_dim },
            );
            let mid_shape = mid[0].1;
            let mid_data: Vec<Vec<f32>> = mid.into_iter().map(|(d, _)| d).collect();
            let back = simulate(&mid_data, mid_shape, w, A2aOp::UspOutput { head_dim });
            for (rank, (data, _)) in back.iter().enumerate() {
                assert_eq!(data, &xs[rank]);
            }
        }
    }
}

/// `[b, s, h, d]` as head_dim 2, or the same numbers read as `[b, h, s, d]`.
fn shape_for(head_dim: usize, [b, s, h, d]: [usize; 4]) -> [usize; 4] {
    if head_dim == 2 {
        [b, s, h, d]
    } else {
        [b, h, s, d]
    }
}

#[test]
fn wan_twelve_heads_cannot_split_eight_ways() {
    let shape = [1, 2, 12, 1];
    let x = vec![0.0; 24];
    let err = pack(&x, shape, 8, A2aOp::HEADS_TO_SEQUENCE).unwrap_err();
    assert_eq!(
        err.to_string(),
        "head dimension (12) must be divisible by sequence parallel world size (8)"
    );
    assert_eq!(err.python_exception(), "AssertionError");
    let err = pack(&x, shape, 8, A2aOp::UspInput { head_dim: 2 }).unwrap_err();
    assert_eq!(
        err.to_string(),
        "h_global (12) must be divisible by world_size (8)"
    );
    assert!(pack(&x, shape, 4, A2aOp::UspInput { head_dim: 2 }).is_ok());
}

#[test]
fn sequence_and_dim_errors() {
    let x = vec![0.0; 6];
    let err = pack(&x, [1, 3, 2, 1], 2, A2aOp::SEQUENCE_TO_HEADS).unwrap_err();
    assert_eq!(
        err.to_string(),
        "sequence dimension (3) must be divisible by sequence parallel world size (2)"
    );
    let err = pack(&x, [1, 3, 2, 1], 2, A2aOp::UspOutput { head_dim: 2 }).unwrap_err();
    assert_eq!(
        err.to_string(),
        "s_global (3) must be divisible by world_size (2)"
    );
    let bad = A2aOp::AllToAll4D {
        scatter_dim: 3,
        gather_dim: 1,
    };
    let err = pack(&x, [1, 3, 2, 1], 2, bad).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Invalid scatter_dim=3, gather_dim=1. Only (scatter_dim=2, gather_dim=1) and \
         (scatter_dim=1, gather_dim=2) are supported."
    );
    assert_eq!(err.python_exception(), "RuntimeError");
    let err = pack(&x, [1, 3, 2, 1], 2, A2aOp::UspInput { head_dim: 3 }).unwrap_err();
    assert_eq!(err.to_string(), "head_dim must be 1 or 2, got 3");
}

#[test]
fn world_one_passes_through_without_checks() {
    let x = vec![1.0, 2.0, 3.0];
    let bad = A2aOp::AllToAll4D {
        scatter_dim: 0,
        gather_dim: 0,
    };
    assert!(!issues_collective(1));
    assert_eq!(pack(&x, [1, 3, 1, 1], 1, bad).unwrap(), vec![x.clone()]);
    assert_eq!(
        unpack(vec![x.clone()], [1, 3, 1, 1], 1, bad).unwrap(),
        (x, [1, 3, 1, 1])
    );
}

#[test]
fn guards_reject_bad_buffers() {
    assert_eq!(
        pack(&[0.0; 3], [1, 2, 2, 1], 2, A2aOp::HEADS_TO_SEQUENCE)
            .unwrap_err()
            .python_exception(),
        "SimulatorGuard"
    );
    assert!(matches!(
        unpack(
            vec![vec![0.0; 2]],
            [1, 2, 2, 1],
            2,
            A2aOp::HEADS_TO_SEQUENCE
        ),
        Err(A2aError::WrongRankCount {
            expected: 2,
            actual: 1
        })
    ));
    assert!(matches!(
        unpack(
            vec![vec![0.0; 3], vec![0.0; 1]],
            [1, 2, 2, 1],
            2,
            A2aOp::HEADS_TO_SEQUENCE
        ),
        Err(A2aError::ShapeMismatch { .. })
    ));
    assert_eq!(
        pack::<f32>(&[], [0, 2, 2, 1], 0, A2aOp::HEADS_TO_SEQUENCE),
        Err(A2aError::ZeroWorld)
    );
    let empty = [usize::MAX, 0, 2, 1];
    assert!(matches!(
        pack::<f32>(&[], empty, 2, A2aOp::HEADS_TO_SEQUENCE),
        Err(A2aError::ShapeTooLarge { .. })
    ));
    let empty = [1 << 40, 0, 2, 1];
    let (sent, got) = (
        pack::<f32>(&[], empty, 2, A2aOp::HEADS_TO_SEQUENCE).unwrap(),
        vec![vec![], vec![]],
    );
    assert_eq!(sent, got);
    let want = reference_global(&got, empty, 2, A2aOp::HEADS_TO_SEQUENCE).unwrap();
    assert_eq!(
        unpack(sent, empty, 2, A2aOp::HEADS_TO_SEQUENCE).unwrap(),
        (vec![], [1 << 40, 0, 1, 1])
    );
    assert_eq!(want, got);
    let huge = [usize::MAX, 2, 2, 1];
    assert!(matches!(
        pack::<f32>(&[], huge, 2, A2aOp::HEADS_TO_SEQUENCE),
        Err(A2aError::ShapeMismatch { .. })
    ));
}
