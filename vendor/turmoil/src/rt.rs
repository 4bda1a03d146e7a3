use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use rand::rngs::SmallRng;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio::task::LocalSet;
use tokio::time::{sleep, Duration, Instant};

use super::Result;
use crate::loopback::EVENT_INTERVAL;

// To support re-creation, we need to store a factory of the future that
// represents the software. This is somewhat annoying in that it requires
// boxxing to avoid generics.
type Software<'a> = Box<dyn Fn() -> Pin<Box<dyn Future<Output = Result>>> + 'a>;

/// Runtime kinds.
pub enum Kind<'a> {
    /// A runtime for executing test code.
    Client,

    /// A runtime that is running simulated host software.
    Host { software: Software<'a> },

    /// A runtime without any software. The network topology uses this for
    /// time tracking and message delivery.
    NoSoftware,
}

/// Runtime configuration.
#[derive(Clone, Default)]
pub struct Config {
    /// Whether io is enabled on the runtime.
    pub enable_io: bool,

    /// Rng used to seed the tokio runtime.
    ///
    /// Only used if the `tokio_unstable` cfg flag is set.
    #[cfg_attr(not(tokio_unstable), expect(dead_code))]
    pub rng: Option<SmallRng>,

    /// scen patch: the host's ticks deliver its loopback queue (`crate::loopback`).
    pub loopback_queue: bool,
}

/// Per host simulated runtime.
///
/// The tokio runtime is paused (see [`Builder::start_paused`]), which gives us
/// control over when and how to advance time. In particular, see [`Rt::tick`],
/// which lets the runtime do a bit more work.
pub struct Rt<'a> {
    pub kind: Kind<'a>,

    /// Handle to the Tokio runtime driving this simulated host. Each runtime
    /// may have a different sense of "now" which simulates clock skew.
    tokio: Runtime,

    /// Local task set used for running !Send tasks.
    local: LocalSet,

    /// A user readable name to identify the node.
    pub nodename: Arc<str>,

    /// Optional handle to a host's software. When software finishes, the handle is
    /// consumed to check for error, which is propagated up to fail the simulation.
    handle: Option<JoinHandle<Result>>,

    /// Runtime configuration.
    config: Config,

    /// scen patch: the waker the host's tick polls its `LocalSet` with (kept across ticks).
    wake_flag: Option<Arc<WakeFlag>>,

    /// scen patch (idle hosts): the ticks skipped since the last one run ([`Rt::skip`]); the
    /// runtime's clock is moved over them before it next runs.
    lag: Duration,
}

impl<'a> Rt<'a> {
    pub(crate) fn client<F>(nodename: Arc<str>, client: F, mut config: Config) -> Self
    where
        F: Future<Output = Result> + 'static,
    {
        let (tokio, local) = init(&mut config);

        let handle = with(&tokio, &local, || tokio::task::spawn_local(client));

        Self {
            kind: Kind::Client,
            tokio,
            local,
            nodename,
            handle: Some(handle),
            config,
            wake_flag: None,
            lag: Duration::ZERO,
        }
    }

    pub(crate) fn host<F, Fut>(nodename: Arc<str>, software: F, mut config: Config) -> Self
    where
        F: Fn() -> Fut + 'a,
        Fut: Future<Output = Result> + 'static,
    {
        let (tokio, local) = init(&mut config);

        let software: Software = Box::new(move || Box::pin(software()));
        let handle = with(&tokio, &local, || tokio::task::spawn_local(software()));

        Self {
            kind: Kind::Host { software },
            tokio,
            local,
            nodename,
            handle: Some(handle),
            config,
            wake_flag: None,
            lag: Duration::ZERO,
        }
    }

    pub(crate) fn no_software() -> Self {
        let mut config = Config::default();
        let (tokio, local) = init(&mut config);

        Self {
            kind: Kind::NoSoftware,
            tokio,
            local,
            nodename: String::new().into(),
            handle: None,
            config,
            wake_flag: None,
            lag: Duration::ZERO,
        }
    }

    pub(crate) fn is_client(&self) -> bool {
        matches!(self.kind, Kind::Client)
    }

    fn is_host(&self) -> bool {
        matches!(self.kind, Kind::Host { .. })
    }

    pub(crate) fn is_software_running(&self) -> bool {
        self.handle.is_some()
    }

