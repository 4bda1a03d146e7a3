//! One rank's process: runs the scenario program step by step with c10d's semantics.
//!
//! This is the model's heart and exists once: the simulator runs it as a task on a turmoil
//! host, the hardware mode as a real process. It owns what a Python process owns: the
//! default group and its TCPStore (rank 0 serves it), the group counter, the groups, the
//! current device. Each step reports start/done/error events and, while blocked, a wait
//! record saying on what and on whom.

use super::coll::{self, AsyncProbe, CallShape, Coll, OutVars};
use super::device::DeviceComms;
use super::fabric::Fabric;
use super::link::{CallInfo, FabricLink};
use super::net::{Clock, Net};
use crate::c10d::backend::{self, BackendConfig, Device};
use crate::c10d::collective::CollOp;
use crate::c10d::error::{self, C10dError};
use crate::c10d::naming;
use crate::c10d::rendezvous;
use crate::c10d::store::{self, join_key, StoreClient, StoreError};
use crate::dtype::DType;
use crate::reduce::{self, ReduceOp};
use crate::scenario::env::expand_env;
use crate::scenario::expr::{format_number, interpolate, Expr};
use crate::scenario::{
    CollStep, IntArg, Launcher, P2pOp, Platform, RankSpec, Scenario, Splits, Step, StepKind,
    TensorSpec, RANK_VARS,
};
use crate::tensor::Tensor;
use crate::trace::{Event, EventKind, Probe, Wait};
use std::collections::BTreeMap;
use std::rc::Rc;

mod calls;
mod detail;
mod sglang;
use crate::diagnose::{CallKind, GroupRecord};
use calls::CallSpec;

/// How a rank's program ended (a rank that never ends is hung: the runner decides that).
#[derive(Debug, Clone, PartialEq)]
pub enum RankEnd {
    Completed,
    Failed { step: usize, error: String },
}

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
    ranks: Vec<usize>,
    config: BackendConfig,
    timeout_ms: u64,
    prefixes: Vec<String>,
    seq: u64,
    p2p_seq: BTreeMap<(usize, usize), u64>,
    store_counter: BTreeMap<String, u64>,
    comms: BTreeMap<String, ()>,
}

impl Pg {
    fn group_rank(&self, global: usize) -> Option<usize> {
        self.ranks.iter().position(|r| *r == global)
    }
}

/// The default group's world: the store and this rank's identity in it.
struct WorldPg<N: Net> {
    store: Rc<StoreClient<N>>,
    rank: usize,
    world_size: usize,
    config: BackendConfig,
    bound: Option<Device>,
    timeout_ms: u64,
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
    /// sglang's start-up state, once `init_distributed_environment` ran (rank/sglang.rs).
    sgl: Option<sglang::SgState>,
    /// How often `destroy_process_group()` reset the group counter (names restart).
    group_generation: u32,
    /// In-flight `async_op = true` collectives, by work name.
    works: BTreeMap<String, Work<P>>,
}

type CallResult = Res<(Tensor, Option<Tensor>)>;

/// An `async_op = true` call: `None` on a non-member (R27 returns None instead of a Work).
enum Work<P: Probe> {
    None,
    Pending {
        handle: tokio::task::JoinHandle<CallResult>,
        step: Box<CollStep>,
        call: CallShape,
        probe: AsyncProbe<P>,
    },
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
    let fabric = match Fabric::start(env.net.clone(), env.proc_rank).await {
        Ok(f) => f,
        Err(e) => {
            return RankEnd::Failed {
                step: 0,
                error: format!("RuntimeError: cannot listen: {e}"),
            }
        }
    };
    let devices = match node.platform {
        Platform::Xpu => backend::visible_devices(
            node.devices,
            spec.env.get("ZE_AFFINITY_MASK").map(|s| s.as_str()),
        ),
        _ => node.devices,
    };
    let mut p = Proc {
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
        sgl: None,
        group_generation: 0,
        works: BTreeMap::new(),
    };
    let span = tracing::info_span!("rank", rank = p.env.proc_rank);
    let end = tracing::Instrument::instrument(p.run(), span).await;
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
        let text = text.into();
        crate::log::mirror(kind, self.now(), &text);
        self.env.probe.event(Event {
            t_ms: self.now(),
            rank: Some(self.env.proc_rank),
            step: Some(self.step),
            kind,
            text,
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
        for step in &scenario.steps {
            if !step.on.matches(&self.spec, &scenario.world) {
                continue;
            }
            self.step = step.index;
            let span = match &step.id {
                Some(id) => tracing::info_span!("step", step = step.index + 1, id = %id),
                None => tracing::info_span!("step", step = step.index + 1),
            };
            span.in_scope(|| self.event(EventKind::Start, describe(step)));
            self.env
                .probe
                .step_gate(self.env.proc_rank, step.index)
                .await;
            let result = tracing::Instrument::instrument(self.exec(step), span.clone()).await;
            let _in_step = span.enter();
            match result {
                Ok(note) => self.event(EventKind::Done, note),
                Err(e) => {
                    self.wait(None);
                    self.event(EventKind::Error, e.to_string());
                    return RankEnd::Failed {
                        step: step.index,
                        error: e.to_string(),
                    };
                }
            }
        }
        RankEnd::Completed
    }

    async fn exec(&mut self, step: &Step) -> Res<String> {
        match &step.kind {
            StepKind::InitProcessGroup {
                backend,
                init_method,
                device_id,
                timeout_ms,
                rank,
                world_size,
            } => {
                let rank = self.int_arg(rank);
                let ws = self.int_arg(world_size);
                self.init_process_group(backend, init_method, device_id, *timeout_ms, rank, ws)
                    .await
            }
            StepKind::NewGroup {
                ranks,
                backend,
                use_local_synchronization,
                device_id,
                timeout_ms,
                handle,
            } => {
                self.new_group(
                    ranks,
                    backend,
                    *use_local_synchronization,
                    device_id,
                    *timeout_ms,
                    handle,
                )
                .await
            }
            StepKind::DestroyProcessGroup { group } => self.destroy(group),
            StepKind::SetDevice { device } => {
                let d = self.device(device)?;
                if d.ty == "xpu" {
                    let i = d.index.unwrap_or(0);
                    if i >= self.devices {
                        return Err(backend::xpu_device_out_of_range(i, self.devices));
                    }
                }
                self.current_device = d.index.unwrap_or(0);
                Ok(format!("current device {d}"))
            }
            StepKind::Barrier { group } => self.barrier(group).await,
            StepKind::Collective(c) => self.collective(c).await,
            StepKind::Wait { work } => self.wait_work(work).await,
            StepKind::BatchP2p {
                group,
                tensor,
                ops,
                expect,
            } => self.batch_p2p(group, tensor, ops, expect).await,
            StepKind::Send { group, tensor, dst } => {
                self.p2p(group, tensor, *dst, true, &None).await
            }
            StepKind::Recv {
                group,
                tensor,
                src,
                expect,
            } => self.p2p(group, tensor, *src, false, expect).await,
            StepKind::Log { message } => {
                let line = interpolate(message, &RANK_VARS, &|v| self.var(v)).unwrap_or_default();
                self.event(EventKind::Log, line);
                Ok(String::new())
            }
            StepKind::Sleep { ms } => {
                let until = self.now() + ms;
                self.env.clock.sleep_until_ms(until).await;
                Ok(format!("slept {ms}ms"))
            }
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
            } => self.sp_all_to_all(*op, group, *shape, *dtype, fill).await,
            StepKind::BroadcastPyobj { payload_bytes } => {
                self.broadcast_pyobj(*payload_bytes).await
            }
            StepKind::DenoiseStep {
                model,
                dtype,
                payload_bytes,
            } => self.denoise_step(model, *dtype, *payload_bytes).await,
        }
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
        Device::parse(&text)
            .ok_or_else(|| error::runtime(format!("Invalid device string: '{text}'")))
    }

