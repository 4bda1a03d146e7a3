//! The rank model's side of device communicators ([`DeviceComms`]): naming a communicator,
//! joining it and running an operation on it, with the wait record a hang report needs
//! (device libraries never time out, so the record says who the call waits for).

use super::{Coll, Proc, Res};
use crate::c10d::error::C10dError;
use crate::runtime::device::{CommRef, DeviceComms};
use crate::runtime::link::CallInfo;
use crate::runtime::net::{Clock, Net};
use crate::scenario::expr::Expr;
use crate::scenario::TensorSpec;
use crate::tensor::Tensor;
use crate::trace::{EventKind, Probe, Wait};

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// The communicator of group `name` over `members` (global ranks, in communicator order).
    pub(super) fn comm_ref(
        &self,
        name: &str,
        members: &[usize],
        me: usize,
        pair: Option<(usize, usize)>,
    ) -> CommRef {
        let id = match pair {
            Some((a, b)) => format!("{name}/p2p:{}:{}", a.min(b), a.max(b)),
            None => format!("{name}/coll"),
        };
        CommRef {
            id,
            size: members.len(),
            rank: members.iter().position(|m| *m == me).expect("member"),
        }
    }

    fn device_wait(&self, what: String, group: &str, seq: Option<u64>, peers: Vec<usize>) -> Wait {
        Wait {
            step: self.step,
            what,
            group: Some(group.to_string()),
            seq,
            peers,
            since_ms: self.now(),
            deadline_ms: None,
            timeout_error: None,
        }
    }

    /// Joins a device communicator; like the real library, it waits for every member forever.
    pub(super) async fn init_device_comm(
        &self,
        d: &dyn DeviceComms,
        comm: &CommRef,
        uid: &[u8],
        members: &[usize],
        label: &str,
    ) -> Res<()> {
        let me = self.world()?.rank;
        let others: Vec<usize> = members.iter().copied().filter(|m| *m != me).collect();
        self.wait(Some(self.device_wait(
            format!(
                "device communicator init of group {label}: waiting for ranks {others:?} to join"
            ),
            label,
            None,
            others,
        )));
        let r = d.init(comm, uid).await;
        self.wait(None);
        r?;
        self.event(
            EventKind::Info,
            format!(
                "device communicator ready for group {label} ({} ranks)",
                comm.size
            ),
        );
        Ok(())
    }

    /// One collective on the device communicator.
    pub(super) async fn run_device(
        &self,
        d: &dyn DeviceComms,
        comm: &CommRef,
        coll: &Coll,
        t: &mut Tensor,
        info: &CallInfo,
    ) -> Res<Option<Tensor>> {
        let pg_ranks = self.group_ranks_of(comm);
        let me = self.world()?.rank;
        let peers: Vec<usize> = pg_ranks.iter().copied().filter(|r| *r != me).collect();
        let mut w = self.device_wait(
            format!(
                "{} #{} on group {}: inside the device library, waiting for ranks {peers:?}",
                info.op, info.seq, info.group
            ),
            &info.group,
            Some(info.seq),
            peers,
        );
        w.deadline_ms = info.timeout.as_ref().map(|(t, _)| *t);
        w.timeout_error = info.timeout.as_ref().map(|(_, e)| e.to_string());
        self.wait(Some(w));
        // New collectives get a DeviceComms method and an arm here; until then they say so.
        #[allow(unreachable_patterns)]
        let r = match coll {
            Coll::AllReduce(op) => d.all_reduce(comm, t, *op).await.map(|_| None),
            Coll::Broadcast(src) => {
                let root = pg_ranks.iter().position(|r| r == src).expect("checked");
                d.broadcast(comm, t, root).await.map(|_| None)
            }
            Coll::AllGather => d
                .all_gather(comm, t)
                .await
                .map(|parts| Some(Tensor::concat(&parts))),
            Coll::Barrier => d.barrier(comm).await.map(|_| None),
            other => Err(crate::c10d::error::runtime(format!(
                "{} has no device-library binding yet (DeviceComms in runtime/device.rs)",
                other.name()
            ))),
        };
        self.wait(None);
        r
    }

    /// The global ranks of a group communicator (its group's members).
    fn group_ranks_of(&self, comm: &CommRef) -> Vec<usize> {
        let name = comm.id.rsplit_once('/').map(|(n, _)| n).unwrap_or("");
        self.pgs
            .get(name)
            .map(|p| p.ranks.clone())
            .unwrap_or_default()
    }

    /// send/recv on the pair's device communicator.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn p2p_device(
        &self,
        d: &dyn DeviceComms,
        comm: &CommRef,
        mut t: Tensor,
        peer: usize,
        peer_pos: usize,
        send: bool,
        seq: u64,
        group_label: String,
        timeout: Option<(u64, C10dError)>,
        spec: &TensorSpec,
        expect: &Option<Expr>,
    ) -> Res<String> {
        let verb = if send { "send to" } else { "recv from" };
        let mut w = self.device_wait(
            format!("{verb} rank {peer} #{seq} on group {group_label}: inside the device library"),
            &group_label,
            Some(seq),
            vec![peer],
        );
        w.deadline_ms = timeout.as_ref().map(|(t, _)| *t);
        w.timeout_error = timeout.as_ref().map(|(_, e)| e.to_string());
        self.wait(Some(w));
        let r = if send {
            d.send(comm, &t, peer_pos).await
        } else {
            d.recv(comm, &mut t, peer_pos).await
        };
        self.wait(None);
        r?;
        if send {
            return Ok(format!("sent {} elements to rank {peer}", t.numel()));
        }
        self.check_values(spec, expect, &t, false)
    }
}
