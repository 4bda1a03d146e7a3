//! `TORCH_DISTRIBUTED_DEBUG=DETAIL` (R32): before every collective on a gloo, nccl, xccl or ucc
//! group, the `ProcessGroupWrapper` runs a monitored barrier and compares the members'
//! `CollectiveFingerPrint`s, so a mismatch becomes an error instead of a hang. The texts are
//! real torch 2.15 on gloo (docs/diagnosis.md has the commands), where they differ from the spec:
//! shapes print as `4vs 8` (space-joined, no brackets); a member that never arrives fails the
//! group's rank 0 with `[Rank 0]: Ranks 1, 2 failed to pass monitoredBarrier in 5000 ms` (the
//! wrapper's "Monitored Barrier encountered error" wrapping does not apply: gloo throws a
//! `c10::Error`, not a `std::runtime_error`); fingerprints of different serialized lengths are
//! compared by length first, so the other rank prints as `OpType=<the op whose number is that
//! length>` (e.g. barrier vs all_reduce: `OpType=GATHER` / `OpType=REDUCE`).
//!
//! The fingerprint's sequence number is the wrapped backend's (`Pg::backend_seq`): gloo's counts
//! the group's sends and receives too, `monitored_barrier`'s among them, so members that all
//! call the same collective still differ by it after a monitored barrier on 3 or more members
//! (`Sequence number: 4vs 2`, measured) or a send/recv some members took no part in.
//!
//! The exchange goes through the world's store (the real wrapper uses a helper gloo group on
//! the same store), so a member that never arrives is a real wait with the group's timeout. Its
//! keys count the checks on the group, as the helper group's messages meet in that order. The
//! notices gloo writes on the helper group's pairs when a send or receive is posted go over
//! the fabric, so a peer that dies around them resets the pair as the real one does.

use super::{error, Clock, Net, Probe, Proc, Res};
use crate::c10d::collective::CollOp;
use crate::c10d::store::{StoreClient, StoreError};
use crate::runtime::fabric::FabricError;
use crate::scenario::CollStep;
use crate::tensor::Tensor;
use crate::trace::StoreUse;
use std::rc::Rc;

/// One rank's `CollectiveFingerPrint`: op type, the wrapper's sequence number, and each
/// checked tensor's dtype, device type and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FingerPrint {
    pub op: i64,
    pub seq: u64,
    pub tensors: Vec<(String, String, Vec<usize>)>,
}

/// c10d `OpType` numbers (`Types.hpp`), which the length-mismatch text depends on.
const OP_TYPES: [&str; 20] = [
    "BROADCAST",
    "ALLREDUCE",
    "ALLREDUCE_COALESCED",
    "REDUCE",
    "ALLGATHER",
    "_ALLGATHER_BASE",
    "ALLGATHER_COALESCED",
    "GATHER",
    "SCATTER",
    "REDUCE_SCATTER",
    "ALLTOALL_BASE",
    "ALLTOALL",
    "SEND",
    "RECV",
    "RECVANYSOURCE",
    "BARRIER",
    "_REDUCE_SCATTER_BASE",
    "COALESCED",
    "_ALLREDUCE_SPARSE",
    "REDUCE_SCATTER_TENSOR_COALESCED",
];

fn op_name(code: i64) -> &'static str {
    usize::try_from(code)
        .ok()
        .and_then(|c| OP_TYPES.get(c))
        .copied()
        .unwrap_or("UNKNOWN")
}

fn op_code(name: &str) -> i64 {
    OP_TYPES.iter().position(|n| *n == name).unwrap_or(100) as i64
}

/// How `c10::str` prints a device type in the fingerprint (measured for cpu; other device
/// types by the same pattern [inf]).
fn device_text(dev: &str) -> String {
    format!(
        "TensorOptions(dtype=float (default), device={dev}, layout=Strided (default), \
         requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))"
    )
}

