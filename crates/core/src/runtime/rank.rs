//! One rank's process: runs the scenario program step by step with c10d's semantics.
//!
//! This is the model's heart and exists once: the simulator runs it as a task on a turmoil
//! host, the hardware mode as a real process. It owns what a Python process owns: the
//! default group and its TCPStore (rank 0 serves it), the group counter, the groups, the
//! current device. Each step reports start/done/error events and, while blocked, a wait
//! record saying on what and on whom.
//!
//! This file holds the process state, the step loop and the step descriptions; each c10d
//! operation is in a file named for it under rank/: `init.rs` (rendezvous, store, backends),
//! `groups.rs` (new_group, destroy, communicators), `collectives.rs`, `p2p.rs`, `calls.rs`
//! (call records), `device_ops.rs`, `detail.rs` (TORCH_DISTRIBUTED_DEBUG=DETAIL), `sglang.rs`.

use super::coll::{AsyncProbe, CallShape};
use super::device::DeviceComms;
use super::fabric::Fabric;
use crate::c10d::backend::{self, BackendConfig, Device};
use crate::c10d::error::{self, C10dError};
use crate::c10d::store::StoreClient;
use crate::net::{Clock, Net};
use crate::probe::Probe;
use crate::ranks::Ranks;
use crate::scenario::env::expand_env;
use crate::scenario::expr::{format_number, interpolate};
use crate::scenario::{CollStep, IntArg, Platform, RankSpec, Scenario, Step, StepKind, RANK_VARS};
use crate::trace::{Event, EventKind, EventTag, Wait};
use std::collections::BTreeMap;
use std::rc::Rc;

mod calls;
mod collectives;
mod describe;
mod detail;
mod groups;
mod init;
mod monitored;
mod p2p;
mod p2p_async;
mod sglang;
mod shrink;
mod split;
mod store_calls;
mod tcp_store;
use crate::diagnose::{CallKind, GroupRecord, PlannedCalls, PlannedRecord};
use calls::CallSpec;

use crate::outcome::Failure;
pub use crate::outcome::RankEnd;

/// Everything a rank needs from its runner.
pub struct RankEnv<N: Net, C: Clock, P: Probe> {
    pub net: N,
    pub clock: C,
    pub probe: P,
    pub scenario: Rc<Scenario>,
    /// The process index in the scenario's world.
    pub proc_rank: usize,
    /// The device collectives (hardware: oneCCL); `None` = core's algorithms over the fabric.
    pub device: Option<Rc<dyn DeviceComms>>,
    /// Set when the process is killed (fabric.rs: what arrives after stays unread).
    pub life: super::fabric::Life,
    /// The store files of this rank's node (`init_method="file://..."`), shared with the
    /// node's other ranks and outliving them; `None` where the runner keeps none (hardware
    /// mode), and file:// is refused.
    pub files: Option<Rc<crate::c10d::store::Files>>,
}

