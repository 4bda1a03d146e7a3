//! scen's deterministic simulator: one turmoil host per node, ranks as tasks on their node, the
//! TCPStore as a real TCP service on rank 0's node, a virtual clock that jumps over idle time,
//! and a hang analysis at the first moment no rank can make progress. Here: the world's build
//! and each node's software (services, ranks); the main loop and its phases are in drive.rs.
//!
//! Same scenario + seed => the same trace, byte for byte: one thread, turmoil seeded with the
//! seed and a fixed epoch, no wall clock, no hash-order iteration.

#![forbid(unsafe_code)]

pub mod clock;
mod drive;
pub mod faults;
pub mod internal;
pub mod net;
pub mod probe;
pub mod schedule;

use clock::VirtualClock;
use faults::{Action, FaultPlan};
use net::{Activity, SimNet};
use probe::SimProbe;
use scen_core::c10d::store;

use scen_core::net::{Clock, Net};
use scen_core::outcome::{Failure, Killer, RankEnd};
use scen_core::probe::Probe;
use scen_core::report::Report;
use scen_core::report::{Mode, RunFacts};
use scen_core::runtime::rank::{run_rank, RankEnv};
use scen_core::runtime::torchrun;
use scen_core::scenario::{Launcher, Scenario};
use scen_core::trace::{Event, EventKind};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};

/// Limits that keep a runaway scenario from running forever.
const MAX_STEPS: u64 = 20_000_000;
const MAX_VIRTUAL_MS: u64 = 30 * 24 * 3600 * 1000;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("the simulator failed: {0}")]
    Turmoil(String),
    /// A defect of scen or a limit of the simulator, not a verdict about the scenario: a panic
    /// in a simulated task or in turmoil, or a broken invariant. The run's outcome is unknown.
    #[error("internal error with seed {seed}: {detail}")]
    Internal { seed: u64, detail: String },
    /// A value computed while running (a formula, an environment variable) exceeds one of
    /// scen's limits: bad input found late, reported like bad input.
    #[error("the scenario exceeds a limit of scen: {0}")]
    Limit(String),
}

/// Test hook: `SCEN_TEST_PANIC_RANK=N` makes rank N's task panic when it starts, so tests can
/// check that a panic in a simulated task ends the run as an internal error.
const PANIC_HOOK_ENV: &str = "SCEN_TEST_PANIC_RANK";

/// Runs `scenario` with `seed` (the scenario's own seed when `None`).
///
/// Any panic while simulating is returned as [`SimError::Internal`], never as a report.
pub fn simulate(scenario: &Scenario, seed: Option<u64>) -> Result<Report, SimError> {
    let seed = seed.unwrap_or(scenario.sim.seed);
    let watch = internal::Watch::start();
    let inject = std::env::var(PANIC_HOOK_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok());
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        simulate_inner(scenario, seed, inject, &watch)
    }));
    let internal = |detail: String| SimError::Internal { seed, detail };
    match run {
        Ok(Err(SimError::Internal { detail, .. })) => Err(internal(detail)),
        Ok(r) => match watch.caught() {
            Some(p) => Err(internal(p)),
            None => r,
        },
        Err(_) => Err(internal(
            watch
                .caught()
                .unwrap_or_else(|| "a panic in the simulator".into()),
        )),
    }
}

/// Local ports for outgoing connections (turmoil's default is 49152..=65535).
const EPHEMERAL_PORTS: std::ops::RangeInclusive<u16> = 32768..=65535;

/// The connection backlog of each simulated listener and the buffer of each stream: turmoil's
/// default (64) is less than the ranks that connect to a TCPStore at once in a large world.
fn tcp_capacity(s: &Scenario) -> usize {
    (s.world.size() + s.world.services.len() + 16)
        .saturating_mul(2)
        .max(64)
}

