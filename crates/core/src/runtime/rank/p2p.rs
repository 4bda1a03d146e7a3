//! Point-to-point: send/recv, isend/irecv and batch_isend_irecv (no c10d rule of its own; DETAIL skips it, docs/rules/c10d.md#r32).

use super::*;
use crate::c10d::error;
use crate::net::{Clock, Net};
use crate::payload::Symbolic;
use crate::probe::Probe;
use crate::runtime::coll::OutVars;
use crate::runtime::coll::{Done, Fill};
use crate::runtime::fabric::FabricError;
use crate::scenario::expr::Expr;
use crate::scenario::{IntArg, P2pOp, TensorSpec};
use crate::tensor::Tensor;
use crate::trace::{Dir, Wait, WaitOn};

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// `end`: the peer, whether this rank sends, and the tag.
    pub(super) async fn p2p(
        &mut self,
        group: &Option<String>,
        spec: &TensorSpec,
        end: (usize, bool, u32),
        expect: &Option<Expr>,
    ) -> Res<String> {
        if self.env.scenario.sim.payloads.symbolic() {
            let (t, dev) = self.make_symbolic(spec);
            self.p2p_with(group, spec, t, dev, end, expect).await
        } else {
            let (t, dev) = self.make_tensor(spec);
            self.p2p_with(group, spec, t, dev, end, expect).await
        }
    }

    /// A step's tensor as a symbolic payload (its fill's digest, no values).
    pub(super) fn make_symbolic(&self, spec: &TensorSpec) -> (Tensor<Symbolic>, String) {
        let n = spec.shape.iter().product::<usize>();
        let t = Symbolic::fill(spec, spec.shape.clone(), n, &|v| self.var(v));
        let dev = spec
            .device
            .clone()
            .unwrap_or_else(|| self.accel().to_string());
        (t, dev)
    }

    /// A received tensor's done text: checked values, or a symbolic summary.
    pub(super) fn p2p_result<D: Fill>(
        &self,
        spec: &TensorSpec,
        expect: &Option<Expr>,
        out: Tensor<D>,
        vars: &OutVars,
    ) -> Res<String> {
        match D::done(out, None) {
            Done::Values(out, _) => self.check_values(spec, expect, &out, vars),
            Done::Symbolic(out, _) => Ok(out.summary()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn p2p_with<D: Fill>(
        &mut self,
        group: &Option<String>,
        spec: &TensorSpec,
        t: Tensor<D>,
        dev: String,
        (peer, send, tag): (usize, bool, u32),
        expect: &Option<Expr>,
    ) -> Res<String> {
        let op = if send { "send" } else { "recv" };
        let Some(name) = self.resolve_group(group)? else {
            return self.non_member(op, expect);
        };
        let me = self.world()?.rank;
        let backend = self.p2p_checks(&name, &t, &dev, peer)?;
        let (src, dst) = if send { (me, peer) } else { (peer, me) };
        if backend != "gloo" {
            self.ensure_comm(&name, &dev, &backend, Some((src, dst)))
                .await?;
        }
        match self
            .p2p_transfer(&name, &backend, &t, (peer, send, tag), false)
            .await?
        {
            None => Ok(format!("sent {} elements to rank {peer}", t.numel())),
            Some(out) => {
                let vars = OutVars::flat(out.numel());
                self.p2p_result(spec, expect, out, &vars)
            }
        }
    }

    /// The checks a p2p call makes before it posts anything; returns its backend.
    pub(super) fn p2p_checks<D: Fill>(
        &self,
        name: &str,
        t: &Tensor<D>,
        dev: &str,
        peer: usize,
    ) -> Res<String> {
        let backend = self.pgs[name].config.backend_for(dev)?.to_string();
        self.check_device(&backend, dev)?;
        self.check_dtype(&backend, t.dtype, None)?;
        if self.pgs[name].group_rank(peer).is_none() {
            return Err(error::not_in_group(peer, &self.pgs[name].label));
        }
        if peer == self.world()?.rank {
            return Err(error::send_to_self());
        }
        Ok(backend)
    }

    /// One send or receive of `t` with `peer` on group `name` (its communicator ready); returns
    /// the received tensor. `announced`: a gloo receive whose ready notice
    /// ([`Self::announce_recvs`]) was already sent.
    pub(super) async fn p2p_transfer<D: Fill>(
        &mut self,
        name: &str,
        backend: &str,
        t: &Tensor<D>,
        (peer, send, tag): (usize, bool, u32),
        announced: bool,
    ) -> Res<Option<Tensor<D>>> {
        let p = self.p2p_begin(name, backend, t, (peer, send, tag))?;
        if backend != "gloo" {
            if let Some(d) = self.env.device.clone() {
                let Some(values) = D::values_ref(t) else {
                    return Err(error::symbolic_on_device());
                };
                let (seq, label, timeout) = (p.seq, p.group_label, p.timeout);
                let r = self
                    .p2p_device(&*d, name, values, peer, send, seq, label, timeout)
                    .await;
                self.call_end(p.call, r.is_ok());
                return r.map(|o| o.map(D::from_values));
            }
        }
        if send {
            return self.p2p_send(backend, t, peer, p).await.map(|_| None);
        }
        self.p2p_recv(name, backend, t, peer, announced, p)
            .await
            .map(Some)
    }

    /// A p2p call's sequence number on its (src, dst) pair, tag, timeout and flight record.
    pub(super) fn p2p_begin<D: Fill>(
        &mut self,
        name: &str,
        backend: &str,
        t: &Tensor<D>,
        (peer, send, user_tag): (usize, bool, u32),
    ) -> Res<P2pCall> {
        let me = self.world()?.rank;
        let (src, dst) = if send { (me, peer) } else { (peer, me) };
        // gloo matches a send and a recv by their tag too; NCCL and XCCL ignore it.
        let user_tag = if backend == "gloo" { user_tag } else { 0 };
        let pg = self.pgs.get_mut(name).expect("pg");
        if backend == "gloo" {
            pg.gloo_p2p += 1;
        }
        let n = pg.p2p_seq.entry((src, dst)).or_insert(0);
        *n += 1;
        let seq = *n;
        let m = pg.p2p_match.entry((src, dst, user_tag)).or_insert(0);
        *m += 1;
        let nth = *m;
        let pg = &self.pgs[name];
        let tag = fabric_tag(&pg.name, backend, (src, dst), user_tag, nth);
        let timeout = self.op_timeout(
            backend,
            pg.timeout_ms,
            seq,
            if send { "SEND" } else { "RECV" },
            t.numel(),
        );
        let group_label = format!("{} ({})", pg.label, pg.name);
        let pg_timeout_ms = pg.timeout_ms;
        let (kind, op) = if send {
            (CallKind::Send, "send")
        } else {
            (CallKind::Recv, "recv")
        };
        let call = self.call_begin(CallSpec {
            group: name,
            backend,
            kind,
            op,
            seq,
            tensor: t,
            root: None,
            reduce_op: None,
            peer: Some(peer),
            splits: None,
            agreed_shape: None,
            tag: user_tag,
        });
        Ok(P2pCall {
            numel: t.numel(),
            tag,
            seq,
            group_label,
            pg_timeout_ms,
            timeout,
            call,
        })
    }

    /// A send over the fabric (gloo: its notice to the receiver and the wait for its ready
    /// notice first).
    async fn p2p_send<D: Fill>(
        &mut self,
        backend: &str,
        t: &Tensor<D>,
        peer: usize,
        p: P2pCall,
    ) -> Res<()> {
        let tag = &p.tag;
        if backend == "gloo" {
            // gloo's send notifies its receiver first (NOTIFY_SEND_READY): a receiver
            // killed meanwhile leaves it unread and resets this rank's connection.
            if let Err(e) = self.fabric.send(peer, &send_notice_tag(tag), &[]).await {
                self.call_end(p.call, false);
                return Err(e.into_c10d(None));
            }
            if let Err(e) = self
                .await_ready(tag, peer, p.seq, p.group_label, p.pg_timeout_ms)
                .await
            {
                self.call_end(p.call, false);
                return Err(e);
            }
        }
        let me = self.env.proc_rank;
        let device = backend != "gloo";
        self.env.clock.charge(me, peer, device, t.data.len()).await;
        let r = self.fabric.send(peer, tag, &t.data.wire()).await;
        self.call_end(p.call, r.is_ok());
        r.map_err(|e| e.into_c10d(None))
    }

    /// A receive over the fabric, waited on as the rank's wait, under the backend's size rules.
    pub(super) async fn p2p_recv<D: Fill>(
        &mut self,
        name: &str,
        backend: &str,
        t: &Tensor<D>,
        peer: usize,
        announced: bool,
        p: P2pCall,
    ) -> Res<Tensor<D>> {
        let P2pCall {
            tag,
            seq,
            group_label,
            timeout,
            call,
            ..
        } = p;
        if backend == "gloo" && !announced {
            if let Err(e) = self.fabric.send(peer, &ready_tag(&tag), &[]).await {
                self.call_end(call, false);
                return Err(e.into_c10d(None));
            }
        }
        self.wait(Some(Wait {
            step: self.step,
            on: WaitOn::P2p { dir: Dir::Recv },
            what: format!("recv #{seq} from rank {peer} on group {group_label}"),
            group: Some(group_label),
            seq: Some(seq),
            peers: vec![peer],
            since_ms: self.now(),
            deadline_ms: timeout.as_ref().map(|(d, _)| *d),
            timeout_error: timeout.as_ref().map(|(_, e)| e.clone().into()),
        }));
        let scope = (backend == "gloo").then(|| self.pgs[name].name.clone());
        let r = self
            .fabric
            .recv_any(
                &self.env.clock,
                &[peer],
                &tag,
                timeout.as_ref().map(|(d, _)| *d),
                scope.as_deref(),
            )
            .await;
        if let Some(scope) = &scope {
            self.close_on_timeout(&r, scope).await;
        }
        let r = r.map(|(_, m)| m).and_then(|body| {
            D::decode(&body).ok_or_else(|| {
                FabricError::Wire(crate::wire::WireError::Malformed(format!(
                    "rank {peer} sent a message of another payload kind"
                )))
            })
        });
        let r = self
            .p2p_size_rule(r, backend, peer, seq, t.data.len(), &timeout)
            .await;
        self.wait(None);
        // The sender's notice came before its data: done with.
        let _ = self.fabric.try_recv(peer, &send_notice_tag(&tag));
        // gloo's pair takes a message shorter than the posted buffer into its first bytes.
        let r = r.map(|data| {
            if backend == "gloo" && data.len() < t.data.len() {
                let mut full = t.data.clone();
                full.copy_in(0..data.len(), &data);
                full
            } else {
                data
            }
        });
        let size_ok = r.as_ref().is_ok_and(|d| d.len() == t.data.len());
        self.call_end(call, size_ok);
        let data = r.map_err(|e| e.into_c10d(timeout.clone().map(|(_, e)| e)))?;
        if data.len() != t.data.len() {
            // Only gloo gets here (a device backend's recv of another size waits on,
            // p2p_size_rule), with a longer message: it aborts the process. The message is
            // read; what its sender sends next, unread, resets its connection (the rule of
            // gloo's collectives too).
            self.fabric.died_reading();
            return Err(error::gloo_enforce_abort(data.len(), t.data.len()));
        }
        Ok(Tensor {
            dtype: t.dtype,
            shape: t.shape.clone(),
            data,
        })
    }

    /// A gloo send waits until its receiver has posted the matching recv (gloo's unbound
    /// buffers rendezvous: the receiver's notice comes first, then the data), so an unmatched
    /// send times out as real gloo's does.
    async fn await_ready(
        &mut self,
        tag: &str,
        peer: usize,
        seq: u64,
        group_label: String,
        timeout_ms: u64,
    ) -> Res<()> {
        let deadline_ms = self.now() + timeout_ms;
        let timeout_error = error::gloo_send_timeout(timeout_ms);
        let wait = Wait {
            step: self.step,
            on: WaitOn::P2p { dir: Dir::Send },
            what: format!("send #{seq} to rank {peer} on group {group_label} (waits for its recv)"),
            group: Some(group_label),
            seq: Some(seq),
            peers: vec![peer],
            since_ms: self.now(),
            deadline_ms: Some(deadline_ms),
            timeout_error: Some(timeout_error.clone().into()),
        };
        let scope = tag.split('/').next().unwrap_or_default().to_string();
        let r = self
            .gloo_wait_for(wait, peer, &ready_tag(tag), &scope)
            .await;
        r.map(|_| ()).map_err(|e| e.into_c10d(Some(timeout_error)))
    }

    /// One gloo wait, described by `wait`, for the message `tag` from `peer` in context `scope`
    /// until the wait's deadline: the rank waits meanwhile, and a timeout closes the group's
    /// pairs as gloo's does.
    pub(super) async fn gloo_wait_for(
        &mut self,
        wait: Wait,
        peer: usize,
        tag: &str,
        scope: &str,
    ) -> Result<Vec<u8>, FabricError> {
        let deadline_ms = wait.deadline_ms;
        self.wait(Some(wait));
        let r = self
            .fabric
            .recv_any(&self.env.clock, &[peer], tag, deadline_ms, Some(scope))
            .await;
        self.close_on_timeout(&r, scope).await;
        self.wait(None);
        r.map(|(_, m)| m)
    }

    /// A gloo wait in group `scope` that timed out closes the group's pairs
    /// ([`crate::runtime::fabric::Fabric::close_pairs`]).
    async fn close_on_timeout<T>(&self, r: &Result<T, FabricError>, scope: &str) {
        if let Err(FabricError::Timeout) = r {
            if let Some(pg) = self.pgs.values().find(|pg| pg.name == scope) {
                self.fabric
                    .close_pairs(&self.env.clock, scope, &pg.ranks)
                    .await;
            }
        }
    }

    /// A gloo batch posts every receive before any send completes: each receive's ready
    /// notice goes out first (the tags its receives will have), so two ranks that both send
    /// first do not wait on each other.
    async fn announce_recvs(
        &mut self,
        name: &str,
        backend: &str,
        ops: &[P2pOp],
        peers: &[usize],
    ) -> Res<()> {
        if backend != "gloo" {
            return Ok(());
        }
        let me = self.world()?.rank;
        let mut next: std::collections::BTreeMap<(usize, u32), u64> =
            std::collections::BTreeMap::new();
        for (o, p) in ops.iter().zip(peers) {
            if o.send {
                continue;
            }
            let done = self.pgs[name]
                .p2p_match
                .get(&(*p, me, o.tag))
                .copied()
                .unwrap_or(0);
            let k = next.entry((*p, o.tag)).or_insert(done);
            *k += 1;
            let tag = fabric_tag(&self.pgs[name].name, backend, (*p, me), o.tag, *k);
            self.fabric
                .send(*p, &ready_tag(&tag), &[])
                .await
                .map_err(|e| e.into_c10d(None))?;
        }
        Ok(())
    }

    /// `batch_isend_irecv`: the group's communicator (every member must join the first batch),
    /// all sends posted, then every receive completed and checked.
    pub(super) async fn batch_p2p(
        &mut self,
        group: &Option<String>,
        spec: &TensorSpec,
        ops: &[P2pOp],
        expect: &Option<Expr>,
    ) -> Res<String> {
        let Some(name) = self.resolve_group(group)? else {
            return self.non_member("batch_isend_irecv", expect);
        };
        if self.env.scenario.sim.payloads.symbolic() {
            let (t, dev) = self.make_symbolic(spec);
            self.batch_with(&name, spec, t, dev, ops, expect).await
        } else {
            let (t, dev) = self.make_tensor(spec);
            self.batch_with(&name, spec, t, dev, ops, expect).await
        }
    }

    async fn batch_with<D: Fill>(
        &mut self,
        name: &str,
        spec: &TensorSpec,
        t: Tensor<D>,
        dev: String,
        ops: &[P2pOp],
        expect: &Option<Expr>,
    ) -> Res<String> {
        let name = name.to_string();
        let backend = self.pgs[&name].config.backend_for(&dev)?.to_string();
        self.check_device(&backend, &dev)?;
        self.check_dtype(&backend, t.dtype, None)?;
        let peers: Vec<usize> = ops
            .iter()
            .map(|o| match &o.peer {
                IntArg::Int(i) => (*i).max(0) as usize,
                IntArg::Expr(e) => e.eval(&|v| self.var(v)).max(0.0) as usize,
            })
            .collect();
        for p in &peers {
            if self.pgs[&name].group_rank(*p).is_none() {
                return Err(error::not_in_group(*p, &self.pgs[&name].label));
            }
        }
        if backend != "gloo" {
            self.ensure_comm(&name, &dev, &backend, None).await?;
        }
        self.announce_recvs(&name, &backend, ops, &peers).await?;
        // gloo posts every isend at once (its data goes when its receiver posts), then the
        // program waits each request in list order; a device backend's sends go in order.
        let mut posted = if backend == "gloo" {
            self.post_isends(&name, &backend, &t, ops, &peers).await?
        } else {
            for (o, p) in ops.iter().zip(&peers).filter(|(o, _)| o.send) {
                self.p2p_transfer(&name, &backend, &t, (*p, true, o.tag), false)
                    .await?;
            }
            Default::default()
        };
        let mut notes = Vec::new();
        for (k, (o, p)) in ops.iter().zip(&peers).enumerate() {
            if o.send {
                if let Some((handle, sent)) = posted.pop_front() {
                    self.wait_isend(handle, sent, None).await?;
                }
                continue;
            }
            let out = self
                .p2p_transfer(&name, &backend, &t, (*p, false, o.tag), true)
                .await?
                .expect("a receive returns data");
            let vars = OutVars::flat(out.numel())
                .with("peer", *p as f64)
                .with("k", k as f64);
            notes.push(format!(
                "from {p}: {}",
                self.p2p_result(spec, expect, out, &vars)?
            ));
        }
        let sends = ops.iter().filter(|o| o.send).count();
        Ok(format!("{sends} sent; {}", notes.join("; ")))
    }
}

/// The fabric tag of the `nth` message from `src` to `dst` with the user's tag `user_tag` on
/// group `group` (gloo pairs the n-th send and recv with the same peer and tag).
fn fabric_tag(
    group: &str,
    backend: &str,
    (src, dst): (usize, usize),
    user_tag: u32,
    nth: u64,
) -> String {
    match user_tag {
        0 => format!("{group}/{backend}/p2p/{src}->{dst}/{nth}"),
        u => format!("{group}/{backend}/p2p/{src}->{dst}/t{u}/{nth}"),
    }
}

pub(super) use crate::runtime::fabric::{ready_tag, send_notice_tag};

/// One p2p call as it runs: its sequence number on its (src, dst) pair, fabric tag, group
/// label, timeouts and flight record.
pub(super) struct P2pCall {
    pub numel: usize,
    pub tag: String,
    pub seq: u64,
    pub group_label: String,
    pub pg_timeout_ms: u64,
    pub timeout: Option<(u64, C10dError)>,
    pub call: crate::diagnose::CallRecord,
}
