//! Groups: new_group (names, members, the local-sync path), destroy, group handles and
//! the lazy device communicators (docs/rules/c10d.md#r18 to #r25).

use super::*;
use crate::c10d::backend::{self, BackendConfig};
use crate::c10d::error;
use crate::c10d::naming;
use crate::c10d::store::{join_key, KeySeq, StoreError};
use crate::diagnose::GroupCall;
use crate::net::{Clock, Net};
use crate::probe::Probe;
use crate::trace::{EventKind, StoreUse};

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// `by`: a scenario step gets the result text; sglang's planned calls (O(W) on every rank)
    /// discard it (formatting it was a tenth of a large start-up's time) and report a call of
    /// their plan as such.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn new_group(
        &mut self,
        ranks: Option<&[usize]>,
        backend_arg: &Option<String>,
        (local_sync, sort_ranks): (bool, bool),
        device_id: &Option<String>,
        timeout_ms: Option<u64>,
        handle: &Option<String>,
        by: Caller<'_>,
    ) -> Res<String> {
        let describe = matches!(by, Caller::Step);
        let (me, ws, default_config, bound) = {
            let w = self.world()?;
            (w.rank, w.world_size, w.config.clone(), w.bound.clone())
        };
        let ranks = group_ranks(ranks, ws, sort_ranks)?;
        let backend_s = backend_arg
            .as_ref()
            .map(|b| self.expand(b))
            .unwrap_or(default_config.original.clone());
        let config = BackendConfig::parse(&backend_s, Some(self.accel()))?;
        let device = self.group_device(device_id, bound)?;
        let timeout_ms =
            backend::timeout_or_default_ms(timeout_ms, &config, self.env.scenario.time_scale);
        let member = ranks.contains(&me);
        let label = handle.clone().unwrap_or_else(|| "unnamed".into());
        if local_sync && !member {
            self.set_handle(handle, Handle::NonMember);
            return Ok(if describe {
                format!(
                    "not a member of {} (local synchronization: no name taken)",
                    crate::ranks::listed(&ranks)
                )
            } else {
                String::new()
            });
        }
        let (name, call) = if local_sync {
            let name = naming::hashed_name(&ranks, self.group_count);
            (name, GroupCall::LocalSyncNewGroup)
        } else {
            (naming::counter_name(self.group_count), GroupCall::NewGroup)
        };
        self.report_group(by, me, (&ranks, call), &config.original, &label);
        self.group_count += 1;
        if !member {
            self.set_handle(handle, Handle::NonMember);
            if barrier_after_init(&self.spec) {
                self.store_barrier(&name, ws, timeout_ms).await?;
            }
            return Ok(if describe {
                format!(
                    "group \"{name}\" {}: not a member (NON_GROUP_MEMBER)",
                    crate::ranks::listed(&ranks)
                )
            } else {
                String::new()
            });
        }
        config.check_built_in()?;
        config.check_known()?;
        let mut prefixes = self.world()?.base_prefixes.clone();
        prefixes.extend(["0/".to_string(), format!("{name}/")]);
        let pg = self.make_pg(
            name.clone(),
            label,
            ranks.clone(),
            config,
            timeout_ms,
            prefixes,
        );
        let backends = pg.config.describe();
        self.pgs.insert(name.clone(), pg);
        self.set_handle(handle, Handle::Member(name.clone()));
        self.construct_backends(&name).await?;
        self.post_construct(&name, &device).await?;
        if barrier_after_init(&self.spec) {
            let n = if local_sync { ranks.len() } else { ws };
            self.store_barrier(&name, n, timeout_ms).await?;
        }
        Ok(if describe {
            format!(
                "group \"{name}\" {} backends {backends}",
                crate::ranks::listed(&ranks)
            )
        } else {
            String::new()
        })
    }

    /// The device a new group binds: its own `device_id`, which must be the world's bound
    /// device when there is one, or that bound device.
    fn group_device(
        &mut self,
        device_id: &Option<String>,
        bound: Option<Device>,
    ) -> Res<Option<Device>> {
        let Some(d) = device_id else {
            return Ok(bound);
        };
        let d = self.device(d)?;
        if bound.as_ref().is_some_and(|b| *b != d) {
            return Err(error::mismatched_bound_device());
        }
        Ok(Some(d))
    }

    /// A counter-named group for the diagnosis: a planned call of sglang's plan as such, any
    /// other call as a group record.
    pub(super) fn report_group(
        &self,
        by: Caller<'_>,
        me: usize,
        (ranks, call): (&[usize], GroupCall),
        backend: &str,
        label: &str,
    ) {
        let (step, line) = (self.step, self.env.scenario.steps[self.step].loc.line);
        let name = (self.group_generation, self.group_count);
        match by {
            Caller::Sglang(Some((source, call))) => self.env.probe.planned_group(&PlannedRecord {
                rank: me,
                name,
                source,
                call,
                backend,
                step,
                line,
            }),
            _ => self.env.probe.group(&GroupRecord {
                rank: me,
                generation: name.0,
                index: name.1,
                ranks: crate::ranks::of(ranks),
                backend: backend.to_string(),
                label: label.to_string(),
                step,
                line,
                call,
            }),
        }
    }

    pub(super) fn set_handle(&mut self, handle: &Option<String>, h: Handle) {
        if let Some(name) = handle {
            self.handles.insert(name.clone(), h);
        }
    }

    /// R13.
    pub(super) async fn destroy(&mut self, group: &Option<String>) -> Res<String> {
        match group {
            None => {
                let world = self.world.take().ok_or_else(error::not_initialized)?;
                // A FileStore's destructor runs with its group (file.rs: the last one removes
                // the file).
                if let Some(f) = world.store.as_file() {
                    f.free();
                }
                // The store this rank served goes with the group (its last reference): its
                // port is free again for a later init, as real torch 2.15's is. Unless the
                // program holds the store: then it lives on with the process (its task).
                let held = std::mem::take(&mut self.holds_store);
                self.group_holds_server = None;
                if let Some(server) = self.store_server.take().filter(|_| !held) {
                    super::store_calls::close_servers(&[&server]).await;
                }
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
                None => Err(error::invalid_group()),
            },
        }
    }

    /// `dist.set_timeout(timeout, group)`: the group's collectives posted from now on use the
    /// new timeout; its send/recv, store waits and works already posted keep theirs. A
    /// non-member raises `ValueError: Invalid process group specified` (real torch 2.15).
    pub(super) fn set_timeout(&mut self, group: &Option<String>, timeout_ms: u64) -> Res<String> {
        let Some(name) = self.resolve_group(group)? else {
            return Err(error::invalid_group());
        };
        let pg = self.pgs.get_mut(&name).expect("pg");
        pg.coll_timeout_ms = timeout_ms;
        Ok(format!(
            "collectives of {} ({}) from now on time out after {timeout_ms}ms",
            pg.label, pg.name
        ))
    }

    /// Resolves a step's group: `Ok(None)` for a non-member (R27).
    pub(super) fn resolve_group(&self, group: &Option<String>) -> Res<Option<String>> {
        self.world()?;
        match group {
            None => Ok(Some("0".into())),
            Some(h) => match self.handles.get(h) {
                Some(Handle::Member(name)) if self.pgs.contains_key(name) => Ok(Some(name.clone())),
                Some(Handle::Member(_)) => Err(error::invalid_group()),
                Some(Handle::NonMember) => Ok(None),
                None => Err(error::group_never_created(h)),
            },
        }
    }

    /// R24/R38: the device communicator, created lazily through a store key.
    pub(super) async fn ensure_comm(
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
        let plan = self.comm_plan(name, dev, pair);
        let device = self.env.device.clone();
        let uid = self.comm_unique_id(&plan, backend, me).await?;
        if let Some(d) = device {
            let comm = self.comm_ref(name, &plan.members, me, pair);
            self.init_device_comm(&*d, &comm, &uid, &plan.members, &plan.label)
                .await?;
        } else {
            self.join_comm_members(&plan, backend, me).await?;
            self.event(
                EventKind::Info,
                format!(
                    "{backend} communicator ready for group {} (store key {})",
                    plan.label, plan.key
                ),
            );
        }
        self.pgs
            .get_mut(name)
            .expect("pg")
            .comms
            .insert(comm_key, ());
        Ok(())
    }

    /// The communicator's store key (the group's prefixes, the device, the group's counter for
    /// it), its members and what its waits are named after.
    fn comm_plan(&mut self, name: &str, dev: &str, pair: Option<(usize, usize)>) -> CommPlan {
        let pg = self.pgs.get_mut(name).expect("pg");
        let counter = pg.store_counter.entry(dev.to_string()).or_insert(0);
        let local_key = counter.to_string();
        *counter += 1;
        let mut prefixes = pg.prefixes.clone();
        prefixes.push(format!("{dev}/"));
        CommPlan {
            key: join_key(&prefixes, &local_key),
            local_key,
            members: match pair {
                Some((a, b)) => vec![a.min(b), a.max(b)].into(),
                None => pg.ranks.clone(),
            },
            timeout_ms: pg.timeout_ms,
            label: format!("{} ({})", pg.label, pg.name),
        }
    }

    /// The first member sets the communicator's unique id; the others get it (a timeout is the
    /// backend's own unique-id error).
    async fn comm_unique_id(&self, plan: &CommPlan, backend: &str, me: usize) -> Res<Vec<u8>> {
        let CommPlan {
            key,
            local_key,
            members,
            timeout_ms,
            label,
        } = plan;
        let store = self.world()?.store.clone();
        if members[0] == me {
            let uid = match &self.env.device {
                Some(d) => d.unique_id()?,
                None => format!("{backend}-uid:{key}").into_bytes(),
            };
            store.set(key, &uid).await.map_err(|e| self.store_err(e))?;
            return Ok(uid);
        }
        // The store's own get timeout (a FileStore's `Timeout waiting for key: ...`; not
        // measured on a device backend here).
        let inner = store.get_timeout_error(*timeout_ms, key).to_string();
        let err = error::unique_id_timeout(backend, me, local_key, &inner);
        let what = format!(
            "{backend} communicator of group {label}: store get unique id '{key}' from rank {}",
            members[0]
        );
        self.store_get(
            key,
            Some(*timeout_ms),
            vec![members[0]],
            (StoreUse::UniqueId, what),
            Some(label.clone()),
            Some(err.clone()),
        )
        .await
        .map_err(|e| match e {
            StoreError::Timeout { .. } => err.clone(),
            other => self.store_err(other),
        })
    }

    /// The library's own bootstrap: every member must join; oneCCL/NCCL init never times out.
    async fn join_comm_members(&mut self, plan: &CommPlan, backend: &str, me: usize) -> Res<()> {
        let (key, members, label) = (&plan.key, &plan.members, &plan.label);
        let pos = members.iter().position(|m| *m == me).expect("member");
        let net_rtt_us = self.publish_address(&format!("{key}/addr/{pos}")).await?;
        // Every member must join this communicator, even one whose address gloo already knows:
        // one get per member, the loop sent as one request (c10d::store::seq).
        let others: Vec<usize> = members.iter().copied().filter(|m| *m != me).collect();
        let keys = KeySeq {
            prefix: format!("{key}/addr/"),
            start: 0,
            end: members.len(),
            skip: Some(pos),
        };
        let mut next = 0;
        while next < others.len() {
            let m = others[next];
            let what = format!(
                "{backend} communicator init of group {label}: waiting for rank {m} to join"
            );
            let got = self
                .store_get_from(
                    &keys,
                    next,
                    net_rtt_us,
                    &[m],
                    (StoreUse::CommJoin, what),
                    label,
                    None,
                )
                .await?;
            for v in got.iter() {
                self.fabric.learn(others[next], v);
                next += 1;
            }
        }
        Ok(())
    }
}

