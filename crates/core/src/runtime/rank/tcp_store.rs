//! The TCPStore as a rank meets it (R16, docs/rules/c10d.md#r16): serving one on its host,
//! connecting with backoff and checking in, and the server's wait for its workers. Both
//! `init_process_group`'s store (init.rs) and the stores a program makes (store_calls.rs) go
//! through here.

use super::*;
use crate::c10d::error;
use crate::c10d::rendezvous;
use crate::c10d::store::{self, StoreClient, StoreError};
use crate::net::{Clock, Net};
use crate::probe::{Fact, Probe};
use crate::scenario::Launcher;
use crate::trace::{EventKind, EventTag, Wait, WaitOn};
use crate::wire::WireError;

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    pub(super) async fn start_store_server(&mut self, port: u16) -> Res<()> {
        let server = self.serve_store(port).await?;
        self.store_server = Some(server);
        (self.env.probe).fact(self.env.proc_rank, &Fact::StoreServer { port });
        Ok(())
    }

    /// A TCPStore server on this rank's host at `port`, living until it is aborted or the
    /// process ends (its task); a taken port is TCPStore's `EADDRINUSE`.
    pub(super) async fn serve_store(&mut self, port: u16) -> Res<tokio::task::AbortHandle> {
        let listener = self.env.net.bind(port).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                error::eaddrinuse(port)
            } else {
                error::store_listen_failed(port, &e.to_string())
            }
        })?;
        let (net, clock) = (self.env.net.clone(), self.env.clock.clone());
        let server = tokio::task::spawn_local(store::serve(net, clock, listener));
        let handle = server.abort_handle();
        self.tasks.push(server);
        self.event(
            EventKind::Info,
            format!("TCPStore server listening on port {port}"),
        );
        Ok(handle)
    }

    /// R16: connect with exponential backoff until the deadline; with `how.check_in`, the
    /// constructor's count into `init/` (its value returned, else 0).
    pub(super) async fn connect_store(
        &self,
        host: &str,
        port: u16,
        timeout_ms: u64,
        deadline: u64,
        how: Connect,
    ) -> Res<(StoreClient<N>, i64)> {
        let mut delay_ms = 100u64;
        let mut tries = 0u64;
        loop {
            self.wait(Some(Wait {
                step: self.step,
                on: WaitOn::StoreConnect {
                    host: host.to_string(),
                    port,
                },
                what: format!("connect to TCPStore {host}:{port}"),
                group: None,
                seq: None,
                peers: vec![],
                since_ms: self.now(),
                deadline_ms: Some(deadline),
                timeout_error: Some(error::client_connect_timeout(timeout_ms, host, port).into()),
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
                    let addr = format!("{host}:{port}");
                    let client = if how.agent && self.env.net.agent_store_is_pytorch() {
                        // torchrun's agent hosts a real PyTorch TCPStore: its protocol.
                        StoreClient::open_torch(s, addr, self.env.clock.clone()).await
                    } else {
                        StoreClient::open(&self.env.net, s, addr).await
                    };
                    let client = client.map_err(|e| self.store_err(e))?;
                    if !how.check_in {
                        return Ok((client, 0));
                    }
                    // The constructor's first exchange (PyTorch validates and pings, then
                    // counts in): a server that closed the connection meanwhile (its group
                    // destroyed, its port about to serve the next init) is retried like a
                    // refused connect, as TCPStore's connect loop does.
                    match client.add("init/", 1).await {
                        Ok(n) => return Ok((client, n)),
                        Err(StoreError::Wire(WireError::Closed)) if self.now() < deadline => {
                            self.event(EventKind::Info, format!("TCPStore {host}:{port} closed the connection before it answered: connecting again"));
                        }
                        Err(e) => return Err(self.store_err(e)),
                    }
                    tries += 1;
                    self.env.clock.sleep_until_ms(self.now() + delay_ms).await;
                    delay_ms = (delay_ms * 2).min(5_000);
                }
                Err(e) => {
                    if tries == 0 {
                        let text =
                            error::connect_retry_warning(host, port, timeout_ms, delay_ms, &e);
                        self.tagged_event(EventKind::Warn, text, Some(EventTag::ConnectRetry));
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
    /// `n`: `init/` after this rank's check-in (made by [`Self::connect_store`]).
    pub(super) async fn wait_for_workers(
        &self,
        store: &StoreClient<N>,
        n: i64,
        rv: &rendezvous::Rendezvous,
        timeout_ms: u64,
    ) -> Res<()> {
        self.event(
            EventKind::Info,
            format!("checked in to TCPStore {} (init/ = {n})", store.addr),
        );
        if rv.rank != 0 || self.env.scenario.world.launcher == Launcher::Torchrun {
            return Ok(());
        }
        self.wait_for_clients(store, n, rv.world_size, timeout_ms)
            .await
    }

    /// The server's side of waitForWorkers: until `init/` counts `world_size` check-ins, or
    /// TCPStore's own timeout text.
    pub(super) async fn wait_for_clients(
        &self,
        store: &StoreClient<N>,
        n: i64,
        world_size: usize,
        timeout_ms: u64,
    ) -> Res<()> {
        let after_ms = error::workers_timeout_after_ms(timeout_ms);
        self.wait(Some(Wait {
            step: self.step,
            on: WaitOn::StoreWorkers { world_size },
            what: format!("TCPStore server waiting for {world_size} clients"),
            group: None,
            seq: None,
            // The ranks it waits for, up to scen's largest world (a program may pass a world size
            // far past it: a fuzzed 2^32 listed 32 GB of ranks).
            peers: (1..world_size.min(crate::scenario::limits::MAX_WORLD_SIZE + 1)).collect(),
            since_ms: self.now(),
            deadline_ms: Some(self.now() + after_ms),
            timeout_error: Some(error::workers_timeout(after_ms, n, world_size).into()),
        }));
        let want = i64::try_from(world_size).unwrap_or(i64::MAX);
        let r = store.wait_ge("init/", want, after_ms).await;
        self.wait(None);
        match r {
            Ok(_) => Ok(()),
            Err(StoreError::Timeout { value, .. }) => {
                Err(error::workers_timeout(after_ms, value, world_size))
            }
            Err(e) => Err(self.store_err(e)),
        }
    }
}

/// How [`Proc::connect_store`] joins a TCPStore.
#[derive(Debug, Clone, Copy)]
pub(super) struct Connect {
    /// The store is torchrun's agent's (a real PyTorch TCPStore in hw mode: its protocol).
    pub agent: bool,
    /// The constructor counts into `init/` (a world size given and `wait_for_workers`).
    pub check_in: bool,
}
