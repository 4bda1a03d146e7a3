//! Rendezvous and the default group: init_process_group (on its own rendezvous or a store the
//! program passes), backend construction and the store-based barrier (docs/rules/c10d.md#r7 to
//! #r17; the TCPStore's server and client are tcp_store.rs).

use super::*;
use crate::c10d::backend::{self, BackendConfig, Device};
use crate::c10d::error::{self, C10dError};
use crate::c10d::rendezvous;
use crate::c10d::store::{self, join_key, KeySeq, StoreClient, StoreError, Values};
use crate::net::{Clock, Net};
use crate::probe::Probe;
use crate::scenario::Launcher;
use crate::trace::{EventKind, StoreUse, Wait, WaitOn};
use crate::wire::WireError;
use std::collections::BTreeMap;
use std::rc::Rc;

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    pub(super) async fn init_process_group(
        &mut self,
        backend: &Option<String>,
        device_id: &Option<String>,
        timeout_ms: Option<u64>,
        how: Rdzv<'_>,
    ) -> Res<String> {
        let Rdzv {
            init_method,
            rank,
            world_size,
            store: own,
        } = how;
        if self.world.is_some() {
            return Err(error::init_twice());
        }
        // torch 2.15 checks a passed store's arguments first (distributed_c10d.py).
        let own_name = own;
        let own = match own {
            Some(name) => Some(self.own_store_for_init(name, init_method, rank, world_size)?),
            None => None,
        };
        let device = device_id.as_ref().map(|d| self.device(d)).transpose()?;
        if let Some(d) = &device {
            self.check_device_id(d)?;
        }
        let backend_s = match backend {
            Some(b) => self.expand(b),
            // No backend: the device's default one (R3), else none at all.
            None => device
                .as_ref()
                .and_then(|d| backend::default_backend_for(&d.ty))
                .unwrap_or("undefined")
                .to_string(),
        };
        let config = BackendConfig::parse(&backend_s, Some(self.accel()))?;
        config.check_built_in()?;
        let timeout_ms =
            backend::timeout_or_default_ms(timeout_ms, &config, self.env.scenario.time_scale);
        if let Some((store, rv, origin)) = own {
            // No rendezvous, no "default_pg" prefix, no set_timeout: the store as passed.
            let r = self
                .init_on_store(store, &rv, config, device, timeout_ms, origin)
                .await;
            // The group holds the store from here on: a master's server outlives the
            // program's globals while the group lives.
            if r.is_ok() {
                let own = own_name.as_ref().and_then(|n| self.stores.get(n.as_str()));
                self.group_holds_server = own.and_then(|s| s.server.clone());
            }
            return r;
        }
        let rv = self.rendezvous(init_method, rank, world_size)?;
        if let Some(path) = &rv.file {
            // R15: a FileStore, constructed in the rendezvous; no server, no connect, no
            // waitForWorkers. An init that raises frees it (its destructor runs).
            let store = Rc::new(self.open_file_store(path, rv.world_size)?);
            let origin = Origin::rendezvous(format!("file://{path}"));
            let r = self
                .init_on_store(store.clone(), &rv, config, device, timeout_ms, origin)
                .await;
            if let (Err(_), Some(f)) = (&r, store.as_file()) {
                f.free();
            }
            return r;
        }
        let deadline = self.now() + timeout_ms;
        // Under torchrun the agent hosts the store (TORCHELASTIC_USE_AGENT_STORE): every rank
        // is a client and nobody waits for workers.
        let agent_store = self.env.scenario.world.launcher == Launcher::Torchrun;
        if rv.rank == 0 && !agent_store {
            self.start_store_server(rv.port).await?;
        }
        let how = super::tcp_store::Connect {
            agent: agent_store,
            check_in: true,
        };
        let (store, joined) = self
            .connect_store(&rv.host, rv.port, timeout_ms, deadline, how)
            .await?;
        let store = Rc::new(store);
        self.wait_for_workers(&store, joined, &rv, timeout_ms)
            .await?;
        let origin = Origin::rendezvous(format!("{}:{}", rv.host, rv.port));
        self.init_on_store(store, &rv, config, device, timeout_ms, origin)
            .await
    }

    /// `init_process_group(store=S, rank=, world_size=)`: torch 2.15's checks of the
    /// arguments (AssertionError, before anything else), then the store a step made.
    fn own_store_for_init(
        &self,
        name: &str,
        init_method: &Option<String>,
        rank: Option<usize>,
        world_size: Option<usize>,
    ) -> Res<(Rc<StoreClient<N>>, rendezvous::Rendezvous, Origin)> {
        if init_method.is_some() {
            return Err(error::store_and_init_method());
        }
        let world_size = world_size
            .filter(|w| *w > 0)
            .ok_or_else(error::store_world_size)?;
        within_world_limit(world_size)?;
        let rank = rank.ok_or_else(error::store_rank)?;
        let own = self.store_named(&Some(name.to_string()))?;
        let rv = rendezvous::Rendezvous {
            host: String::new(),
            port: 0,
            rank,
            world_size,
            file: None,
        };
        let origin = Origin {
            prefixes: own.prefixes.clone(),
            at: format!("{name} (the program's)"),
            store_timeout_ms: Some(own.timeout_ms),
        };
        Ok((own.client, rv, origin))
    }

    /// `FileStore(path, world_size)` on this rank's node (c10d/store/file.rs).
    fn open_file_store(&self, path: &str, world_size: usize) -> Res<StoreClient<N>> {
        let files = self
            .env
            .files
            .as_ref()
            .ok_or_else(|| error::file_store_unsupported(path))?;
        let me = self.env.proc_rank;
        let f = store::FileClient::open(files, path, world_size, me, self.env.clock.clone());
        self.event(
            EventKind::Info,
            format!("FileStore file://{path} opened (world_size={world_size})"),
        );
        Ok(StoreClient::file(f))
    }

    /// init_process_group once the rendezvous gave a store: the backend, the default group,
    /// its gloo mesh and the optional store barrier.
    async fn init_on_store(
        &mut self,
        store: Rc<StoreClient<N>>,
        rv: &rendezvous::Rendezvous,
        config: BackendConfig,
        device: Option<Device>,
        timeout_ms: u64,
        origin: Origin,
    ) -> Res<String> {
        config.check_known()?;
        if rv.rank >= rv.world_size {
            // The backend is built for ranks 0..world_size: a rank outside has no place in it
            // (gloo's context enforces rank < size; the model would have no group rank).
            if config.backends().contains(&"gloo") {
                return Err(error::gloo_rank_not_below_size(rv.rank, rv.world_size));
            }
            return Err(error::rank_out_of_range(rv.rank, rv.world_size));
        }
        self.world = Some(WorldPg {
            store,
            store_timeout_ms: origin.store_timeout_ms,
            base_prefixes: origin.prefixes.clone(),
            rank: rv.rank,
            world_size: rv.world_size,
            config: config.clone(),
            bound: device.clone(),
        });
        self.group_count = 1;
        let mut prefixes = origin.prefixes;
        prefixes.push("0/".into());
        let pg = self.make_pg(
            "0".into(),
            "WORLD".into(),
            crate::ranks::world(rv.world_size),
            config,
            timeout_ms,
            prefixes,
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
        let store_at = origin.at;
        Ok(format!(
            "default group \"0\" rank {}/{} backends {} store {} timeout {}ms{}",
            rv.rank,
            rv.world_size,
            self.pgs["0"].config.describe(),
            store_at,
            timeout_ms,
            device.map(|d| format!(" bound to {d}")).unwrap_or_default()
        ))
    }

    /// Where and as whom this rank joins: `init_method` (default `env://`) with the explicit
    /// rank and world size, refused where scen cannot follow (a world over its limit).
    fn rendezvous(
        &self,
        init_method: &Option<String>,
        rank: Option<usize>,
        world_size: Option<usize>,
    ) -> Res<rendezvous::Rendezvous> {
        let url = init_method
            .as_ref()
            .map(|u| self.expand(u))
            .unwrap_or_else(|| "env://".into());
        let rv = rendezvous::resolve(&url, rank, world_size, &self.spec.env)?;
        within_world_limit(rv.world_size)?;
        Ok(rv)
    }

    pub(super) fn store_err(&self, e: StoreError) -> C10dError {
        match e {
            StoreError::Timeout {
                key, timeout_ms, ..
            } => match self.world.as_ref() {
                Some(w) => w.store.get_timeout_error(timeout_ms, &key),
                None => error::store_wait_timeout(timeout_ms, &key),
            },
            StoreError::Wire(WireError::Closed) => error::store_server_gone(),
            StoreError::Wire(WireError::BrokenPipe) => error::store_broken_pipe(),
            StoreError::Wire(w) => error::store_connection_failed(&w.to_string()),
            StoreError::Stale { key, path } => error::file_store_stale_key(&path, &key),
            StoreError::Unsupported(what) => error::limit(what),
        }
    }

    pub(super) fn world(&self) -> Res<&WorldPg<N>> {
        self.world.as_ref().ok_or_else(error::not_initialized)
    }

    pub(super) fn make_pg(
        &self,
        name: String,
        label: String,
        ranks: Ranks,
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
            coll_timeout_ms: timeout_ms,
            prefixes,
            wired: None,
            seq: 0,
            gloo_p2p: 0,
            detail_checks: 0,
            p2p_seq: BTreeMap::new(),
            p2p_match: BTreeMap::new(),
            monitored: 0,
            store_counter: BTreeMap::new(),
            comms: BTreeMap::new(),
            split: false,
        }
    }

    /// Store get with a wait record naming the ranks that should have set the key; it gives up
    /// as the store does ([`StoreClient::give_up_at_ms`]).
    pub(super) async fn store_get(
        &self,
        key: &str,
        timeout_ms: Option<u64>,
        peers: Vec<usize>,
        (used_by, what): (StoreUse, String),
        group: Option<String>,
        timeout_error: Option<C10dError>,
    ) -> Result<Vec<u8>, StoreError> {
        let store = self.world.as_ref().expect("world").store.clone();
        let used = (used_by, what);
        self.store_get_on(&store, key, timeout_ms, peers, used, group, timeout_error)
            .await
    }

    /// [`Proc::store_get`] on `store` (the world's, or a connection of its own).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn store_get_on(
        &self,
        store: &StoreClient<N>,
        key: &str,
        timeout_ms: Option<u64>,
        peers: Vec<usize>,
        (used_by, what): (StoreUse, String),
        group: Option<String>,
        timeout_error: Option<C10dError>,
    ) -> Result<Vec<u8>, StoreError> {
        let t = timeout_ms.unwrap_or(store::NO_TIMEOUT);
        // DETAIL's monitoredBarrier is gloo's, modelled over the store: its timeout is exact on
        // any store (a FileStore's own reads give up on whole seconds).
        let exact = used_by == StoreUse::MonitoredBarrier;
        self.wait(Some(Wait {
            step: self.step,
            on: WaitOn::StoreGet {
                key: key.to_string(),
                used_by,
            },
            what,
            group,
            seq: None,
            peers,
            since_ms: self.now(),
            deadline_ms: timeout_ms.map(|t| match exact {
                true => self.now().saturating_add(t),
                false => store.give_up_at_ms(self.now(), t),
            }),
            timeout_error: timeout_error.map(Into::into),
        }));
        let r = match exact {
            true => store.get_exact(key, t).await,
            false => store.get(key, t).await,
        };
        self.wait(None);
        r
    }

    /// Sets `key` to this rank's fabric address and returns the network's share of that round
    /// trip (the round trip minus the server's own time): what a loop of store reads sent as
    /// one request is charged per key (`c10d::store::seq`).
    pub(super) async fn publish_address(&self, key: &str) -> Res<u64> {
        let store = self.world()?.store.clone();
        let t0_us = self.env.clock.now_us();
        let server_us = store
            .set_timed(key, self.fabric.address().as_bytes())
            .await
            .map_err(|e| self.store_err(e))?;
        Ok((self.env.clock.now_us() - t0_us).saturating_sub(server_us))
    }

    /// `check` of every key, in order: one request where the clock batches store loops
    /// ([`Clock::batches_store_loops`]), else a request per key.
    pub(super) async fn store_check_all(
        &self,
        keys: &KeySeq,
        net_rtt_us: u64,
    ) -> Result<Vec<bool>, StoreError> {
        let store = self.world.as_ref().expect("world").store.clone();
        if self.env.clock.batches_store_loops() && !keys.is_empty() {
            return store.check_seq(keys, net_rtt_us).await;
        }
        let mut present = Vec::with_capacity(keys.len());
        for k in 0..keys.len() {
            present.push(store.check(&keys.key(k)).await?);
        }
        Ok(present)
    }

    /// The values of `keys` before the first one absent when the loop reaches it, as one request
    /// ([`StoreClient::get_seq`](crate::c10d::store::StoreClient::get_seq), with the wait
    /// record of its first key's get; it never blocks) where the clock batches store loops.
    /// Elsewhere none: the caller then gets each key with a blocking get of its own.
    pub(super) async fn store_get_seq(
        &self,
        keys: &KeySeq,
        net_rtt_us: u64,
        peers: &[usize],
        (used_by, what): (StoreUse, &str),
        group: &str,
    ) -> Result<Values, StoreError> {
        if !self.env.clock.batches_store_loops() || keys.is_empty() {
            return Ok(Values::default());
        }
        let store = self.world.as_ref().expect("world").store.clone();
        self.wait(Some(Wait {
            step: self.step,
            on: WaitOn::StoreGet {
                key: keys.key(keys.indexes().next().unwrap_or(keys.start)),
                used_by,
            },
            what: what.to_string(),
            group: Some(group.to_string()),
            seq: None,
            peers: peers.to_vec(),
            since_ms: self.now(),
            deadline_ms: None,
            timeout_error: None,
        }));
        let r = store.get_seq(keys, net_rtt_us).await;
        self.wait(None);
        r
    }

    /// The values of `keys` from the `next`-th on, at least one: the loop of gets sent as one
    /// request ([`Proc::store_get_seq`]), and where its first key was absent when the loop
    /// reached it, the blocking get the loop makes, waiting on `peers` (with `timeout`: its
    /// deadline and the error raised at it, which a store timeout becomes).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn store_get_from(
        &self,
        keys: &KeySeq,
        next: usize,
        net_rtt_us: u64,
        peers: &[usize],
        (used_by, what): (StoreUse, String),
        group: &str,
        timeout: Option<(u64, C10dError)>,
    ) -> Res<Values> {
        let got = self
            .store_get_seq(&keys.from(next), net_rtt_us, peers, (used_by, &what), group)
            .await
            .map_err(|e| self.store_err(e))?;
        if !got.is_empty() {
            return Ok(got);
        }
        let (timeout_ms, timeout_error) = timeout.unzip();
        let v = self
            .store_get(
                &keys.key(next),
                timeout_ms,
                peers.to_vec(),
                (used_by, what),
                Some(group.to_string()),
                timeout_error.clone(),
            )
            .await
            .map_err(|e| match (e, &timeout_error) {
                (StoreError::Timeout { .. }, Some(t)) => t.clone(),
                (other, _) => self.store_err(other),
            })?;
        Ok(Values::of(vec![v]))
    }

    /// R24 gloo: connectFullMesh over the group's prefix store, blocking among members.
    pub(super) async fn construct_backends(&mut self, name: &str) -> Res<()> {
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
        // ProcessGroupGloo keys each of its contexts under its index (one context here, "0"),
        // then the rank: real torch 2.15 waits on `default_pg/0//cpu//0/<rank>`.
        let mut prefixes = pg.prefixes.clone();
        if !pg.split {
            prefixes.push(format!("{dev}/"));
        }
        prefixes.push("0".into());
        let (ranks, timeout_ms, label) = (
            pg.ranks.clone(),
            pg.timeout_ms,
            format!("{} ({})", pg.label, pg.name),
        );
        let net_rtt_us = self
            .publish_address(&join_key(&prefixes, &grank.to_string()))
            .await?;
        let peers: Vec<usize> = ranks.iter().copied().filter(|r| *r != me).collect();
        let keys = KeySeq {
            prefix: join_key(&prefixes, ""),
            start: 0,
            end: ranks.len(),
            skip: Some(grank),
        };
        let wired = self
            .read_mesh_addresses(&keys, &peers, net_rtt_us, (timeout_ms, &label))
            .await?;
        if !wired.is_empty() {
            let to = |r: usize| wired.iter().find(|(m, _)| *m == r).map_or(r, |w| w.1);
            let pg = self.pgs.get_mut(name).expect("group");
            pg.wired = Some(pg.ranks.iter().map(|&r| to(r)).collect());
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

    /// connectFullMesh's reads: every peer's address under `keys`, learned as that peer's,
    /// unless another rank this rank knows wrote it (two groups sharing a name, R25): those
    /// come back as (member, the rank that wrote its key).
    async fn read_mesh_addresses(
        &self,
        keys: &KeySeq,
        peers: &[usize],
        net_rtt_us: u64,
        (timeout_ms, label): (u64, &str),
    ) -> Res<Vec<(usize, usize)>> {
        // One check per peer, then one get per peer; each loop goes as one request and is
        // charged as the loop (c10d::store::seq).
        let present = self
            .store_check_all(keys, net_rtt_us)
            .await
            .map_err(|e| self.store_err(e))?;
        // Peers absent at the check, in peer order: values arrive in that order too, so the
        // ones still missing are always `missing[gone..]`.
        let missing: Vec<usize> = (peers.iter().zip(&present))
            .filter(|(_, p)| !**p)
            .map(|(r, _)| *r)
            .collect();
        let (mut next, mut gone) = (0, 0);
        // (member, the rank that wrote its key instead), where they differ.
        let mut wired: Vec<(usize, usize)> = Vec::new();
        while next < peers.len() {
            let key = &keys.key(next);
            let what = format!("gloo connectFullMesh of group {label}: store get '{key}'");
            // R24: a store timeout here reaches Python as the store's own error (TCPStore's
            // DistStoreError, FileStore's "Wait timeout"), not wrapped in "Gloo connectFullMesh
            // failed with" (real PyTorch 2.15, torch mode).
            let timeout = self.world()?.store.wait_timeout_error(timeout_ms, key);
            let got = self
                .store_get_from(
                    keys,
                    next,
                    net_rtt_us,
                    &missing[gone..],
                    (StoreUse::GlooMesh, what),
                    label,
                    Some((timeout_ms, timeout)),
                )
                .await?;
            for v in got.iter() {
                gone += (missing.get(gone) == Some(&peers[next])) as usize;
                if let Some(r) = self.fabric.learn_unless_other(peers[next], v) {
                    wired.push((peers[next], r));
                }
                next += 1;
            }
        }
        Ok(wired)
    }

    /// R11/R22.4: `if device_id and pg._get_backend(device_id).supports_splitting: eager connect`.
    pub(super) async fn post_construct(&mut self, name: &str, device: &Option<Device>) -> Res<()> {
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
    pub(super) async fn store_barrier(
        &self,
        name: &str,
        world_size: usize,
        timeout_ms: u64,
    ) -> Res<()> {
        let w = self.world()?;
        let store = w.store.clone();
        let rank = w.rank;
        let key = format!("store_based_barrier_key:{name}");
        let full = join_key(&w.base_prefixes, &key);
        let n = store.add(&full, 1).await.map_err(|e| self.store_err(e))?;
        let last = format!("{full}:last_worker");
        if n as usize >= world_size {
            store
                .set(&last, b"1")
                .await
                .map_err(|e| self.store_err(e))?;
        }
        // The barrier's `store.wait` error, in the store's words (a FileStore's is not measured
        // here: gloo's connectFullMesh before it already waits for every rank).
        let inner = store.wait_timeout_error(timeout_ms, &last).to_string();
        let r = self
            .store_get(
                &last,
                Some(timeout_ms),
                vec![],
                (StoreUse::StoreBarrier, format!("store based barrier for group {name} ({n}/{world_size} joined when this rank arrived)")),
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
}

/// How `init_process_group` finds its store: `init_method` (default `env://`) with the
/// explicit rank and world size, or a store the program passes (`store=`, a step's name).
pub(super) struct Rdzv<'a> {
    pub init_method: &'a Option<String>,
    pub rank: Option<usize>,
    pub world_size: Option<usize>,
    pub store: &'a Option<String>,
}

/// Where the default group's store came from: the prefixes its keys go under before the
/// group's own (`default_pg` after a rendezvous; a passed store's own, torch adds none), what
/// the init's result names, and a passed store's own timeout.
pub(super) struct Origin {
    prefixes: Vec<String>,
    at: String,
    store_timeout_ms: Option<u64>,
}

impl Origin {
    fn rendezvous(at: String) -> Origin {
        Origin {
            prefixes: vec!["default_pg".into()],
            at,
            store_timeout_ms: None,
        }
    }
}

/// An `init_process_group` world size scen can hold (a rendezvous's or a passed store's; user
/// input: a fuzzed `world_size = 9223372036854775807` on a passed store overflowed an allocation).
fn within_world_limit(world_size: usize) -> Res<()> {
    if world_size > crate::scenario::limits::MAX_WORLD_SIZE {
        return Err(error::limit(format!(
            "init_process_group world_size={world_size} is over scen's limit of {} ranks",
            crate::scenario::limits::MAX_WORLD_SIZE
        )));
    }
    Ok(())
}
