//! torchrun's elastic agent, played by scen's hw launcher when the job's launcher is torchrun
//! (`[world] launcher = "torchrun"`, what `scen record` writes, or `--launcher torchrun`): without
//! it every rank of a recording would be a client of a store nobody hosts. As torchrun does,
//! node 0's launcher hosts the TCPStore at MASTER_PORT in PyTorch's protocol (core's store
//! server, the one the simulator hosts for its agent), every rank gets torchrun's environment,
//! and once a worker has exited failed, the launcher stops the others at the agent's next check
//! with the agent's reason (core's `runtime::torchrun`, the simulator's rule).

use crate::net::{TokioNet, WallClock};
use crate::watchdog::State;
use crate::HwError;
use scen_core::outcome::RankEnd;
use scen_core::runtime::torchrun;
use scen_core::scenario::{Scenario, StepKind};
use scen_core::trace::WaitOn;
use std::process::Command;
use std::thread::JoinHandle;

/// The port of a literal `tcp://HOST:PORT` init_method that names the scenario's MASTER_PORT:
/// the program looks for torchrun's store there, so the agent must listen on that port (the
/// simulator's agent does), not on a free one.
pub(crate) fn store_port_named_by_url(s: &Scenario) -> Option<u16> {
    let master = torchrun::agent_store_port(s);
    s.steps.iter().find_map(|st| {
        let StepKind::InitProcessGroup {
            init_method: Some(url),
            ..
        } = &st.kind
        else {
            return None;
        };
        let rest = url.strip_prefix("tcp://")?;
        let hostport = rest.split(['?', '/']).next()?;
        let port: u16 = hostport.rsplit_once(':')?.1.parse().ok()?;
        (port == master).then_some(port)
    })
}

/// What torchrun sets for every worker beyond RANK/LOCAL_RANK/WORLD_SIZE/LOCAL_WORLD_SIZE/
/// GROUP_RANK/MASTER_ADDR/MASTER_PORT (the launcher's own): read from a real torchrun's workers
/// (PyTorch 2.x, local_elastic_agent.py `_start_workers`). TORCHELASTIC_ERROR_FILE is not set:
/// scen's ranks write no error file.
pub(crate) struct WorkerEnv<'a> {
    pub rank: usize,
    pub world: usize,
    pub nnodes: usize,
    pub per_node: usize,
    pub run_id: &'a str,
}

impl WorkerEnv<'_> {
    pub(crate) fn apply(&self, cmd: &mut Command) {
        cmd.env("GROUP_WORLD_SIZE", self.nnodes.to_string())
            .env("ROLE_NAME", "default")
            .env("ROLE_RANK", self.rank.to_string())
            .env("ROLE_WORLD_SIZE", self.world.to_string())
            .env("TORCHELASTIC_RESTART_COUNT", "0")
            .env("TORCHELASTIC_MAX_RESTARTS", "0")
            .env("TORCHELASTIC_RUN_ID", self.run_id)
            .env("TORCHELASTIC_USE_AGENT_STORE", "True")
            .env(
                "TORCHELASTIC_SIGNALS_TO_HANDLE",
                "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
            );
        if std::env::var_os("TORCH_NCCL_ASYNC_ERROR_HANDLING").is_none() {
            cmd.env("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
        }
        // torchrun's default for several workers per node (run.py), unless the user set it.
        if self.per_node > 1 && std::env::var_os("OMP_NUM_THREADS").is_none() {
            cmd.env("OMP_NUM_THREADS", "1");
        }
    }
}

