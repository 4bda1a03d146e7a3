//! The rank model's side of device communicators ([`DeviceComms`]): naming a communicator,
//! joining it and running an operation on it, with the wait record a hang report needs
//! (device libraries never time out, so the record says who the call waits for).

use super::{Proc, Res};
use crate::c10d::error::{self, C10dError};
use crate::dtype::DType;
use crate::net::{Clock, Net};
use crate::probe::Probe;
use crate::reduce::ReduceOp;
use crate::runtime::coll::{Coll, Exec};
use crate::runtime::device::{CommRef, DeviceComms};
use crate::runtime::link::CallInfo;
use crate::runtime::reuse::{keeps, Lent, Reuse};
use crate::tensor::Tensor;
use crate::trace::{Dir, EventKind, Wait, WaitOn};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

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

    fn device_wait(&self, on: WaitOn, what: String, group: &str, peers: Vec<usize>) -> Wait {
        Wait {
            step: self.step,
            on,
            what,
            group: Some(group.to_string()),
            seq: None,
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
            WaitOn::DeviceInit,
            format!(
                "device communicator init of group {label}: waiting for ranks {others:?} to join"
            ),
            label,
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
        let (verb, dir) = if send {
            ("send to", Dir::Send)
        } else {
            ("recv from", Dir::Recv)
        };
        let mut w = self.device_wait(
            WaitOn::P2p { dir },
            format!("{verb} rank {peer} #{seq} on group {group_label}: inside the device library"),
            &group_label,
            vec![peer],
        );
        w.seq = Some(seq);
        w.deadline_ms = timeout.as_ref().map(|(t, _)| *t);
        w.timeout_error = timeout.as_ref().map(|(_, e)| e.clone().into());
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

/// The buffers a device call may take from and give back to the rank's kept ones: `lent` is
/// the token of the call's input when it is a kept fill.
pub(super) struct Kept {
    pub reuse: Option<Rc<RefCell<Reuse>>>,
    pub lent: Option<Lent>,
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
    kept: Kept,
) -> Result<Option<Tensor>, C10dError> {
    let me = members[comm.rank];
    let peers: Vec<usize> = members.iter().copied().filter(|r| *r != me).collect();
    probe.set_wait(
        info.proc_rank,
        Some(Wait {
            step: info.step,
            on: WaitOn::DeviceCall,
            what: format!(
                "{} #{} on group {}: inside the device library, waiting for ranks {peers:?}",
                info.op, info.seq, info.group
            ),
            group: Some(info.group.clone()),
            seq: Some(info.seq),
            peers,
            since_ms,
            deadline_ms: info.timeout.as_ref().map(|(t, _)| *t),
            timeout_error: info.timeout.as_ref().map(|(_, e)| e.clone().into()),
        }),
    );
    let on = OnDevice {
        d,
        comm,
        reuse: kept.reuse.as_deref(),
        lent: Cell::new(kept.lent),
    };
    let r = coll.run(&on, t).await;
    probe.set_wait(info.proc_rank, None);
    r
}

/// A device library as the executor of [`Coll::run`]: the same splitting and reassembly as the
/// simulator's algorithms, the primitives on the library's communicator.
struct OnDevice<'a> {
    d: &'a dyn DeviceComms,
    comm: &'a CommRef,
    /// The rank's kept buffers (hardware mode): all_reduce runs out of place from them.
    reuse: Option<&'a RefCell<Reuse>>,
    lent: Cell<Option<Lent>>,
}

impl OnDevice<'_> {
    fn unbound(&self, op: &str) -> C10dError {
        error::no_device_binding(op)
    }
}

impl Exec for OnDevice<'_> {
    type Error = C10dError;
    fn members(&self) -> usize {
        self.comm.size
    }
    fn me(&self) -> usize {
        self.comm.rank
    }
    /// With kept buffers, out of place into a spare: the input (a kept fill, only read) goes
    /// back unmodified and the next step with the same fill neither recomputes nor copies it.
    async fn all_reduce(&self, t: &mut Tensor, op: ReduceOp) -> Result<(), C10dError> {
        let Some(reuse) = self.reuse.filter(|_| keeps(t.data.len())) else {
            return self.d.all_reduce(self.comm, t, op).await;
        };
        let out = reuse.borrow_mut().spare(t.data.len());
        let input = std::mem::take(&mut t.data);
        let (input, out) = (self.d)
            .all_reduce_out(self.comm, t.dtype, input, out, op)
            .await?;
        t.data = out;
        reuse.borrow_mut().give_back(input, self.lent.take());
        Ok(())
    }
    async fn reduce(&self, t: &mut Tensor, op: ReduceOp, root: usize) -> Result<(), C10dError> {
        self.d.reduce(self.comm, t, op, root).await
    }
    async fn broadcast(&self, t: &mut Tensor, root: usize) -> Result<(), C10dError> {
        self.d.broadcast(self.comm, t, root).await
    }
    async fn all_gather(&self, t: &Tensor) -> Result<Vec<Tensor>, C10dError> {
        self.d.all_gather(self.comm, t).await
    }
    async fn gather(&self, _t: &Tensor, _root: usize) -> Result<Option<Vec<Tensor>>, C10dError> {
        Err(self.unbound("gather"))
    }
    async fn scatter(
        &self,
        _parts: Option<Vec<Tensor>>,
        _like: &Tensor,
        _root: usize,
    ) -> Result<Tensor, C10dError> {
        Err(self.unbound("scatter"))
    }
    async fn reduce_scatter(
        &self,
        input: &Tensor,
        op: ReduceOp,
        out_shape: &[usize],
    ) -> Result<Tensor, C10dError> {
        self.d.reduce_scatter(self.comm, input, op, out_shape).await
    }
    async fn all_to_all(
        &self,
        dtype: DType,
        sends: Vec<Vec<u8>>,
        recv_lens: &[usize],
    ) -> Result<Vec<Vec<u8>>, C10dError> {
        self.d.all_to_all(self.comm, dtype, sends, recv_lens).await
    }
    async fn barrier(&self) -> Result<(), C10dError> {
        self.d.barrier(self.comm).await
    }
}
