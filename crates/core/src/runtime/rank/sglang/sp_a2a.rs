//! sglang's 4-D sequence-parallel all-to-alls (docs/rules/sglang.md §5.33/§5.34) as a rank runs
//! them: on real data checked element by element, or with symbolic payloads (`[sim] payloads =
//! "symbolic"`), where the same `all_to_all_single` moves no elements, so a step of the shapes
//! real models use (Wan's [3, 4096, 16, 64]) costs the simulator per message, not per element.

use super::super::{Proc, Res};
use super::a2a_error;
use super::a2a_layout::Layout;
use crate::c10d::error;
use crate::dtype::DType;
use crate::net::{Clock, Net};
use crate::payload::Symbolic;
use crate::probe::Probe;
use crate::runtime::coll::{Algo, Coll};
use crate::scenario::expr::Expr;
use crate::scenario::A2aOp;
use crate::sglang::all_to_all_4d as a2a;
use crate::tensor::Tensor;
use crate::trace::{EventKind, Fnv1a};

/// One call's group and layout, resolved before either payload kind runs it.
struct A2aCall {
    name: String,
    backend: String,
    dev: String,
    /// The group's size.
    w: usize,
    glabel: String,
    shape: [usize; 4],
    out_shape: [usize; 4],
    layout: Layout,
}