fn simulate_inner(
    scenario: &Scenario,
    seed: u64,
    inject: Option<usize>,
    watch: &internal::Watch,
) -> Result<Report, SimError> {
    let span = tracing::info_span!("sim", scenario = %scenario.name, seed);
    let _in_sim = span.enter();
    let mut builder = turmoil::Builder::new();
    builder.tcp_capacity(tcp_capacity(scenario));
    // turmoil keeps the local port of every refused connect, so a rank retrying for a long
    // timeout uses one port per try: Linux's lower bound, twice turmoil's default range.
    builder.ephemeral_ports(EPHEMERAL_PORTS);
    if scenario.sim.random_order {
        builder.enable_random_order();
    }
    // Ranks of a node share a host, so most messages are loopback: deliver them from a queue on
    // the host rather than one tokio task and timer each (vendor/turmoil/PATCHES.md; same times
    // and order with the 1 ms tick below and no task spawned on a host's runtime itself).
    builder.loopback_queue(scenario.sim.loopback_queue);
    let mut sim = builder
        .rng_seed(seed)
        .epoch(UNIX_EPOCH)
        .tick_duration(Duration::from_millis(1))
        .simulation_duration(Duration::from_secs(MAX_VIRTUAL_MS))
        .min_message_latency(Duration::from_millis(scenario.sim.latency_min_ms))
        .max_message_latency(Duration::from_millis(scenario.sim.latency_max_ms))
        .build();
    let activity = Activity::default();
    let clock = VirtualClock::default();
    let node_of = scenario.world.ranks.iter().map(|r| r.node).collect();
    clock.set_model(scenario.world.links, node_of);
    clock.set_batch_round_trips(round_trips_alike(scenario));
    let plan = Rc::new(RefCell::new(FaultPlan::new(scenario)));
    let probe = SimProbe::new(
        scenario.world.size(),
        activity.clone(),
        clock.clone(),
        plan.clone(),
    );
    let mut with_env = scenario.clone();
    let env_notes = faults::apply_env(&mut with_env);
    let shared = Rc::new(with_env);
    let shared_env = shared.clone();
    let schedule = schedule::Schedule::for_seed(seed, &clock);
    for node in &scenario.world.nodes {
        let net = SimNet {
            host: node.name.clone(),
            nodes: scenario.world.nodes.len(),
            activity: activity.clone(),
            schedule: schedule.clone(),
        };
        let (clock, probe, shared) = (clock.clone(), probe.clone(), shared.clone());
        let index = node.index;
        // The node's store files (file:// rendezvous): its disk, kept across its reboots.
        let files = Rc::new(store::Files::default());
        sim.host(node.name.as_str(), move || {
            boot_node(
                index,
                (net.clone(), files.clone()),
                clock.clone(),
                probe.clone(),
                shared.clone(),
                inject,
            )
        });
    }
    for (f, text) in env_notes {
        probe.fault_event(f, None, None, &text);
    }
    apply_latency(&sim, scenario, &probe);
    let end_ns = drive::drive(&mut sim, scenario, &clock, &probe, &activity, watch)?;
    if let Some(detail) = over_limit(&probe) {
        return Err(SimError::Limit(detail));
    }
    Ok(report(
        scenario,
        seed,
        &probe,
        end_ns / 1000,
        &shared_env.world.ranks,
    ))
}

/// A rank that stopped on one of scen's limits (a value computed while running): the run
/// cannot say what the scenario does, so it has no verdict.
fn over_limit(probe: &SimProbe) -> Option<String> {
    let st = probe.state.borrow();
    st.ends.iter().enumerate().find_map(|(r, e)| match e {
        Some((
            RankEnd::Failed {
                failure: Failure::OverLimit { detail },
                ..
            },
            _,
        )) => Some(format!("rank {r}: {detail}")),
        _ => None,
    })
}

/// A node's software: its services first (they were there before the job), then its ranks.
async fn boot_node(
    index: usize,
    (net, files): (SimNet, Rc<store::Files>),
    clock: VirtualClock,
    probe: SimProbe,
    s: Rc<Scenario>,
    inject_panic: Option<usize>,
) -> turmoil::Result {
    serve_services(index, &net, &clock, &probe, &s).await?;
    if s.world.launcher == Launcher::Torchrun && index == 0 {
        serve_agent_store(&net, &clock, &probe, &s).await?;
    }
    for spec in s.world.ranks.iter().filter(|r| r.node == index) {
        start_rank(spec.rank, (&net, &files), &clock, &probe, &s, inject_panic);
    }
    std::future::pending::<()>().await;
    Ok(())
}

