//! `dist.shrink_group(ranks_to_exclude, group, shrink_flags)` (torch 2.15), in the order real
//! torch checks it: the list and the flags, the group (a non-member's handle, a group of one
//! rank), then whether the group's backend can shrink. gloo cannot: the call raises
//! `TypeError: Process group backend for '<name>' does not support shrinking operations.`
//! (measured with real torch 2.15, gloo, 3 ranks, 2026-11-29). NCCL's shrink (ncclCommShrink)
//! and XCCL's are not simulated: scen's limit error.

use super::*;
use crate::c10d::error;
use crate::net::{Clock, Net};
use crate::probe::Probe;

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    pub(super) fn shrink_group(
        &mut self,
        group: &Option<String>,
        ranks_to_exclude: &[i64],
        shrink_flags: i64,
    ) -> Res<String> {
        if ranks_to_exclude.is_empty() {
            return Err(error::shrink_nothing_excluded());
        }
        if !(0..=1).contains(&shrink_flags) {
            return Err(error::shrink_bad_flags(shrink_flags));
        }
        let Some(name) = self.resolve_group(group)? else {
            return Err(error::shrink_non_member());
        };
        let pg = &self.pgs[&name];
        if pg.ranks.len() <= 1 {
            return Err(error::shrink_too_small(pg.ranks.len()));
        }
        let backend = pg.config.backend_for(self.accel()).ok();
        let backend = backend.or_else(|| pg.config.backend_for("cpu").ok());
        match backend {
            Some("gloo") | None => Err(error::shrink_unsupported(&name)),
            Some(other) => Err(error::limit(format!(
                "shrink_group of a group on {other}: scen does not simulate a backend's shrink"
            ))),
        }
    }
}