    /// scen patch (idle hosts): whether a tick would run nothing. With the loopback queue,
    /// a host's tick ends only once its `LocalSet` has run every task it had ready and the
    /// tick's sleep fired (time moves on only when nothing is ready), so afterwards the host
    /// has work again only when something wakes its `LocalSet` (which sets the wake flag), a
    /// loopback message or a network message is queued for it (the caller's to check), or a
    /// timer of its runtime is due: scen's hosts set none (their timers are the simulator's
    /// clock), and upstream's per-message timers are what the loopback queue replaces.
    pub(crate) fn is_idle(&self) -> bool {
        self.config.loopback_queue
            && self.is_host()
            && self
                .wake_flag
                .as_ref()
                .is_some_and(|f| !f.woken.load(Ordering::Relaxed))
    }

    /// scen patch (idle hosts): a tick not run: nothing would have happened in it but the
    /// clock, which [`Rt::catch_up`] moves later.
    pub(crate) fn skip(&mut self, duration: Duration) {
        self.lag += duration;
    }

    /// scen patch (idle hosts): moves the runtime's clock over the skipped ticks, so the host
    /// runs its next tick at the time it would have without skipping.
    pub(crate) fn catch_up(&mut self) {
        let lag = mem::take(&mut self.lag);
        if !lag.is_zero() {
            self.tokio.block_on(tokio::time::advance(lag));
        }
    }

    pub(crate) fn now(&self) -> Instant {
        let _guard = self.tokio.enter();
        Instant::now()
    }

    // This method is called by [`Sim::run`], which iterates through all the
    // runtimes and ticks each one. The magic of this method is described in the
    // documentation for [`LocalSet::run_until`], but it may not be entirely
    // obvious how things fit together.
    //
    // A [`LocalSet`] tracks the tasks to run, which may in turn spawn more
    // tasks. `run_until` drives a top level task to completion, but not its
    // children. If you look below, you may be confused. The task we run here
    // just sleeps and has no children! However, it's the _same `LocalSet`_ that
    // is used to run software on the host.
    //
    // In this way, every time `tick` is called, the following unfolds:
    //
    // 1. Time advances on the runtime
    // 2. We schedule a new task that simply sleeps
    // 3. Other tasks on the `LocalSet` get a chance to run
    // 4. The sleep finishes
    // 5. The runtime pauses
    //
    // Returns whether the software has finished successfully or the error
    // that caused failure. Subsequent calls do not return the error as it is
    // expected to fail the simulation.
    pub(crate) fn tick(&mut self, duration: Duration) -> Result<bool> {
        let run = self.local.run_until(async {
            sleep(duration).await;
        });
        if !self.config.loopback_queue || matches!(self.kind, Kind::NoSoftware) {
            self.tokio.block_on(run);
        } else {
            // scen patch: the host's loopback messages are delivered by the tick itself
            // (`crate::loopback`), where tokio would have run their delivery tasks.
            self.tokio.block_on(Tick {
                run: std::pin::pin!(run),
                slot: &mut self.wake_flag,
                waker: None,
            });
            crate::World::current(|world| world.current_host_mut().loopback.end_tick());
        }

        // pull for software completion
        match &self.handle {
            Some(handle) if handle.is_finished() => {
                // Consume handle to extract task result
                if let Some(h) = self.handle.take() {
                    match self.tokio.block_on(h) {
                        // If the host was crashed the JoinError is cancelled, which
                        // needs to be handled to not fail the simulation.
                        Err(je) if je.is_cancelled() => {}
                        res => res??,
                    }
                };
                Ok(true)
            }
            Some(_) => Ok(false),
            None => Ok(true),
        }
    }

    pub(crate) fn crash(&mut self) {
        if !self.is_host() {
            panic!("can only crash host's software");
        }

        if self.handle.take().is_some() {
            self.cancel_tasks();
        };
    }

    pub(crate) fn bounce(&mut self) {
        if !self.is_host() {
            panic!("can only bounce host's software");
        }

        self.cancel_tasks();

        if let Kind::Host { software } = &self.kind {
            let handle = with(&self.tokio, &self.local, || {
                tokio::task::spawn_local(software())
            });
            self.handle.replace(handle);
        };
    }

