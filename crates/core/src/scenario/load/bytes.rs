//! How much tensor memory a collective step needs, checked when the scenario loads: the sizes
//! of the groups steps name (a sub-group's chunks count its members, not the world's) and the
//! refusal of a step past scen's limits, kept apart from reading the step's fields (steps.rs).

use super::{Cx, R};
use crate::c10d::collective::CollOp;
use crate::scenario::limits::{self, human_bytes};
use crate::scenario::model::*;

impl Cx<'_> {
    /// Records that handle `h` names a group of `members` ranks (a handle named more than once,
    /// for example by different ranks, keeps the largest).
    pub(super) fn note_group_size(&self, h: &str, members: usize) {
        let mut sizes = self.group_sizes.borrow_mut();
        let e = sizes.entry(h.to_string()).or_insert(0);
        *e = (*e).max(members);
    }

    /// Members of the group a step names (`None`: WORLD), at most the world's size; a group
    /// whose size is not known counts the whole world.
    pub(super) fn group_members(&self, group: &Option<String>, ws: usize) -> usize {
        group
            .as_ref()
            .and_then(|g| self.group_sizes.borrow().get(g).copied())
            .map_or(ws, |m| m.clamp(1, ws.max(1)))
    }

    /// Refuses a send, recv or batch_isend_irecv whose tensors (`tensors` of them, each held
    /// with its copy on the wire) exceed [`limits::MAX_TENSOR_BYTES_PER_RANK`], and counts them
    /// in the memory estimate as a collective's are (every rank may run the step).
    pub(super) fn check_p2p_bytes(
        &self,
        op: &str,
        tensor: &TensorSpec,
        tensors: usize,
        ws: usize,
        op_at: usize,
    ) -> R<()> {
        let elements: u64 = tensor.shape.iter().map(|d| *d as u64).product();
        let per_rank = elements
            .saturating_mul(tensor.dtype.size_bytes() as u64)
            .saturating_mul(tensors as u64)
            .saturating_mul(2);
        let total = per_rank.saturating_mul(ws as u64);
        if total > self.largest_coll.get().0 {
            self.largest_coll.set((total, op_at));
        }
        if per_rank <= limits::MAX_TENSOR_BYTES_PER_RANK {
            return Ok(());
        }
        Err(self.err(
            op_at,
            format!(
                "{op} needs about {} of tensors per rank ({tensors} x {:?} {} and its copy on the wire): over scen's limit of {} per rank",
                human_bytes(per_rank),
                tensor.shape,
                tensor.dtype.name(),
                human_bytes(limits::MAX_TENSOR_BYTES_PER_RANK)
            ),
        ))
    }

    /// Refuses a collective whose tensors exceed [`limits::MAX_TENSOR_BYTES_PER_RANK`] or
    /// [`limits::MAX_TENSOR_BYTES_TOTAL`] (split-size formulas are checked when they run).
    /// A rank's chunks count the group's `members`; the total counts every rank of the world
    /// (each may run the step in a group of that size).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_coll_bytes(
        &self,
        op: CollOp,
        tensor: &TensorSpec,
        count: usize,
        splits: &Option<(Splits, Splits)>,
        ws: usize,
        members: usize,
        op_at: usize,
    ) -> R<()> {
        let row: u64 = tensor.shape.iter().map(|d| *d as u64).product();
        let elements = match splits {
            Some((Splits::List(i), Splits::List(o))) => {
                let rows = i.iter().sum::<usize>().max(o.iter().sum::<usize>()) as u64;
                // Input and output are each one list: the fan below counts ws chunks.
                rows.saturating_mul(row) / (members as u64).max(1)
            }
            _ => row,
        };
        let esz = tensor.dtype.size_bytes() as u64;
        let per_rank = limits::coll_bytes_per_rank(op, elements, esz, count as u64, members as u64);
        let total = per_rank.saturating_mul(ws as u64);
        if total > self.largest_coll.get().0 {
            self.largest_coll.set((total, op_at));
        }
        let (what, value, limit) = if per_rank > limits::MAX_TENSOR_BYTES_PER_RANK {
            ("per rank", per_rank, limits::MAX_TENSOR_BYTES_PER_RANK)
        } else if total > limits::MAX_TENSOR_BYTES_TOTAL {
            ("over all ranks", total, limits::MAX_TENSOR_BYTES_TOTAL)
        } else {
            return Ok(());
        };
        let over_total = what == "over all ranks";
        if over_total && self.payloads_key.get() == Some(true) {
            // Symbolic payloads hold no tensor data: only the per-rank limit applies.
            return Ok(());
        }
        let mut refusal = self.err(
            op_at,
            format!(
                "{} needs about {} of tensors {what} ({count} x {:?} {}, group of {members}, world {ws}): over scen's limit of {} {what}",
                op.name(),
                human_bytes(value),
                tensor.shape,
                tensor.dtype.name(),
                human_bytes(limit)
            ),
        );
        if !over_total {
            return Err(refusal);
        }
        refusal.message.push_str(
            "; `[sim] payloads = \"symbolic\"` lifts this limit when no step checks values (`expect`)",
        );
        if self.payloads_key.get() == Some(false) {
            return Err(refusal);
        }
        // No `payloads` key: symbolic if no step checks values (decided after the last step).
        let mut over = self.over_limit.borrow_mut();
        match over.as_mut() {
            None => *over = Some((refusal, total)),
            Some((_, max)) => *max = (*max).max(total),
        }
        Ok(())
    }

    /// Refuses a scenario whose run would not fit [`limits::MEMORY_BUDGET_BYTES`]: the
    /// simulator's state for its world and groups plus its largest collective's tensors (none
    /// with symbolic payloads). Returns the estimate.
    pub(super) fn check_memory(
        &self,
        world: &World,
        steps: &[Step],
        payloads: Payloads,
    ) -> R<limits::MemoryEstimate> {
        let ws = world.size() as u64;
        let groups = steps.iter().filter_map(|s| match &s.kind {
            StepKind::InitProcessGroup { .. } => Some(ws),
            StepKind::NewGroup { ranks, .. } => {
                Some(ranks.as_ref().map_or(ws, |r| (r.len() as u64).min(ws)))
            }
            StepKind::SplitGroup { split_ranks, .. } => {
                let largest = split_ranks.iter().flatten().map(Vec::len).max();
                Some((largest.unwrap_or(1) as u64).min(ws))
            }
            _ => None,
        });
        let exchanging: std::collections::BTreeMap<Option<&String>, u64> = steps
            .iter()
            .filter_map(|s| match &s.kind {
                StepKind::Collective(c)
                    if matches!(c.op, CollOp::AllToAllSingle | CollOp::AllToAll) =>
                {
                    let m = self.group_members(&c.group, ws as usize) as u64;
                    Some((c.group.as_ref(), m))
                }
                _ => None,
            })
            .collect();
        let (largest, op_at) = self.largest_coll.get();
        let est = limits::MemoryEstimate {
            state_bytes: limits::state_bytes(ws, groups, exchanging.into_values()),
            tensor_bytes: if payloads.symbolic() {
                0
            } else {
                largest.saturating_mul(limits::TENSOR_COPIES)
            },
        };
        if est.total() <= limits::MEMORY_BUDGET_BYTES {
            return Ok(est);
        }
        let at = if est.tensor_bytes > 0 { op_at } else { 0 };
        Err(self.err(
            at,
            format!(
                "the run would need about {} ({} of simulator state for {ws} ranks and their \
                 groups, {} of tensors), over scen's memory budget of {}",
                human_bytes(est.total()),
                human_bytes(est.state_bytes),
                human_bytes(est.tensor_bytes),
                human_bytes(limits::MEMORY_BUDGET_BYTES)
            ),
        ))
    }
}