/// The `[[world.service]]` TCPStores of node `index` (another job's), with their keys.
async fn serve_services(
    index: usize,
    net: &SimNet,
    clock: &VirtualClock,
    probe: &SimProbe,
    s: &Scenario,
) -> turmoil::Result {
    for svc in s.world.services.iter().filter(|x| x.node == index) {
        match net.bind(svc.port).await {
            Ok(l) => {
                let text = format!(
                    "{}: TCPStore (world_size={}) already listening on {}:{} with {} keys",
                    svc.label,
                    svc.world_size,
                    net.host,
                    svc.port,
                    svc.keys.len()
                );
                node_info(probe, clock, text);
                let keys = svc
                    .keys
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                    .collect();
                tokio::task::spawn_local(store::serve_with(net.clone(), clock.clone(), l, keys));
            }
            Err(e) => return Err(format!("service on port {}: {e}", svc.port).into()),
        }
    }
    Ok(())
}

/// torchrun's agent hosts the TCPStore (TORCHELASTIC_USE_AGENT_STORE) before any worker.
async fn serve_agent_store(
    net: &SimNet,
    clock: &VirtualClock,
    probe: &SimProbe,
    s: &Scenario,
) -> turmoil::Result {
    let port = torchrun::agent_store_port(s);
    match net.bind(port).await {
        Ok(l) => {
            let text = format!(
                "torchrun agent: TCPStore listening on {}:{port} (TORCHELASTIC_USE_AGENT_STORE)",
                net.host
            );
            node_info(probe, clock, text);
            tokio::task::spawn_local(store::serve(net.clone(), clock.clone(), l));
        }
        Err(e) => return Err(format!("torchrun agent's store on port {port}: {e}").into()),
    }
    Ok(())
}

/// An event of a node's own software (a service, torchrun's agent), not of a rank.
fn node_info(probe: &SimProbe, clock: &VirtualClock, text: String) {
    probe.event(Event {
        t_ms: clock.now_ms(),
        rank: None,
        step: None,
        kind: EventKind::Info,
        text,
        tag: None,
    });
}

/// Rank `rank`'s process as a task of its node: a late start, its program, and how it ends
/// (its program's end, or a kill; under torchrun a failure makes the agent stop the others).
fn start_rank(
    rank: usize,
    (net, files): (&SimNet, &Rc<store::Files>),
    clock: &VirtualClock,
    probe: &SimProbe,
    s: &Rc<Scenario>,
    inject_panic: Option<usize>,
) {
    let env = RankEnv {
        net: net.clone(),
        clock: clock.clone(),
        probe: probe.clone(),
        scenario: s.clone(),
        proc_rank: rank,
        device: None,
        life: {
            let clock = clock.clone();
            scen_core::runtime::fabric::Life::on_clock(move || clock.now_ms())
        },
        files: Some(files.clone()),
    };
    let life = env.life.clone();
    let (probe, clock) = (probe.clone(), clock.clone());
    let (kill_tx, kill_rx) = tokio::sync::oneshot::channel();
    probe.kills.borrow_mut()[rank] = Some(kill_tx);
    let late = probe.plan.borrow().late[rank];
    let torchrun = s.world.launcher == Launcher::Torchrun;
    let agent = s.world.agent;
    // Every wake-up of the rank's program is a scheduling point of its node (schedule.rs);
    // a kill is not: the process stops at once (its sockets close after its teardown).
    let schedule = net.schedule.clone();
    tokio::task::spawn_local(async move {
        let run = schedule.shuffled(async {
            if inject_panic == Some(rank) {
                panic!("injected panic in rank {rank}'s task ({PANIC_HOOK_ENV})");
            }
            if let Some((f, delay_ms)) = late {
                probe.fault_event(
                    f,
                    Some(rank),
                    None,
                    &format!("rank {rank} starts {delay_ms}ms late"),
                );
                clock.sleep_until_ms(clock.now_ms() + delay_ms).await;
            }
            run_rank(env).await
        });
        let mut run = Box::pin(run);
        tokio::select! {
            biased;
            _ = kill_rx => {
                // SIGKILL stops the process at once (`run` is not polled again), but its
                // sockets close only once the kernel has torn it down: what peers send it
                // meanwhile stays unread and their connections reset (fabric.rs).
                life.kill();
                let teardown_ms = scen_core::runtime::fabric::KILL_TEARDOWN_MS;
                clock.busy_until_ms(clock.now_ms() + teardown_ms).await;
                drop(run);
                let failed = matches!(
                    probe.state.borrow().ends[rank],
                    Some((RankEnd::Failed { .. }, _))
                );
                if failed && torchrun {
                    tear_down(&probe, &clock, rank, agent).await;
                }
            }
            // The process has exited: its verdict was recorded when its program ended
            // (`Probe::ended`); torchrun's agent sees a failed worker only now.
            end = &mut run => {
                probe.kills.borrow_mut()[rank] = None;
                probe.ended(rank, &end, clock.now_ms());
                if matches!(end, RankEnd::Failed { .. }) && torchrun {
                    tear_down(&probe, &clock, rank, agent).await;
                }
            }
        }
    });
}

