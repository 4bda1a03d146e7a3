//! isend / irecv and an async barrier: calls posted where the program makes them and completed
//! at `work.wait()`. A blocking send in their place would run another program: a ring that
//! posts an isend to its next rank and then receives from its previous one completes in real
//! gloo, while blocking sends wait for each other's receivers until the timeout.
//!
//! gloo (real torch 2.15, measured): an isend notifies its receiver at once and its data goes
//! out as soon as the receiver posts the matching recv, whether or not the sender waits yet; an
//! irecv posts its buffer at once (the sender may go ahead). `wait()` blocks until the work is
//! done, with the group's timeout counted from the wait, or `wait(timeout=)`'s: gloo's own
//! `Timed out waiting Nms for send/recv operation to complete` (not c10d's `Operation timed
//! out!`, which is a collective's), and the timeout closes the group's pairs.

use super::p2p::{ready_tag, send_notice_tag, P2pCall};
use super::*;
use crate::c10d::error;
use crate::net::{Clock, Net};
use crate::probe::Probe;
use crate::runtime::coll::{AsyncProbe, Coll, Fill, OutVars};
use crate::runtime::fabric::FabricError;
use crate::scenario::expr::Expr;
use crate::scenario::{P2pOp, TensorSpec};
use crate::tensor::Tensor;
use crate::trace::{Dir, Wait, WaitOn};

/// A posted isend or irecv: its group, backend, peer and call.
pub(super) struct Posted {
    name: String,
    backend: String,
    peer: usize,
    call: P2pCall,
}

/// A gloo isend / irecv whose `wait` returned: what a second `wait` waits on.
pub(super) struct Waited {
    name: String,
    peer: usize,
    seq: u64,
    label: String,
    pg_timeout_ms: u64,
    send: bool,
}

/// What a second `wait` on `w` waits on, when `w` is a gloo isend or irecv.
pub(super) fn rewait_of<P: Probe>(w: &Work<P>) -> Option<Waited> {
    let (p, send) = match w {
        Work::Send(_, p) => (&**p, true),
        Work::Recv(r) => (&r.posted, false),
        _ => return None,
    };
    Some(Waited {
        name: p.name.clone(),
        peer: p.peer,
        seq: p.call.seq,
        label: p.call.group_label.clone(),
        pg_timeout_ms: p.call.pg_timeout_ms,
        send,
    })
}

/// A gloo batch's posted isends, in list order.
pub(super) type PostedSends = std::collections::VecDeque<(SendTask, Posted)>;

/// The task that sends a gloo isend's data once its receiver posted.
pub(super) type SendTask = tokio::task::JoinHandle<Result<(), FabricError>>;

/// An xccl / nccl irecv, received at its `wait`.
pub(super) struct DeviceRecv {
    group: Option<String>,
    spec: TensorSpec,
    end: (usize, u32),
    expect: Option<Expr>,
}

