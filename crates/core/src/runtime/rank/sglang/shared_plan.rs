//! The sglang plan the ranks of one thread share, and the plan as the list of calls group
//! records name (`diagnose::planned`). A plan is a pure function of (config, version) and holds
//! every group of the world: made once, not once per rank (issue 11).

use super::handle_of;
use crate::diagnose::PlannedCalls;
use crate::scenario::SglangVersion;
use crate::sglang::parallel_state::{
    self as ps, NewGroupCall as NewGroupCallRef, ParallelConfig, Plan, PlanError,
};
use std::cell::RefCell;
use std::rc::Rc;

thread_local! {
    /// The last plan made on this thread. A plan is a pure function of (config, version) and
    /// holds every group of the world; in the simulator every rank runs on one thread, so the
    /// ranks share one plan instead of each making its own (W plans of W groups: the start-up
    /// cost grew as W^3, issue 11).
    static LAST_PLAN: RefCell<Option<(ParallelConfig, SglangVersion, SharedPlan)>> =
        const { RefCell::new(None) };
}

/// A plan the ranks of this thread share, with what its checks need to know once.
#[derive(Clone)]
pub(in crate::runtime::rank) struct SharedPlan {
    pub plan: Rc<Plan>,
    /// The same plan as the list of calls group records name (`diagnose::planned`).
    pub calls: Rc<dyn PlannedCalls>,
    /// The highest rank any call names, if every call's list is sorted (what `new_group`
    /// records: such calls can be reported by their index in the plan).
    pub sorted_max_rank: Option<usize>,
    /// Per rank, the calls whose list holds it (sorted plans only): a rank goes through the
    /// calls between two of its own as one run (`Proc::planned_non_members`).
    pub member_calls: Rc<Vec<Vec<u32>>>,
    /// The world coordinator's calls, and Ulysses/Ring's (indexes).
    world_calls: Rc<Vec<usize>>,
    usp_calls: Rc<Vec<usize>>,
}

impl SharedPlan {
    /// The calls rank `me` must make one by one: its own, the world coordinator's (made
    /// before), Ulysses/Ring ones when they fall back to WORLD, and each call after which
    /// communicators are built (`after`: their calls' numbers, as `communicator_after_call`).
    pub fn stops(&self, me: usize, usp_fallback: bool, after: &[usize]) -> Vec<usize> {
        let mine = self.member_calls.get(me).into_iter().flatten();
        let mut stops: Vec<usize> = mine.map(|i| *i as usize).collect();
        stops.extend(self.world_calls.iter());
        if usp_fallback {
            stops.extend(self.usp_calls.iter());
        }
        stops.extend(after.iter().filter_map(|a| a.checked_sub(1)));
        stops.sort_unstable();
        stops.dedup();
        stops
    }
}

/// The indexes of the calls of these coordinators.
fn calls_of(plan: &Plan, coordinators: &[&str]) -> Vec<usize> {
    let of = |c: &&NewGroupCallRef| coordinators.contains(&c.coordinator);
    (plan.calls.iter().enumerate())
        .filter(|(_, c)| of(c))
        .map(|(i, _)| i)
        .collect()
}

/// Per rank up to `max_rank`, the calls (indexes) whose list holds it, in order.
fn member_calls(plan: &Plan, max_rank: Option<usize>) -> Vec<Vec<u32>> {
    let Some(max) = max_rank else {
        return Vec::new();
    };
    let mut by_rank = vec![Vec::new(); max + 1];
    for (i, c) in plan.calls.iter().enumerate() {
        for r in &c.ranks {
            by_rank[*r].push(i as u32);
        }
    }
    by_rank
}

/// [`ps::plan_initialize_model_parallel`], shared with the other ranks of this thread.
pub(super) fn shared_plan(
    config: ParallelConfig,
    version: SglangVersion,
) -> Result<SharedPlan, PlanError> {
    let hit = LAST_PLAN.with_borrow(|last| {
        last.as_ref()
            .filter(|(c, v, _)| *c == config && *v == version)
            .map(|(_, _, p)| p.clone())
    });
    if let Some(p) = hit {
        return Ok(p);
    }
    let plan = Rc::new(ps::plan_initialize_model_parallel(config, version)?);
    let sorted = (plan.calls.iter()).all(|c| c.ranks.windows(2).all(|w| w[0] < w[1]));
    let max_rank = plan.calls.iter().filter_map(|c| c.ranks.last()).max();
    let sorted_max_rank = max_rank.copied().filter(|_| sorted);
    let shared = SharedPlan {
        calls: plan.clone(),
        sorted_max_rank,
        member_calls: Rc::new(member_calls(&plan, sorted_max_rank)),
        world_calls: Rc::new(calls_of(&plan, &["world"])),
        usp_calls: Rc::new(calls_of(&plan, &["ulysses", "ring"])),
        plan,
    };
    LAST_PLAN.with_borrow_mut(|last| *last = Some((config, version, shared.clone())));
    Ok(shared)
}

/// Group records name a planned call by its index (`diagnose::planned`).
impl PlannedCalls for Plan {
    fn ranks(&self, i: usize) -> &[usize] {
        &self.calls[i].ranks
    }

    fn backend_slot(&self, i: usize) -> usize {
        self.calls[i].backend as usize
    }

    fn label(&self, i: usize, rank: usize) -> String {
        let call = &self.calls[i];
        let handle = handle_of(call).filter(|_| call.ranks.contains(&rank));
        handle.unwrap_or_else(|| "unnamed".into())
    }
}
