//! `dist.split_group(parent, split_ranks, timeout)`, as real torch 2.15 runs it on gloo: a
//! group made from another without a store barrier, whose members connect under the parent's
//! keys (docs/rules/c10d.md#r40).
//!
//! What decides its outcome, each measured with real torch 2.15 (gloo, 2-3 ranks):
//! - The name is `sha1("<r>_<r>_..._<group_count>")` of this rank's list (as given, parent
//!   ranks) and its group counter, which the call advances like any new group. A rank whose
//!   counter differs (an earlier `new_group` it did not make) names the group otherwise and
//!   waits under other keys: both sides time out.
//! - Only the members of this rank's list take part: a member that never calls it leaves the
//!   others waiting in gloo's mesh for its address, `<parent's prefixes>/<name>//0/<rank>`
//!   (no device level, unlike new_group's), until the split's timeout (torch's default for
//!   the backend without one, not the parent's).
//! - The list's order is the new group's: its first rank is group rank 0.
//! - A rank in no list gets `NON_GROUP_MEMBER` and still advances its counter.
//! - Under `TORCH_DISTRIBUTED_DEBUG=DETAIL` the new group is the backend's plain split, with no
//!   ProcessGroupWrapper: its collectives are not fingerprint-checked (measured: an all_reduce
//!   against a broadcast on it times out in gloo, where a new_group's raises DETAIL's error).

use super::*;
use crate::c10d::backend;
use crate::c10d::error;
use crate::c10d::naming;
use crate::diagnose::GroupCall;
use crate::net::{Clock, Net};
use crate::probe::Probe;

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// A `split_group` or `shrink_group` step (runtime/rank/shrink.rs).
    pub(super) async fn group_from_another(&mut self, kind: &StepKind) -> Res<String> {
        match kind {
            StepKind::SplitGroup {
                parent,
                split_ranks,
                timeout_ms,
                handle,
            } => {
                self.split_group(parent, split_ranks.as_deref(), *timeout_ms, handle)
                    .await
            }
            StepKind::ShrinkGroup {
                group,
                ranks_to_exclude,
                shrink_flags,
                ..
            } => self.shrink_group(group, ranks_to_exclude, *shrink_flags),
            _ => unreachable!("a split_group or shrink_group step"),
        }
    }

    async fn split_group(
        &mut self,
        parent: &Option<String>,
        split_ranks: Option<&[Vec<usize>]>,
        timeout_ms: Option<u64>,
        handle: &Option<String>,
    ) -> Res<String> {
        let splits = split_ranks
            .filter(|s| !s.is_empty())
            .ok_or_else(error::split_ranks_empty)?;
        let (me, ws) = {
            let w = self.world()?;
            (w.rank, w.world_size)
        };
        let parent_name = match parent {
            None => "0".to_string(),
            Some(h) => match self.handles.get(h) {
                Some(Handle::Member(name)) if self.pgs.contains_key(name) => name.clone(),
                Some(Handle::Member(_)) => return Err(error::invalid_group()),
                Some(Handle::NonMember) => return Err(error::split_not_in_parent(me)),
                None => return Err(error::group_never_created(h)),
            },
        };
        let (pranks, config, prefixes) = {
            let p = &self.pgs[&parent_name];
            (p.ranks.clone(), p.config.clone(), p.prefixes.clone())
        };
        if config.backends() != ["gloo"] {
            return Err(error::limit(format!(
                "split_group of a group on {}: scen simulates the split of a gloo group only",
                config.describe()
            )));
        }
        let my_rank = pranks.iter().position(|r| *r == me).expect("member");
        let mine = my_split(splits, my_rank, ws)?;
        let timeout_ms =
            backend::timeout_or_default_ms(timeout_ms, &config, self.env.scenario.time_scale);
        let name = naming::hashed_name(mine, self.group_count);
        // Every list as global ranks: the same call on every rank that makes it.
        let all: Vec<usize> = splits
            .iter()
            .flatten()
            .map(|r| pranks.get(*r).copied().unwrap_or(usize::MAX))
            .collect();
        let label = handle.clone().unwrap_or_else(|| "unnamed".into());
        let backend = config.original.clone();
        self.report_group(
            Caller::Step,
            me,
            (&all, GroupCall::SplitGroup),
            &backend,
            &label,
        );
        self.group_count += 1;
        if mine.len() > pranks.len() {
            return Err(error::split_larger_than_parent());
        }
        if !mine.contains(&my_rank) {
            self.set_handle(handle, Handle::NonMember);
            return Ok(format!(
                "split of \"{parent_name}\" as \"{name}\" {mine:?}: not a member (NON_GROUP_MEMBER)"
            ));
        }
        let members = mine
            .iter()
            .map(|r| {
                pranks
                    .get(*r)
                    .copied()
                    .ok_or_else(|| beyond_parent(*r, &pranks))
            })
            .collect::<Res<Vec<usize>>>()?;
        let mut prefixes = prefixes;
        prefixes.push(format!("{name}/"));
        let mut pg = self.make_pg(
            name.clone(),
            label,
            crate::ranks::of(&members),
            config,
            timeout_ms,
            prefixes,
        );
        pg.split = true;
        self.pgs.insert(name.clone(), pg);
        self.set_handle(handle, Handle::Member(name.clone()));
        self.construct_backends(&name).await?;
        Ok(format!(
            "group \"{name}\" split from \"{parent_name}\": global ranks {members:?}"
        ))
    }
}

/// This rank's list of `splits` (the first that holds `my_rank`, else the first), each list
/// checked in order as torch checks them until that one.
fn my_split(splits: &[Vec<usize>], my_rank: usize, ws: usize) -> Res<&[usize]> {
    for s in splits {
        if s.is_empty() {
            return Err(error::split_empty());
        }
        if s.len() > ws {
            return Err(error::split_larger_than_world());
        }
        let mut sorted = s.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(error::split_duplicates());
        }
        if s.contains(&my_rank) {
            return Ok(s);
        }
    }
    Ok(&splits[0])
}

/// A list naming a parent rank past the parent's size: ProcessGroupGloo::split then reads past
/// the end of its rank list (undefined behaviour in C++), which scen does not guess at.
fn beyond_parent(r: usize, parent: &[usize]) -> C10dError {
    error::limit(format!(
        "split_group: rank {r} of a parent group of {} ranks; real gloo reads past its rank list there (undefined), which scen does not simulate",
        parent.len()
    ))
}