    /// Cancel all tasks within the [`Rt`] by dropping the current tokio
    /// [`Runtime`].
    ///
    /// Dropping the runtime blocks the calling thread until all futures have
    /// completed, which is desired here to ensure host software completes and
    /// all resources are dropped.
    ///
    /// Both the [`Runtime`] and [`LocalSet`] are replaced with new instances.
    fn cancel_tasks(&mut self) {
        let (tokio, local) = init(&mut self.config);

        _ = mem::replace(&mut self.tokio, tokio);
        drop(mem::replace(&mut self.local, local));
        // scen patch (idle hosts): a new runtime, polled at its next tick.
        self.wake_flag = None;
        self.lag = Duration::ZERO;
        // scen patch: the loopback messages were (upstream) tasks of the dropped runtime.
        crate::World::current_if_set(|world| {
            if let Some(host) = world.current.and_then(|addr| world.hosts.get_mut(&addr)) {
                host.loopback.clear();
            }
        });
    }
}

/// scen patch: a host's tick. It polls the host's `LocalSet` (`run`) exactly when tokio would
/// have polled it as the `block_on` future (at the start, and after each wake-up), and between
/// those polls gives the host's loopback messages their turns on the runtime's queue
/// (`crate::loopback`), at most [`EVENT_INTERVAL`] at a time as tokio runs spawned tasks.
struct Tick<'a, F> {
    run: Pin<&'a mut F>,
    slot: &'a mut Option<Arc<WakeFlag>>,
    /// The waker made from `slot` for this tick (set at the first poll).
    waker: Option<Waker>,
}

impl<F: Future> Future for Tick<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let waker = this.waker.get_or_insert_with(|| {
            // The first poll of a `block_on` future always happens: it counts as woken.
            let flag = match this.slot {
                Some(flag) if flag.inner.will_wake(cx.waker()) => flag.clone(),
                _ => this
                    .slot
                    .insert(Arc::new(WakeFlag::new(cx.waker())))
                    .clone(),
            };
            flag.woken.store(true, Ordering::Relaxed);
            Waker::from(flag)
        });
        let flag = this.slot.as_ref().expect("set with the waker");
        if flag.woken.swap(false, Ordering::Relaxed) {
            if let Poll::Ready(out) = this.run.as_mut().poll(&mut Context::from_waker(waker)) {
                return Poll::Ready(out);
            }
        }
        let ran = crate::World::current(|world| {
            crate::loopback::run(world.current_host_mut(), EVENT_INTERVAL)
        });
        if ran == EVENT_INTERVAL {
            // tokio yields to its driver after a full batch, then carries on.
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// scen patch: records whether the `LocalSet` (or the tick's sleep) woke the tick, and passes
/// the wake-up on to tokio's `block_on`.
struct WakeFlag {
    woken: AtomicBool,
    inner: Waker,
}

impl WakeFlag {
    fn new(inner: &Waker) -> Self {
        Self {
            woken: AtomicBool::new(true),
            inner: inner.clone(),
        }
    }
}

impl Wake for WakeFlag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Relaxed);
        self.inner.wake_by_ref();
    }
}

fn init(config: &mut Config) -> (Runtime, LocalSet) {
    let mut tokio_builder = tokio::runtime::Builder::new_current_thread();

    #[cfg(tokio_unstable)]
    tokio_builder.unhandled_panic(tokio::runtime::UnhandledPanic::ShutdownRuntime);

    if config.enable_io {
        tokio_builder.enable_io();
    }

    #[cfg(tokio_unstable)]
    if let Some(rng) = &mut config.rng {
        let bytes: [u8; 32] = rand::Rng::random(rng);
        let seed = tokio::runtime::RngSeed::from_bytes(&bytes);
        tokio_builder.rng_seed(seed);
    }

    let tokio = tokio_builder
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();

    tokio.block_on(async {
        // Sleep to "round" `Instant::now()` to the closest `ms`
        tokio::time::sleep(Duration::from_millis(1)).await;
    });

    (tokio, new_local())
}

fn new_local() -> LocalSet {
    #[cfg(not(tokio_unstable))]
    let local = LocalSet::new();

    #[cfg(tokio_unstable)]
    let mut local = LocalSet::new();

    #[cfg(tokio_unstable)]
    local.unhandled_panic(tokio::runtime::UnhandledPanic::ShutdownRuntime);

    local
}

fn with<R>(tokio: &Runtime, local: &LocalSet, f: impl FnOnce() -> R) -> R {
    tokio.block_on(async { local.run_until(async { f() }).await })
}
