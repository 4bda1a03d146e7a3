//! The typed scenario: what the simulator and the hardware runner execute.
//!
//! Everything here has been validated by load.rs: ranks are in range, names resolve, URLs parse.
//! Values that depend on the rank (conditions, fills, templated strings) stay expressions and are
//! evaluated per rank at run time.

use super::expr::Expr;
use crate::c10d::collective::CollOp;
use crate::dtype::DType;
use crate::reduce::ReduceOp;
use std::collections::BTreeMap;
use std::fmt;

/// A place in the scenario file, for errors and reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Loc {
    pub line: usize,
    pub col: usize,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    /// The path as given (used in messages and trace lines).
    pub file: String,
    pub description: Option<String>,
    pub world: World,
    pub steps: Vec<Step>,
    pub expect: Vec<Expectation>,
    pub sim: SimSettings,
    /// `[[faults]]`, in file order; the simulator applies them (see fault.rs).
    pub faults: Vec<super::fault::Fault>,
    /// The factor every timeout and delay was scaled by (scale.rs); 1/1 as written.
    pub time_scale: super::scale::TimeScale,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimSettings {
    pub seed: u64,
    pub latency_min_ms: u64,
    pub latency_max_ms: u64,
    /// turmoil's `enable_random_order`: hosts (nodes) run in a seeded random order each tick.
    pub random_order: bool,
    /// `payloads`: what collectives compute (see [`Payloads`]).
    pub payloads: Payloads,
    /// What the run is expected to allocate at its peak (limits.rs); its
    /// `tensor_room_bytes()` is what a split-size formula, known only as it runs, is held to.
    pub memory: super::limits::MemoryEstimate,
    /// Whether the simulator may send a client's loop of store reads as one request charged as
    /// the loop (`c10d::store::seq`; it does only where round trips cost alike). Always true
    /// from a file; tests turn it off to compare with the loop simulated request by request.
    pub batch_store_loops: bool,
    /// Whether turmoil delivers a host's loopback messages from a queue on the host (scen's
    /// patch, vendor/turmoil/PATCHES.md) rather than a tokio task each. Always true from a
    /// file; tests turn it off to show both give the same trace.
    pub loopback_queue: bool,
}

/// `[sim] payloads`: whether collectives compute real values or only sizes and digests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payloads {
    /// Real bytes: results can be checked (`expect`) and compared with hardware.
    Values,
    /// Sizes and digests only (payload.rs): the same messages and virtual times, no values.
    /// `auto_total_bytes`: chosen by the loader (no `payloads` key) because the world's tensors
    /// would need this many bytes over all ranks, over [`super::limits::MAX_TENSOR_BYTES_TOTAL`].
    Symbolic { auto_total_bytes: Option<u64> },
}

impl Payloads {
    pub fn symbolic(self) -> bool {
        matches!(self, Payloads::Symbolic { .. })
    }

    /// Why a real mode (hardware, torch) refuses these payloads: real modes always move real
    /// bytes, and a world the loader made symbolic is over scen's limit for them.
    pub fn real_mode_refusal(self) -> Option<String> {
        match self {
            Payloads::Values => None,
            Payloads::Symbolic {
                auto_total_bytes: None,
            } => Some(
                "it sets [sim] payloads = \"symbolic\", which only the simulator has: real modes always move real bytes (remove it, or set payloads = \"values\")".into(),
            ),
            Payloads::Symbolic {
                auto_total_bytes: Some(b),
            } => Some(format!(
                "its tensors would need {} over all ranks, over scen's {} limit (the simulator runs it with symbolic payloads; real modes always move real bytes)",
                super::limits::human_bytes(b),
                super::limits::human_bytes(super::limits::MAX_TENSOR_BYTES_TOTAL)
            )),
        }
    }