/// The `all_to_all_single` a 4-D all-to-all issues: one equal row per member.
fn a2a_coll(w: usize, n: usize) -> Coll {
    Coll {
        name: "all_to_all_single",
        torch_op: "ALLTOALL_BASE",
        algo: Algo::AllToAll {
            send_rows: vec![1; w],
            recv_rows: vec![1; w],
            row_elems: n / w,
        },
    }
}

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// The data shard this rank holds along the sequence: its rank in the SP coordinator's group
    /// (how Wan shards frames); without sglang groups, its rank in `group`.
    fn sp_shard(&self, me: usize, group_rank: usize) -> usize {
        self.sgl
            .as_ref()
            .and_then(|s| s.plan.as_ref())
            .and_then(|p| p.membership("sp", me))
            .map_or(group_rank, |m| m.rank_in_group)
    }

    /// docs/rules/sglang.md §5.33/§5.34: sglang's 4-D all-to-alls, checked element by element
    /// against the layout the model code intends (so TP-mixed Ulysses groups, R11, show as wrong
    /// values rather than pass silently); `symbolic`: the same messages without elements, and
    /// nothing to check.
    pub(in crate::runtime::rank) async fn sp_all_to_all(
        &mut self,
        op: A2aOp,
        group: &Option<String>,
        shape: [usize; 4],
        dtype: DType,
        fill: &Expr,
        symbolic: bool,
    ) -> Res<String> {
        let Some(name) = self.resolve_group(group)? else {
            return Ok("not a member: no-op".into());
        };
        let call = self.a2a_call(name, op, shape)?;
        if !a2a::issues_collective(call.w) {
            return Ok(format!(
                "group {} has 1 rank: input returned as is",
                call.glabel
            ));
        }
        self.check_dtype(&call.backend, dtype, None)?;
        if symbolic {
            self.sp_all_to_all_symbolic(call, dtype, fill).await
        } else {
            self.sp_all_to_all_values(call, op, dtype, fill).await
        }
    }

    fn a2a_call(&self, name: String, op: A2aOp, shape: [usize; 4]) -> Res<A2aCall> {
        let me = self.world()?.rank;
        let pg = &self.pgs[&name];
        let (w, j) = (pg.ranks.len(), pg.group_rank(me).expect("member"));
        let dev = self.accel().to_string();
        let backend = pg.config.backend_for(&dev)?.to_string();
        let glabel = format!("{} ({})", pg.label, pg.name);
        let out_shape = a2a::output_shape(shape, w, op).map_err(a2a_error)?;
        let layout = Layout::new(op, self.sp_shard(me, j), w, shape, out_shape);
        Ok(A2aCall {
            name,
            backend,
            dev,
            w,
            glabel,
            shape,
            out_shape,
            layout,
        })
    }

    /// The value of `fill` at element `i` of this rank's input.
    fn a2a_input_value(&self, layout: &Layout, fill: &Expr, i: usize) -> f64 {
        let (rspec, scenario) = (&self.spec, &self.env.scenario);
        let lookup = |v: &str| crate::scenario::rank_var(v, rspec, &scenario.world);
        layout.value(fill, layout.input_coords(i), &lookup)
    }

    async fn sp_all_to_all_values(
        &mut self,
        c: A2aCall,
        op: A2aOp,
        dtype: DType,
        fill: &Expr,
    ) -> Res<String> {
        let (w, shape, out_shape) = (c.w, c.shape, c.out_shape);
        let input = Tensor::from_fn(dtype, shape.to_vec(), |i| {
            self.a2a_input_value(&c.layout, fill, i)
        });
        let n = input.numel();
        // Element indexes (not f32: exact past 2^24 elements).
        let index: Vec<usize> = (0..n).collect();
        let chunks = a2a::pack(&index, shape, w, op).map_err(a2a_error)?;
        let esz = dtype.size_bytes();
        let gather = |src: &[u8], idx: &[usize]| -> Vec<u8> {
            idx.iter()
                .flat_map(|k| src[*k * esz..(*k + 1) * esz].to_vec())
                .collect()
        };
        let sends: Vec<u8> = chunks.iter().flat_map(|c| gather(&input.data, c)).collect();
        if c.backend != "gloo" {
            self.ensure_comm(&c.name, &c.dev, &c.backend, None).await?;
        }
        let mut t = Tensor {
            dtype,
            shape: vec![w, n / w],
            data: sends,
        };
        let got = self
            .run_algo(&c.name, &c.backend, &a2a_coll(w, n), &mut t)
            .await?
            .unwrap_or(t);
        let positions: Vec<Vec<usize>> = (0..w)
            .map(|r| (r * n / w..(r + 1) * n / w).collect())
            .collect();
        let (order, _) = a2a::unpack(positions, shape, w, op).map_err(a2a_error)?;
        let out = Tensor {
            dtype,
            shape: out_shape.to_vec(),
            data: gather(&got.data, &order),
        };
        let (rspec, scenario) = (self.spec.clone(), self.env.scenario.clone());
        let lookup = move |v: &str| crate::scenario::rank_var(v, &rspec, &scenario.world);
        c.layout.check(&out, fill, &lookup).map_err(|m| {
            self.event(EventKind::Error, format!("value mismatch: {m}"));
            error::value_mismatch(m)
        })?;
        Ok(format!(
            "{shape:?} -> {out_shape:?} over group {} (sequence shard {}): values as expected, digest {:016x}",
            c.glabel,
            c.layout.shard,
            out.digest()
        ))
    }

    /// The symbolic input's digest covers the dtype, the shape, the formula and its value at
    /// the input's first and last element (so ranks holding different shards differ).
    fn a2a_symbolic_input(&self, c: &A2aCall, dtype: DType, fill: &Expr) -> Tensor<Symbolic> {
        let n: usize = c.shape.iter().product();
        let mut h = Fnv1a::default();
        h.write(dtype.name().as_bytes());
        for d in c.shape {
            h.write(&(d as u64).to_le_bytes());
        }
        h.write(fill.to_string().as_bytes());
        for i in [0, n - 1] {
            let v = self.a2a_input_value(&c.layout, fill, i);
            h.write(&v.to_bits().to_le_bytes());
        }
        Tensor {
            dtype,
            shape: vec![c.w, n / c.w],
            data: Symbolic::leaf(n * dtype.size_bytes(), h.0),
        }
    }

    async fn sp_all_to_all_symbolic(
        &mut self,
        c: A2aCall,
        dtype: DType,
        fill: &Expr,
    ) -> Res<String> {
        let mut t = self.a2a_symbolic_input(&c, dtype, fill);
        let n = t.numel();
        if c.backend != "gloo" {
            self.ensure_comm(&c.name, &c.dev, &c.backend, None).await?;
        }
        let got = self
            .run_algo(&c.name, &c.backend, &a2a_coll(c.w, n), &mut t)
            .await?
            .unwrap_or(t);
        let out = Tensor {
            dtype,
            shape: c.out_shape.to_vec(),
            data: got.data,
        };
        Ok(format!(
            "{:?} -> {:?} over group {} (sequence shard {}): {}",
            c.shape,
            c.out_shape,
            c.glabel,
            c.layout.shard,
            out.summary()
        ))
    }
}
