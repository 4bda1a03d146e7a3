//! Collectives: tensors, per-op timeouts, dtype/device checks, the call itself through core's
//! algorithms or the device library, async works, result checks and barrier (R26-R32).

use super::p2p_async;
use super::*;
use crate::c10d::ccl_env::{self, AllReduceAlgo};
use crate::c10d::collective::CollOp;
use crate::c10d::error::{self, C10dError};
use crate::dtype::DType;
use crate::net::{Clock, Net};
use crate::payload::Symbolic;
use crate::probe::{Fact, Probe};
use crate::reduce::{self, ReduceOp};
use crate::runtime::coll::{self, AsyncProbe, CallShape, Coll, Done, Fill, OutVars};
use crate::runtime::cost;
use crate::runtime::link::{CallInfo, FabricLink};
use crate::runtime::reuse::{self, ExpectKey, Lent};
use crate::scenario::expr::{format_number, Expr};
use crate::scenario::{CollStep, TensorSpec};
use crate::tensor::Tensor;
use crate::trace::EventKind;

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// The tensor a step creates on this rank.
    pub(super) fn make_tensor(&self, spec: &TensorSpec) -> (Tensor, String) {
        let n = spec.shape.iter().product::<usize>();
        let t = Tensor::from_fn(spec.dtype, spec.shape.clone(), |i| {
            spec.fill.eval(&|v| match v {
                "i" => i as f64,
                "n" => n as f64,
                other => self.var(other),
            })
        });
        let dev = spec
            .device
            .clone()
            .unwrap_or_else(|| self.accel().to_string());
        (t, dev)
    }

    /// The timeout rule of a backend for one call of `timeout_ms` (R29, R31).
    pub(super) fn op_timeout(
        &self,
        backend: &str,
        timeout_ms: u64,
        seq: u64,
        op: &str,
        numel: usize,
    ) -> Option<(u64, C10dError)> {
        let deadline = self.now() + timeout_ms;
        match backend {
            "gloo" => Some((deadline, error::gloo_recv_timeout(timeout_ms))),
            "nccl" => Some((
                deadline,
                error::nccl_watchdog(
                    self.world.as_ref().map(|w| w.rank).unwrap_or(0),
                    seq,
                    op,
                    numel,
                    timeout_ms,
                ),
            )),
            _ if self
                .spec
                .env
                .get("TORCH_XCCL_BLOCKING_WAIT")
                .map(|s| s.as_str())
                == Some("1") =>
            {
                Some((deadline, error::xccl_work_timeout(timeout_ms)))
            }
            _ => None,
        }
    }

    pub(super) fn check_dtype(&self, backend: &str, dtype: DType, op: Option<ReduceOp>) -> Res<()> {
        match backend {
            "gloo" => reduce::check_gloo(dtype, op),
            _ => reduce::check_xccl(dtype, op),
        }
    }

    /// R37: XCCL serves XPU tensors only (reachable when a group maps another device type to
    /// xccl, e.g. `backend = "cpu:xccl,xpu:xccl"`).
    pub(super) fn check_device(&self, backend: &str, dev: &str) -> Res<()> {
        if backend == "xccl" && dev != "xpu" {
            return Err(error::xccl_needs_xpu());
        }
        Ok(())
    }

    pub(super) async fn collective(&mut self, c: &CollStep) -> Res<String> {
        let op = c.op.name();
        let Some(name) = self.resolve_group(&c.group)? else {
            if let Some(w) = &c.work {
                self.works.insert(w.clone(), Work::None);
            }
            return self.non_member(op, &c.expect);
        };
        let dev = c
            .tensor
            .device
            .clone()
            .unwrap_or_else(|| self.accel().to_string());
        let backend = self.pgs[&name].config.backend_for(&dev)?.to_string();
        self.check_device(&backend, &dev)?;
        let reduce_op = c.op.reduces().then_some(c.reduce_op);
        let post_error = if backend == "gloo" {
            self.check_dtype(&backend, c.tensor.dtype, reduce_op).err()
        } else {
            self.check_dtype(&backend, c.tensor.dtype, reduce_op)?;
            None
        };
        let me = self.world()?.rank;
        let pg = &self.pgs[&name];
        let (members, me_g) = (pg.ranks.len(), pg.group_rank(me).expect("member"));
        let root = match c.root {
            Some(r) => Some(
                pg.group_rank(r)
                    .ok_or_else(|| error::not_in_group(r, &pg.label))?,
            ),
            None => None,
        };
        let call = CallShape {
            members,
            me: me_g,
            root,
            splits: coll::eval_splits(
                c,
                members,
                self.env.scenario.world.size(),
                Some(self.env.scenario.sim.memory.tensor_room_bytes())
                    .filter(|_| !self.env.scenario.sim.payloads.symbolic()),
                &|v| self.var(v),
            )?,
            post_error,
        };
        if self.env.scenario.sim.payloads.symbolic() {
            self.run_collective::<Symbolic>(c, &name, &backend, &dev, call)
                .await
        } else {
            self.run_collective::<Vec<u8>>(c, &name, &backend, &dev, call)
                .await
        }
    }

    /// A member's collective call with `D` payloads: the input, DETAIL's checks, the call
    /// (or its async work) and the result.
    async fn run_collective<D: Fill>(
        &mut self,
        c: &CollStep,
        name: &str,
        backend: &str,
        dev: &str,
        call: CallShape,
    ) -> Res<String> {
        let reuse = self.reuse.clone();
        let (t, coll, lent) = coll::build::<D>(c, &call, &|v| self.var(v), reuse.as_deref())?;
        self.wrapper_checks(name, backend, |seq| {
            detail::FingerPrint::of(c, &t, dev, seq)
        })
        .await?;
        if backend != "gloo" {
            self.ensure_comm(name, dev, backend, None).await?;
        }
        if let Some(w) = &c.work {
            let probe = AsyncProbe {
                inner: self.env.probe.clone(),
                state: Default::default(),
            };
            let fut = self.call_future(name, backend, &coll, t, probe.clone(), lent)?;
            let handle =
                tokio::task::spawn_local(async move { fut.await.map(|(t, o)| D::done(t, o)) });
            // A worker thread takes the enqueued work at once: it posts its operations and
            // starts its waits before the program's next call does (so, of two waits with one
            // timeout, the async call's expires first, as in a real run).
            tokio::task::yield_now().await;
            self.works.insert(
                w.clone(),
                Work::Pending {
                    handle,
                    step: Box::new(c.clone()),
                    call,
                    probe,
                },
            );
            return Ok(format!("enqueued (async_op, work \"{w}\")"));
        }
        let probe = self.env.probe.clone();
        let (t, out) = self
            .call_future(name, backend, &coll, t, probe, lent)?
            .await?;
        self.coll_result(c, &call, D::done(t, out))
    }

    /// R27: a call on a group this rank is not in warns and does nothing. Its `expect` does not
    /// apply here, which the report says (a note) rather than counting it as checked.
    pub(super) fn non_member(&self, op: &str, expect: &Option<Expr>) -> Res<String> {
        let r = self.world()?.rank;
        self.event(EventKind::Warn, error::non_member_warning(op, r));
        if expect.is_some() {
            self.event(
                EventKind::Info,
                format!(
                    "expect does not apply on rank {r}: not a member of the group, the call is \
                     a no-op (R27)"
                ),
            );
            let fact = Fact::ExpectNotApplied { step: self.step };
            self.env.probe.fact(r, &fact);
            return Ok("not a member: no-op; its expect does not apply".into());
        }
        Ok("not a member: no-op".into())
    }

    /// `work.wait()`: blocks until the async call finishes and checks its result.
    /// `work.wait()`, or `work.wait(timeout)`: c10d's `Work::wait` raises `Operation timed
    /// out!` when the work has not completed by then (the work runs on; real torch 2.15).
    /// `work.wait()` again after a first wait, as real torch 2.15 does (measured): a
    /// collective's Work returns its result again (or raises its error again); a gloo isend's or
    /// irecv's waits for another completion of its buffer, which never comes: it times out.
    pub(super) async fn wait_work(&mut self, work: &str, timeout_ms: Option<u64>) -> Res<String> {
        let existed = self.works.contains_key(work);
        let again = self.works.get(work).and_then(p2p_async::rewait_of);
        let r = self.first_wait(work, timeout_ms).await;
        if existed && !self.works.contains_key(work) {
            let after = match (&r, again) {
                (Ok(_), Some(w)) => Work::Waited(Box::new(w)),
                (Ok(text), None) => Work::Done(text.clone()),
                (Err(e), _) => Work::Failed(e.clone()),
            };
            self.works.insert(work.to_string(), after);
        }
        r
    }

    async fn first_wait(&mut self, work: &str, timeout_ms: Option<u64>) -> Res<String> {
        match self.works.remove(work) {
            None => Err(error::work_never_started(work)),
            Some(Work::None) => Err(error::wait_on_none()),
            Some(Work::Pending {
                handle,
                step,
                call,
                probe,
            }) => match self.await_work(work, handle, &probe, timeout_ms).await? {
                Ok(done) => self.coll_result(&step, &call, done),
                Err(handle) => {
                    let pending = Work::Pending {
                        handle,
                        step,
                        call,
                        probe,
                    };
                    self.works.insert(work.to_string(), pending);
                    Err(error::work_wait_timeout())
                }
            },
            Some(Work::Barrier { handle, probe }) => {
                match self.await_work(work, handle, &probe, timeout_ms).await? {
                    Ok(_) => Ok("passed".into()),
                    Err(handle) => {
                        let pending = Work::Barrier { handle, probe };
                        self.works.insert(work.to_string(), pending);
                        Err(error::work_wait_timeout())
                    }
                }
            }
            Some(Work::Send(handle, posted)) => self.wait_isend(handle, *posted, timeout_ms).await,
            Some(Work::Recv(r)) => self.wait_irecv(*r, timeout_ms).await,
            Some(Work::DeviceRecv(r)) => self.wait_device_irecv(*r).await,
            Some(Work::Done(text)) => Ok(text),
            Some(Work::Failed(e)) => Err(e),
            Some(Work::Waited(w)) => self.wait_again(*w, timeout_ms).await,
        }
    }

    /// An async call's task awaited at its `wait` (its blocked receives become this step's
    /// wait); when `wait(timeout=)` expires first, the task is handed back: the work runs on.
    async fn await_work(
        &mut self,
        work: &str,
        mut handle: tokio::task::JoinHandle<CallResult>,
        probe: &AsyncProbe<P>,
        timeout_ms: Option<u64>,
    ) -> Res<Result<Done, tokio::task::JoinHandle<CallResult>>> {
        probe.start_waiting(self.env.proc_rank, self.step);
        let r = match timeout_ms {
            None => (&mut handle).await,
            Some(t) => {
                let deadline_ms = self.now() + t;
                tokio::select! {
                    r = &mut handle => r,
                    _ = self.env.clock.sleep_until_ms(deadline_ms) => {
                        self.wait(None);
                        return Ok(Err(handle));
                    }
                }
            }
        };
        self.wait(None);
        let done = r.map_err(|e| error::work_lost(work, &e.to_string()))??;
        Ok(Ok(done))
    }

    /// The call's output on this rank, checked against the step's `expect`.
    /// A symbolic result has no values: its done text names its size and digest, and the
    /// loader refuses an `expect` with symbolic payloads.
    pub(super) fn coll_result(&self, c: &CollStep, call: &CallShape, done: Done) -> Res<String> {
        if let Some(e) = &call.post_error {
            return Err(e.clone());
        }
        let is_root = call.root == Some(call.me);
        if matches!(c.op, CollOp::Reduce | CollOp::Gather) && !is_root {
            let what = if c.op == CollOp::Reduce {
                "not dst: tensor unchanged"
            } else {
                "not dst: sent"
            };
            let summary = match done {
                Done::Values(t, _) => {
                    let head = t.head_f64(SHOWN_VALUES);
                    summarize(&head, t.numel(), t.digest())
                }
                Done::Symbolic(t, _) => t.summary(),
            };
            return Ok(format!("{summary} ({what})"));
        }
        match done {
            Done::Values(t, out) => {
                let (out, input) = match out {
                    Some(o) => (o, Some(t)),
                    None => (t, None),
                };
                let vars = coll::out_vars(c, call, out.numel());
                let r = self.check_values(&c.tensor, &c.expect, &out, &vars);
                if let Some(k) = &self.reuse {
                    let mut k = k.borrow_mut();
                    k.put_spare(out.data);
                    input.into_iter().for_each(|t| k.put_spare(t.data));
                }
                r
            }
            Done::Symbolic(t, out) => Ok(out.unwrap_or(t).summary()),
        }
    }

    pub(super) async fn run_algo<D: Fill>(
        &mut self,
        name: &str,
        backend: &str,
        coll: &Coll,
        t: &mut Tensor<D>,
    ) -> Res<Option<Tensor<D>>> {
        let probe = self.env.probe.clone();
        let fut = self.call_future(name, backend, coll, t.clone(), probe, None)?;
        let (done, out) = fut.await?;
        *t = done;
        Ok(out)
    }

    /// One collective call as a future that owns what it needs, so an `async_op` call can run
    /// as its own task while the program goes on.
    #[allow(clippy::type_complexity)]
    pub(super) fn call_future<Q: Probe, D: Fill>(
        &mut self,
        name: &str,
        backend: &str,
        coll: &Coll,
        mut t: Tensor<D>,
        probe: Q,
        lent: Option<Lent>,
    ) -> Res<impl std::future::Future<Output = Res<(Tensor<D>, Option<Tensor<D>>)>> + 'static> {
        let me = self.world()?.rank;
        let all_reduce = self.all_reduce_algo(name, backend, coll, t.data.len())?;
        let (first, seq) = self.take_seqs(name, backend, coll);
        let pg = &self.pgs[name];
        let call = self.call_begin(calls::spec_of(coll, name, backend, seq, &t, &pg.ranks));
        let cost_us = self.call_cost(name, backend, coll, t.numel() * t.dtype.size_bytes());
        let mut info = self.call_info(name, backend, coll, seq, t.numel());
        info.per_message_cost = cost_us.is_none();
        let pg = &self.pgs[name];
        let fabric = self.fabric.clone();
        let clock = self.env.clock.clone();
        let members = pg.peers_on(backend);
        let me_g = pg.group_rank(me).expect("member");
        let mut tags: Vec<String> = (first..=seq)
            .map(|s| call_tag(&pg.name, backend, s, coll))
            .collect();
        let coll = coll.clone();
        let device = self.env.device.clone().filter(|_| backend != "gloo");
        let reuse = self.reuse.clone();
        let kept = device_ops::Kept { reuse, lent };
        let backend_is_gloo = backend == "gloo";
        let comm = self.comm_ref(name, &members, me, None);
        let since_ms = self.now();
        let span =
            tracing::info_span!("call", group = %pg.name, label = %pg.label, seq, op = %info.op);
        span.in_scope(|| tracing::debug!(t_ms = since_ms, "call started"));
        let fut = async move {
            if let Some(d) = device {
                let Some(values) = D::values(&mut t) else {
                    return Err(error::symbolic_on_device());
                };
                let r = device_ops::run_on_device(
                    &*d, &comm, &coll, values, &info, &probe, &members, since_ms, kept,
                )
                .await;
                calls::end_record(&probe, &clock, call, r.is_ok());
                return r.map(|out| (t, out.map(D::from_values)));
            }
            let link = FabricLink {
                fabric: &fabric,
                clock: &clock,
                probe: &probe,
                members: &members,
                me: me_g,
                tag: std::cell::RefCell::new(tags.remove(0)),
                next_tags: std::cell::RefCell::new(tags),
                info,
                error: Default::default(),
                recv_waits: Default::default(),
                held: Default::default(),
            };
            let r = if backend_is_gloo {
                coll.run(&crate::runtime::on_gloo::OnGloo(&link), &mut t)
                    .await
            } else {
                let on = coll::OnLink {
                    link: &link,
                    all_reduce,
                };
                coll.run(&on, &mut t).await
            };
            let r = match r {
                Err(crate::algo::CollectiveError::Mismatch(why))
                    if !link.info.peer_exit_is_error =>
                {
                    Err(link.wait_out_mismatch(&why).await)
                }
                r => r,
            };
            if let (Some(us), true) = (cost_us, r.is_ok()) {
                clock.spend_us(us).await;
            }
            calls::end_record(&probe, &clock, call, r.is_ok());
            r.map(|out| (t, out)).map_err(|e| {
                let raised = link.error.borrow().clone();
                collective_error(e, raised, || fabric.died_reading())
            })
        };
        Ok(tracing::Instrument::instrument(fut, span))
    }

    /// The group's sequence numbers the call takes, first and last: one, or one per member
    /// for gloo's list reduce_scatter ([`Coll::gloo_calls`]).
    fn take_seqs(&mut self, name: &str, backend: &str, coll: &Coll) -> (u64, u64) {
        let pg = self.pgs.get_mut(name).expect("pg");
        let calls = match backend {
            "gloo" => coll.gloo_calls(pg.ranks.len()),
            _ => 1,
        };
        let first = pg.seq + 1;
        pg.seq += calls;
        (first, pg.seq)
    }

    /// What a call on group `name` with `in_bytes` of input costs each member in the timing
    /// model, when it is charged as a whole (runtime/cost.rs).
    fn call_cost(&self, name: &str, backend: &str, coll: &Coll, in_bytes: usize) -> Option<f64> {
        let (s, env) = (&self.env.scenario, &self.spec.env);
        cost::call_us(s, env, backend, coll, in_bytes, &self.pgs[name].ranks)
    }

    /// What the transport knows of call `seq` on group `name`: whose, which, its timeout.
    fn call_info(
        &self,
        name: &str,
        backend: &str,
        coll: &Coll,
        seq: u64,
        numel: usize,
    ) -> CallInfo {
        let pg = &self.pgs[name];
        CallInfo {
            proc_rank: self.env.proc_rank,
            step: self.step,
            group: format!("{} ({})", pg.label, pg.name),
            seq,
            op: coll.name().to_string(),
            timeout: self.op_timeout(backend, pg.coll_timeout_ms, seq, coll.torch_op(), numel),
            peer_exit_is_error: backend == "gloo",
            device: backend != "gloo",
            wait_ms: (backend == "gloo").then_some(pg.coll_timeout_ms),
            pairs: pg.name.clone(),
            per_message_cost: true,
        }
    }

    /// The all-reduce a call on group `name` runs: the ring for gloo (gloo's ring), oneCCL's
    /// selection from this rank's environment for xccl (c10d/ccl_env.rs).
    fn all_reduce_algo(
        &self,
        name: &str,
        backend: &str,
        coll: &Coll,
        bytes: usize,
    ) -> Res<AllReduceAlgo> {
        if backend != "xccl" || !matches!(coll.algo, coll::Algo::AllReduce(_)) {
            return Ok(AllReduceAlgo::Ring);
        }
        let ranks = &self.env.scenario.world.ranks;
        let nodes: Vec<usize> = self.pgs[name]
            .ranks
            .iter()
            .map(|r| ranks[*r].node)
            .collect();
        ccl_env::all_reduce_algo(&self.spec.env, bytes, &nodes)
    }

    pub(super) fn check_values(
        &self,
        spec: &TensorSpec,
        expect: &Option<Expr>,
        out: &Tensor,
        vars: &OutVars,
    ) -> Res<String> {
        let head = out.head_f64(SHOWN_VALUES);
        let Some(expect) = expect else {
            // Nothing to check: decode only what the summary shows.
            return Ok(summarize(&head, out.numel(), self.digest(out)));
        };
        let done = |digest| {
            let summary = summarize(&head, out.numel(), digest);
            Ok(format!("{summary} (values as expected)"))
        };
        if let Some(digest) = self.all_as_expected(spec, expect, out, vars) {
            return done(digest);
        }
        let w = spec.dtype.size_bytes();
        let mut one = vec![0u8; w];
        // The value cast to the dtype, as torch compares it: encoded once, no tensor per element.
        let cast = |want: f64, one: &mut [u8]| {
            spec.dtype.encode(want, one);
            spec.dtype.decode(one)
        };
        for i in 0..out.numel() {
            let got = out.get_f64(i);
            let want = expect.eval(&|v| vars.get(i, v).unwrap_or_else(|| self.var(v)));
            let want_cast = cast(want, &mut one);
            if got == want_cast || (got.is_nan() && want_cast.is_nan()) {
                continue;
            }
            let tol = f64::from(spec.expect_ulps) * spec.dtype.ulp(want_cast);
            if (got - want_cast).abs() <= tol {
                continue;
            }
            self.event(
                EventKind::Error,
                format!(
                    "value mismatch at element {i}: got {}, expected {} ({})",
                    format_number(got),
                    format_number(want_cast),
                    expect
                ),
            );
            return Err(error::value_mismatch(format!(
                "element {i}: got {}, expected {}",
                format_number(got),
                format_number(want_cast)
            )));
        }
        done(self.digest(out))
    }

    /// The fast check: every byte of `out` equals the expected values' bytes (one value for
    /// every element, or the values kept from an earlier step with the same formula and
    /// layout). Returns the digest then; `None` sends the caller to the element-wise check,
    /// which applies `expect_ulps` and names the element that differs.
    fn all_as_expected(
        &self,
        spec: &TensorSpec,
        expect: &Expr,
        out: &Tensor,
        vars: &OutVars,
    ) -> Option<u64> {
        if out.dtype != spec.dtype {
            return None;
        }
        let per_element = ["i", "k", "chunk", "j"].iter().any(|v| expect.uses(v));
        let dt = spec.dtype;
        let want = |i: usize| expect.eval(&|v| vars.get(i, v).unwrap_or_else(|| self.var(v)));
        if !per_element {
            let mut one = vec![0u8; dt.size_bytes()];
            dt.encode(want(0), &mut one);
            if !reuse::all_equal(&out.data, &one) {
                return None;
            }
            return Some(match &self.reuse {
                Some(r) => r.borrow_mut().constant_digest(out, &one),
                None => out.digest(),
            });
        }
        let r = self
            .reuse
            .as_ref()
            .filter(|_| reuse::keeps(out.data.len()))?;
        let key = ExpectKey {
            formula: expect.source().to_string(),
            dtype: dt,
            shape: out.shape.clone(),
            vars: vars.clone(),
        };
        r.borrow_mut().matches_expected(key, out, || {
            // The rank's variables bound once; the output's own (i, k, chunk, j, n, ...) per
            // element, as the element-wise check looks them up.
            let e = expect.bind(&|v| vars.get(0, v).is_none().then(|| self.var(v)));
            let look = |i: usize| move |v: &str| vars.get(i, v).unwrap_or(f64::NAN);
            // A flat output whose formula reads `i` only as `i % m` (not `j`, which is `i`
            // there): one period, repeated.
            let period = (vars.is_flat() && !e.uses("j"))
                .then(|| e.period_in("i", reuse::MAX_FORMULA_PERIOD))
                .flatten();
            let numel = out.numel();
            if let Some(p) = period {
                return reuse::periodic_bytes(dt, numel, p as usize, |i| e.eval(&look(i)));
            }
            let mut bytes = vec![0u8; out.data.len()];
            let w = dt.size_bytes();
            for (i, b) in bytes.chunks_exact_mut(w).enumerate() {
                dt.encode(e.eval(&look(i)), b);
            }
            bytes
        })
    }

    /// `t`'s digest (reused for bytes equal to the last ones hashed, with kept buffers).
    fn digest(&self, t: &Tensor) -> u64 {
        match &self.reuse {
            Some(r) => r.borrow_mut().digest(t),
            None => t.digest(),
        }
    }

    pub(super) async fn barrier(
        &mut self,
        group: &Option<String>,
        work: &Option<String>,
    ) -> Res<String> {
        let Some(name) = self.resolve_group(group)? else {
            if let Some(w) = work {
                self.works.insert(w.clone(), Work::None);
            }
            let r = self.world()?.rank;
            self.event(EventKind::Warn, error::non_member_warning("barrier", r));
            return Ok("not a member: no-op".into());
        };
        // R6: device_ids, bound device, CPU for CPU-only groups, else the accelerator.
        let pg = &self.pgs[&name];
        let bound = self.world()?.bound.clone();
        let dev = if let Some(b) = bound {
            b.ty
        } else if pg.config.map.keys().all(|d| d == "cpu") || self.accel() == "cpu" {
            "cpu".to_string()
        } else if pg.config.map.contains_key(self.accel()) {
            self.accel().to_string()
        } else {
            "cpu".to_string()
        };
        let backend = pg.config.backend_for(&dev)?.to_string();
        self.wrapper_checks(&name, &backend, |seq| {
            Some(detail::FingerPrint::barrier(seq))
        })
        .await?;
        if backend != "gloo" {
            self.ensure_comm(&name, &dev, &backend, None).await?;
        }
        if let Some(w) = work {
            self.barrier_async(&name, &backend, w).await?;
            return Ok(format!("enqueued (async_op, work \"{w}\")"));
        }
        let mut t = Tensor::from_fn(DType::F32, vec![1], |_| 0.0);
        self.run_algo(&name, &backend, &Coll::barrier(), &mut t)
            .await?;
        Ok(format!("passed ({dev}:{backend})"))
    }
}