/// A device communicator about to be made: its store key and members.
struct CommPlan {
    key: String,
    /// The group's counter for the device, as the unique-id error names it.
    local_key: String,
    members: crate::ranks::Ranks,
    timeout_ms: u64,
    /// `label (name)` of the group, for waits and events.
    label: String,
}

/// `ranks` (the world when not given) sorted, refused as c10d refuses them: a duplicate, more
/// ranks than the world, a rank outside it. Shared (`crate::ranks`): a W-long list is not
/// copied for each of the O(W) calls every rank of a large sglang world makes. With
/// `sort_ranks=False` the list keeps its order (its position is the group rank), checked in it.
fn group_ranks(ranks: Option<&[usize]>, ws: usize, sort: bool) -> Res<Ranks> {
    let Some(given) = ranks else {
        return Ok(crate::ranks::world(ws));
    };
    if !sort {
        let mut sorted = given.to_vec();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(error::duplicate_ranks(given));
        }
        return checked_size(given, ws);
    }
    // Lists are mostly sorted already (sglang's plan, the world): no sort, no copy.
    let sorted;
    let ranks = if given.is_sorted() {
        given
    } else {
        sorted = {
            let mut v = given.to_vec();
            v.sort();
            v
        };
        &sorted[..]
    };
    if ranks.windows(2).any(|w| w[0] == w[1]) {
        return Err(error::duplicate_ranks(ranks));
    }
    checked_size(ranks, ws)
}

/// R18's size and range checks, in the list's order.
fn checked_size(ranks: &[usize], ws: usize) -> Res<Ranks> {
    if ranks.len() > ws {
        return Err(error::group_larger_than_world());
    }
    if let Some(bad) = ranks.iter().find(|r| **r >= ws) {
        return Err(error::rank_out_of_range(*bad, ws));
    }
    Ok(crate::ranks::of(ranks))
}
