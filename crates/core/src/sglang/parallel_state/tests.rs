//! Unit tests of the planner: names, failures, PP models, derived groups, communicators.

use super::*;

fn cfg(world: usize, tp: usize, u: usize, r: usize, cfg_deg: usize) -> ParallelConfig {
    ParallelConfig {
        tp,
        ulysses: u,
        ring: r,
        sp: u * r,
        cfg: cfg_deg,
        ..ParallelConfig::new(world)
    }
}

#[test]
fn unique_names_follow_group_name_counters() {
    let plan = plan_initialize_model_parallel(cfg(4, 2, 1, 1, 2), Version::V2).unwrap();
    let names: Vec<&str> = plan
        .coordinators
        .iter()
        .map(|c| c.unique_name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "world:0",
            "cfg_group:0",
            "cfg_group:1",
            "pp_group:0",
            "sp_group:0",
            "tp_group:0",
            "vae_decode_group:0"
        ]
    );
    let v0 = plan_initialize_model_parallel(cfg(4, 2, 1, 1, 2), Version::V0).unwrap();
    assert_eq!(v0.coordinator("tp").unwrap().unique_name, "cfg_group:2");
}

#[test]
fn world_too_small_uses_python_text() {
    let err = plan_initialize_model_parallel(cfg(4, 2, 2, 1, 2), Version::V2).unwrap_err();
    assert_eq!(
        err.to_string(),
        "world_size (4) is less than tensor_parallel_degree (2) x pipeline_parallel_degree (1) \
         xsequence_parallel_degree (2) xclassifier_free_guidance_degree (2) xdata_parallel_degree (1)"
    );
    assert_eq!(err.python_exception(), "RuntimeError");
    assert_eq!(err.issued_calls().len(), 2);
}

#[test]
fn extra_ranks_fail_the_dp_assertion() {
    let err = plan_initialize_model_parallel(cfg(3, 1, 1, 1, 2), Version::V2).unwrap_err();
    assert_eq!(err.to_string(), "group_ranks=[[0], [1]], local_rank=2");
    assert_eq!(err.python_exception(), "AssertionError");
    // world (2 calls) + DP (2 lists x 2 calls) happen before the assertion.
    assert_eq!(err.issued_calls().len(), 6);
}

#[test]
fn sp_not_ulysses_times_ring_fails_split_assertion() {
    let bad = ParallelConfig {
        sp: 4,
        ulysses: 2,
        ring: 1,
        ..ParallelConfig::new(4)
    };
    let err = plan_initialize_model_parallel(bad, Version::V2).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Each SP group must have size 2, got sizes [4]"
    );
    // V0 tolerates it (yunchang splits dit into u*r blocks).
    assert!(plan_initialize_model_parallel(bad, Version::V0).is_ok());
    let bad3 = ParallelConfig {
        sp: 4,
        ulysses: 3,
        ring: 1,
        ..ParallelConfig::new(4)
    };
    let err = plan_initialize_model_parallel(bad3, Version::V0).unwrap_err();
    assert_eq!(err.to_string(), "world_size 4 % sp_degree 3 == 0");
}

#[test]
fn vae_parallel_always_fails() {
    // world == dit: the VAE ranks dit.. are outside the world (torch ValueError).
    let c = ParallelConfig {
        cfg: 2,
        vae_parallel_size: 1,
        ..ParallelConfig::new(2)
    };
    let err = plan_initialize_model_parallel(c, Version::V1).unwrap_err();
    assert!(matches!(
        err,
        PlanError::RankOutsideWorld {
            coordinator: "vae",
            ..
        }
    ));
    assert_eq!(err.python_exception(), "ValueError");
    // world > dit: the VAE ranks are in no DP list and assert first.
    let c = ParallelConfig { world_size: 3, ..c };
    let err = plan_initialize_model_parallel(c, Version::V1).unwrap_err();
    assert!(matches!(
        err,
        PlanError::RankInNoGroup {
            coordinator: "dp",
            ..
        }
    ));
}

#[test]
fn zero_degree_is_guarded() {
    let c = ParallelConfig {
        ring: 0,
        ..ParallelConfig::new(2)
    };
    assert_eq!(
        plan_initialize_model_parallel(c, Version::V2),
        Err(PlanError::ZeroDegree { name: "ring" })
    );
}

#[test]
fn huge_world_is_guarded() {
    let c = ParallelConfig {
        tp: usize::MAX,
        ..ParallelConfig::new(usize::MAX)
    };
    let err = plan_initialize_model_parallel(c, Version::V2).unwrap_err();
    assert_eq!(err.python_exception(), "SimulatorGuard");
    let c = ParallelConfig {
        tp: usize::MAX,
        cfg: 2,
        ..ParallelConfig::new(8)
    };
    let err = plan_initialize_model_parallel(c, Version::V2).unwrap_err();
    assert!(matches!(err, PlanError::WorldTooSmall { .. }));
}

#[test]
fn xdit_pipeline_doubles_two_rank_lists() {
    let c = ParallelConfig {
        pp: 2,
        ..ParallelConfig::new(2)
    };
    let plan = plan_initialize_model_parallel(c, Version::V0).unwrap();
    let tags: Vec<String> = plan
        .calls
        .iter()
        .filter(|c| c.coordinator == "pp")
        .map(NewGroupCall::tag)
        .collect();
    assert_eq!(
        tags,
        [
            "pp.super.device",
            "pp.super.cpu",
            "pp.again.device_0_1",
            "pp.again.device_1_0",
            "pp.again.cpu_0_1",
            "pp.again.cpu_1_0",
            "pp.skip_device"
        ]
    );
    let pp = plan.coordinator("pp").unwrap();
    assert_eq!(pp.communicator_after_call - pp.first_call, 2);
}