/// After rank `failed`'s process exited failed under torchrun: once the agent's next check has
/// seen it and its stop takes effect (`[world] agent_check_ms`, `agent_stop_ms`), every worker
/// still running is stopped, failed with the agent's reason, naming the rank that check saw as
/// the first failure (core's `runtime::torchrun`).
async fn tear_down(
    probe: &SimProbe,
    clock: &VirtualClock,
    failed: usize,
    agent: torchrun::AgentTiming,
) {
    probe
        .failed_exits
        .borrow_mut()
        .push((failed, clock.now_ms()));
    let Some((_, at)) = torchrun::stop_after([(failed, clock.now_ms())], agent) else {
        return;
    };
    let checks = probe.agent_checks.clone();
    checks.set(checks.get() + 1);
    clock.sleep_until_ms(at).await;
    checks.set(checks.get() - 1);
    let exits = probe.failed_exits.borrow().clone();
    let failed = torchrun::stop_after(exits, agent).map_or(failed, |(root, _)| root);
    // Every worker process still running, in its program or in its teardown after it.
    let running: Vec<usize> = {
        let n = probe.state.borrow().ends.len();
        (0..n).filter(|r| probe.process_alive(*r)).collect()
    };
    for r in running {
        probe.stop_by_agent(r, torchrun::stopped_by_agent(failed));
    }
}

/// Whether every store round trip costs about the same, so a client's loop of store reads
/// can go as one request charged the round trip it measured: latency drawn per message from a
/// range wider than one step (`[sim] latency_ms`, a latency fault with `max_ms`) varies from one
/// round trip to the next, and the races `scen explore` looks for live in that variation.
fn round_trips_alike(s: &Scenario) -> bool {
    let random_fault = s.faults.iter().any(|f| {
        matches!(
            f.kind,
            scen_core::scenario::FaultKind::Latency {
                fixed_ms: None,
                max_ms: Some(_),
                ..
            }
        )
    });
    s.sim.batch_store_loops && s.sim.latency_max_ms - s.sim.latency_min_ms <= 1 && !random_fault
}

/// Applies every timed fault action due at `now_ms`, writing each to the trace.
fn apply_due(sim: &mut turmoil::Sim<'_>, s: &Scenario, probe: &SimProbe, now_ms: u64) {
    let due = probe.plan.borrow_mut().take_due(now_ms);
    for t in due {
        probe.fault_event(t.fault, None, None, &t.text);
        let name = |n: usize| s.world.nodes[n].name.clone();
        let ranks_on = |n: usize| -> Vec<usize> {
            s.world
                .ranks
                .iter()
                .filter(|r| r.node == n)
                .map(|r| r.rank)
                .collect()
        };
        match &t.action {
            Action::CrashRanks(ranks) => {
                for r in ranks {
                    probe.kill(*r, t.fault);
                }
            }
            Action::CrashNode(n) => {
                for r in ranks_on(*n) {
                    probe.kill(r, t.fault);
                }
                sim.crash(name(*n).as_str());
            }
            Action::Bounce(n) => {
                for r in ranks_on(*n) {
                    probe.kill(r, t.fault);
                    let mut st = probe.state.borrow_mut();
                    st.ends[r] = None;
                    st.waits[r] = None;
                    st.step[r] = None;
                }
                sim.bounce(name(*n).as_str());
            }
            Action::Cut { links, oneway } => {
                for (x, y) in faults::pairs(links, *oneway) {
                    if *oneway {
                        sim.partition_oneway(name(x).as_str(), name(y).as_str());
                    } else {
                        sim.partition(name(x).as_str(), name(y).as_str());
                    }
                }
            }
            Action::Heal { links, oneway } => {
                for (x, y) in faults::pairs(links, *oneway) {
                    if *oneway {
                        sim.repair_oneway(name(x).as_str(), name(y).as_str());
                    } else {
                        sim.repair(name(x).as_str(), name(y).as_str());
                    }
                }
            }
            Action::Hold(links) => {
                for (x, y) in faults::pairs(links, false) {
                    sim.hold(name(x).as_str(), name(y).as_str());
                }
            }
            Action::Release(links) => {
                for (x, y) in faults::pairs(links, false) {
                    sim.release(name(x).as_str(), name(y).as_str());
                }
            }
            Action::Loss(links, rate) => {
                for (x, y) in faults::pairs(links, false) {
                    sim.set_link_fail_rate(name(x).as_str(), name(y).as_str(), *rate);
                }
            }
        }
    }
}