impl FingerPrint {
    /// A barrier's: no tensors (`runCollectiveChecks(OpType::BARRIER, {})`; real torch 2.15
    /// fails a `dist.barrier()` whose member never arrives with the wrapper's monitored
    /// barrier text, user-path 7/410).
    pub fn barrier(seq: u64) -> FingerPrint {
        FingerPrint {
            op: op_code("BARRIER"),
            seq,
            tensors: vec![],
        }
    }

    /// What the wrapper checks for `c` (ProcessGroupWrapper.cpp): the op type and which
    /// tensors; all_to_all and the coalesced ops pass none ("alltoall supports uneven split").
    pub fn of<D>(c: &CollStep, input: &Tensor<D>, dev: &str, seq: u64) -> Option<FingerPrint> {
        let t = |shape: &[usize]| {
            vec![(
                input.dtype.torch_name().to_string(),
                dev.to_string(),
                shape.to_vec(),
            )]
        };
        let (op, tensors) = match c.op {
            CollOp::AllReduce => ("ALLREDUCE", t(&input.shape)),
            CollOp::Broadcast => ("BROADCAST", t(&input.shape)),
            CollOp::Reduce => ("REDUCE", t(&input.shape)),
            CollOp::Gather => ("GATHER", t(&input.shape)),
            CollOp::AllGather => ("ALLGATHER", t(&input.shape)),
            CollOp::AllGatherIntoTensor => ("_ALLGATHER_BASE", t(&input.shape)),
            CollOp::Scatter => ("SCATTER", t(&c.tensor.shape)),
            CollOp::ReduceScatter => ("REDUCE_SCATTER", t(&c.tensor.shape)),
            CollOp::AllToAllSingle => ("ALLTOALL_BASE", vec![]),
            CollOp::AllToAll => ("ALLTOALL", vec![]),
            CollOp::AllReduceCoalesced => ("ALLREDUCE_COALESCED", vec![]),
            CollOp::AllGatherCoalesced | CollOp::AllGatherIntoTensorCoalesced => {
                ("ALLGATHER_COALESCED", vec![])
            }
            CollOp::ReduceScatterTensorCoalesced => ("REDUCE_SCATTER_TENSOR_COALESCED", vec![]),
            // Two tensors, input then output (`{inputBuffer, outputBuffer}`); the text prints
            // the input's shape and both dtypes and devices (measured).
            CollOp::ReduceScatterTensor => {
                let mut ts = t(&input.shape);
                ts.extend(t(&c.tensor.shape));
                ("_REDUCE_SCATTER_BASE", ts)
            }
        };
        Some(FingerPrint {
            op: op_code(op),
            seq,
            tensors,
        })
    }

    /// The length of the serialized int64 tensor the wrapper all-gathers first.
    fn serialized_len(&self) -> usize {
        3 + 2 * self.tensors.len() + self.tensors.iter().map(|t| 1 + t.2.len()).sum::<usize>()
    }

    /// `op;seq;dtype,device,d0 d1|...` for the store.
    pub fn encode(&self) -> String {
        let ts: Vec<String> = self
            .tensors
            .iter()
            .map(|(d, v, s)| {
                let dims: Vec<String> = s.iter().map(|x| x.to_string()).collect();
                format!("{d},{v},{}", dims.join(" "))
            })
            .collect();
        format!("{};{};{}", self.op, self.seq, ts.join("|"))
    }

    pub fn decode(s: &str) -> Option<FingerPrint> {
        let mut it = s.splitn(3, ';');
        let op = it.next()?.parse().ok()?;
        let seq = it.next()?.parse().ok()?;
        let rest = it.next()?;
        let mut tensors = Vec::new();
        for t in rest.split('|').filter(|t| !t.is_empty()) {
            let mut f = t.splitn(3, ',');
            let (d, v, s) = (f.next()?, f.next()?, f.next()?);
            let dims = s
                .split(' ')
                .filter(|x| !x.is_empty())
                .map(|x| x.parse().ok())
                .collect::<Option<Vec<usize>>>()?;
            tensors.push((d.to_string(), v.to_string(), dims));
        }
        Some(FingerPrint { op, seq, tensors })
    }

