//! Point-to-point: send/recv, isend/irecv and batch_isend_irecv (c10d.md R30).

use super::*;
use crate::c10d::error;
use crate::runtime::coll::OutVars;
use crate::runtime::net::{Clock, Net};
use crate::scenario::expr::Expr;
use crate::scenario::{IntArg, P2pOp, TensorSpec};
use crate::tensor::Tensor;
use crate::trace::{Probe, Wait};

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    pub(super) async fn p2p(
        &mut self,
        group: &Option<String>,
        spec: &TensorSpec,
        peer: usize,
        send: bool,
        expect: &Option<Expr>,
    ) -> Res<String> {
        let (t, dev) = self.make_tensor(spec);
        let op = if send { "send" } else { "recv" };
        let Some(name) = self.resolve_group(group)? else {
            return self.non_member(op, expect);
        };
        let me = self.world()?.rank;
        let backend = self.pgs[&name].config.backend_for(&dev)?.to_string();
        self.check_device(&backend, &dev)?;
        self.check_dtype(&backend, t.dtype, None)?;
        if self.pgs[&name].group_rank(peer).is_none() {
            return Err(error::value(format!(
                "Global rank {peer} is not part of group {}",
                self.pgs[&name].label
            )));
        }
        if peer == me {
            return Err(error::value("Invalid destination rank: destination rank should not be the same as the rank of the current process."));
        }
        let (src, dst) = if send { (me, peer) } else { (peer, me) };
        if backend != "gloo" {
            self.ensure_comm(&name, &dev, &backend, Some((src, dst)))
                .await?;
        }
        match self.p2p_transfer(&name, &backend, &t, peer, send).await? {
            None => Ok(format!("sent {} elements to rank {peer}", t.numel())),
            Some(out) => self.check_values(spec, expect, &out, &OutVars::flat(out.numel())),
        }
    }

    /// One send or receive of `t` with `peer` on group `name` (its communicator ready); returns
    /// the received tensor.
    pub(super) async fn p2p_transfer(
        &mut self,
        name: &str,
        backend: &str,
        t: &Tensor,
        peer: usize,
        send: bool,
    ) -> Res<Option<Tensor>> {
        let me = self.world()?.rank;
        let (src, dst) = if send { (me, peer) } else { (peer, me) };
        let pg = self.pgs.get_mut(name).expect("pg");
        let n = pg.p2p_seq.entry((src, dst)).or_insert(0);
        *n += 1;
        let seq = *n;
        let pg = &self.pgs[name];
        let tag = format!("{}/{backend}/p2p/{src}->{dst}/{seq}", pg.name);
        let timeout = self.op_timeout(
            backend,
            pg,
            seq,
            if send { "SEND" } else { "RECV" },
            t.numel(),
        );
        let group_label = format!("{} ({})", pg.label, pg.name);
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
        });
        if backend != "gloo" {
            if let Some(d) = self.env.device.clone() {
                let r = self
                    .p2p_device(&*d, name, t, peer, send, seq, group_label, timeout)
                    .await;
                self.call_end(call, r.is_ok());
                return r;
            }
        }
        if send {
            let me = self.env.proc_rank;
            let device = backend != "gloo";
            self.env.clock.charge(me, peer, device, t.data.len()).await;
            let r = self.fabric.send(peer, &tag, &t.data).await;
            self.call_end(call, r.is_ok());
            r.map_err(|e| error::runtime(e.to_string()))?;
            return Ok(None);
        }
        self.wait(Some(Wait {
            step: self.step,
            what: format!("recv #{seq} from rank {peer} on group {group_label}"),
            group: Some(group_label),
            seq: Some(seq),
            peers: vec![peer],
            since_ms: self.now(),
            deadline_ms: timeout.as_ref().map(|(d, _)| *d),
            timeout_error: timeout.as_ref().map(|(_, e)| e.to_string()),
        }));
        let r = self
            .fabric
            .recv(
                &self.env.clock,
                peer,
                &tag,
                timeout.as_ref().map(|(d, _)| *d),
            )
            .await;
        let r = self
            .p2p_size_rule(r, backend, peer, seq, t.data.len(), &timeout)
            .await;
        self.wait(None);
        let size_ok = r.as_ref().is_ok_and(|d| d.len() == t.data.len());
        self.call_end(call, size_ok);
        let data = r.map_err(|e| match e {
            crate::runtime::fabric::FabricError::Timeout => timeout
                .clone()
                .map(|(_, e)| e)
                .unwrap_or_else(|| error::runtime("timed out")),
            crate::runtime::fabric::FabricError::PeerClosed(p) => error::peer_closed(p),
            other => error::runtime(other.to_string()),
        })?;
        if data.len() != t.data.len() {
            return Err(error::runtime(format!(
                "recv from rank {peer}: got {} bytes, the receive buffer has {} (sizes differ between the send and the recv)",
                data.len(),
                t.data.len()
            )));
        }
        Ok(Some(Tensor {
            dtype: t.dtype,
            shape: t.shape.clone(),
            data,
        }))
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
        let (t, dev) = self.make_tensor(spec);
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
                return Err(error::value(format!(
                    "Global rank {p} is not part of group {}",
                    self.pgs[&name].label
                )));
            }
        }
        if backend != "gloo" {
            self.ensure_comm(&name, &dev, &backend, None).await?;
        }
        for (o, p) in ops.iter().zip(&peers) {
            if o.send {
                self.p2p_transfer(&name, &backend, &t, *p, true).await?;
            }
        }
        let mut notes = Vec::new();
        for (k, (o, p)) in ops.iter().zip(&peers).enumerate() {
            if o.send {
                continue;
            }
            let out = self
                .p2p_transfer(&name, &backend, &t, *p, false)
                .await?
                .expect("a receive returns data");
            let vars = OutVars::flat(out.numel())
                .with("peer", *p as f64)
                .with("k", k as f64);
            notes.push(format!(
                "from {p}: {}",
                self.check_values(spec, expect, &out, &vars)?
            ));
        }
        let sends = ops.iter().filter(|o| o.send).count();
        Ok(format!("{sends} sent; {}", notes.join("; ")))
    }
}