#[test]
fn v2_replica_and_encoder_dp_with_data_parallel() {
    let c = ParallelConfig {
        dp: 2,
        tp: 2,
        ..cfg(8, 2, 1, 1, 2)
    };
    let plan = plan_initialize_model_parallel(c, Version::V2).unwrap();
    assert_eq!(
        plan.groups["replica"],
        GroupKind::Created(vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]])
    );
    assert_eq!(plan.groups["encoder_dp"], GroupKind::Alias("cfg".into()));
    let c = ParallelConfig {
        dp: 2,
        ..ParallelConfig::new(2)
    };
    let plan = plan_initialize_model_parallel(c, Version::V2).unwrap();
    assert_eq!(plan.groups["replica"], GroupKind::Alias("tp".into()));
    let c = ParallelConfig {
        tp: 2,
        ..ParallelConfig::new(2)
    };
    let plan = plan_initialize_model_parallel(c, Version::V2).unwrap();
    assert_eq!(plan.groups["encoder_dp"], GroupKind::Absent);
    assert!(!plan.memberships(0).contains_key("encoder_dp"));
}

#[test]
fn cuda_communicator_construction_steps() {
    let plan = plan_initialize_model_parallel(cfg(4, 2, 1, 1, 2), Version::V2).unwrap();
    let g = plan.communicator_group("cfg", 3).unwrap();
    let steps = device_communicator_collectives(Platform::Cuda, Version::V2, &g);
    assert_eq!(
        steps,
        vec![
            ConstructionStep::Broadcast {
                group: CommGroup::Cpu,
                src: 1,
                bytes: 128
            },
            ConstructionStep::NcclCommInitRank { nranks: 2, rank: 1 },
            ConstructionStep::AllReduce {
                group: CommGroup::PyNccl,
                elements: 1,
                bytes: 4
            },
            ConstructionStep::StreamSynchronize,
        ]
    );
    assert!(device_communicator_collectives(Platform::Xpu, Version::V2, &g).is_empty());
    let tp = plan.communicator_group("tp", 0).unwrap();
    assert!(device_communicator_collectives(Platform::Cuda, Version::V2, &tp).is_empty());
    let dp = plan.communicator_group("dp", 0).unwrap();
    assert!(device_communicator_collectives(Platform::Cuda, Version::V2, &dp).is_empty());
}

#[test]
fn cpu_shm_barriers_only_for_tp_names() {
    let g = CommunicatorGroup {
        coordinator: "tp",
        unique_name: "tp:0".into(),
        ranks: vec![0, 1],
        rank: 0,
        rank_in_group: 0,
        use_device_communicator: true,
    };
    let b = ConstructionStep::Barrier {
        group: CommGroup::Device,
    };
    assert_eq!(
        device_communicator_collectives(Platform::CpuX86Shm, Version::V0, &g),
        vec![b, b]
    );
    let g = CommunicatorGroup {
        unique_name: "cfg_group:2".into(),
        ..g
    };
    assert!(device_communicator_collectives(Platform::CpuX86Shm, Version::V0, &g).is_empty());
}

#[test]
fn backend_table_per_version() {
    assert_eq!(
        torch_distributed_backend(Platform::Xpu, Version::V0),
        Ok("gloo")
    );
    assert_eq!(
        torch_distributed_backend(Platform::Xpu, Version::V2),
        Ok("xccl")
    );
    assert_eq!(
        torch_distributed_backend(Platform::Musa, Version::V1),
        Ok("nccl")
    );
    assert!(torch_distributed_backend(Platform::Other, Version::V2).is_err());
}

#[test]
fn legacy_split_mixes_tp_pairs() {
    // docs/rules/sglang.md §3.19 / sglang R11: w8 tp2 u2 → legacy Ulysses are TP pairs.
    let legacy = usp_groups_legacy_yunchang(2, 1, 8).unwrap();
    let ulysses: Vec<Vec<usize>> = legacy
        .iter()
        .filter(|g| g.axis == UspAxis::Ulysses)
        .map(|g| g.ranks.clone())
        .collect();
    assert_eq!(
        ulysses,
        vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
    );
}

#[test]
fn worlds_up_to_the_planner_guard_are_planned() {
    // The plan's guard covers the scenario's world limit (it once stopped at 1024): a 4096-rank
    // tp2 x u2 x r2 x cfg2 x dp256 world is planned, one past the guard is guarded.
    let limit = MAX_WORLD_SIZE;
    let big = |world| ParallelConfig {
        dp: world / 16,
        ..cfg(world, 2, 2, 2, 2)
    };
    let plan = plan_initialize_model_parallel(big(limit), Version::V2).expect("4096 ranks");
    assert!(plan.memberships(limit - 1).contains_key("tp"));
    let err = plan_initialize_model_parallel(
        ParallelConfig {
            dp: 1,
            ..cfg(limit + 1, 1, 1, 1, 1)
        },
        Version::V2,
    )
    .unwrap_err();
    assert_eq!(err.python_exception(), "SimulatorGuard");
}

#[test]
fn member_lists_are_the_memberships_borrowed() {
    let c = ParallelConfig {
        tp: 2,
        cfg: 2,
        dp: 2,
        ..ParallelConfig::new(8)
    };
    let plan = plan_initialize_model_parallel(c, Version::V2).unwrap();
    for rank in 0..8 {
        let owned: Vec<(String, Vec<usize>)> = (plan.memberships(rank).into_iter())
            .map(|(k, m)| (k, m.ranks))
            .collect();
        let borrowed: Vec<(String, Vec<usize>)> = (plan.member_lists(rank).into_iter())
            .map(|(k, r)| (k.to_string(), r.to_vec()))
            .collect();
        assert_eq!(owned, borrowed);
    }
}