/// The agent's TCPStore: a thread serving it until the agent is dropped.
pub(crate) struct AgentStore {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl AgentStore {
    /// Binds `bind_ip:port` now (before any worker starts, as torchrun's agent does) and serves
    /// PyTorch's protocol there; `host` is the address the ranks reach it at.
    pub(crate) fn host(bind_ip: &str, host: &str, port: u16, epoch: u64) -> Result<Self, HwError> {
        let listener = std::net::TcpListener::bind((bind_ip, port))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| {
                HwError::Io(format!(
                    "torchrun's agent's TCPStore cannot listen on {bind_ip}:{port}: {e}"
                ))
            })?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let net = TokioNet {
            host: host.to_string(),
            bind_ip: bind_ip.to_string(),
            // PyTorch's protocol has no job token: torchrun's store lets any client in.
            job_token: None,
            allow_torch_clients: true,
            agent_store_is_pytorch: true,
        };
        let clock = WallClock {
            epoch_unix_ms: epoch,
        };
        let thread = std::thread::Builder::new()
            .name("torchrun-agent-store".into())
            .spawn(move || serve(listener, net, clock, rx))
            .map_err(|e| HwError::Io(format!("starting torchrun's agent's TCPStore: {e}")))?;
        Ok(AgentStore {
            stop: Some(tx),
            thread: Some(thread),
        })
    }
}

fn serve(
    listener: std::net::TcpListener,
    net: TokioNet,
    clock: WallClock,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let Ok(l) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        tokio::select! {
            _ = scen_core::c10d::store::serve(net, clock, l) => {}
            _ = stop => {}
        }
    });
    // The LocalSet and its connections' tasks drop here: every socket closes.
}

impl Drop for AgentStore {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The agent of one node: its store (node 0 only) and which workers it stopped.
pub(crate) struct Agent {
    pub store: Option<AgentStore>,
    pub run_id: String,
    /// Workers this agent stopped: what they still say of their end is too late.
    pub stopped: Vec<usize>,
    /// When its check sees a failed exit and its stop follows (`[world] agent_check_ms`,
    /// `agent_stop_ms`).
    pub timing: torchrun::AgentTiming,
}

impl Agent {
    /// The agent's check at `t`: once the earliest failed worker's exit (`exits`: rank, exit
    /// time) is a monitor interval old, every worker whose process is `running` and whose end
    /// is not known, or whose program completed and who is still in its teardown, is stopped,
    /// failed with the agent's reason (as the simulator's agent does). Returns the ranks to
    /// SIGTERM.
    pub(crate) fn check(
        &mut self,
        st: &mut State,
        exits: Vec<(usize, u64)>,
        running: &[usize],
        t: u64,
    ) -> Vec<usize> {
        let Some((failed, at)) = torchrun::stop_after(exits, self.timing) else {
            return vec![];
        };
        if t < at {
            return vec![];
        }
        let stop: Vec<usize> = running
            .iter()
            .copied()
            .filter(|r| torchrun::stop_decides(st.obs.ends[*r].as_ref().map(|(e, _)| e)))
            .collect();
        for &r in &stop {
            st.process_died(r, torchrun::stopped_by_agent(failed), t);
            self.stopped.push(r);
        }
        if !stop.is_empty() {
            st.notes.push(format!(
                "torchrun's agent (this launcher): rank {failed} failed; SIGTERM to the workers still running: {stop:?}"
            ));
        }
        stop
    }

    /// Under torchrun only the agent hosts a TCPStore: a rank still retrying its connect to
    /// another port (a `tcp://` init_method naming it) waits for a store nobody will serve. As
    /// the watchdog does for a dead store host, the launcher raises c10d's connect timeout for
    /// it now rather than after it (30 min by default). Returns whether it raised any.
    pub(crate) fn unserved_connects(
        &self,
        st: &mut State,
        running: &[usize],
        port: u16,
        t: u64,
    ) -> bool {
        let mut raised = false;
        for &r in running {
            let Some(w) = st.obs.waits[r].clone() else {
                continue;
            };
            let (WaitOn::StoreConnect { port: p, .. }, Some(err)) = (&w.on, w.timeout_error) else {
                continue;
            };
            if *p == port || st.obs.ends[r].is_some() {
                continue;
            }
            st.notes.push(format!(
                "rank {r}: under torchrun only the agent's TCPStore (port {port}) is served, nothing of this job will listen on port {p}: c10d would retry the connect until its timeout expired and then raise {:?}; the launcher raised it now",
                err.text()
            ));
            st.force_end(r, w.step, err, t);
            raised = true;
        }
        raised
    }

