//! Point-to-point steps' fields (batch ops, peers, tags) and the Work handles that async
//! calls name and `wait` steps use: split from steps.rs, which loads every other field.

use super::{Cx, R};
use crate::scenario::expr::Expr;
use crate::scenario::model::*;
use crate::scenario::raw::*;
use toml::Spanned;

impl Cx<'_> {
    pub(super) fn wait_work(&self, r: &RawStep, op_at: usize) -> R<String> {
        let Some(w) = &r.work else {
            return Err(self.err(op_at, "wait needs `work` (the handle of an async_op call)"));
        };
        if self.works.borrow().contains(w.get_ref()) {
            Ok(w.get_ref().clone())
        } else {
            Err(self.at(
                w,
                format!(
                    "unknown work `{}`: name it with `work` on an earlier async_op = true step",
                    w.get_ref()
                ),
            ))
        }
    }

    pub(super) fn p2p_ops(&self, r: &RawStep, ws: usize, op_at: usize) -> R<Vec<P2pOp>> {
        let Some(ops) = &r.ops else {
            return Err(self.err(
                op_at,
                "batch_isend_irecv needs `ops = [{ op = \"isend\", peer = 1 }, ...]`",
            ));
        };
        if ops.get_ref().is_empty() {
            return Err(self.at(
                ops,
                "ops is empty (batch_isend_irecv needs at least one op)",
            ));
        }
        ops.get_ref()
            .iter()
            .map(|o| {
                let o = o.get_ref();
                let send = match o.op.get_ref().as_str() {
                    "isend" => true,
                    "irecv" => false,
                    other => {
                        return Err(
                            self.at(&o.op, format!("unknown p2p op `{other}` (isend, irecv)"))
                        )
                    }
                };
                let peer = match o.peer.get_ref() {
                    RawIntOrExpr::Int(i) => {
                        IntArg::Int(self.rank_in_range(*i, o.peer.span().start, ws)? as i64)
                    }
                    RawIntOrExpr::Expr(src) => {
                        IntArg::Expr(Expr::parse(src, &RANK_VARS).map_err(|e| {
                            self.err(self.in_str(o.peer.span().start, e.offset), e.message)
                        })?)
                    }
                };
                let tag = self.p2p_tag(&o.tag)?;
                Ok(P2pOp { send, peer, tag })
            })
            .collect()
    }

    pub(super) fn peer(
        &self,
        v: &Option<Spanned<i64>>,
        what: &str,
        ws: usize,
        op_at: usize,
    ) -> R<usize> {
        match v {
            Some(s) => self.rank_in_range(*s.get_ref(), s.span().start, ws),
            None => Err(self.err(op_at, format!("`{what}` is required"))),
        }
    }

    /// `async_op = true` with `work = "<name>"`: the Work handle a later `wait` names.
    pub(super) fn async_work(&self, r: &RawStep) -> R<Option<String>> {
        match (&r.async_op, &r.work) {
            (Some(a), None) if *a.get_ref() => Err(self.at(
                a,
                "async_op = true needs `work = \"<name>\"` to wait on later",
            )),
            (a, Some(w)) if !a.as_ref().is_some_and(|a| *a.get_ref()) => {
                Err(self.at(w, "`work` names the handle of an async_op = true call"))
            }
            (_, Some(w)) => Ok(Some(self.name_work(w.get_ref()))),
            _ => Ok(None),
        }
    }

    /// isend/irecv's `work` (required: `dist.isend` returns the Work a later `wait` completes);
    /// send/recv have none.
    pub(super) fn p2p_work(&self, r: &RawStep, op: &str, op_at: usize) -> R<Option<String>> {
        match (&r.work, op.starts_with('i')) {
            (Some(w), true) => Ok(Some(self.name_work(w.get_ref()))),
            (None, true) => Err(self.err(
                op_at,
                format!("{op} needs `work = \"<name>\"` (its Work, for a later `wait`)"),
            )),
            (_, false) => Ok(None),
        }
    }

    fn name_work(&self, w: &str) -> String {
        self.works.borrow_mut().push(w.to_string());
        w.to_string()
    }

    /// send/recv's `tag` (default 0): gloo's tag is 32 bits.
    pub(super) fn p2p_tag(&self, t: &Option<Spanned<i64>>) -> R<u32> {
        match t {
            None => Ok(0),
            Some(v) => u32::try_from(*v.get_ref())
                .ok()
                .filter(|x| i32::try_from(*x).is_ok())
                .ok_or_else(|| self.at(v, "tag must be between 0 and 2147483647")),
        }
    }
}
