//! The call-record hook of a rank: one call when a collective or p2p call starts, one when it
//! ends, reporting a flight-recorder-like [`CallRecord`] (docs/rules/c10d.md#r33) through the probe.

use super::{wait_out_peer_exit, Net, Probe, Proc};
use crate::c10d::error::C10dError;
use crate::diagnose::{CallKind, CallRecord, CallState, Fingerprint, Splits};
use crate::net::Clock;
use crate::payload::Payload;
use crate::reduce::ReduceOp;
use crate::runtime::coll::{Algo, Coll};
use crate::runtime::fabric::FabricError;
use crate::tensor::Tensor;
use crate::trace::{Wait, WaitOn};

/// What a call is, as the hook needs it.
pub(super) struct CallSpec<'a, D = Vec<u8>> {
    /// The group's c10d name (key of `Proc::pgs`).
    pub group: &'a str,
    pub backend: &'a str,
    pub kind: CallKind,
    pub op: &'a str,
    pub seq: u64,
    pub tensor: &'a Tensor<D>,
    /// Broadcast source, global rank.
    pub root: Option<usize>,
    pub reduce_op: Option<ReduceOp>,
    /// p2p: the other side, global rank.
    pub peer: Option<usize>,
    /// all_to_all: rows to and from each member.
    pub splits: Option<Splits>,
    /// The shape every member must agree on when it is not the tensor's: a scatter's root
    /// holds one chunk per member, every member receives one (`None`: the tensor's shape).
    pub agreed_shape: Option<Vec<usize>>,
    /// p2p: the tag (0 for collectives).
    pub tag: u32,
}

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// Records the start of a call; pass the result to [`Proc::call_end`].
    pub(super) fn call_begin<D: Payload>(&self, c: CallSpec<'_, D>) -> CallRecord {
        let pg = &self.pgs[c.group];
        let (shape, nbytes) = match &c.agreed_shape {
            Some(s) => (
                s.clone(),
                c.tensor.dtype.size_bytes() * s.iter().product::<usize>(),
            ),
            None => (c.tensor.shape.clone(), c.tensor.data.len()),
        };
        let rec = CallRecord {
            rank: self
                .world
                .as_ref()
                .map(|w| w.rank)
                .unwrap_or(self.env.proc_rank),
            group: pg.name.clone(),
            group_label: pg.label.clone(),
            group_ranks: pg.ranks.clone(),
            backend: c.backend.to_string(),
            kind: c.kind,
            seq: c.seq,
            peer: c.peer,
            fp: Fingerprint {
                op: c.op.to_string(),
                dtype: c.tensor.dtype.name().to_string(),
                shape,
                nbytes,
                root: c.root,
                reduce_op: c.reduce_op.map(|o| o.name().to_string()),
                splits: c.splits,
            },
            step: self.step,
            line: self.env.scenario.steps[self.step].loc.line,
            state: CallState::Started,
            t_start_ms: self.now(),
            t_end_ms: None,
            t_start_us: self.env.clock.now_us(),
            t_end_us: None,
            tag: c.tag,
        };
        self.env.probe.call(&rec);
        rec
    }

    /// Records how a call ended (a call that never ends stays `started`).
    pub(super) fn call_end(&self, rec: CallRecord, ok: bool) {
        end_record(&self.env.probe, &self.env.clock, rec, ok);
    }

    /// Device backends do not compare a send's size with its recv's (docs/diagnosis.md): a
    /// recv that got another byte count keeps waiting until a timeout rule applies. gloo's pair
    /// raises instead, which the caller does.
    pub(super) async fn p2p_size_rule<D: Payload>(
        &self,
        r: Result<D, FabricError>,
        backend: &str,
        peer: usize,
        seq: u64,
        want_bytes: usize,
        timeout: &Option<(u64, C10dError)>,
    ) -> Result<D, FabricError> {
        match r {
            Ok(d) if d.len() != want_bytes && backend != "gloo" => {
                self.wait(Some(Wait {
                    step: self.step,
                    on: WaitOn::P2pUnchecked,
                    what: format!(
                        "recv #{seq} from rank {peer}: the send has {} bytes, this recv expects \
                         {want_bytes}; the backend does not check and keeps waiting",
                        d.len()
                    ),
                    group: None,
                    seq: Some(seq),
                    peers: vec![peer],
                    since_ms: self.now(),
                    deadline_ms: timeout.as_ref().map(|(d, _)| *d),
                    timeout_error: timeout.as_ref().map(|(_, e)| e.clone().into()),
                }));
                wait_out_peer_exit(&self.env.clock, timeout.as_ref().map(|(d, _)| *d)).await
            }
            r => r,
        }
    }
}

/// Records how a call ended, from a call's own future (async_op calls outlive the step).
pub(super) fn end_record<Q: Probe, K: Clock>(probe: &Q, clock: &K, mut rec: CallRecord, ok: bool) {
    rec.state = if ok {
        CallState::Completed
    } else {
        CallState::Failed
    };
    rec.t_end_ms = Some(clock.now_ms());
    rec.t_end_us = Some(clock.now_us());
    probe.call(&rec);
}

/// The call record's view of a collective: its root as a global rank and its reduce op, which
/// the fingerprint compares (DETAIL does not, R32).
pub(super) fn spec_of<'a, D>(
    coll: &Coll,
    group: &'a str,
    backend: &'a str,
    seq: u64,
    t: &'a Tensor<D>,
    members: &[usize],
) -> CallSpec<'a, D> {
    let (root, reduce_op) = match &coll.algo {
        Algo::Broadcast(r) | Algo::Gather(r) => (Some(members[*r]), None),
        Algo::Scatter { root, .. } => (Some(members[*root]), None),
        Algo::Reduce(op, r) => (Some(members[*r]), Some(*op)),
        Algo::AllReduce(op) | Algo::ReduceScatter { op, .. } => (None, Some(*op)),
        Algo::AllGather { .. } | Algo::AllToAll { .. } | Algo::Barrier => (None, None),
    };
    let splits = match &coll.algo {
        Algo::AllToAll {
            send_rows,
            recv_rows,
            row_elems,
        } => Some(Splits {
            send_rows: send_rows.clone(),
            recv_rows: recv_rows.clone(),
            row_elems: *row_elems,
        }),
        _ => None,
    };
    let agreed_shape = match &coll.algo {
        Algo::Scatter { out_shape, .. } => Some(out_shape.clone()),
        _ => None,
    };
    CallSpec {
        group,
        backend,
        kind: CallKind::Collective,
        op: coll.name(),
        seq,
        tensor: t,
        root,
        reduce_op,
        peer: None,
        splits,
        agreed_shape,
        tag: 0,
    }
}