    fn sizes(&self) -> Vec<String> {
        self.tensors
            .first()
            .map(|t| t.2.iter().map(|d| d.to_string()).collect())
            .unwrap_or_default()
    }

    fn dtypes(&self) -> Vec<String> {
        self.tensors.iter().map(|t| t.0.clone()).collect()
    }

    fn devices(&self) -> Vec<String> {
        self.tensors.iter().map(|t| device_text(&t.1)).collect()
    }

    /// `CollectiveFingerPrint(...)` as `operator<<` prints it (no comma before `OpType` when
    /// there are no tensors: real).
    fn text(&self) -> String {
        if self.tensors.is_empty() {
            return format!(
                "CollectiveFingerPrint(SequenceNumber={}OpType={})",
                self.seq,
                op_name(self.op)
            );
        }
        format!(
            "CollectiveFingerPrint(SequenceNumber={}, OpType={}, TensorShape=[{}], TensorDtypes={}, \
             TensorDeviceTypes={})",
            self.seq,
            op_name(self.op),
            self.sizes().join(", "),
            self.dtypes().join(" "),
            self.devices().join(" ")
        )
    }

    /// `compute_collective_diff`: `Collectives differ in the following aspects: ...`.
    fn diff(&self, other: &FingerPrint) -> Option<String> {
        let mut s = String::from("Collectives differ in the following aspects: ");
        let mut found = false;
        if self.seq != other.seq {
            found = true;
            s.push_str(&format!("\t Sequence number: {}vs {}", self.seq, other.seq));
        }
        if op_name(self.op) != op_name(other.op) {
            found = true;
            s.push_str(&format!(
                "  Op type: {}vs {}",
                op_name(self.op),
                op_name(other.op)
            ));
        }
        for (what, mine, theirs) in [
            ("shapes", self.sizes(), other.sizes()),
            ("dtypes", self.dtypes(), other.dtypes()),
            ("devices", self.devices(), other.devices()),
        ] {
            if mine != theirs {
                found = true;
                s.push_str(&format!(
                    "  Tensor Tensor {what}: {}vs {}",
                    mine.join(" "),
                    theirs.join(" ")
                ));
            }
        }
        found.then_some(s)
    }

    /// The error this rank (group rank `me`) raises given every member's fingerprint in group
    /// rank order, if any differs. `verify_tensors` runs twice: over every member's length
    /// first (the shape check), then over every member's contents, so a member whose length
    /// differs is named before a lower one whose contents differ (user-path 7/1051).
    pub fn verify(&self, me: usize, all: &[FingerPrint]) -> Option<String> {
        let len = all
            .iter()
            .enumerate()
            .find(|(_, o)| o.serialized_len() != self.serialized_len())
            .map(|(r, o)| {
                // The shape check all-gathers one-element tensors [len]; deserialising that
                // reads the length as the op type.
                let seen = FingerPrint {
                    op: o.serialized_len() as i64,
                    seq: 0,
                    tensors: vec![],
                };
                (r, seen)
            });
        let (r, seen) = len.or_else(|| {
            all.iter()
                .enumerate()
                .find(|(_, o)| *o != self)
                .map(|(r, o)| (r, o.clone()))
        })?;
        let mut msg = error::detail_mismatch(me, &self.text(), r, &seen.text());
        if let Some(d) = self.diff(&seen) {
            msg.push_str(&d);
        }
        Some(msg)
    }
}

/// How a wait of the wrapper's monitored barrier ended without a timeout.
enum Waited {
    /// The key was set: the member checked in (or rank 0 answered).
    Key,
    /// The peer's process ended first: the helper group's pair with it closed (or reset).
    PeerEnded(FabricError),
}