    /// The watchdog found the run hopeless and raised the waits' timeouts for the ranks: a
    /// rank whose end comes after the agent's stop (or that has none) is stopped instead, when
    /// the agent would have stopped it (each failed rank's process exits its `exit_ms` after
    /// its end: `exit_ms(rank)`).
    pub(crate) fn after_stall(
        &mut self,
        st: &mut State,
        local: &[usize],
        exit_ms: impl Fn(usize) -> u64,
    ) {
        let failed_at = |r: usize, e: &Option<(RankEnd, u64)>| match e {
            Some((RankEnd::Failed { .. }, t)) => Some(*t + exit_ms(r)),
            _ => None,
        };
        let exits = st
            .obs
            .ends
            .iter()
            .enumerate()
            .filter_map(|(r, e)| Some((r, failed_at(r, e)?)));
        let Some((failed, at)) = torchrun::stop_after(exits, self.timing) else {
            return;
        };
        for &r in local {
            let later = match &st.obs.ends[r] {
                None => true,
                Some((_, t)) => *t > at && st.forced.contains(&r),
            };
            if later {
                st.process_died(r, torchrun::stopped_by_agent(failed), at);
                st.forced.push(r);
                self.stopped.push(r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scen_core::outcome::Failure;

    fn failed(step: usize) -> RankEnd {
        RankEnd::Failed {
            step,
            failure: Failure::Interrupted {
                signal: 2,
                launcher: scen_core::outcome::ScenLauncher::Hw,
                at: String::new(),
            },
        }
    }

    fn agent() -> Agent {
        Agent {
            store: None,
            run_id: "t".into(),
            stopped: vec![],
            timing: torchrun::AgentTiming::default(),
        }
    }

    #[test]
    fn the_agent_stops_the_running_workers_a_monitor_interval_after_a_failed_exit() {
        let mut st = State::new(3, vec![]);
        st.obs.ends[2] = Some((failed(1), 400));
        st.obs.step[0] = Some(1);
        let mut a = agent();
        assert!(a.check(&mut st, vec![(2, 450)], &[0, 1, 2], 549).is_empty());
        assert_eq!(
            a.check(&mut st, vec![(2, 450)], &[0, 1, 2], 550),
            vec![0, 1]
        );
        let Some((RankEnd::Failed { step, failure }, t)) = &st.obs.ends[0] else {
            panic!("rank 0 stopped");
        };
        assert_eq!((*step, *t), (1, 550));
        assert_eq!(failure, &torchrun::stopped_by_agent(2));
        assert_eq!(a.stopped, vec![0, 1]);
        // Nothing failed: nobody is stopped.
        let mut st = State::new(2, vec![]);
        assert!(agent().check(&mut st, vec![], &[0, 1], 10_000).is_empty());
    }

    #[test]
    fn a_tcp_url_naming_master_port_is_where_the_agent_listens() {
        let s = |url: &str, port: u16| {
            scen_core::scenario::parse(
                &format!(
                    "[world]\nranks_per_node = 2\nmaster_port = {port}\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\ninit_method = \"{url}\"\n"
                ),
                "t.toml",
                "t",
            )
            .expect("parses")
        };
        assert_eq!(
            store_port_named_by_url(&s("tcp://localhost:29500", 29500)),
            Some(29500)
        );
        assert_eq!(
            store_port_named_by_url(&s("tcp://10.0.0.1:30017?rank=0", 30017)),
            Some(30017)
        );
        assert_eq!(
            store_port_named_by_url(&s("tcp://localhost:29500", 30017)),
            None
        );
        assert_eq!(store_port_named_by_url(&s("env://", 29500)), None);
    }

    #[test]
    fn after_a_stall_later_timeouts_become_the_agents_stop() {
        let mut st = State::new(3, vec![]);
        st.obs.ends[0] = Some((failed(2), 1_000));
        st.obs.ends[1] = Some((failed(2), 5_000));
        st.forced = vec![0, 1];
        let mut a = agent();
        a.after_stall(&mut st, &[0, 1, 2], |_| 50);
        assert_eq!(st.obs.ends[0].as_ref().map(|e| e.1), Some(1_000));
        for r in [1, 2] {
            let Some((RankEnd::Failed { failure, .. }, t)) = &st.obs.ends[r] else {
                panic!("rank {r} stopped");
            };
            assert_eq!((failure, *t), (&torchrun::stopped_by_agent(0), 1_150));
        }
    }
}