    /// R8: device_id checks and defaults.
    fn check_device_id(&self, d: &Device) -> Res<()> {
        if d.ty == "cpu" {
            return Ok(());
        }
        if d.ty != self.accel() {
            return Err(error::value(format!(
                "device_id {d} does not match the current compilation's accelerator support ({})",
                self.accel()
            )));
        }
        match d.index {
            None => Err(error::value("Please use a device_id with index.")),
            Some(i) if i >= self.devices => Err(error::value(format!(
                "device_id {d} is out of range: device count is {}",
                self.devices
            ))),
            Some(_) => Ok(()),
        }
    }

    async fn init_process_group(
        &mut self,
        backend: &Option<String>,
        init_method: &Option<String>,
        device_id: &Option<String>,
        timeout_ms: Option<u64>,
        rank: Option<usize>,
        world_size: Option<usize>,
    ) -> Res<String> {
        if self.world.is_some() {
            return Err(error::init_twice());
        }
        let device = device_id.as_ref().map(|d| self.device(d)).transpose()?;
        if let Some(d) = &device {
            self.check_device_id(d)?;
        }
        let backend_s = match backend {
            Some(b) => self.expand(b),
            None => match &device {
                Some(d) => backend::default_backend_for(&d.ty)
                    .unwrap_or("undefined")
                    .to_string(),
                None => "undefined".to_string(),
            },
        };
        let config = BackendConfig::parse(&backend_s, Some(self.accel()))?;
        config.check_built_in()?;
        let timeout_ms = timeout_ms.unwrap_or_else(|| {
            let scale = self.env.scenario.time_scale;
            scale.apply(backend::default_timeout_ms(&config))
        });
        let url = init_method
            .as_ref()
            .map(|u| self.expand(u))
            .unwrap_or_else(|| "env://".into());
        let rv = rendezvous::resolve(&url, rank, world_size, &self.spec.env)?;
        if rv.world_size > crate::scenario::limits::MAX_WORLD_SIZE {
            return Err(error::limit(format!(
                "init_process_group world_size={} is over scen's limit of {} ranks",
                rv.world_size,
                crate::scenario::limits::MAX_WORLD_SIZE
            )));
        }
        if let Some(path) = &rv.file {
            return Err(error::runtime(format!(
                "file://{path}: scen does not model FileStore rendezvous yet; use env:// or tcp://"
            )));
        }
        let deadline = self.now() + timeout_ms;
        // Under torchrun the agent hosts the store (TORCHELASTIC_USE_AGENT_STORE): every rank
        // is a client and nobody waits for workers.
        let agent_store = self.env.scenario.world.launcher == Launcher::Torchrun;
        if rv.rank == 0 && !agent_store {
            self.start_store_server(rv.port).await?;
        }
        let store = Rc::new(
            self.connect_store(&rv.host, rv.port, timeout_ms, deadline)
                .await?,
        );
        self.wait_for_workers(&store, &rv, timeout_ms).await?;
        config.check_known()?;
        if rv.rank >= rv.world_size {
            // The backend is built for ranks 0..world_size: a rank outside has no place in it
            // (gloo's context enforces rank < size; the model would have no group rank).
            return Err(error::value(format!(
                "Rank {} is out of range. Valid ranks are 0 to {} (world_size={})",
                rv.rank,
                rv.world_size.saturating_sub(1),
                rv.world_size
            )));
        }
        self.world = Some(WorldPg {
            store,
            rank: rv.rank,
            world_size: rv.world_size,
            config: config.clone(),
            bound: device.clone(),
            timeout_ms,
        });
        self.group_count = 1;
        let ranks: Vec<usize> = (0..rv.world_size).collect();
        let pg = self.make_pg(
            "0".into(),
            "WORLD".into(),
            ranks,
            config,
            timeout_ms,
            vec!["default_pg".into(), "0/".into()],
        );
        self.pgs.insert("0".into(), pg);
        self.construct_backends("0").await?;
        self.post_construct("0", &device).await?;
        if self
            .spec
            .env
            .get("TORCH_DIST_INIT_BARRIER")
            .map(|s| s.as_str())
            == Some("1")
        {
            self.store_barrier("0", rv.world_size, timeout_ms).await?;
        }
        Ok(format!(
            "default group \"0\" rank {}/{} backends {} store {}:{} timeout {}ms{}",
            rv.rank,
            rv.world_size,
            self.pgs["0"].config.describe(),
            rv.host,
            rv.port,
            timeout_ms,
            device.map(|d| format!(" bound to {d}")).unwrap_or_default()
        ))
    }