/// The posted half of an irecv that `wait` completes: what it receives into and checks.
pub(super) struct PostedRecv {
    posted: Posted,
    spec: TensorSpec,
    expect: Option<Expr>,
}

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// `dist.isend` / `dist.irecv` (`end`: peer, whether this rank sends, tag) as work `w`.
    pub(super) async fn p2p_post(
        &mut self,
        group: &Option<String>,
        spec: &TensorSpec,
        end: (usize, bool, u32),
        expect: &Option<Expr>,
        w: &str,
    ) -> Res<String> {
        let Some(name) = self.resolve_group(group)? else {
            self.works.insert(w.to_string(), Work::None);
            let op = if end.1 { "isend" } else { "irecv" };
            return self.non_member(op, expect);
        };
        let (dev, symbolic) = (
            self.tensor_device(spec),
            self.env.scenario.sim.payloads.symbolic(),
        );
        let backend = if symbolic {
            self.p2p_checks(&name, &self.make_symbolic(spec).0, &dev, end.0)?
        } else {
            self.p2p_checks(&name, &self.make_tensor(spec).0, &dev, end.0)?
        };
        if backend != "gloo" {
            return self.post_on_device(group, spec, end, expect, w).await;
        }
        let posted = if symbolic {
            let t = self.make_symbolic(spec).0;
            self.post_gloo(name, backend, &t, end).await?
        } else {
            let t = self.make_tensor(spec).0;
            self.post_gloo(name, backend, &t, end).await?
        };
        let peer = end.0;
        let work = match posted {
            (posted, Some(handle)) => Work::Send(handle, Box::new(posted)),
            (posted, None) => Work::Recv(Box::new(PostedRecv {
                posted,
                spec: spec.clone(),
                expect: expect.clone(),
            })),
        };
        self.works.insert(w.to_string(), work);
        Ok(match end.1 {
            true => format!("posted (isend to rank {peer}, work \"{w}\")"),
            false => format!("posted (irecv from rank {peer}, work \"{w}\")"),
        })
    }

    /// The device a step's tensor lives on.
    fn tensor_device(&self, spec: &TensorSpec) -> String {
        spec.device
            .clone()
            .unwrap_or_else(|| self.accel().to_string())
    }

    /// A gloo isend or irecv posted: its notice to the peer (an isend's "send ready", an
    /// irecv's "recv posted"); an isend's data goes out from its own task.
    #[allow(clippy::type_complexity)]
    async fn post_gloo<D: Fill>(
        &mut self,
        name: String,
        backend: String,
        t: &Tensor<D>,
        end: (usize, bool, u32),
    ) -> Res<(Posted, Option<SendTask>)> {
        let p = self.p2p_begin(&name, &backend, t, end)?;
        let (peer, send, _) = end;
        // gloo's pair throws at the call, before posting anything, once it has read its
        // peer's close (user-path 7/1073: an irecv 0.3 s after its peer's SIGABRT raised
        // `Connection closed by peer` itself, no work to wait on; real torch 2.15).
        if let Some(e) = self.fabric.has_peer_ended(peer) {
            self.call_end(p.call, false);
            return Err(e.into_c10d(None));
        }
        let notice = match send {
            true => send_notice_tag(&p.tag),
            false => ready_tag(&p.tag),
        };
        if let Err(e) = self.fabric.send(peer, &notice, &[]).await {
            self.call_end(p.call, false);
            return Err(e.into_c10d(None));
        }
        let posted = Posted {
            name,
            backend,
            peer,
            call: p,
        };
        let handle =
            send.then(|| self.send_when_ready(&posted, t.data.len(), t.data.wire().into_owned()));
        Ok((posted, handle))
    }

    /// The rest of a gloo isend as its own task: the receiver's ready notice, then the data.
    fn send_when_ready(&self, p: &Posted, bytes: usize, data: Vec<u8>) -> SendTask {
        let (fabric, clock) = (self.fabric.clone(), self.env.clock.clone());
        let (me, peer, tag) = (self.env.proc_rank, p.peer, p.call.tag.clone());
        let scope = self.pgs[&p.name].name.clone();
        tokio::task::spawn_local(async move {
            fabric
                .recv_any(&clock, &[peer], &ready_tag(&tag), None, Some(&scope))
                .await?;
            clock.charge(me, peer, false, bytes).await;
            fabric.send(peer, &tag, &data).await
        })
    }

    /// xccl / nccl: a device send does not wait for its receiver, so an isend is sent here; an
    /// irecv receives at its `wait`.
    async fn post_on_device(
        &mut self,
        group: &Option<String>,
        spec: &TensorSpec,
        (peer, send, tag): (usize, bool, u32),
        expect: &Option<Expr>,
        w: &str,
    ) -> Res<String> {
        if send {
            let done = self.p2p(group, spec, (peer, true, tag), &None).await?;
            self.works.insert(w.to_string(), Work::Done(done));
            return Ok(format!("posted (isend to rank {peer}, work \"{w}\")"));
        }
        let deferred = DeviceRecv {
            group: group.clone(),
            spec: spec.clone(),
            end: (peer, tag),
            expect: expect.clone(),
        };
        self.works
            .insert(w.to_string(), Work::DeviceRecv(Box::new(deferred)));
        Ok(format!("posted (irecv from rank {peer}, work \"{w}\")"))
    }

    /// `wait()` on an xccl / nccl irecv: the receive itself.
    pub(super) async fn wait_device_irecv(&mut self, r: DeviceRecv) -> Res<String> {
        let (peer, tag) = r.end;
        self.p2p(&r.group, &r.spec, (peer, false, tag), &r.expect)
            .await
    }

    /// `wait()` on an isend: until its data went out (gloo: once the receiver posted).
    pub(super) async fn wait_isend(
        &mut self,
        mut handle: SendTask,
        p: Posted,
        timeout_ms: Option<u64>,
    ) -> Res<String> {
        if !self.pgs.contains_key(&p.name) {
            return Err(error::work_lost(
                "isend",
                "its group was destroyed before the wait",
            ));
        }
        let t_ms = timeout_ms.unwrap_or(p.call.pg_timeout_ms);
        let (deadline_ms, err) = (self.now() + t_ms, error::gloo_send_timeout(t_ms));
        self.wait(Some(self.p2p_wait(&p, Dir::Send, deadline_ms, &err)));
        let r = tokio::select! {
            r = &mut handle => Some(r),
            _ = self.env.clock.sleep_until_ms(deadline_ms) => None,
        };
        self.wait(None);
        let Some(r) = r else {
            handle.abort();
            self.close_pairs_of(&p.name).await;
            self.call_end(p.call.call, false);
            return Err(err);
        };
        let r = r.map_err(|e| error::work_lost("isend", &e.to_string()))?;
        self.call_end(p.call.call, r.is_ok());
        r.map_err(|e| e.into_c10d(None))?;
        let n = p.call.numel;
        Ok(format!("sent {n} elements to rank {}", p.peer))
    }

    /// `wait()` on a gloo irecv: the receive its post announced, checked against `expect`.
    pub(super) async fn wait_irecv(
        &mut self,
        r: PostedRecv,
        timeout_ms: Option<u64>,
    ) -> Res<String> {
        if !self.pgs.contains_key(&r.posted.name) {
            return Err(error::work_lost(
                "irecv",
                "its group was destroyed before the wait",
            ));
        }
        if self.env.scenario.sim.payloads.symbolic() {
            let (t, _) = self.make_symbolic(&r.spec);
            self.finish_irecv(r, t, timeout_ms).await
        } else {
            let (t, _) = self.make_tensor(&r.spec);
            self.finish_irecv(r, t, timeout_ms).await
        }
    }

    async fn finish_irecv<D: Fill>(
        &mut self,
        r: PostedRecv,
        t: Tensor<D>,
        timeout_ms: Option<u64>,
    ) -> Res<String> {
        let PostedRecv {
            posted,
            spec,
            expect,
        } = r;
        let Posted {
            name,
            backend,
            peer,
            mut call,
        } = posted;
        let t_ms = timeout_ms.unwrap_or(call.pg_timeout_ms);
        call.timeout = Some((self.now() + t_ms, error::gloo_recv_timeout(t_ms)));
        let out = self.p2p_recv(&name, &backend, &t, peer, true, call).await?;
        let vars = OutVars::flat(out.numel());
        self.p2p_result(&spec, &expect, out, &vars)
    }

    /// The rank's wait in an isend or irecv's `wait`.
    fn p2p_wait(&self, p: &Posted, dir: Dir, deadline_ms: u64, err: &error::C10dError) -> Wait {
        let (seq, peer) = (p.call.seq, p.peer);
        let label = p.call.group_label.clone();
        let what = match dir {
            Dir::Send => {
                format!("isend #{seq} to rank {peer} on group {label} (waits for its recv)")
            }
            Dir::Recv => format!("irecv #{seq} from rank {peer} on group {label}"),
        };
        Wait {
            step: self.step,
            on: WaitOn::P2p { dir },
            what,
            group: Some(label),
            seq: Some(seq),
            peers: vec![peer],
            since_ms: self.now(),
            deadline_ms: Some(deadline_ms),
            timeout_error: Some(err.clone().into()),
        }
    }

    /// A second `wait` on a gloo isend / irecv: gloo's buffer waits for another completion, so
    /// it times out (the group's timeout or `wait(timeout=)`'s) and closes the group's pairs.
    pub(super) async fn wait_again(&mut self, w: Waited, timeout_ms: Option<u64>) -> Res<String> {
        let t_ms = timeout_ms.unwrap_or(w.pg_timeout_ms);
        let (dir, err, what) = match w.send {
            true => (Dir::Send, error::gloo_send_timeout(t_ms), "isend #{seq} to"),
            false => (
                Dir::Recv,
                error::gloo_recv_timeout(t_ms),
                "irecv #{seq} from",
            ),
        };
        let what = what.replace("{seq}", &w.seq.to_string());
        let deadline_ms = self.now() + t_ms;
        let wait = Wait {
            step: self.step,
            on: WaitOn::P2p { dir },
            what: format!(
                "{what} rank {} on group {}, waited again (gloo waits for another completion)",
                w.peer, w.label
            ),
            group: Some(w.label.clone()),
            seq: Some(w.seq),
            peers: vec![w.peer],
            since_ms: self.now(),
            deadline_ms: Some(deadline_ms),
            timeout_error: Some(err.clone().into()),
        };
        // A message nobody sends: the wait ends at its deadline, or when the pair closes.
        let Some(scope) = self.pgs.get(&w.name).map(|pg| pg.name.clone()) else {
            return Err(err);
        };
        let never = format!("{scope}/gloo/rewait/{}", w.seq);
        let r = self.gloo_wait_for(wait, w.peer, &never, &scope).await;
        Err(match r {
            Err(FabricError::Timeout) | Ok(_) => err,
            Err(e) => e.into_c10d(None),
        })
    }

    /// A timeout in group `name`'s gloo context closes its pairs.
    async fn close_pairs_of(&self, name: &str) {
        if let Some(pg) = self.pgs.get(name) {
            self.fabric
                .close_pairs(&self.env.clock, &pg.name, &pg.ranks)
                .await;
        }
    }

    /// A gloo batch's isends, posted in list order: each task with its post.
    pub(super) async fn post_isends<D: Fill>(
        &mut self,
        name: &str,
        backend: &str,
        t: &Tensor<D>,
        ops: &[P2pOp],
        peers: &[usize],
    ) -> Res<PostedSends> {
        let mut out = PostedSends::new();
        for (o, p) in ops.iter().zip(peers).filter(|(o, _)| o.send) {
            let end = (*p, true, o.tag);
            let (posted, handle) = self
                .post_gloo(name.to_string(), backend.to_string(), t, end)
                .await?;
            if let Some(handle) = handle {
                out.push_back((handle, posted));
            }
        }
        Ok(out)
    }

    /// `dist.barrier(async_op=True)`: the barrier as its own task; `wait` blocks on it.
    pub(super) async fn barrier_async(&mut self, name: &str, backend: &str, w: &str) -> Res<()> {
        let probe = AsyncProbe {
            inner: self.env.probe.clone(),
            state: Default::default(),
        };
        let t = Tensor::from_fn(crate::dtype::DType::F32, vec![1], |_| 0.0);
        let fut = self.call_future(name, backend, &Coll::barrier(), t, probe.clone(), None)?;
        let handle = tokio::task::spawn_local(async move {
            fut.await.map(|(t, o)| <Vec<u8> as Fill>::done(t, o))
        });
        tokio::task::yield_now().await;
        self.works
            .insert(w.to_string(), Work::Barrier { handle, probe });
        Ok(())
    }
}
