//! The rank model's side of device communicators ([`DeviceComms`]): naming a communicator,
//! joining it and running an operation on it, with the wait record a hang report needs
//! (device libraries never time out, so the record says who the call waits for).

use super::{Proc, Res};
use crate::c10d::error::{self, C10dError};
use crate::runtime::coll::{regroup, Algo, Coll};
use crate::runtime::device::{CommRef, DeviceComms};
use crate::runtime::link::CallInfo;
use crate::runtime::net::{Clock, Net};
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

    /// send/recv on a device communicator: the pair's (`send`/`recv` steps), else the group's
    /// (`batch_isend_irecv`). Returns the received tensor.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn p2p_device(
        &self,
        d: &dyn DeviceComms,
        name: &str,
        t: &Tensor,
        peer: usize,
        send: bool,
        seq: u64,
        group_label: String,
        timeout: Option<(u64, C10dError)>,
    ) -> Res<Option<Tensor>> {
        let me = self.world()?.rank;
        let (a, b) = (me.min(peer), me.max(peer));
        let pair_key = format!(":{a}:{b}");
        let has_pair = self.pgs[name].comms.keys().any(|k| k.ends_with(&pair_key));
        let (comm, peer_pos) = if has_pair {
            (
                self.comm_ref(name, &[a, b], me, Some((a, b))),
                usize::from(a == me),
            )
        } else {
            let ranks = self.pgs[name].ranks.clone();
            let pos = ranks.iter().position(|r| *r == peer).expect("checked");
            (self.comm_ref(name, &ranks, me, None), pos)
        };
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
        let mut out = t.clone();
        let r = if send {
            d.send(&comm, t, peer_pos).await
        } else {
            d.recv(&comm, &mut out, peer_pos).await
        };
        self.wait(None);
        r?;
        Ok((!send).then_some(out))
    }
}

/// One collective on the device communicator, with the wait record a hang report needs; one
/// arm per [`DeviceComms`] method. Collectives without a method fail with a clear error.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run_on_device<Q: Probe>(
    d: &dyn DeviceComms,
    comm: &CommRef,
    coll: &Coll,
    t: &mut Tensor,
    info: &CallInfo,
    probe: &Q,
    members: &[usize],
    since_ms: u64,
) -> Result<Option<Tensor>, C10dError> {
    let me = members[comm.rank];
    let peers: Vec<usize> = members.iter().copied().filter(|r| *r != me).collect();
    probe.set_wait(
        info.proc_rank,
        Some(Wait {
            step: info.step,
            what: format!(
                "{} #{} on group {}: inside the device library, waiting for ranks {peers:?}",
                info.op, info.seq, info.group
            ),
            group: Some(info.group.clone()),
            seq: Some(info.seq),
            peers,
            since_ms,
            deadline_ms: info.timeout.as_ref().map(|(t, _)| *t),
            timeout_error: info.timeout.as_ref().map(|(_, e)| e.to_string()),
        }),
    );
    let r = match &coll.algo {
        Algo::AllReduce(op) => d.all_reduce(comm, t, *op).await.map(|_| None),
        Algo::Broadcast(root) => d.broadcast(comm, t, *root).await.map(|_| None),
        Algo::AllGather { count } => d
            .all_gather(comm, t)
            .await
            .map(|parts| Some(regroup(&parts, *count, t))),
        Algo::Reduce(op, root) => d.reduce(comm, t, *op, *root).await.map(|_| None),
        Algo::ReduceScatter {
            op,
            count,
            out_shape,
        } => {
            let (n, m) = (comm.size, out_shape.iter().product::<usize>());
            let w = t.dtype.size_bytes();
            let mut outs = Vec::with_capacity(*count);
            for k in 0..*count {
                let input = Tensor {
                    dtype: t.dtype,
                    shape: vec![n * m],
                    data: t.data[k * n * m * w..(k + 1) * n * m * w].to_vec(),
                };
                outs.push(d.reduce_scatter(comm, &input, *op, out_shape).await?);
            }
            Ok(Some(if *count == 1 {
                outs.pop().expect("one")
            } else {
                Tensor::concat(&outs)
            }))
        }
        Algo::AllToAll {
            send_rows,
            recv_rows,
            row_elems,
        } => {
            let w = t.dtype.size_bytes() * row_elems;
            let mut sends = Vec::with_capacity(send_rows.len());
            let mut at = 0;
            for rows in send_rows {
                sends.push(t.data[at..at + rows * w].to_vec());
                at += rows * w;
            }
            let lens: Vec<usize> = recv_rows.iter().map(|r| r * w).collect();
            let got = d.all_to_all(comm, t.dtype, sends, &lens).await?;
            let mut shape = t.shape.clone();
            shape[0] = recv_rows.iter().sum();
            Ok(Some(Tensor {
                dtype: t.dtype,
                shape,
                data: got.concat(),
            }))
        }
        Algo::Barrier => d.barrier(comm).await.map(|_| None),
        _ => Err(error::runtime(format!(
            "{} has no device-library binding yet (add a DeviceComms method in runtime/device.rs)",
            coll.name()
        ))),
    };
    probe.set_wait(info.proc_rank, None);
    r
}