    async fn start_store_server(&mut self, port: u16) -> Res<()> {
        let listener = self.env.net.bind(port).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                error::eaddrinuse(port)
            } else {
                error::runtime(format!(
                    "TCPStore server failed to listen on port {port}: {e}"
                ))
            }
        })?;
        let (net, clock) = (self.env.net.clone(), self.env.clock.clone());
        self.tasks
            .push(tokio::task::spawn_local(store::serve(net, clock, listener)));
        self.event(
            EventKind::Info,
            format!("TCPStore server listening on port {port}"),
        );
        Ok(())
    }

    /// R16: connect with exponential backoff until the deadline.
    async fn connect_store(
        &self,
        host: &str,
        port: u16,
        timeout_ms: u64,
        deadline: u64,
    ) -> Res<StoreClient<N>> {
        let mut delay_ms = 100u64;
        let mut tries = 0u64;
        loop {
            self.wait(Some(Wait {
                step: self.step,
                what: format!(
                    "{} {host}:{port}",
                    crate::diagnose::hang::STORE_CONNECT_WAIT
                ),
                group: None,
                seq: None,
                peers: vec![],
                since_ms: self.now(),
                deadline_ms: Some(deadline),
                timeout_error: Some(
                    error::client_connect_timeout(timeout_ms, host, port).to_string(),
                ),
            }));
            match self.env.net.connect(host, port).await {
                Ok(s) => {
                    self.wait(None);
                    if tries > 0 {
                        self.event(
                            EventKind::Info,
                            format!("connected to TCPStore {host}:{port} after {tries} retries"),
                        );
                    }
                    return StoreClient::open(&self.env.net, s, format!("{host}:{port}"))
                        .await
                        .map_err(|e| self.store_err(e));
                }
                Err(e) => {
                    if tries == 0 {
                        self.event(
                            EventKind::Warn,
                            format!(
                                "TCP client failed to connect/validate to host {host}:{port} - retrying (try=0, timeout={timeout_ms}ms, delay={delay_ms}ms): {e}"
                            ),
                        );
                    }
                    tries += 1;
                    if self.now() + delay_ms >= deadline {
                        self.env.clock.sleep_until_ms(deadline).await;
                        self.wait(None);
                        return Err(error::client_connect_timeout(timeout_ms, host, port));
                    }
                    self.env.clock.sleep_until_ms(self.now() + delay_ms).await;
                    delay_ms = (delay_ms * 2).min(5_000);
                }
            }
        }
    }

    /// R16 waitForWorkers: everyone counts in; the server's rank waits for all.
    async fn wait_for_workers(
        &self,
        store: &StoreClient<N>,
        rv: &rendezvous::Rendezvous,
        timeout_ms: u64,
    ) -> Res<()> {
        let n = store.add("init/", 1).await.map_err(|e| self.store_err(e))?;
        self.event(
            EventKind::Info,
            format!("checked in to TCPStore {} (init/ = {n})", store.addr),
        );
        if rv.rank != 0 || self.env.scenario.world.launcher == Launcher::Torchrun {
            return Ok(());
        }
        let after_ms = error::workers_timeout_after_ms(timeout_ms);
        self.wait(Some(Wait {
            step: self.step,
            what: format!(
                "{} {} clients",
                crate::diagnose::hang::STORE_WORKERS_WAIT,
                rv.world_size
            ),
            group: None,
            seq: None,
            peers: (1..rv.world_size).collect(),
            since_ms: self.now(),
            deadline_ms: Some(self.now() + after_ms),
            timeout_error: Some(error::workers_timeout(after_ms, n, rv.world_size).to_string()),
        }));
        let r = store.wait_ge("init/", rv.world_size as i64, after_ms).await;
        self.wait(None);
        match r {
            Ok(_) => Ok(()),
            Err(StoreError::Timeout { value, .. }) => {
                Err(error::workers_timeout(after_ms, value, rv.world_size))
            }
            Err(e) => Err(self.store_err(e)),
        }
    }

    fn store_err(&self, e: StoreError) -> C10dError {
        match e {
            StoreError::Timeout {
                key, timeout_ms, ..
            } => error::store_wait_timeout(timeout_ms, &key),
            StoreError::Wire(w) => C10dError {
                kind: "DistNetworkError",
                message: format!("TCPStore connection failed: {w}"),
            },
        }
    }

    fn world(&self) -> Res<&WorldPg<N>> {
        self.world.as_ref().ok_or_else(error::not_initialized)
    }

    fn make_pg(
        &self,
        name: String,
        label: String,
        ranks: Vec<usize>,
        config: BackendConfig,
        timeout_ms: u64,
        prefixes: Vec<String>,
    ) -> Pg {
        Pg {
            name,
            label,
            ranks,
            config,
            timeout_ms,
            prefixes,
            seq: 0,
            p2p_seq: BTreeMap::new(),
            store_counter: BTreeMap::new(),
            comms: BTreeMap::new(),
        }
    }

    /// Store get with a wait record naming the ranks that should have set the key.
    async fn store_get(
        &self,
        key: &str,
        timeout_ms: Option<u64>,
        peers: Vec<usize>,
        what: String,
        group: Option<String>,
        timeout_error: Option<C10dError>,
    ) -> Result<Vec<u8>, StoreError> {
        let store = self.world.as_ref().expect("world").store.clone();
        let t = timeout_ms.unwrap_or(store::NO_TIMEOUT);
        self.wait(Some(Wait {
            step: self.step,
            what,
            group,
            seq: None,
            peers,
            since_ms: self.now(),
            deadline_ms: timeout_ms.map(|t| self.now() + t),
            timeout_error: timeout_error.map(|e| e.to_string()),
        }));
        let r = store.get(key, t).await;
        self.wait(None);
        r
    }

    /// R24 gloo: connectFullMesh over the group's prefix store, blocking among members.
    async fn construct_backends(&mut self, name: &str) -> Res<()> {
        let pg = &self.pgs[name];
        if !pg.config.backends().contains(&"gloo") {
            return Ok(());
        }
        let me = self.world()?.rank;
        let grank = pg.group_rank(me).expect("member");
        let dev = pg
            .config
            .map
            .iter()
            .find(|(_, b)| b.as_str() == "gloo")
            .map(|(d, _)| d.clone())
            .expect("gloo");
        let mut prefixes = pg.prefixes.clone();
        prefixes.push(format!("{dev}/"));
        let (ranks, timeout_ms, label) = (
            pg.ranks.clone(),
            pg.timeout_ms,
            format!("{} ({})", pg.label, pg.name),
        );
        let store = self.world()?.store.clone();
        store
            .set(
                &join_key(&prefixes, &grank.to_string()),
                self.fabric.address().as_bytes(),
            )
            .await
            .map_err(|e| self.store_err(e))?;
        let mut missing = Vec::new();
        for (gr, r) in ranks.iter().enumerate() {
            if *r != me
                && !store
                    .check(&join_key(&prefixes, &gr.to_string()))
                    .await
                    .map_err(|e| self.store_err(e))?
            {
                missing.push(*r);
            }
        }
        for (gr, r) in ranks.iter().enumerate() {
            if *r == me {
                continue;
            }
            let key = join_key(&prefixes, &gr.to_string());
            // R24: a store timeout here reaches Python as the store's own DistStoreError, not
            // wrapped in "Gloo connectFullMesh failed with" (real PyTorch 2.15, torch mode).
            let timeout = error::store_wait_timeout(timeout_ms, &key);
            let v = self
                .store_get(
                    &key,
                    Some(timeout_ms),
                    missing.clone(),
                    format!("gloo connectFullMesh of group {label}: store get '{key}'"),
                    Some(label.clone()),
                    Some(timeout.clone()),
                )
                .await
                .map_err(|e| match e {
                    StoreError::Timeout { .. } => timeout.clone(),
                    other => self.store_err(other),
                })?;
            missing.retain(|m| m != r);
            self.fabric.learn(*r, &String::from_utf8_lossy(&v));
        }
        self.event(
            EventKind::Info,
            format!(
                "gloo full mesh connected for group {label} ({} ranks)",
                ranks.len()
            ),
        );
        Ok(())
    }

    /// R11/R22.4: `if device_id and pg._get_backend(device_id).supports_splitting: eager connect`.
    async fn post_construct(&mut self, name: &str, device: &Option<Device>) -> Res<()> {
        let Some(d) = device else { return Ok(()) };
        let b = self.pgs[name].config.backend_for(&d.ty)?.to_string();
        if backend::supports_splitting(&b) && b == "nccl" {
            self.ensure_comm(name, &d.ty, &b, None).await?;
            self.event(
                EventKind::Info,
                format!("eager NCCL communicator init for group {name} on {d}"),
            );
        }
        Ok(())
    }

    /// R17.
    async fn store_barrier(&self, name: &str, world_size: usize, timeout_ms: u64) -> Res<()> {
        let w = self.world()?;
        let store = w.store.clone();
        let rank = w.rank;
        let key = format!("store_based_barrier_key:{name}");
        let full = join_key(&["default_pg".to_string()], &key);
        let n = store.add(&full, 1).await.map_err(|e| self.store_err(e))?;
        let last = format!("{full}:last_worker");
        if n as usize >= world_size {
            store
                .set(&last, b"1")
                .await
                .map_err(|e| self.store_err(e))?;
        }
        let inner = error::store_wait_timeout(timeout_ms, &last).to_string();
        let r = self
            .store_get(
                &last,
                Some(timeout_ms),
                vec![],
                format!("store based barrier for group {name} ({n}/{world_size} joined when this rank arrived)"),
                Some(name.to_string()),
                Some(error::store_barrier_timeout(rank, name, world_size, n, timeout_ms, &inner)),
            )
            .await;
        match r {
            Ok(_) => Ok(()),
            Err(StoreError::Timeout { .. }) => {
                let joined = store.add(&full, 0).await.unwrap_or(n);
                Err(error::store_barrier_timeout(
                    rank, name, world_size, joined, timeout_ms, &inner,
                ))
            }
            Err(e) => Err(self.store_err(e)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn new_group(
        &mut self,
        ranks: &Option<Vec<usize>>,
        backend_arg: &Option<String>,
        local_sync: bool,
        device_id: &Option<String>,
        timeout_ms: Option<u64>,
        handle: &Option<String>,
    ) -> Res<String> {
        let (me, ws, default_config, bound, default_timeout) = {
            let w = self.world()?;
            (
                w.rank,
                w.world_size,
                w.config.clone(),
                w.bound.clone(),
                w.timeout_ms,
            )
        };
        let _ = default_timeout;
        let mut ranks: Vec<usize> = ranks.clone().unwrap_or_else(|| (0..ws).collect());
        ranks.sort();
        if ranks.windows(2).any(|w| w[0] == w[1]) {
            return Err(error::value(format!(
                "ranks list must not contain duplicate entries, got {ranks:?}"
            )));
        }
        if ranks.len() > ws {
            return Err(error::value("the new group's world size should be less or equal to the world size set by init_process_group"));
        }
        if let Some(bad) = ranks.iter().find(|r| **r >= ws) {
            return Err(error::value(format!(
                "Rank {bad} is out of range. Valid ranks are 0 to {} (world_size={ws})",
                ws - 1
            )));
        }
        let backend_s = backend_arg
            .as_ref()
            .map(|b| self.expand(b))
            .unwrap_or(default_config.original.clone());
        let config = BackendConfig::parse(&backend_s, Some(self.accel()))?;
        let device = match device_id {
            None => bound.clone(),
            Some(d) => {
                let d = self.device(d)?;
                if bound.as_ref().is_some_and(|b| *b != d) {
                    return Err(error::mismatched_bound_device());
                }
                Some(d)
            }
        };
        let timeout_ms = timeout_ms.unwrap_or_else(|| {
            let scale = self.env.scenario.time_scale;
            scale.apply(backend::default_timeout_ms(&config))
        });
        let member = ranks.contains(&me);
        let label = handle.clone().unwrap_or_else(|| "unnamed".into());
        if local_sync && !member {
            self.set_handle(handle, Handle::NonMember);
            return Ok(format!(
                "not a member of {ranks:?} (local synchronization: no name taken)"
            ));
        }
        let name = if local_sync {
            naming::hashed_name(&ranks, self.group_count)
        } else {
            self.env.probe.group(&GroupRecord {
                rank: me,
                generation: self.group_generation,
                index: self.group_count,
                ranks: ranks.clone(),
                backend: config.original.clone(),
                label: label.clone(),
                step: self.step,
                line: self.env.scenario.steps[self.step].loc.line,
            });
            naming::counter_name(self.group_count)
        };
        self.group_count += 1;
        if !member {
            self.set_handle(handle, Handle::NonMember);
            if barrier_after_init(&self.spec) {
                self.store_barrier(&name, ws, timeout_ms).await?;
            }
            return Ok(format!(
                "group \"{name}\" {ranks:?}: not a member (NON_GROUP_MEMBER)"
            ));
        }
        config.check_built_in()?;
        config.check_known()?;
        let prefixes = vec![
            "default_pg".to_string(),
            "0/".to_string(),
            format!("{name}/"),
        ];
        let pg = self.make_pg(
            name.clone(),
            label,
            ranks.clone(),
            config,
            timeout_ms,
            prefixes,
        );
        let describe = pg.config.describe();
        self.pgs.insert(name.clone(), pg);
        self.set_handle(handle, Handle::Member(name.clone()));
        self.construct_backends(&name).await?;
        self.post_construct(&name, &device).await?;
        if barrier_after_init(&self.spec) {
            let n = if local_sync { ranks.len() } else { ws };
            self.store_barrier(&name, n, timeout_ms).await?;
        }
        Ok(format!("group \"{name}\" {ranks:?} backends {describe}"))
    }

    fn set_handle(&mut self, handle: &Option<String>, h: Handle) {
        if let Some(name) = handle {
            self.handles.insert(name.clone(), h);
        }
    }

    /// R13.
    fn destroy(&mut self, group: &Option<String>) -> Res<String> {
        match group {
            None => {
                self.world.take().ok_or_else(error::not_initialized)?;
                let n = self.pgs.len();
                self.pgs.clear();
                self.handles.clear();
                self.group_count = 0;
                self.group_generation += 1;
                Ok(format!("destroyed {n} groups; group counter reset to 0"))
            }
            Some(h) => match self.handles.get(h).cloned() {
                Some(Handle::NonMember) => Ok("NON_GROUP_MEMBER: nothing to destroy".into()),
                Some(Handle::Member(name)) => {
                    self.pgs.remove(&name);
                    self.handles.remove(h);
                    Ok(format!("destroyed group \"{name}\""))
                }
                None => Err(error::value("Invalid process group specified")),
            },
        }
    }

    /// Resolves a step's group: `Ok(None)` for a non-member (R27).
    fn resolve_group(&self, group: &Option<String>) -> Res<Option<String>> {
        self.world()?;
        match group {
            None => Ok(Some("0".into())),
            Some(h) => match self.handles.get(h) {
                Some(Handle::Member(name)) if self.pgs.contains_key(name) => Ok(Some(name.clone())),
                Some(Handle::Member(_)) => Err(error::value("Invalid process group specified")),
                Some(Handle::NonMember) => Ok(None),
                None => Err(error::runtime(format!(
                    "group `{h}` was never created on this rank (its new_group step did not run here)"
                ))),
            },
        }
    }

    /// R24/R38: the device communicator, created lazily through a store key.
    async fn ensure_comm(
        &mut self,
        name: &str,
        dev: &str,
        backend: &str,
        pair: Option<(usize, usize)>,
    ) -> Res<()> {
        let comm_key = match pair {
            Some((a, b)) => format!("{dev}:{a}:{b}"),
            None => dev.to_string(),
        };
        if self.pgs[name].comms.contains_key(&comm_key) {
            return Ok(());
        }
        let me = self.world()?.rank;
        let pg = self.pgs.get_mut(name).expect("pg");
        let counter = pg.store_counter.entry(dev.to_string()).or_insert(0);
        let local_key = counter.to_string();
        *counter += 1;
        let mut prefixes = pg.prefixes.clone();
        prefixes.push(format!("{dev}/"));
        let key = join_key(&prefixes, &local_key);
        let members: Vec<usize> = match pair {
            Some((a, b)) => vec![a.min(b), a.max(b)],
            None => pg.ranks.clone(),
        };
        let (timeout_ms, label) = (pg.timeout_ms, format!("{} ({})", pg.label, pg.name));
        let store = self.world()?.store.clone();
        let device = self.env.device.clone();
        let uid = if members[0] == me {
            let uid = match &device {
                Some(d) => d.unique_id()?,
                None => format!("{backend}-uid:{key}").into_bytes(),
            };
            store.set(&key, &uid).await.map_err(|e| self.store_err(e))?;
            uid
        } else {
            let inner = error::store_wait_timeout(timeout_ms, &key).to_string();
            let err = error::unique_id_timeout(backend, me, &local_key, &inner);
            self.store_get(
                &key,
                Some(timeout_ms),
                vec![members[0]],
                format!("{backend} communicator of group {label}: store get unique id '{key}' from rank {}", members[0]),
                Some(label.clone()),
                Some(err.clone()),
            )
            .await
            .map_err(|e| match e {
                StoreError::Timeout { .. } => err.clone(),
                other => self.store_err(other),
            })?
        };
        if let Some(d) = device {
            let comm = self.comm_ref(name, &members, me, pair);
            self.init_device_comm(&*d, &comm, &uid, &members, &label)
                .await?;
            self.pgs
                .get_mut(name)
                .expect("pg")
                .comms
                .insert(comm_key, ());
            return Ok(());
        }
        // The library's own bootstrap: every member must join; oneCCL/NCCL init never times out.
        let pos = members.iter().position(|m| *m == me).expect("member");
        store
            .set(
                &format!("{key}/addr/{pos}"),
                self.fabric.address().as_bytes(),
            )
            .await
            .map_err(|e| self.store_err(e))?;
        // Every member must join this communicator, even one whose address gloo already knows.
        for (i, m) in members.iter().enumerate() {
            if *m == me {
                continue;
            }
            let k = format!("{key}/addr/{i}");
            let v = self
                .store_get(
                    &k,
                    None,
                    vec![*m],
                    format!("{backend} communicator init of group {label}: waiting for rank {m} to join"),
                    Some(label.clone()),
                    None,
                )
                .await
                .map_err(|e| self.store_err(e))?;
            self.fabric.learn(*m, &String::from_utf8_lossy(&v));
        }
        self.pgs
            .get_mut(name)
            .expect("pg")
            .comms
            .insert(comm_key, ());
        self.event(
            EventKind::Info,
            format!("{backend} communicator ready for group {label} (store key {key})"),
        );
        Ok(())
    }

    /// The tensor a step creates on this rank.
    fn make_tensor(&self, spec: &TensorSpec) -> (Tensor, String) {
        let n = spec.shape.iter().product::<usize>();
        let t = Tensor::from_fn(spec.dtype, spec.shape.clone(), |i| {
            spec.fill.eval(&|v| match v {
                "i" => i as f64,
                "n" => n as f64,
                other => self.var(other),
            })
        });
        let dev = spec
            .device
            .clone()
            .unwrap_or_else(|| self.accel().to_string());
        (t, dev)
    }

    /// The timeout rule of a backend for one call (R29, R31).
    fn op_timeout(
        &self,
        backend: &str,
        pg: &Pg,
        seq: u64,
        op: &str,
        numel: usize,
    ) -> Option<(u64, C10dError)> {
        let deadline = self.now() + pg.timeout_ms;
        match backend {
            "gloo" => Some((deadline, error::gloo_recv_timeout(pg.timeout_ms))),
            "nccl" => Some((
                deadline,
                error::nccl_watchdog(
                    self.world.as_ref().map(|w| w.rank).unwrap_or(0),
                    seq,
                    op,
                    numel,
                    pg.timeout_ms,
                ),
            )),
            _ if self
                .spec
                .env
                .get("TORCH_XCCL_BLOCKING_WAIT")
                .map(|s| s.as_str())
                == Some("1") =>
            {
                Some((deadline, error::xccl_work_timeout(pg.timeout_ms)))
            }
            _ => None,
        }
    }

    fn check_dtype(&self, backend: &str, dtype: DType, op: Option<ReduceOp>) -> Res<()> {
        let r = match backend {
            "gloo" => reduce::check_gloo(dtype, op),
            _ => reduce::check_xccl(dtype, op),
        };
        r.map_err(|e| C10dError {
            kind: e.kind,
            message: e.message,
        })
    }

    /// R37: XCCL serves XPU tensors only (reachable when a group maps another device type to
    /// xccl, e.g. `backend = "cpu:xccl,xpu:xccl"`).
    fn check_device(&self, backend: &str, dev: &str) -> Res<()> {
        if backend == "xccl" && dev != "xpu" {
            return Err(error::value("Tensors must be XPU and dense"));
        }
        Ok(())
    }

    async fn collective(&mut self, c: &CollStep) -> Res<String> {
        let op = c.op.name();
        let Some(name) = self.resolve_group(&c.group)? else {
            if let Some(w) = &c.work {
                self.works.insert(w.clone(), Work::None);
            }
            return self.non_member(op, &c.expect);
        };
        let dev = c
            .tensor
            .device
            .clone()
            .unwrap_or_else(|| self.accel().to_string());
        let backend = self.pgs[&name].config.backend_for(&dev)?.to_string();
        self.check_device(&backend, &dev)?;
        let reduce_op = c.op.reduces().then_some(c.reduce_op);
        let post_error = if backend == "gloo" {
            self.check_dtype(&backend, c.tensor.dtype, reduce_op).err()
        } else {
            self.check_dtype(&backend, c.tensor.dtype, reduce_op)?;
            None
        };
        let me = self.world()?.rank;
        let pg = &self.pgs[&name];
        let (members, me_g) = (pg.ranks.len(), pg.group_rank(me).expect("member"));
        let root = match c.root {
            Some(r) => Some(pg.group_rank(r).ok_or_else(|| {
                error::value(format!("Global rank {r} is not part of group {}", pg.label))
            })?),
            None => None,
        };
        let call = CallShape {
            members,
            me: me_g,
            root,
            splits: coll::eval_splits(c, members, &|v| self.var(v))?,
            post_error,
        };
        let (t, coll) = coll::build(c, &call, &|v| self.var(v))?;
        if detail::enabled(&self.spec.env, &backend) {
            if let Some(fp) = detail::FingerPrint::of(c, &t, &dev, self.pgs[&name].seq) {
                self.detail_checks(&name, fp).await?;
            }
        }
        if backend != "gloo" {
            self.ensure_comm(&name, &dev, &backend, None).await?;
        }
        if let Some(w) = &c.work {
            let probe = AsyncProbe {
                inner: self.env.probe.clone(),
                state: Default::default(),
            };
            let fut = self.call_future(&name, &backend, &coll, t, probe.clone())?;
            let handle = tokio::task::spawn_local(fut);
            self.works.insert(
                w.clone(),
                Work::Pending {
                    handle,
                    step: Box::new(c.clone()),
                    call,
                    probe,
                },
            );
            return Ok(format!("enqueued (async_op, work \"{w}\")"));
        }
        let mut t = t;
        let out = self.run_algo(&name, &backend, &coll, &mut t).await?;
        self.coll_result(c, &call, t, out)
    }

    /// R27: a call on a group this rank is not in warns and does nothing. Its `expect` does not
    /// apply here, which the report says (a note) rather than counting it as checked.
    fn non_member(&self, op: &str, expect: &Option<Expr>) -> Res<String> {
        let r = self.world()?.rank;
        self.event(
            EventKind::Warn,
            format!("Running {op} on global rank {r} which does not belong to the given group."),
        );
        if expect.is_some() {
            self.event(
                EventKind::Info,
                format!(
                    "{} on rank {r}: not a member of the group, the call is a no-op (R27)",
                    crate::verdict::EXPECT_NOT_APPLIED
                ),
            );
            return Ok("not a member: no-op; its expect does not apply".into());
        }
        Ok("not a member: no-op".into())
    }

    /// `work.wait()`: blocks until the async call finishes and checks its result.
    async fn wait_work(&mut self, work: &str) -> Res<String> {
        match self.works.remove(work) {
            None => Err(error::runtime(format!(
                "work `{work}` was never started on this rank (its async_op step did not run here)"
            ))),
            Some(Work::None) => Err(C10dError {
                kind: "AttributeError",
                message: "'NoneType' object has no attribute 'wait'".into(),
            }),
            Some(Work::Pending {
                handle,
                step,
                call,
                probe,
            }) => {
                probe.start_waiting(self.env.proc_rank, self.step);
                let r = handle.await;
                self.wait(None);
                let (t, out) =
                    r.map_err(|e| error::runtime(format!("work `{work}` was lost: {e}")))??;
                self.coll_result(&step, &call, t, out)
            }
        }
    }

    /// The call's output on this rank, checked against the step's `expect`.
    fn coll_result(
        &self,
        c: &CollStep,
        call: &CallShape,
        t: Tensor,
        out: Option<Tensor>,
    ) -> Res<String> {
        if let Some(e) = &call.post_error {
            return Err(e.clone());
        }
        let is_root = call.root == Some(call.me);
        if matches!(c.op, CollOp::Reduce | CollOp::Gather) && !is_root {
            let what = if c.op == CollOp::Reduce {
                "not dst: tensor unchanged"
            } else {
                "not dst: sent"
            };
            let vals = t.to_f64_vec();
            return Ok(format!("{} ({what})", summarize(&vals, t.digest())));
        }
        let out = out.unwrap_or(t);
        let vars = coll::out_vars(c, call, out.numel());
        self.check_values(&c.tensor, &c.expect, &out, &vars)
    }

    async fn run_algo(
        &mut self,
        name: &str,
        backend: &str,
        coll: &Coll,
        t: &mut Tensor,
    ) -> Res<Option<Tensor>> {
        let probe = self.env.probe.clone();
        let fut = self.call_future(name, backend, coll, t.clone(), probe)?;
        let (done, out) = fut.await?;
        *t = done;
        Ok(out)
    }

    /// One collective call as a future that owns what it needs, so an `async_op` call can run
    /// as its own task while the program goes on.
    fn call_future<Q: Probe>(
        &mut self,
        name: &str,
        backend: &str,
        coll: &Coll,
        mut t: Tensor,
        probe: Q,
    ) -> Res<impl std::future::Future<Output = CallResult> + 'static> {
        let me = self.world()?.rank;
        let pg = self.pgs.get_mut(name).expect("pg");
        pg.seq += 1;
        let seq = pg.seq;
        let pg = &self.pgs[name];
        let call = self.call_begin(calls::spec_of(coll, name, backend, seq, &t, &pg.ranks));
        let pg = &self.pgs[name];
        let info = CallInfo {
            proc_rank: self.env.proc_rank,
            step: self.step,
            group: format!("{} ({})", pg.label, pg.name),
            seq,
            op: coll.name().to_string(),
            timeout: self.op_timeout(backend, pg, seq, coll.torch_op(), t.numel()),
            peer_exit_is_error: backend == "gloo",
            device: backend != "gloo",
        };
        let fabric = self.fabric.clone();
        let clock = self.env.clock.clone();
        let members = pg.ranks.clone();
        let me_g = pg.group_rank(me).expect("member");
        let tag = format!("{}/{backend}/{seq}", pg.name);
        let coll = coll.clone();
        let device = self.env.device.clone().filter(|_| backend != "gloo");
        let comm = self.comm_ref(name, &members, me, None);
        let since_ms = self.now();
        let span =
            tracing::info_span!("call", group = %pg.name, label = %pg.label, seq, op = %info.op);
        span.in_scope(|| tracing::debug!(t_ms = since_ms, "call started"));
        let fut = async move {
            if let Some(d) = device {
                let r = device_ops::run_on_device(
                    &*d, &comm, &coll, &mut t, &info, &probe, &members, since_ms,
                )
                .await;
                calls::end_record(&probe, &clock, call, r.is_ok());
                return r.map(|out| (t, out));
            }
            let link = FabricLink {
                fabric: &fabric,
                clock: &clock,
                probe: &probe,
                members: &members,
                me: me_g,
                tag,
                info,
                error: Default::default(),
            };
            let r = match coll.run(&coll::OnLink(&link), &mut t).await {
                Err(crate::algo::CollectiveError::Mismatch(why))
                    if !link.info.peer_exit_is_error =>
                {
                    Err(link.wait_out_mismatch(&why).await)
                }
                r => r,
            };
            calls::end_record(&probe, &clock, call, r.is_ok());
            match r {
                Ok(out) => Ok((t, out)),
                Err(e) => Err(link
                    .error
                    .borrow()
                    .clone()
                    .unwrap_or_else(|| error::runtime(e.to_string()))),
            }
        };
        Ok(tracing::Instrument::instrument(fut, span))
    }

    fn check_values(
        &self,
        spec: &TensorSpec,
        expect: &Option<Expr>,
        out: &Tensor,
        vars: &OutVars,
    ) -> Res<String> {
        let vals = out.to_f64_vec();
        let summary = summarize(&vals, out.digest());
        let Some(expect) = expect else {
            return Ok(summary);
        };
        for (i, got) in vals.iter().enumerate() {
            let want = expect.eval(&|v| vars.get(i, v).unwrap_or_else(|| self.var(v)));
            let want_cast = Tensor::from_fn(spec.dtype, vec![1], |_| want).get_f64(0);
            let tol = f64::from(spec.expect_ulps) * spec.dtype.ulp(want_cast);
            let same = *got == want_cast || (got.is_nan() && want_cast.is_nan());
            let within = (got - want_cast).abs() <= tol;
            if !same && !within {
                self.event(
                    EventKind::Error,
                    format!(
                        "value mismatch at element {i}: got {}, expected {} ({})",
                        format_number(*got),
                        format_number(want_cast),
                        expect
                    ),
                );
                return Err(C10dError {
                    kind: "ValueMismatch",
                    message: format!(
                        "element {i}: got {}, expected {}",
                        format_number(*got),
                        format_number(want_cast)
                    ),
                });
            }
        }
        Ok(format!("{summary} (values as expected)"))
    }

    async fn barrier(&mut self, group: &Option<String>) -> Res<String> {
        let Some(name) = self.resolve_group(group)? else {
            let r = self.world()?.rank;
            self.event(
                EventKind::Warn,
                format!(
                    "Running barrier on global rank {r} which does not belong to the given group."
                ),
            );
            return Ok("not a member: no-op".into());
        };
        // R6: device_ids, bound device, CPU for CPU-only groups, else the accelerator.
        let pg = &self.pgs[&name];
        let bound = self.world()?.bound.clone();
        let dev = if let Some(b) = bound {
            b.ty
        } else if pg.config.map.keys().all(|d| d == "cpu") || self.accel() == "cpu" {
            "cpu".to_string()
        } else if pg.config.map.contains_key(self.accel()) {
            self.accel().to_string()
        } else {
            "cpu".to_string()
        };
        let backend = pg.config.backend_for(&dev)?.to_string();
        if backend != "gloo" {
            self.ensure_comm(&name, &dev, &backend, None).await?;
        }
        let mut t = Tensor::from_fn(DType::F32, vec![1], |_| 0.0);
        self.run_algo(&name, &backend, &Coll::barrier(), &mut t)
            .await?;
        Ok(format!("passed ({dev}:{backend})"))
    }

    async fn p2p(
        &mut self,
        group: &Option<String>,
        spec: &TensorSpec,
        peer: usize,
        send: bool,
        expect: &Option<Expr>,
    ) -> Res<String> {
        let (t, dev) = self.make_tensor(spec);
        let op = if send { "send" } else { "recv" };
        let Some(name) = self.resolve_group(group)? else {
            return self.non_member(op, expect);
        };
        let me = self.world()?.rank;
        let backend = self.pgs[&name].config.backend_for(&dev)?.to_string();
        self.check_device(&backend, &dev)?;
        self.check_dtype(&backend, t.dtype, None)?;
        if self.pgs[&name].group_rank(peer).is_none() {
            return Err(error::value(format!(
                "Global rank {peer} is not part of group {}",
                self.pgs[&name].label
            )));
        }
        if peer == me {
            return Err(error::value("Invalid destination rank: destination rank should not be the same as the rank of the current process."));
        }
        let (src, dst) = if send { (me, peer) } else { (peer, me) };
        if backend != "gloo" {
            self.ensure_comm(&name, &dev, &backend, Some((src, dst)))
                .await?;
        }
        match self.p2p_transfer(&name, &backend, &t, peer, send).await? {
            None => Ok(format!("sent {} elements to rank {peer}", t.numel())),
            Some(out) => self.check_values(spec, expect, &out, &OutVars::flat(out.numel())),
        }
    }

    /// One send or receive of `t` with `peer` on group `name` (its communicator ready); returns
    /// the received tensor.
    async fn p2p_transfer(
        &mut self,
        name: &str,
        backend: &str,
        t: &Tensor,
        peer: usize,
        send: bool,
    ) -> Res<Option<Tensor>> {
        let me = self.world()?.rank;
        let (src, dst) = if send { (me, peer) } else { (peer, me) };
        let pg = self.pgs.get_mut(name).expect("pg");
        let n = pg.p2p_seq.entry((src, dst)).or_insert(0);
        *n += 1;
        let seq = *n;
        let pg = &self.pgs[name];
        let tag = format!("{}/{backend}/p2p/{src}->{dst}/{seq}", pg.name);
        let timeout = self.op_timeout(
            backend,
            pg,
            seq,
            if send { "SEND" } else { "RECV" },
            t.numel(),
        );
        let group_label = format!("{} ({})", pg.label, pg.name);
        let (kind, op) = if send {
            (CallKind::Send, "send")
        } else {
            (CallKind::Recv, "recv")
        };
        let call = self.call_begin(CallSpec {
            group: name,
            backend,
            kind,
            op,
            seq,
            tensor: t,
            root: None,
            reduce_op: None,
            peer: Some(peer),
            splits: None,
        });
        if backend != "gloo" {
            if let Some(d) = self.env.device.clone() {
                let r = self
                    .p2p_device(&*d, name, t, peer, send, seq, group_label, timeout)
                    .await;
                self.call_end(call, r.is_ok());
                return r;
            }
        }
        if send {
            let me = self.env.proc_rank;
            let device = backend != "gloo";
            self.env.clock.charge(me, peer, device, t.data.len()).await;
            let r = self.fabric.send(peer, &tag, &t.data).await;
            self.call_end(call, r.is_ok());
            r.map_err(|e| error::runtime(e.to_string()))?;
            return Ok(None);
        }
        self.wait(Some(Wait {
            step: self.step,
            what: format!("recv #{seq} from rank {peer} on group {group_label}"),
            group: Some(group_label),
            seq: Some(seq),
            peers: vec![peer],
            since_ms: self.now(),
            deadline_ms: timeout.as_ref().map(|(d, _)| *d),
            timeout_error: timeout.as_ref().map(|(_, e)| e.to_string()),
        }));
        let r = self
            .fabric
            .recv(
                &self.env.clock,
                peer,
                &tag,
                timeout.as_ref().map(|(d, _)| *d),
            )
            .await;
        let r = self
            .p2p_size_rule(r, backend, peer, seq, t.data.len(), &timeout)
            .await;
        self.wait(None);
        let size_ok = r.as_ref().is_ok_and(|d| d.len() == t.data.len());
        self.call_end(call, size_ok);
        let data = r.map_err(|e| match e {
            super::fabric::FabricError::Timeout => timeout
                .clone()
                .map(|(_, e)| e)
                .unwrap_or_else(|| error::runtime("timed out")),
            super::fabric::FabricError::PeerClosed(p) => error::peer_closed(p),
            other => error::runtime(other.to_string()),
        })?;
        if data.len() != t.data.len() {
            return Err(error::runtime(format!(
                "recv from rank {peer}: got {} bytes, the receive buffer has {} (sizes differ between the send and the recv)",
                data.len(),
                t.data.len()
            )));
        }
        Ok(Some(Tensor {
            dtype: t.dtype,
            shape: t.shape.clone(),
            data,
        }))
    }

    /// `batch_isend_irecv`: the group's communicator (every member must join the first batch),
    /// all sends posted, then every receive completed and checked.
    async fn batch_p2p(
        &mut self,
        group: &Option<String>,
        spec: &TensorSpec,
        ops: &[P2pOp],
        expect: &Option<Expr>,
    ) -> Res<String> {
        let Some(name) = self.resolve_group(group)? else {
            return self.non_member("batch_isend_irecv", expect);
        };
        let (t, dev) = self.make_tensor(spec);
        let backend = self.pgs[&name].config.backend_for(&dev)?.to_string();
        self.check_device(&backend, &dev)?;
        self.check_dtype(&backend, t.dtype, None)?;
        let peers: Vec<usize> = ops
            .iter()
            .map(|o| match &o.peer {
                IntArg::Int(i) => (*i).max(0) as usize,
                IntArg::Expr(e) => e.eval(&|v| self.var(v)).max(0.0) as usize,
            })
            .collect();
        for p in &peers {
            if self.pgs[&name].group_rank(*p).is_none() {
                return Err(error::value(format!(
                    "Global rank {p} is not part of group {}",
                    self.pgs[&name].label
                )));
            }
        }
        if backend != "gloo" {
            self.ensure_comm(&name, &dev, &backend, None).await?;
        }
        for (o, p) in ops.iter().zip(&peers) {
            if o.send {
                self.p2p_transfer(&name, &backend, &t, *p, true).await?;
            }
        }
        let mut notes = Vec::new();
        for (k, (o, p)) in ops.iter().zip(&peers).enumerate() {
            if o.send {
                continue;
            }
            let out = self
                .p2p_transfer(&name, &backend, &t, *p, false)
                .await?
                .expect("a receive returns data");
            let vars = OutVars::flat(out.numel())
                .with("peer", *p as f64)
                .with("k", k as f64);
            notes.push(format!(
                "from {p}: {}",
                self.check_values(spec, expect, &out, &vars)?
            ));
        }
        let sends = ops.iter().filter(|o| o.send).count();
        Ok(format!("{sends} sent; {}", notes.join("; ")))
    }
}

/// oneCCL/NCCL do not notice a peer's exit (oneccl.md §4): the call just never completes, until
/// a timeout rule (blocking wait, watchdog) applies.
pub(crate) async fn wait_out_peer_exit<C: Clock>(
    clock: &C,
    deadline: Option<u64>,
) -> Result<Vec<u8>, super::fabric::FabricError> {
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
fn summarize(vals: &[f64], digest: u64) -> String {
    let shown: Vec<String> = vals.iter().take(8).map(|v| format_number(*v)).collect();
    let more = if vals.len() > 8 {
        format!(", ... ({} values)", vals.len())
    } else {
        String::new()
    };
    format!("[{}{more}] digest {digest:016x}", shown.join(", "))
}

/// The step as its start event prints it.
fn describe(step: &Step) -> String {
    let g = |g: &Option<String>| g.clone().unwrap_or_else(|| "WORLD".into());
    let t = |t: &TensorSpec| {
        format!(
            "{}{:?} on {}",
            t.dtype.name(),
            t.shape,
            t.device.clone().unwrap_or_else(|| "accelerator".into())
        )
    };
    let detail = match &step.kind {
        StepKind::InitProcessGroup {
            backend,
            init_method,
            device_id,
            ..
        } => format!(
            "backend={} init_method={}{}",
            backend.clone().unwrap_or_else(|| "None".into()),
            init_method.clone().unwrap_or_else(|| "env://".into()),
            device_id
                .as_ref()
                .map(|d| format!(" device_id={d}"))
                .unwrap_or_default()
        ),
        StepKind::NewGroup {
            ranks,
            backend,
            handle,
            device_id,
            use_local_synchronization,
            ..
        } => format!(
            "{}ranks={} backend={}{}{}",
            handle
                .as_ref()
                .map(|h| format!("{h}: "))
                .unwrap_or_default(),
            ranks
                .as_ref()
                .map(|r| format!("{r:?}"))
                .unwrap_or_else(|| "all".into()),
            backend.clone().unwrap_or_else(|| "default".into()),
            device_id
                .as_ref()
                .map(|d| format!(" device_id={d}"))
                .unwrap_or_default(),
            if *use_local_synchronization {
                " use_local_synchronization"
            } else {
                ""
            }
        ),
        StepKind::DestroyProcessGroup { group } => g(group),
        StepKind::SetDevice { device } => device.clone(),
        StepKind::Barrier { group } => format!("group={}", g(group)),
        StepKind::Collective(c) => describe_coll(c, &g(&c.group), &t(&c.tensor)),
        StepKind::Wait { work } => format!("work={work}"),
        StepKind::BatchP2p {
            group, tensor, ops, ..
        } => format!(
            "group={} {} ops=[{}]",
            g(group),
            t(tensor),
            ops.iter()
                .map(|o| format!(
                    "{} {}",
                    if o.send { "isend" } else { "irecv" },
                    match &o.peer {
                        IntArg::Int(i) => i.to_string(),
                        IntArg::Expr(e) => e.to_string(),
                    }
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        StepKind::Send { group, tensor, dst } => {
            format!("group={} {} dst={dst}", g(group), t(tensor))
        }
        StepKind::Recv {
            group, tensor, src, ..
        } => format!("group={} {} src={src}", g(group), t(tensor)),
        StepKind::Log { .. } => String::new(),
        StepKind::Sleep { ms } => format!("{ms}ms"),
        StepKind::InitDistributedEnvironment { version, .. } => format!("version={version:?}"),
        StepKind::InitializeModelParallel {
            degrees: d,
            usp_fallback,
            ..
        } => format!(
            "tp={} ulysses={} ring={} sp={} cfg={} dp={} pp={}{}",
            d.tp,
            d.ulysses,
            d.ring,
            d.sp,
            d.cfg,
            d.dp,
            d.pp,
            if *usp_fallback {
                " (parallel_groups import fails)"
            } else {
                ""
            }
        ),
        StepKind::SpAllToAll {
            op, group, shape, ..
        } => format!("group={} {shape:?} {op:?}", g(group)),
        StepKind::BroadcastPyobj { payload_bytes } => format!("{payload_bytes} bytes"),
        StepKind::DenoiseStep { model: m, .. } => format!(
            "seq={} heads={}x{} layers={}",
            m.seq, m.heads, m.head_dim, m.layers
        ),
    };
    format!("{} {detail}", step.kind.op_name())
        .trim_end()
        .to_string()
}

/// A collective step's start line: group, tensor, then only the arguments the op takes.
fn describe_coll(c: &CollStep, group: &str, tensor: &str) -> String {
    let mut s = format!("group={group} {tensor}");
    if c.op.reduces() {
        s += &format!(" op={}", c.reduce_op.name());
    }
    if let (Some(f), Some(r)) = (c.op.root_field(), c.root) {
        s += &format!(" {f}={r}");
    }
    if c.op.coalesced() {
        s += &format!(" count={}", c.count);
    }
    if let Some((i, o)) = &c.splits {
        let show = |x: &Splits| match x {
            Splits::List(v) => format!("{v:?}"),
            Splits::Expr(e) => format!("\"{e}\""),
        };
        s += &format!(
            " input_split_sizes={} output_split_sizes={}",
            show(i),
            show(o)
        );
    }
    if let Some(w) = &c.work {
        s += &format!(" async_op work={w}");
    }
    s
}
