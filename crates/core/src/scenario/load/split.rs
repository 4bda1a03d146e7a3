//! The `split_group` step's fields: the parent `group`, `split_ranks` (lists of the parent's
//! group ranks) and `as`; and `shrink_group`'s: `group`, `ranks_to_exclude`, `shrink_flags`. What torch itself checks when the call runs (an empty list, a
//! duplicate, a list longer than the world) stays for the run to raise with torch's words;
//! only what no program could pass (a negative rank) is an error here, naming file:line:col.

use super::{Cx, R};
use crate::scenario::model::StepKind;
use crate::scenario::raw::RawStep;

impl Cx<'_> {
    pub(super) fn split_group_step(
        &self,
        r: &RawStep,
        parent: Option<String>,
        handles: &mut Vec<String>,
    ) -> R<StepKind> {
        let split_ranks = match &r.split_ranks {
            None => None,
            Some(lists) => {
                let at = lists.span().start;
                let mut out = Vec::new();
                for list in lists.get_ref() {
                    let ranks = list
                        .iter()
                        .map(|v| {
                            usize::try_from(*v).map_err(|_| {
                                self.err(
                                    at,
                                    format!(
                                        "split_ranks: rank {v} is negative (a rank of the parent group, 0 or more)"
                                    ),
                                )
                            })
                        })
                        .collect::<R<Vec<_>>>()?;
                    out.push(ranks);
                }
                Some(out)
            }
        };
        let handle = r.as_name.as_ref().map(|h| h.get_ref().clone());
        if let Some(h) = &handle {
            if !handles.contains(h) {
                handles.push(h.clone());
            }
            let largest = split_ranks
                .iter()
                .flatten()
                .map(Vec::len)
                .max()
                .unwrap_or(1);
            self.note_group_size(h, largest);
        }
        Ok(StepKind::SplitGroup {
            parent,
            split_ranks,
            timeout_ms: self.timeout(&r.timeout_s)?,
            handle,
        })
    }

    /// `shrink_group`: torch checks the list and the flags when the call runs (runtime/rank/
    /// shrink.rs); only the list's presence is checked here.
    pub(super) fn shrink_group_step(
        &self,
        r: &RawStep,
        group: Option<String>,
        handles: &mut Vec<String>,
        op_at: usize,
    ) -> R<StepKind> {
        let Some(list) = &r.ranks_to_exclude else {
            return Err(self.err(
                op_at,
                "shrink_group needs `ranks_to_exclude` (a list of the group's ranks)",
            ));
        };
        let handle = r.as_name.as_ref().map(|h| h.get_ref().clone());
        if let Some(h) = &handle {
            if !handles.contains(h) {
                handles.push(h.clone());
            }
        }
        Ok(StepKind::ShrinkGroup {
            group,
            ranks_to_exclude: list.get_ref().clone(),
            shrink_flags: r.shrink_flags.as_ref().map_or(0, |f| *f.get_ref()),
            handle,
        })
    }
}
