//! Platforms as sglang's `current_platform` sees them, the backend each picks, and the
//! collectives a coordinator's device communicator makes while it is built (docs/rules/sglang.md §2.7, §4.23, sglang R5).

use thiserror::Error;

use super::Version;

/// Platform as seen by `current_platform` (docs/rules/sglang.md §2.7, §4.23).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Platform {
    /// NVIDIA CUDA (cuda-alike).
    Cuda,
    /// AMD ROCm (cuda-alike).
    Rocm,
    /// Moore Threads MUSA (cuda-alike).
    Musa,
    /// Ascend NPU.
    Npu,
    /// Intel XPU.
    Xpu,
    /// Apple MPS.
    Mps,
    /// Plain CPU.
    Cpu,
    /// CPU on x86 with `torch.ops._C.init_shm_manager` available.
    CpuX86Shm,
    /// Anything else (out-of-tree).
    Other,
}

impl Platform {
    /// `is_cuda_alike()`: CUDA, ROCm, MUSA.
    pub fn is_cuda_alike(self) -> bool {
        matches!(self, Platform::Cuda | Platform::Rocm | Platform::Musa)
    }
}

/// `get_torch_distributed_backend_str()` has no entry for the platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("NotImplementedError: no torch.distributed backend for platform {platform:?}")]
pub struct UnsupportedPlatform {
    /// The platform.
    pub platform: Platform,
}

/// The concrete backend behind [`BackendChoice::Device`] (docs/rules/sglang.md#s2-7): V0 is
/// nccl on cuda-alike and gloo elsewhere; V1/V2 use the platform table.
pub fn torch_distributed_backend(
    platform: Platform,
    version: Version,
) -> Result<&'static str, UnsupportedPlatform> {
    if platform.is_cuda_alike() {
        return Ok("nccl");
    }
    if version == Version::V0 {
        return Ok("gloo");
    }
    match platform {
        Platform::Npu => Ok("hccl"),
        Platform::Mps | Platform::Cpu | Platform::CpuX86Shm => Ok("gloo"),
        Platform::Xpu => Ok("xccl"),
        _ => Err(UnsupportedPlatform { platform }),
    }
}

/// A rank's view of one coordinator, input of
/// [`device_communicator_collectives`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommunicatorGroup {
    /// Coordinator kind.
    pub coordinator: &'static str,
    /// `unique_name` (the CPU-SHM rule tests its `"tp"` prefix).
    pub unique_name: String,
    /// Global ranks of the rank's group.
    pub ranks: Vec<usize>,
    /// The global rank.
    pub rank: usize,
    /// Its index in `ranks`.
    pub rank_in_group: usize,
    /// Whether the coordinator builds a device communicator.
    pub use_device_communicator: bool,
}

/// Which process group / communicator a construction step runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CommGroup {
    /// The coordinator's gloo `cpu_group`.
    Cpu,
    /// The coordinator's `device_group`.
    Device,
    /// The freshly built PyNccl communicator.
    PyNccl,
}

/// One step of device-communicator construction (docs/rules/sglang.md#s4-23).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConstructionStep {
    /// Local: group rank 0 calls `ncclGetUniqueId`.
    NcclGetUniqueId,
    /// `dist.broadcast` of `bytes` from global rank `src`.
    Broadcast {
        /// Group used.
        group: CommGroup,
        /// Global source rank (`ranks[0]`).
        src: usize,
        /// Payload size.
        bytes: usize,
    },
    /// `ncclCommInitRank(nranks, id, rank)`; blocks across members.
    NcclCommInitRank {
        /// Group size.
        nranks: usize,
        /// Rank in group.
        rank: usize,
    },
    /// Warm-up all-reduce.
    AllReduce {
        /// Group used.
        group: CommGroup,
        /// Element count.
        elements: usize,
        /// Payload size.
        bytes: usize,
    },
    /// Local: `stream.synchronize()`.
    StreamSynchronize,
    /// `barrier` on a group.
    Barrier {
        /// Group used.
        group: CommGroup,
    },
}

impl ConstructionStep {
    /// Whether the step needs the other members (vs. purely local).
    pub fn is_collective(self) -> bool {
        !matches!(
            self,
            ConstructionStep::NcclGetUniqueId | ConstructionStep::StreamSynchronize
        )
    }
}

/// Construction steps of the device communicator a rank builds for `group`
/// (docs/rules/sglang.md §4.23, sglang R5): none unless the coordinator uses one and the group has
/// more than one rank; CUDA-alike → PyNccl (128-byte gloo broadcast of the unique id,
/// `ncclCommInitRank`, 1-element fp32 all-reduce); CPU-SHM with a `tp*` name →
/// two device-group barriers; everything else, XPU included → none. The three
/// lineages build the same communicators, so `version` does not change the
/// result today.
pub fn device_communicator_collectives(
    platform: Platform,
    version: Version,
    group: &CommunicatorGroup,
) -> Vec<ConstructionStep> {
    match version {
        // Every lineage builds the same communicators (V0 on XPU also lands
        // on CpuCommunicator); matched so a new lineage must decide. 0.5.23 is taken as V2
        // here: its CUDA and CPU-SHM paths were read but cannot run on this CPU machine, and
        // its srt MoE-EP groups are single-rank (no communicator).
        Version::V0 | Version::V1 | Version::V2 | Version::V0_5_23 => {}
    }
    if !group.use_device_communicator || group.ranks.len() <= 1 {
        return Vec::new();
    }
    if platform.is_cuda_alike() {
        return pynccl_construction(group);
    }
    if platform == Platform::CpuX86Shm && group.unique_name.starts_with("tp") {
        let barrier = ConstructionStep::Barrier {
            group: CommGroup::Device,
        };
        return vec![barrier, barrier];
    }
    Vec::new()
}

const NCCL_UNIQUE_ID_BYTES: usize = 128;
const WARMUP_ALL_REDUCE_BYTES: usize = 4;

fn pynccl_construction(group: &CommunicatorGroup) -> Vec<ConstructionStep> {
    let mut steps = Vec::with_capacity(5);
    if group.rank_in_group == 0 {
        steps.push(ConstructionStep::NcclGetUniqueId);
    }
    steps.push(ConstructionStep::Broadcast {
        group: CommGroup::Cpu,
        src: group.ranks[0],
        bytes: NCCL_UNIQUE_ID_BYTES,
    });
    steps.push(ConstructionStep::NcclCommInitRank {
        nranks: group.ranks.len(),
        rank: group.rank_in_group,
    });
    steps.push(ConstructionStep::AllReduce {
        group: CommGroup::PyNccl,
        elements: 1,
        bytes: WARMUP_ALL_REDUCE_BYTES,
    });
    steps.push(ConstructionStep::StreamSynchronize);
    steps
}