    /// The report's note when payloads are symbolic.
    pub fn note(self) -> Option<String> {
        match self {
            Payloads::Symbolic {
                auto_total_bytes: Some(b),
            } => Some(format!(
                "payloads: symbolic (tensors would need {} over all ranks, over the {} limit; values are not computed)",
                super::limits::human_bytes(b),
                super::limits::human_bytes(super::limits::MAX_TENSOR_BYTES_TOTAL)
            )),
            Payloads::Symbolic {
                auto_total_bytes: None,
            } => Some(
                "payloads: symbolic ([sim] payloads = \"symbolic\"; values are not computed)".into(),
            ),
            Payloads::Values => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Platform {
    Xpu,
    Cuda,
    Cpu,
}

impl Platform {
    pub fn name(self) -> &'static str {
        match self {
            Platform::Xpu => "xpu",
            Platform::Cuda => "cuda",
            Platform::Cpu => "cpu",
        }
    }

    pub fn parse(s: &str) -> Option<Platform> {
        match s {
            "xpu" => Some(Platform::Xpu),
            "cuda" => Some(Platform::Cuda),
            "cpu" => Some(Platform::Cpu),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Node {
    pub index: usize,
    pub name: String,
    pub platform: Platform,
    pub devices: usize,
}

#[derive(Debug, Clone)]
pub struct RankSpec {
    pub rank: usize,
    pub node: usize,
    pub local_rank: usize,
    /// The process environment, torchrun defaults plus the scenario's overrides.
    pub env: BTreeMap<String, String>,
}

/// A TCP store already listening when the job starts (another job's, for port-reuse bugs).
#[derive(Debug, Clone)]
pub struct Service {
    pub node: usize,
    pub port: u16,
    pub world_size: usize,
    pub label: String,
    /// Keys the other job's store already holds when this job starts (its `init/` counter,
    /// its groups' keys), so a client that joins it by mistake sees what it really would.
    pub keys: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct World {
    pub nodes: Vec<Node>,
    pub ranks_per_node: usize,
    pub ranks: Vec<RankSpec>,
    pub services: Vec<Service>,
    /// How the job is started, which decides who hosts the TCPStore.
    pub launcher: Launcher,
    /// What each message costs in virtual time (`[world.links]`, defaults otherwise).
    pub links: crate::perf::model::TimingModel,
    /// The model file's per-op costs (`[[ops]]`, fitted by `scen bench --calibrate`): a
    /// collective call costs what `scen bench` predicts with them (runtime/cost.rs).
    pub op_costs: Vec<crate::perf::model::OpCost>,
    /// `[world] exit_ms`: how long a rank's process lives after its program ends, completed or
    /// raised — a Python interpreter's teardown, during which its sockets and (rank 0) its
    /// TCPStore server still serve peers. Default [`DEFAULT_EXIT_MS`]; never time-scaled (the
    /// teardown is real time in every mode).
    pub exit_ms: u64,
    /// `[[world.rank]] exit_ms`: ranks whose teardown is their own (a recording's, measured).
    pub rank_exit_ms: BTreeMap<usize, u64>,
    /// `[world] globals_freed_ms`: when in a rank's teardown its program's globals are freed,
    /// and with them a TCPStore it made and still holds (its server closes then, long before
    /// the process ends, unless a group holds the store). Default: a third of the rank's
    /// `exit_ms` (measured, gloo, plain processes: 0.2 s of a 0.7 s teardown).
    pub globals_freed_ms: Option<u64>,
    /// `[[world.rank]] globals_freed_ms`: a recording's, measured per rank.
    pub rank_globals_freed_ms: BTreeMap<usize, u64>,
    /// `[world] agent_check_ms` / `agent_stop_ms` (torchrun only): when torchrun's agent sees
    /// the first failed worker's exit and when its stop of the others takes effect after that
    /// (`runtime::torchrun::AgentTiming`; a recording writes what its run measured).
    pub agent: crate::runtime::torchrun::AgentTiming,
}

impl World {
    /// How long rank `r`'s process lives after its program ends ([`World::exit_ms`], or its
    /// own from `[[world.rank]]`).
    pub fn exit_ms_of(&self, r: usize) -> u64 {
        self.rank_exit_ms.get(&r).copied().unwrap_or(self.exit_ms)
    }

    /// When in rank `r`'s teardown its program's globals are freed ([`World::globals_freed_ms`]),
    /// at most its whole teardown.
    pub fn globals_freed_ms_of(&self, r: usize) -> u64 {
        let exit_ms = self.exit_ms_of(r);
        let ms = self.rank_globals_freed_ms.get(&r).copied();
        ms.or(self.globals_freed_ms)
            .unwrap_or(exit_ms / 3)
            .min(exit_ms)
    }
}

/// A Python rank's teardown after its last line: about 0.45 s for a gloo rank on this project's
/// 2-core machine (scripts/bench-torch-exit.py; docs/torch.md), up to 1 s under load.
pub const DEFAULT_EXIT_MS: u64 = 450;

/// The longest `exit_ms` a scenario may give (a process's teardown, ms).
pub const MAX_EXIT_MS: u64 = 60_000;

/// `[world] launcher`: plain processes (rank 0 hosts the TCPStore; the default) or torchrun
/// (its agent hosts the store, TORCHELASTIC_USE_AGENT_STORE, and stops every worker when one
/// fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Launcher {
    #[default]
    Processes,
    Torchrun,
}

impl Launcher {
    pub fn parse(s: &str) -> Option<Launcher> {
        match s {
            "processes" => Some(Launcher::Processes),
            "torchrun" => Some(Launcher::Torchrun),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Launcher::Processes => "processes",
            Launcher::Torchrun => "torchrun",
        }
    }
}

impl World {
    pub fn size(&self) -> usize {
        self.ranks.len()
    }
}

/// Which ranks a step or expectation applies to.
#[derive(Debug, Clone)]
pub enum Selector {
    All,
    Ranks(Vec<usize>),
    Expr(Expr),
}

/// The variables every rank-dependent expression may use.
pub const RANK_VARS: [&str; 5] = [
    "rank",
    "local_rank",
    "node",
    "world_size",
    "local_world_size",
];

impl Selector {
    pub fn matches(&self, r: &RankSpec, world: &World) -> bool {
        self.matches_with(&|v| rank_var(v, r, world))
    }

    /// Matches against variable values (`rank` must be among them).
    pub fn matches_with(&self, lookup: &dyn Fn(&str) -> f64) -> bool {
        match self {
            Selector::All => true,
            Selector::Ranks(list) => list.iter().any(|r| *r as f64 == lookup("rank")),
            Selector::Expr(e) => e.holds(lookup),
        }
    }
}

/// The value of one of [`RANK_VARS`] for a rank.
pub fn rank_var(name: &str, r: &RankSpec, world: &World) -> f64 {
    match name {
        "rank" => r.rank as f64,
        "local_rank" => r.local_rank as f64,
        "node" => r.node as f64,
        "world_size" => world.size() as f64,
        "local_world_size" => world.ranks_per_node as f64,
        _ => f64::NAN,
    }
}

/// An integer argument that may depend on the rank (`rank = "{rank}"`).
#[derive(Debug, Clone)]
pub enum IntArg {
    Int(i64),
    Expr(Expr),
}

#[derive(Debug, Clone)]
pub struct Step {
    /// 0-based position in the program; reports print it 1-based.
    pub index: usize,
    pub loc: Loc,
    pub id: Option<String>,
    pub on: Selector,
    pub kind: StepKind,
}

/// `step 3 all_reduce "ar"` for 0-based step `index`: [`Step::label`], for whoever names a step
/// without its scenario (a flight-recorder import).
pub fn step_label(index: usize, op: &str, id: Option<&str>) -> String {
    match id {
        Some(id) => format!("step {} {op} \"{id}\"", index + 1),
        None => format!("step {} {op}", index + 1),
    }
}

impl Step {
    /// `step 3 new_group "mesh"`: how reports name a step (1-based, as the trace numbers it).
    /// Never `#3`: reports write a call's per-group sequence number that way (`all_reduce #2 on
    /// WORLD`), and a step and a call sit side by side in one line.
    pub fn label(&self) -> String {
        step_label(self.index, self.kind.op_name(), self.id.as_deref())
    }
}

/// A tensor a step creates: dtype, shape, device type and a fill formula over `i` and the rank.
#[derive(Debug, Clone)]
pub struct TensorSpec {
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// `None` means the platform's accelerator (`xpu` on an xpu node, `cpu` on a cpu node).
    pub device: Option<String>,
    pub fill: Expr,
    /// How far a result may be from `expect` (cast to `dtype`), in units in the last place of
    /// `dtype` at the expected value: 0 (the default) means exact. Integers are always exact.
    pub expect_ulps: u32,
}

pub use super::store::{PortArg, StoreCall, StoreStep, TcpStoreSpec, TCP_STORE_DEFAULT_TIMEOUT_MS};

#[derive(Debug, Clone)]
pub enum StepKind {
    InitProcessGroup {
        backend: Option<String>,
        init_method: Option<String>,
        device_id: Option<String>,
        timeout_ms: Option<u64>,
        rank: Option<IntArg>,
        world_size: Option<IntArg>,
        /// `store=`: a store the program made (a `tcp_store` / `prefix_store` step's name), in
        /// place of a rendezvous.
        store: Option<String>,
    },
    NewGroup {
        ranks: Option<Vec<usize>>,
        backend: Option<String>,
        use_local_synchronization: bool,
        /// `sort_ranks=False`: `ranks` keeps its order, which gives the group ranks.
        sort_ranks: bool,
        device_id: Option<String>,
        timeout_ms: Option<u64>,
        handle: Option<String>,
    },
    /// `dist.split_group(parent, split_ranks, timeout)` (runtime/rank/split.rs): `parent`
    /// `None` is the default group; `split_ranks` are ranks of the parent group, each list in
    /// the order that gives the new group's ranks (`None`: the call passed none).
    SplitGroup {
        parent: Option<String>,
        split_ranks: Option<Vec<Vec<usize>>>,
        timeout_ms: Option<u64>,
        handle: Option<String>,
    },
    /// `dist.shrink_group(ranks_to_exclude, group, shrink_flags)` (runtime/rank/shrink.rs).
    ShrinkGroup {
        group: Option<String>,
        ranks_to_exclude: Vec<i64>,
        shrink_flags: i64,
        handle: Option<String>,
    },
    DestroyProcessGroup {
        group: Option<String>,
    },
    SetDevice {
        device: String,
    },
    /// `dist.set_timeout(timeout, group)`: the group's later collectives time out after
    /// `timeout_ms` (its send/recv and works already posted keep the old timeout).
    SetTimeout {
        group: Option<String>,
        timeout_ms: u64,
    },
    /// A call on the default group's store (`dist.distributed_c10d._get_default_store()`), the
    /// program's own keys beside c10d's, or on a store the program made (scenario/store.rs).
    Store(StoreStep),
    /// `work`: `async_op = true` (the barrier's Work, for a later `wait`).
    Barrier {
        group: Option<String>,
        work: Option<String>,
    },
    /// `monitored_barrier` (gloo): rank 0 waits for every member's check-in up to `timeout_ms`
    /// (None: the backend's default, not the group's timeout), then answers each.
    MonitoredBarrier {
        group: Option<String>,
        timeout_ms: Option<u64>,
        wait_all_ranks: bool,
    },
    /// Every collective of [`CollOp`] (all_reduce, broadcast, all_gather, ...).
    Collective(CollStep),
    /// `work.wait()` on an `async_op = true` collective's handle; `timeout_ms`:
    /// `work.wait(timeout=...)`, which raises if the work has not completed by then.
    Wait {
        work: String,
        timeout_ms: Option<u64>,
    },
    /// `batch_isend_irecv` of a list of isend/irecv ops, all with the step's tensor spec.
    BatchP2p {
        group: Option<String>,
        tensor: TensorSpec,
        ops: Vec<P2pOp>,
        expect: Option<Expr>,
    },
    /// `tag`: the p2p tag (gloo matches a send and a recv by it; NCCL and XCCL ignore it).
    /// `work`: `isend` (the Work a later `wait` completes).
    Send {
        group: Option<String>,
        tensor: TensorSpec,
        dst: usize,
        tag: u32,
        work: Option<String>,
    },
    /// `work`: `irecv` (posted here; a later `wait` receives and checks `expect`).
    Recv {
        group: Option<String>,
        tensor: TensorSpec,
        src: usize,
        expect: Option<Expr>,
        tag: u32,
        work: Option<String>,
    },
    Log {
        message: String,
    },
    Sleep {
        ms: u64,
    },
    /// The program's own code raises here (an `assert`, a shape check): the rank ends failed
    /// with this exception, as a Python rank whose exception nothing catches does.
    Raise {
        /// The class name Python prints (`ValueError`, or the program's own class).
        exception: String,
        /// `str(e)`: the text after `Type: ` (empty for a bare `assert`).
        message: String,
    },
    /// The program ends its own process here: `sys.exit(code)` (after the interpreter's
    /// teardown, like a completed rank's) or a signal it sends itself (`os.kill(os.getpid(),
    /// signal.SIGKILL)`: at once, with no teardown).
    Exit(ProgramExit),
    /// sglang `maybe_init_distributed_environment_and_model_parallel`, first half (docs/rules/sglang.md#s2).
    InitDistributedEnvironment {
        version: SglangVersion,
        init_method: Option<String>,
        timeout_ms: Option<u64>,
    },
    /// sglang `initialize_model_parallel` (docs/rules/sglang.md §3–§4).
    InitializeModelParallel {
        degrees: SglangDegrees,
        /// `None`: the version of the earlier `init_distributed_environment` (else v2).
        version: Option<SglangVersion>,
        /// `parallel_groups` failed to import on this rank: Ulysses/Ring fall back to WORLD.
        usp_fallback: bool,
    },
    /// `all_to_all_4d` (docs/rules/sglang.md §5.33) or `usp_all_to_all` (§5.34) on real data.
    SpAllToAll {
        op: A2aOp,
        group: Option<String>,
        /// The per-rank input shape `[b, s, h, d]` the Python function receives.
        shape: [usize; 4],
        dtype: DType,
        /// Value at global coordinates `b, s, h, d`.
        fill: Expr,
    },
    /// The scheduler's per-iteration `broadcast_pyobj` fan-out over SP, CFG, TP cpu groups (sglang R12).
    BroadcastPyobj {
        payload_bytes: usize,
    },
    /// One diffusion step's traffic for a model shape (docs/rules/sglang.md#s5-36).
    DenoiseStep {
        model: DenoiseModel,
        dtype: DType,
        payload_bytes: usize,
    },
}

pub use crate::sglang::all_to_all_4d::A2aOp;
pub use crate::sglang::parallel_state::Degrees as SglangDegrees;
pub use crate::sglang::parallel_state::Version as SglangVersion;

/// The transformer a `denoise_step` runs (Wan2.1-1.3B: 12 heads x 128, 30 layers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenoiseModel {
    pub batch: usize,
    /// Global sequence length (tokens), sharded over the SP group.
    pub seq: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub layers: usize,
}

impl StepKind {
    pub fn op_name(&self) -> &'static str {
        match self {
            StepKind::InitProcessGroup { .. } => "init_process_group",
            StepKind::NewGroup { .. } => "new_group",
            StepKind::SplitGroup { .. } => "split_group",
            StepKind::ShrinkGroup { .. } => "shrink_group",
            StepKind::DestroyProcessGroup { .. } => "destroy_process_group",
            StepKind::SetDevice { .. } => "set_device",
            StepKind::SetTimeout { .. } => "set_timeout",
            StepKind::Store(c) => c.call.op_name(),
            StepKind::Barrier { .. } => "barrier",
            StepKind::MonitoredBarrier { .. } => "monitored_barrier",
            StepKind::Collective(c) => c.op.name(),
            StepKind::Wait { .. } => "wait",
            StepKind::BatchP2p { .. } => "batch_isend_irecv",
            StepKind::Send { work: None, .. } => "send",
            StepKind::Send { work: Some(_), .. } => "isend",
            StepKind::Recv { work: None, .. } => "recv",
            StepKind::Recv { work: Some(_), .. } => "irecv",
            StepKind::Log { .. } => "log",
            StepKind::Sleep { .. } => "sleep",
            StepKind::Raise { .. } => "raise",
            StepKind::Exit(_) => "exit",
            StepKind::InitDistributedEnvironment { .. } => "init_distributed_environment",
            StepKind::InitializeModelParallel { .. } => "initialize_model_parallel",
            StepKind::SpAllToAll {
                op: A2aOp::AllToAll4D { .. },
                ..
            } => "all_to_all_4d",
            StepKind::SpAllToAll { .. } => "usp_all_to_all",
            StepKind::BroadcastPyobj { .. } => "broadcast_pyobj",
            StepKind::DenoiseStep { .. } => "denoise_step",
        }
    }
}

/// How an `exit` step ends its rank's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramExit {
    /// `sys.exit(code)`: 0 ends the program completed, any other code fails the rank with it.
    /// Without `teardown` (`os._exit(code)`) the process ends at once, else after the
    /// interpreter's teardown (`[world] exit_ms`).
    Code { code: i32, teardown: bool },
    /// The process sends itself this signal (its default action ends it).
    Signal(i32),
}

impl ProgramExit {
    /// Whether the process lives through the interpreter's teardown first.
    pub fn tears_down(self) -> bool {
        matches!(self, ProgramExit::Code { teardown: true, .. })
    }

    /// How the rank ends (`None`: completed, `sys.exit(0)`).
    pub fn failure(self) -> Option<crate::outcome::Failure> {
        use crate::outcome::{Failure, Killer};
        match self {
            ProgramExit::Code { code: 0, .. } => None,
            ProgramExit::Code { code, .. } => Some(Failure::Exited { code: Some(code) }),
            ProgramExit::Signal(signal) => Some(Failure::Killed {
                signal,
                by: Killer::Unknown,
            }),
        }
    }
}

/// One collective step: the op and its arguments (which apply is decided by [`CollOp`]).
#[derive(Debug, Clone)]
pub struct CollStep {
    pub op: CollOp,
    pub group: Option<String>,
    /// The per-member tensor: the input of reductions/broadcast/gathers, the output of
    /// scatter/reduce-scatter (whose inputs are `group size` times larger).
    pub tensor: TensorSpec,
    /// SUM unless given; only used when `op.reduces()`.
    pub reduce_op: ReduceOp,
    /// `src` or `dst` (a global rank) of rooted ops.
    pub root: Option<usize>,
    /// Tensors in the list of `_coalesced` ops.
    pub count: usize,
    /// all_to_all: rows sent to / received from each member, as `(input, output)`.
    pub splits: Option<(Splits, Splits)>,
    pub expect: Option<Expr>,
    /// `async_op = true`: the Work handle's name for a later `wait`.
    pub work: Option<String>,
}

/// Split sizes, in rows along dim 0, one per group member: the same list on every rank, or a
/// formula over the rank variables and `j` (the member's group rank).
#[derive(Debug, Clone)]
pub enum Splits {
    List(Vec<usize>),
    Expr(Expr),
}

/// One op of a `batch_isend_irecv` list; `peer` (a global rank) may depend on the rank.
#[derive(Debug, Clone)]
pub struct P2pOp {
    pub send: bool,
    pub peer: IntArg,
    /// The op's tag (default 0: gloo matches by peer and tag; NCCL and XCCL ignore it).
    pub tag: u32,
}

/// What a scenario expects of some ranks.
#[derive(Debug, Clone)]
pub struct Expectation {
    pub loc: Loc,
    pub on: Selector,
    pub outcome: ExpectedOutcome,
    /// Substrings of the error text (for `fails`): the failure's text must contain one of
    /// them (a recording lists two where real runs of the program read either; none: any).
    pub error: Vec<String>,
    /// The step (0-based index) where the rank fails or hangs (`running`: where it was).
    pub step: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedOutcome {
    Completes,
    Fails,
    Hangs,
    /// The rank was still running `after_ms` after the run started (a recording cut by its
    /// time limit): a hang holds, and so does an end at or after that time.
    Running {
        after_ms: u64,
    },
}

impl ExpectedOutcome {
    pub fn name(self) -> &'static str {
        match self {
            ExpectedOutcome::Completes => "completes",
            ExpectedOutcome::Fails => "fails",
            ExpectedOutcome::Hangs => "hangs",
            ExpectedOutcome::Running { .. } => "running",
        }
    }
}