/// Whether the wrapper is on for this rank and backend (R32: gloo, nccl, xccl, ucc).
fn enabled(env: &std::collections::BTreeMap<String, String>, backend: &str) -> bool {
    env.get("TORCH_DISTRIBUTED_DEBUG").map(|s| s.as_str()) == Some("DETAIL")
        && matches!(backend, "gloo" | "nccl" | "xccl" | "ucc")
}

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// One wait of the wrapper's monitored barrier: `key` within `timeout_ms`, or the end of
    /// `peer`'s process. The barrier runs on a helper gloo group whose pairs all exist, so a
    /// member that died fails the wait on it at once (`Ranks 2 failed to pass
    /// monitoredBarrier`, and its members then read rank 0's close: real torch 2.15, user-path
    /// 7/271), unless its message came first: its key was set before it ended. The store is
    /// this model's carrier only: when it goes (rank 0 hosted it and exited), the wait goes on
    /// on the pair.
    async fn detail_wait(
        &self,
        key: &str,
        timeout_ms: u64,
        peer: usize,
        (what, name): (&str, &str),
    ) -> Result<Waited, StoreError> {
        let used = || (StoreUse::MonitoredBarrier, what.to_string());
        let group = || Some(name.to_string());
        let world = self.world.as_ref().expect("world").store.clone();
        if let Some(e) = self.fabric.has_peer_ended(peer) {
            // Ended before this wait: its key says whether it checked in first.
            return Ok(match world.check(key).await? {
                true => Waited::Key,
                false => Waited::PeerEnded(e),
            });
        }
        let Some(side) = self.abandonable_store(&world).await else {
            let r = self.store_get_on(
                &world,
                key,
                Some(timeout_ms),
                vec![peer],
                used(),
                group(),
                None,
            );
            return r.await.map(|_| Waited::Key);
        };
        let deadline_ms = self.now() + timeout_ms;
        let lost = tokio::select! {
            biased;
            r = self.store_get_on(&side, key, Some(timeout_ms), vec![peer], used(), group(), None) => {
                match r {
                    Ok(_) => return Ok(Waited::Key),
                    Err(e @ StoreError::Wire(_)) => e,
                    Err(e) => return Err(e),
                }
            }
            e = self.fabric.peer_ended(peer) => {
                self.wait(None);
                return Ok(Waited::PeerEnded(e));
            }
        };
        tokio::select! {
            e = self.fabric.peer_ended(peer) => Ok(Waited::PeerEnded(e)),
            _ = self.env.clock.sleep_until_ms(deadline_ms) => Err(match lost {
                StoreError::Wire(_) => StoreError::Timeout {
                    key: key.to_string(),
                    timeout_ms,
                    value: 0,
                },
                e => e,
            }),
        }
    }

    /// A store client whose blocking read may be given up half-way: a FileStore's (no
    /// connection), else a connection of its own to the same TCPStore, closed with it, so the
    /// world's connection never carries an answer nobody reads. `None` for PyTorch's own store
    /// protocol (torch mode's agent store): its wait is then not raced.
    async fn abandonable_store(&self, world: &Rc<StoreClient<N>>) -> Option<Rc<StoreClient<N>>> {
        if world.as_file().is_some() {
            return Some(world.clone());
        }
        if world.is_torch() {
            return None;
        }
        let (host, port) = world.addr.rsplit_once(':')?;
        let s = self.env.net.connect(host, port.parse().ok()?).await.ok()?;
        let c = StoreClient::open(&self.env.net, s, world.addr.clone())
            .await
            .ok()?;
        Some(Rc::new(c))
    }

    /// The wrapper's checks when DETAIL wraps `backend`: `fp` makes the call's fingerprint
    /// from the group's sequence number (None: a call the wrapper does not check).
    pub(super) async fn wrapper_checks(
        &mut self,
        name: &str,
        backend: &str,
        fp: impl FnOnce(u64) -> Option<FingerPrint>,
    ) -> Res<()> {
        // split_group's groups are the backend's own split, not wrapped (R40: real torch 2.15
        // under DETAIL runs them as plain ProcessGroupGloo).
        if !enabled(&self.spec.env, backend) || self.pgs[name].split {
            return Ok(());
        }
        match fp(self.pgs[name].backend_seq(backend)) {
            Some(fp) => self.detail_checks(name, fp).await,
            None => Ok(()),
        }
    }

    /// The wrapper's checks before collective `fp` on group `name`: a monitored barrier
    /// (every member checks in with the group's rank 0, which answers once all did), then
    /// every member's fingerprint compared with this rank's.
    pub(super) async fn detail_checks(&mut self, name: &str, fp: FingerPrint) -> Res<()> {
        let pg = &self.pgs[name];
        let (ranks, timeout_ms) = (pg.ranks.clone(), pg.timeout_ms);
        let me = pg
            .group_rank(self.world()?.rank)
            .ok_or_else(|| error::internal("DETAIL checks on a group this rank is not in"))?;
        let store = self.world()?.store.clone();
        // The helper group's messages meet in the order of the checks, whatever the members'
        // sequence numbers (which may differ: that is what the check reports).
        let (n, nth) = {
            let pg = self.pgs.get_mut(name).expect("pg");
            pg.detail_checks += 1;
            (pg.detail_checks, pg.seq + 1)
        };
        let key = |g: usize| format!("pg_wrapper:{name}/detail/{n}/{g}");
        let ack = format!("pg_wrapper:{name}/detail/{n}/ack");
        if me != 0 {
            // A member posts its check-in's send first (user-path 7/910).
            self.detail_peers_gone(&ranks[..1], &fp).await?;
        }
        store
            .set(&key(me), fp.encode().as_bytes())
            .await
            .map_err(|e| self.store_err(e))?;
        let deadline = self.now() + timeout_ms;
        let what = format!("DETAIL monitoredBarrier before collective #{nth} on group {name}");
        if me == 0 {
            // A member whose process ended before rank 0 came never sent its check-in (gloo
            // sends once the receive is posted): rank 0's receive is posted on a closed pair.
            self.detail_peers_gone(&ranks[1..], &fp).await?;
            // gloo's rank 0 posts a receive for every member at once (a notice on each pair).
            for g in 1..ranks.len() {
                self.detail_notice(ranks[g], &key(g)).await;
            }
            // wait_all_ranks: a member whose process ended fails to pass, the others are still
            // waited for (in rank order, within the barrier's time).
            let mut ended = Vec::new();
            for g in 1..ranks.len() {
                let left = deadline.saturating_sub(self.now()).max(1);
                match self
                    .detail_wait(&key(g), left, ranks[g], (&what, name))
                    .await
                {
                    Ok(Waited::Key) => {}
                    Ok(Waited::PeerEnded(_)) => ended.push(g),
                    Err(StoreError::Timeout { .. }) => {
                        let mut missing = Vec::new();
                        for g in 1..ranks.len() {
                            if !store.check(&key(g)).await.unwrap_or(false) {
                                missing.push(g);
                            }
                        }
                        return Err(error::monitored_barrier_missing(&missing, timeout_ms));
                    }
                    Err(e) => return Err(self.store_err(e)),
                }
            }
            if !ended.is_empty() {
                return Err(error::monitored_barrier_missing(&ended, timeout_ms));
            }
            for &r in &ranks[1..] {
                let _ = self.fabric.try_recv(r, &format!("{ack}/notice"));
            }
            store.set(&ack, b"1").await.map_err(|e| self.store_err(e))?;
        } else {
            let keys = (key(0), key(me), ack.clone());
            self.detail_check_in(me, ranks[0], keys, timeout_ms, (&what, name))
                .await?;
        }
        let mut all = Vec::with_capacity(ranks.len());
        for g in 0..ranks.len() {
            let v = store
                .get(&key(g), timeout_ms)
                .await
                .map_err(|e| self.store_err(e))?;
            let text = String::from_utf8_lossy(&v);
            all.push(FingerPrint::decode(&text).ok_or_else(|| error::malformed_fingerprint(g))?);
        }
        match fp.verify(me, &all) {
            Some(msg) => Err(error::detail_error(msg)),
            None => Ok(()),
        }
    }

    /// Posting on a gloo pair that has read its peer's close throws at once, outside
    /// monitoredBarrier's try, and the wrapper wraps the pair's error: rank 0 posting its
    /// receives from members that are gone (user-path 7/777), a member posting its check-in's
    /// send to a rank 0 that is gone (7/910; real torch 2.15; monitored.rs has the bare
    /// monitored_barrier's own texts, 7/515).
    async fn detail_peers_gone(&self, peers: &[usize], fp: &FingerPrint) -> Res<()> {
        for &r in peers {
            self.fabric.watch(r).await;
            if let Some(e) = self.fabric.has_peer_ended(r) {
                return Err(error::detail_barrier_error(&fp.text(), &e.into_c10d(None)));
            }
        }
        Ok(())
    }

    /// A member's side of the wrapper's monitored barrier (gloo's `monitoredBarrier`): its
    /// check-in's send and its answer's receive posted at once (notices on the pair with rank
    /// 0); the send completes once rank 0 came and posted its receive (`came`, rank 0's own
    /// key), then the receive waits for rank 0's answer (`ack`), each within the group's
    /// timeout. A member whose rank 0 came late times out in the receive, its timeout counted
    /// from rank 0's coming (user-path 7/465, real torch 2.15).
    async fn detail_check_in(
        &self,
        me: usize,
        root: usize,
        (came, mine, ack): (String, String, String),
        timeout_ms: u64,
        at: (&str, &str),
    ) -> Res<()> {
        self.detail_notice(root, &ack).await;
        for (key, answer) in [(&came, false), (&ack, true)] {
            match self.detail_wait(key, timeout_ms, root, at).await {
                Ok(Waited::Key) => {}
                Ok(Waited::PeerEnded(e)) => {
                    return Err(error::monitored_barrier_peer_errors(me, &e.into_c10d(None)))
                }
                Err(StoreError::Timeout { .. }) => {
                    return Err(error::monitored_barrier_no_answer(me, timeout_ms, answer))
                }
                Err(e) => return Err(self.store_err(e)),
            }
        }
        // Rank 0's notice for this member's check-in, done with.
        let _ = self.fabric.try_recv(root, &format!("{mine}/notice"));
        Ok(())
    }

    /// A notice of the helper group's gloo pair with `peer` (a posted send or receive: gloo
    /// writes one at once), so a peer that dies around it resets this rank's pair as the
    /// real one does (user-path 7/468). The barrier's own messages go through the store.
    /// A peer already gone shows in the wait that follows.
    async fn detail_notice(&self, peer: usize, key: &str) {
        let _ = self.fabric.send(peer, &format!("{key}/notice"), &[]).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(op: &str, seq: u64, shape: &[usize]) -> FingerPrint {
        FingerPrint {
            op: op_code(op),
            seq,
            tensors: vec![("Float".into(), "cpu".into(), shape.to_vec())],
        }
    }

    const CPU: &str = "TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))";

    /// Texts of `TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun --nproc-per-node 2` on gloo, torch 2.15.
    #[test]
    fn texts_match_real_torch_2_15() {
        let a = fp("ALLREDUCE", 0, &[2, 3]);
        let b = fp("ALLREDUCE", 0, &[3, 2]);
        assert_eq!(
            a.verify(0, &[a.clone(), b.clone()]).unwrap(),
            format!("Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[2, 3], TensorDtypes=Float, TensorDeviceTypes={CPU}), but Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[3, 2], TensorDtypes=Float, TensorDeviceTypes={CPU}).Collectives differ in the following aspects:   Tensor Tensor shapes: 2 3vs 3 2")
        );
        let barrier = FingerPrint {
            op: op_code("BARRIER"),
            seq: 0,
            tensors: vec![],
        };
        let ar = fp("ALLREDUCE", 0, &[4]);
        assert_eq!(
            barrier.verify(0, &[barrier.clone(), ar.clone()]).unwrap(),
            "Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=0OpType=BARRIER), but Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=0OpType=GATHER).Collectives differ in the following aspects:   Op type: BARRIERvs GATHER"
        );
        assert_eq!(
            ar.verify(1, &[barrier.clone(), ar.clone()]).unwrap(),
            format!("Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[4], TensorDtypes=Float, TensorDeviceTypes={CPU}), but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=0OpType=REDUCE).Collectives differ in the following aspects:   Op type: ALLREDUCEvs REDUCE  Tensor Tensor shapes: 4vs   Tensor Tensor dtypes: Floatvs   Tensor Tensor devices: {CPU}vs ")
        );
        assert!(ar.verify(0, &[ar.clone(), ar.clone()]).is_none());
        // reduce_scatter_tensor: input then output checked, the input's shape printed (2 ranks,
        // outputs of 3 and 2 floats, processes).
        let rs = |seq, n: usize| FingerPrint {
            op: op_code("_REDUCE_SCATTER_BASE"),
            seq,
            tensors: vec![
                ("Float".into(), "cpu".into(), vec![2 * n]),
                ("Float".into(), "cpu".into(), vec![n]),
            ],
        };
        assert_eq!(
            rs(1, 3).verify(0, &[rs(1, 3), rs(1, 2)]).unwrap(),
            format!("Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=1, OpType=_REDUCE_SCATTER_BASE, TensorShape=[6], TensorDtypes=Float Float, TensorDeviceTypes={CPU} {CPU}), but Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=1, OpType=_REDUCE_SCATTER_BASE, TensorShape=[4], TensorDtypes=Float Float, TensorDeviceTypes={CPU} {CPU}).Collectives differ in the following aspects:   Tensor Tensor shapes: 6vs 4")
        );
        // The same all_reduce after a monitored barrier on 3 ranks: gloo's numbers 4 and 2.
        assert_eq!(
            fp("ALLREDUCE", 2, &[4]).verify(2, &[fp("ALLREDUCE", 4, &[4]), fp("ALLREDUCE", 2, &[4]), fp("ALLREDUCE", 2, &[4])]).unwrap(),
            format!("Detected mismatch between collectives on ranks. Rank 2 is running collective: CollectiveFingerPrint(SequenceNumber=2, OpType=ALLREDUCE, TensorShape=[4], TensorDtypes=Float, TensorDeviceTypes={CPU}), but Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=4, OpType=ALLREDUCE, TensorShape=[4], TensorDtypes=Float, TensorDeviceTypes={CPU}).Collectives differ in the following aspects: \t Sequence number: 2vs 4")
        );
        // Every length is checked before any contents (user-path 7/1051, processes): group
        // ranks 0-2 in reduce_scatter_tensor (rank 2 behind in sequence), rank 3 in
        // all_gather_into_tensor (a shorter fingerprint): rank 0 names rank 3, not rank 2.
        let ag = fp("_ALLGATHER_BASE", 0, &[2]);
        assert_eq!(
            rs(1, 8).verify(0, &[rs(1, 8), rs(1, 8), rs(0, 8), ag.clone()]).unwrap(),
            format!("Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=1, OpType=_REDUCE_SCATTER_BASE, TensorShape=[16], TensorDtypes=Float Float, TensorDeviceTypes={CPU} {CPU}), but Rank 3 is running collective: CollectiveFingerPrint(SequenceNumber=0OpType=GATHER).Collectives differ in the following aspects: \t Sequence number: 1vs 0  Op type: _REDUCE_SCATTER_BASEvs GATHER  Tensor Tensor shapes: 16vs   Tensor Tensor dtypes: Float Floatvs   Tensor Tensor devices: {CPU} {CPU}vs ")
        );
        assert_eq!(FingerPrint::decode(&a.encode()), Some(a));
    }
}