/// The tag of call `seq` on group `group`'s messages. gloo's slots: a call's messages are its
/// algorithm's (Coll::gloo_slot).
fn call_tag(group: &str, backend: &str, seq: u64, coll: &Coll) -> String {
    match backend {
        "gloo" => format!("{group}/{backend}/{seq}/{}", coll.gloo_slot()),
        _ => format!("{group}/{backend}/{seq}"),
    }
}

/// A failed collective's error as c10d raises it: what the link raised (a peer's close, a
/// timeout), else the algorithm's own check. gloo aborts the process on a message larger than
/// the posted buffer, in its loop thread, which has read that message and what came before
/// (`died_reading`): a pair is reset only by what its peer sent after, unread at the death
/// (`Fabric::shutdown`), so a sender that sent nothing more reads a close
/// (scenarios/reduce_longer_on_root_aborts_gloo.toml).
fn collective_error(
    e: crate::algo::CollectiveError,
    raised: Option<C10dError>,
    died_reading: impl FnOnce(),
) -> C10dError {
    match e {
        crate::algo::CollectiveError::TooLarge { got, posted, .. } => {
            died_reading();
            error::gloo_enforce_abort(got, posted)
        }
        crate::algo::CollectiveError::SelfLength { .. } => error::gloo_alltoallv_self_length(),
        e => raised.unwrap_or_else(|| error::transport(&e.to_string())),
    }
}