/// Per-link latency faults act once, before the run.
fn apply_latency(sim: &turmoil::Sim<'_>, s: &Scenario, probe: &SimProbe) {
    for f in &s.faults {
        let scen_core::scenario::FaultKind::Latency {
            links,
            fixed_ms,
            max_ms,
        } = &f.kind
        else {
            continue;
        };
        let name = |n: usize| s.world.nodes[n].name.clone();
        for (x, y) in faults::pairs(links, false) {
            match (fixed_ms, max_ms) {
                (Some(ms), _) => sim.set_link_latency(
                    name(x).as_str(),
                    name(y).as_str(),
                    Duration::from_millis(*ms),
                ),
                (None, Some(ms)) => sim.set_link_max_message_latency(
                    name(x).as_str(),
                    name(y).as_str(),
                    Duration::from_millis(*ms),
                ),
                (None, None) => {}
            }
        }
        let what = match (fixed_ms, max_ms) {
            (Some(ms), _) => format!("exactly {ms}ms"),
            (_, Some(ms)) => format!(
                "between {}ms and {ms}ms (exponential)",
                s.sim.latency_min_ms
            ),
            _ => String::new(),
        };
        let pairs: Vec<String> = faults::pairs(links, false)
            .iter()
            .map(|(x, y)| format!("node{x}<->node{y}"))
            .collect();
        probe.fault_event(
            f.index,
            None,
            None,
            &format!("latency on {}: {what}", pairs.join(", ")),
        );
    }
}

/// "rank 0 fails after fault #2 (...) acted at 0.500s: crash rank 3": which fault each
/// failure or hang followed.
fn attribution(probe: &SimProbe) -> Vec<String> {
    let acted = probe.acted.borrow();
    let plan = probe.plan.borrow();
    let ends = &probe.state.borrow().ends;
    let mut notes = Vec::new();
    for (r, end) in ends.iter().enumerate() {
        let (verb, until) = match end {
            Some((RankEnd::Completed, _)) => continue,
            Some((RankEnd::Failed { failure, .. }, t_ms)) => match failure {
                Failure::Killed {
                    by: Killer::Fault { index, .. },
                    ..
                } => {
                    let by = acted
                        .iter()
                        .rev()
                        .find(|a| a.t_ms <= *t_ms && a.fault == *index);
                    if let Some(a) = by {
                        let f = &plan.faults[a.fault];
                        notes.push(format!(
                            "rank {r} crashed at {} (fault #{}, {}:{}): {}",
                            scen_core::trace::format_ms(*t_ms).trim(),
                            a.fault + 1,
                            plan.file,
                            f.loc.line,
                            a.text
                        ));
                    }
                    continue;
                }
                _ => ("fails", *t_ms),
            },
            None => ("hangs", u64::MAX),
        };
        if let Some(a) = acted.iter().rev().find(|a| a.t_ms <= until) {
            notes.push(format!(
                "rank {r} {verb} after {} acted at {}: {}",
                plan.label(a.fault),
                scen_core::trace::format_ms(a.t_ms).trim(),
                a.text
            ));
        }
    }
    notes
}

fn note(probe: &SimProbe, t_ms: u64, text: String) {
    scen_core::log::mirror(EventKind::Verdict, t_ms, &text);
    probe.event(Event {
        t_ms,
        rank: None,
        step: None,
        kind: EventKind::Verdict,
        text,
        tag: None,
    });
}

/// The run's report: what the probe observed, through core's one report builder.
fn report(
    s: &Scenario,
    seed: u64,
    probe: &SimProbe,
    end_us: u64,
    env_ranks: &[scen_core::scenario::RankSpec],
) -> Report {
    let notes = attribution(probe);
    let observed = std::mem::take(&mut *probe.state.borrow_mut());
    scen_core::report::build(
        s,
        observed,
        RunFacts {
            mode: Mode::Sim,
            seed,
            end_ms: end_us / 1000,
            end_us,
            local: None,
            env_ranks,
            notes,
            gathered: false,
        },
    )
}