/// Who asks `new_group` for a group: a scenario step (the result text is the step's), or
/// sglang's start-up (text discarded: O(W) calls on every rank), whose call may be one of a plan
/// every rank shares (`(plan, index)`: reported as such, see `diagnose::planned`).
enum Caller<'a> {
    Step,
    Sglang(Option<(&'a Rc<dyn PlannedCalls>, usize)>),
}

/// What a user handle (`as = "tp"`) refers to on this rank.
#[derive(Debug, Clone)]
enum Handle {
    Member(String),
    NonMember,
}

/// A process group this rank is a member of.
struct Pg {
    name: String,
    label: String,
    /// Shared with the other members (crate::ranks).
    ranks: Ranks,
    config: BackendConfig,
    /// The group's timeout when it was made: its store waits, gloo's send/recv (its
    /// context's), DETAIL's helper group.
    timeout_ms: u64,
    /// The backend's timeout for collectives posted from now on: `timeout_ms` until
    /// `set_timeout` changes it (gloo's `options_->timeout`; measured with real torch 2.15: a
    /// later collective times out at the new value, a send/recv or a monitored barrier's
    /// check-in does not).
    coll_timeout_ms: u64,
    prefixes: Vec<String>,
    /// The rank behind each group rank's gloo pair, where another rank than the member wrote
    /// that member's address under the group's keys: two different groups that share a name
    /// (R25) connect whoever wrote the keys, as real gloo does (user-path 7/849: ranks 1 and 2
    /// formed a pair and completed their all_reduce on it). `None`: the members themselves.
    wired: Option<Ranks>,
    seq: u64,
    /// gloo sends and receives this rank posted on the group so far: the program's and
    /// `monitored_barrier`'s own. gloo's sequence number, which DETAIL's fingerprint carries,
    /// counts them with the collectives (R32).
    gloo_p2p: u64,
    /// DETAIL's checks this rank ran on the group so far: how its helper group's messages
    /// (here store keys) match across ranks.
    detail_checks: u64,
    /// p2p calls so far per (src, dst): their sequence numbers in reports.
    p2p_seq: BTreeMap<(usize, usize), u64>,
    /// p2p calls so far per (src, dst, tag): how gloo matches a send with its recv.
    p2p_match: BTreeMap<(usize, usize, u32), u64>,
    /// `monitored_barrier` calls on this group so far (their messages' tags).
    monitored: u64,
    store_counter: BTreeMap<String, u64>,
    comms: BTreeMap<String, ()>,
    /// Made by `split_group`: gloo keys its mesh under the group's prefixes with no device
    /// level (runtime/rank/split.rs).
    split: bool,
}

impl Pg {
    /// The backend's `getSequenceNumberForGroup()`, which DETAIL's fingerprint carries (R32):
    /// gloo's counts every collective, send and receive posted on the group (so
    /// `monitored_barrier`'s own, too: rank 0 posts 2 per other member, the others 2); the
    /// other backends' count the collectives only [inf: ProcessGroupNCCL's `seqCollective_`;
    /// not measured].
    fn backend_seq(&self, backend: &str) -> u64 {
        match backend {
            "gloo" => self.seq + self.gloo_p2p,
            _ => self.seq,
        }
    }

    fn group_rank(&self, global: usize) -> Option<usize> {
        self.ranks.iter().position(|r| *r == global)
    }

    /// The ranks a call on `backend` exchanges messages with, in group-rank order.
    fn peers_on(&self, backend: &str) -> Ranks {
        match (&self.wired, backend) {
            (Some(w), "gloo") => w.clone(),
            _ => self.ranks.clone(),
        }
    }
}

/// The default group's world: the store and this rank's identity in it.
struct WorldPg<N: Net> {
    store: Rc<StoreClient<N>>,
    /// The store's own timeout when the program passed it (`init_process_group(store=)`):
    /// its blocking reads keep it; else `init_process_group` set it to the group's.
    store_timeout_ms: Option<u64>,
    /// The prefixes before every group's own: `default_pg` after a rendezvous, a passed
    /// store's own (torch adds none to it).
    base_prefixes: Vec<String>,
    rank: usize,
    world_size: usize,
    config: BackendConfig,
    bound: Option<Device>,
}

struct Proc<N: Net, C: Clock, P: Probe> {
    env: RankEnv<N, C, P>,
    spec: RankSpec,
    platform: Platform,
    devices: usize,
    fabric: Rc<Fabric<N>>,
    world: Option<WorldPg<N>>,
    group_count: u64,
    pgs: BTreeMap<String, Pg>,
    handles: BTreeMap<String, Handle>,
    current_device: usize,
    step: usize,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The TCPStore server this rank hosts for its default group: it lives as long as that
    /// group (`destroy_process_group()` drops the last reference, and PyTorch's server closes).
    store_server: Option<tokio::task::AbortHandle>,
    /// The program took the default group's store (a `get_default_store` step): it outlives
    /// `destroy_process_group`, and the server with it, until the process ends.
    holds_store: bool,
    /// The stores the program made (`tcp_store` / `prefix_store` steps), by name.
    stores: BTreeMap<String, store_calls::OwnStore<N>>,
    /// The server of the program's own TCPStore that `init_process_group(store=)` made the
    /// default group's: it lives while the group does, past the program's globals.
    group_holds_server: Option<Rc<tokio::task::AbortHandle>>,
    /// sglang's start-up state, once `init_distributed_environment` ran (rank/sglang.rs).
    sgl: Option<sglang::SgState>,
    /// How often `destroy_process_group()` reset the group counter (names restart).
    group_generation: u32,
    /// In-flight `async_op = true` collectives, by work name.
    works: BTreeMap<String, Work<P>>,
    /// Its program ended with `os._exit` (an exit step without teardown).
    ended_at_once: bool,
    /// Fills, expected values, digests and buffers kept across steps (device library runs only:
    /// runtime/reuse.rs).
    reuse: Option<Rc<std::cell::RefCell<super::reuse::Reuse>>>,
}

type CallResult = Res<super::coll::Done>;

/// An `async_op = true` call, isend or irecv: `None` on a non-member (R27 returns None
/// instead of a Work).
enum Work<P: Probe> {
    None,
    Pending {
        handle: tokio::task::JoinHandle<CallResult>,
        step: Box<CollStep>,
        call: CallShape,
        probe: AsyncProbe<P>,
    },
    /// `barrier(async_op=True)`.
    Barrier {
        handle: tokio::task::JoinHandle<CallResult>,
        probe: AsyncProbe<P>,
    },
    /// A gloo isend: the task that sends its data once its receiver posted.
    Send(
        tokio::task::JoinHandle<Result<(), super::fabric::FabricError>>,
        Box<p2p_async::Posted>,
    ),
    /// A gloo irecv, posted; `wait` receives.
    Recv(Box<p2p_async::PostedRecv>),
    /// An xccl / nccl irecv; `wait` receives.
    DeviceRecv(Box<p2p_async::DeviceRecv>),
    /// A work already done (an xccl / nccl isend when made, a collective once waited): its
    /// done text, which another `wait` returns again.
    Done(String),
    /// A work whose wait raised: another `wait` raises it again.
    Failed(C10dError),
    /// A gloo isend / irecv already waited: another `wait` waits for a completion that never
    /// comes.
    Waited(Box<p2p_async::Waited>),
}

type Res<T> = Result<T, C10dError>;

mod device_ops;

/// A process killed mid-step (a crash fault drops its future) still closes what it owns.
impl<N: Net, C: Clock, P: Probe> Drop for Proc<N, C, P> {
    fn drop(&mut self) {
        self.fabric.shutdown();
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Runs the scenario's program for one rank; spawned tasks are aborted when it returns
/// (the process exits, its sockets close).
pub async fn run_rank<N: Net, C: Clock, P: Probe>(env: RankEnv<N, C, P>) -> RankEnd {
    let spec = env.scenario.world.ranks[env.proc_rank].clone();
    let node = env.scenario.world.nodes[spec.node].clone();
    let fabric = match Fabric::start(env.net.clone(), env.proc_rank, env.life.clone()).await {
        Ok(f) => f,
        Err(e) => return RankEnd::raised(0, "RuntimeError", format!("cannot listen: {e}")),
    };
    let devices = match node.platform {
        Platform::Xpu => backend::visible_devices(
            node.devices,
            spec.env.get("ZE_AFFINITY_MASK").map(|s| s.as_str()),
        ),
        _ => node.devices,
    };
    let reuse = env.device.as_ref().map(|_| Rc::default());
    let mut p = Proc {
        reuse,
        env,
        spec,
        platform: node.platform,
        devices,
        fabric,
        world: None,
        group_count: 0,
        pgs: BTreeMap::new(),
        handles: BTreeMap::new(),
        current_device: 0,
        step: 0,
        tasks: Vec::new(),
        store_server: None,
        holds_store: false,
        stores: BTreeMap::new(),
        group_holds_server: None,
        sgl: None,
        group_generation: 0,
        works: BTreeMap::new(),
        ended_at_once: false,
    };
    let span = tracing::info_span!("rank", rank = p.env.proc_rank);
    let end = tracing::Instrument::instrument(p.run(), span).await;
    // The verdict is the program's end; the process then lives through its teardown (one rule
    // for every mode: docs/scenario-format.md `exit_ms`), its store server and sockets serving.
    let now = p.env.clock.now_ms();
    if let Some(b) = p.env.device.as_ref().and_then(|d| d.busy()) {
        let fact = crate::probe::Fact::DeviceTime {
            library: b.library,
            inside_us: b.inside_us,
            of_us: b.of_us,
            calls: b.calls,
        };
        p.env.probe.fact(p.env.proc_rank, &fact);
    }
    p.env.probe.ended(p.env.proc_rank, &end, now);
    let exit_ms = p.env.scenario.world.exit_ms_of(p.env.proc_rank);
    // An aborted process (gloo's size check, a signal to itself) or one that called os._exit
    // dies at once: no interpreter teardown.
    let aborted = p.ended_at_once
        || matches!(
            &end,
            RankEnd::Failed {
                failure: crate::outcome::Failure::Killed { .. },
                ..
            }
        );
    if aborted {
        // Its sockets close once the kernel has torn it down; what arrives meanwhile is unread.
        p.env.life.kill();
        let teardown_ms = super::fabric::KILL_TEARDOWN_MS;
        p.env.clock.busy_until_ms(now + teardown_ms).await;
    } else {
        p.free_globals(now).await;
        if exit_ms > 0 {
            p.env.clock.sleep_until_ms(now + exit_ms).await;
        }
    }
    if let Some(d) = p.env.device.clone() {
        let _ = d.shutdown().await;
    }
    p.fabric.shutdown();
    for t in &p.tasks {
        t.abort();
    }
    for w in p.works.values() {
        if let Work::Pending { handle, .. } = w {
            handle.abort();
        }
    }
    p.world = None;
    end
}

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    fn now(&self) -> u64 {
        self.env.clock.now_ms()
    }

    fn event(&self, kind: EventKind, text: impl Into<String>) {
        self.tagged_event(kind, text.into(), None);
    }

    fn tagged_event(&self, kind: EventKind, text: String, tag: Option<EventTag>) {
        crate::log::mirror(kind, self.now(), &text);
        self.env.probe.event(Event {
            t_ms: self.now(),
            rank: Some(self.env.proc_rank),
            step: Some(self.step),
            kind,
            text,
            tag,
        });
    }

    fn wait(&self, w: Option<Wait>) {
        self.env.probe.set_wait(self.env.proc_rank, w);
    }

    fn var(&self, name: &str) -> f64 {
        crate::scenario::rank_var(name, &self.spec, &self.env.scenario.world)
    }

    fn accel(&self) -> &'static str {
        self.platform.name()
    }

    async fn run(&mut self) -> RankEnd {
        let scenario = self.env.scenario.clone();
        for (k, step) in scenario.steps.iter().enumerate() {
            if !step.on.matches(&self.spec, &scenario.world) {
                continue;
            }
            self.step = step.index;
            let span = match &step.id {
                Some(id) => tracing::info_span!("step", step = step.index + 1, id = %id),
                None => tracing::info_span!("step", step = step.index + 1),
            };
            let line = describe::start_line(&scenario, k);
            span.in_scope(|| self.event(EventKind::Start, line));
            self.env
                .probe
                .step_gate(self.env.proc_rank, step.index)
                .await;
            // An error is traced as the process said it (an abort's own message), and ends
            // the rank as the failure it is.
            let result = match &step.kind {
                // The program's own exception: nothing to run, the rank ends failed with it.
                StepKind::Raise { exception, message } => {
                    let f = Failure::Raised {
                        exception: exception.clone(),
                        message: message.clone(),
                    };
                    Err((f.text(), f))
                }
                // The program ends its own process: sys.exit(0) completes it here.
                StepKind::Exit(end) => {
                    self.ended_at_once = !end.tears_down();
                    match end.failure() {
                        None => {
                            span.in_scope(|| self.event(EventKind::Done, "exit 0"));
                            return RankEnd::Completed;
                        }
                        Some(f) => Err((f.text(), f)),
                    }
                }
                _ => tracing::Instrument::instrument(self.exec(step), span.clone())
                    .await
                    .map_err(|e| (e.to_string(), Failure::from(e))),
            };
            let _in_step = span.enter();
            match result {
                Ok(note) => self.event(EventKind::Done, note),
                Err((said, failure)) => {
                    self.wait(None);
                    self.event(EventKind::Error, said);
                    return RankEnd::Failed {
                        step: step.index,
                        failure,
                    };
                }
            }
        }
        RankEnd::Completed
    }

    /// An `init_process_group` step, its rank and world size evaluated for this rank.
    async fn init_step(&mut self, kind: &StepKind) -> Res<String> {
        let StepKind::InitProcessGroup {
            backend,
            init_method,
            device_id,
            timeout_ms,
            rank,
            world_size,
            store,
        } = kind
        else {
            return Ok(String::new());
        };
        let how = init::Rdzv {
            init_method,
            rank: self.int_arg(rank),
            world_size: self.int_arg(world_size),
            store,
        };
        self.init_process_group(backend, device_id, *timeout_ms, how)
            .await
    }

    async fn exec(&mut self, step: &Step) -> Res<String> {
        match &step.kind {
            StepKind::InitProcessGroup { .. } => self.init_step(&step.kind).await,
            StepKind::NewGroup {
                ranks,
                backend,
                use_local_synchronization,
                sort_ranks,
                device_id,
                timeout_ms,
                handle,
            } => {
                self.new_group(
                    ranks.as_deref(),
                    backend,
                    (*use_local_synchronization, *sort_ranks),
                    device_id,
                    *timeout_ms,
                    handle,
                    Caller::Step,
                )
                .await
            }
            StepKind::SplitGroup { .. } | StepKind::ShrinkGroup { .. } => {
                self.group_from_another(&step.kind).await
            }
            StepKind::DestroyProcessGroup { group } => self.destroy(group).await,
            StepKind::SetDevice { device } => self.set_device(device),
            StepKind::SetTimeout { group, timeout_ms } => self.set_timeout(group, *timeout_ms),
            StepKind::Store(step) => self.store_step(step).await,
            StepKind::Barrier { group, work } => self.barrier(group, work).await,
            StepKind::MonitoredBarrier {
                group,
                timeout_ms,
                wait_all_ranks,
            } => {
                self.monitored_barrier(group, *timeout_ms, *wait_all_ranks)
                    .await
            }
            StepKind::Collective(c) => self.collective(c).await,
            StepKind::Wait { work, timeout_ms } => self.wait_work(work, *timeout_ms).await,
            StepKind::BatchP2p {
                group,
                tensor,
                ops,
                expect,
            } => self.batch_p2p(group, tensor, ops, expect).await,
            StepKind::Send {
                group,
                tensor,
                dst,
                tag,
                work,
            } => match work {
                None => self.p2p(group, tensor, (*dst, true, *tag), &None).await,
                Some(w) => {
                    self.p2p_post(group, tensor, (*dst, true, *tag), &None, w)
                        .await
                }
            },
            StepKind::Recv {
                group,
                tensor,
                src,
                expect,
                tag,
                work,
            } => match work {
                None => self.p2p(group, tensor, (*src, false, *tag), expect).await,
                Some(w) => {
                    self.p2p_post(group, tensor, (*src, false, *tag), expect, w)
                        .await
                }
            },
            StepKind::Log { message } => {
                let line = interpolate(message, &RANK_VARS, &|v| self.var(v)).unwrap_or_default();
                self.event(EventKind::Log, line);
                Ok(String::new())
            }
            // run() ends the rank at a raise step without calling exec.
            StepKind::Raise { .. } | StepKind::Exit(_) => Ok(String::new()),
            StepKind::Sleep { ms } => self.sleep(*ms).await,
            StepKind::InitDistributedEnvironment { .. }
            | StepKind::InitializeModelParallel { .. }
            | StepKind::SpAllToAll { .. }
            | StepKind::BroadcastPyobj { .. }
            | StepKind::DenoiseStep { .. } => self.exec_sglang(&step.kind).await,
        }
    }

    /// sglang's steps (`runtime/rank/sglang/`).
    async fn exec_sglang(&mut self, kind: &StepKind) -> Res<String> {
        match kind {
            StepKind::InitDistributedEnvironment {
                version,
                init_method,
                timeout_ms,
            } => {
                self.init_distributed_environment(*version, init_method, *timeout_ms)
                    .await
            }
            StepKind::InitializeModelParallel {
                degrees,
                version,
                usp_fallback,
            } => {
                self.initialize_model_parallel(degrees, *version, *usp_fallback)
                    .await
            }
            StepKind::SpAllToAll {
                op,
                group,
                shape,
                dtype,
                fill,
            } => {
                let symbolic = self.env.scenario.sim.payloads.symbolic();
                self.sp_all_to_all(*op, group, *shape, *dtype, fill, symbolic)
                    .await
            }
            StepKind::BroadcastPyobj { payload_bytes } => {
                self.broadcast_pyobj(*payload_bytes).await
            }
            StepKind::DenoiseStep {
                model,
                dtype,
                payload_bytes,
            } => self.denoise_step(model, *dtype, *payload_bytes).await,
            _ => Err(error::internal("exec_sglang: not an sglang step")),
        }
    }

    /// `torch.xpu.set_device(d)`: an index past the node's devices raises (R4's sibling).
    fn set_device(&mut self, device: &str) -> Res<String> {
        let d = self.device(device)?;
        if d.ty == "xpu" {
            let i = d.index.unwrap_or(0);
            if i >= self.devices {
                return Err(error::xpu_device_out_of_range(i, self.devices));
            }
        }
        self.current_device = d.index.unwrap_or(0);
        Ok(format!("current device {d}"))
    }

    /// The program's own time between calls.
    async fn sleep(&self, ms: u64) -> Res<String> {
        let until = self.now() + ms;
        self.env.clock.sleep_until_ms(until).await;
        Ok(format!("slept {ms}ms"))
    }

    fn int_arg(&self, a: &Option<IntArg>) -> Option<usize> {
        a.as_ref().map(|a| match a {
            IntArg::Int(i) => (*i).max(0) as usize,
            IntArg::Expr(e) => e.eval(&|v| self.var(v)).max(0.0) as usize,
        })
    }

    fn expand(&self, s: &str) -> String {
        let s = expand_env(s, &self.spec.env);
        interpolate(&s, &RANK_VARS, &|v| self.var(v)).unwrap_or(s)
    }

    fn device(&self, s: &str) -> Res<Device> {
        let text = self.expand(s);
        Device::parse(&text).ok_or_else(|| error::invalid_device(&text))
    }

    /// R8: device_id checks and defaults.
    fn check_device_id(&self, d: &Device) -> Res<()> {
        if d.ty == "cpu" {
            return Ok(());
        }
        if d.ty != self.accel() {
            return Err(error::device_id_wrong_accelerator(
                &d.to_string(),
                self.accel(),
            ));
        }
        match d.index {
            None => Err(error::device_id_without_index()),
            Some(i) if i >= self.devices => {
                Err(error::device_id_out_of_range(&d.to_string(), self.devices))
            }
            Some(_) => Ok(()),
        }
    }
}

/// oneCCL/NCCL do not notice a peer's exit (docs/rules/oneccl.md#s4): the call just never completes, until
/// a timeout rule (blocking wait, watchdog) applies.
pub(crate) async fn wait_out_peer_exit<C: Clock, T>(
    clock: &C,
    deadline: Option<u64>,
) -> Result<T, super::fabric::FabricError> {
    match deadline {
        Some(d) => {
            clock.sleep_until_ms(d).await;
            Err(super::fabric::FabricError::Timeout)
        }
        None => std::future::pending().await,
    }
}

fn barrier_after_init(spec: &RankSpec) -> bool {
    spec.env.get("TORCH_DIST_INIT_BARRIER").map(|s| s.as_str()) == Some("1")
}

/// `[6, 6, 6, 6] digest 1a2b...`: result values as the trace prints them (first 8).
/// How many values a done text shows.
const SHOWN_VALUES: usize = 8;

/// The values a done text shows: the first [`SHOWN_VALUES`] of a tensor's `numel`.
fn summarize(head: &[f64], numel: usize, digest: u64) -> String {
    let shown: Vec<String> = head
        .iter()
        .take(SHOWN_VALUES)
        .map(|v| format_number(*v))
        .collect();
    let more = if numel > SHOWN_VALUES {
        format!(", ... ({numel} values)")
    } else {
        String::new()
    };
    format!("[{}{more}] digest {digest:016x}", shown.join(", "))
}
