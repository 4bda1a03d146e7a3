//! `monitored_barrier` (gloo's `ProcessGroupGloo::monitoredBarrier`): every member other than
//! the group's rank 0 sends rank 0 a check-in and waits for its answer; rank 0 waits for the
//! check-ins in rank order, within the barrier's timeout, and answers each only when all came.
//! So rank 0 names the member that did not arrive, and the others learn only that rank 0 failed.
//!
//! Measured on real torch 2.15 (gloo, 3 ranks; docs/scenario-format.md has the commands):
//! `timeout=None` is the backend's default (30 min), not the group's timeout; the members' own
//! waits have the group's timeout; with `wait_all_ranks=False` each wait on rank 0 gets what is
//! left of the barrier's time, with `True` each gets all of it, and gloo's timeout closes the
//! group's pairs (so after one missing member the others fail at once). The messages go over
//! gloo's pairs with tags of their own, so they never match the program's sends and receives,
//! but they count in the group's gloo sequence number as the program's do (rank 0: a receive
//! per other member, then a send each if all came; the others: one send, one receive), which
//! DETAIL's fingerprint carries (R32). A member that comes after rank 0's process ended fails at
//! once with gloo's own `Connection closed by peer` (its send throws), not the barrier's words,
//! and so does rank 0 when it comes after a member's process ended (its receive throws).

use super::*;
use crate::c10d::backend;
use crate::c10d::error;
use crate::net::{Clock, Net};
use crate::probe::Probe;
use crate::trace::{Dir, Wait, WaitOn};

/// One monitored barrier as it runs on this rank.
struct Barrier {
    /// The group's fabric scope (gloo context) and label.
    scope: String,
    label: String,
    /// World ranks of the group's members, in group-rank order.
    ranks: crate::ranks::Ranks,
    /// This call's tag prefix on the group.
    tag: String,
    timeout_ms: u64,
    pg_timeout_ms: u64,
}

impl Barrier {
    /// Member `g`'s check-in (`inbound`) or rank 0's answer to it.
    fn tag(&self, g: usize, inbound: bool) -> String {
        let way = if inbound { "in" } else { "out" };
        format!("{}/{g}/{way}", self.tag)
    }
}

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    pub(super) async fn monitored_barrier(
        &mut self,
        group: &Option<String>,
        timeout_ms: Option<u64>,
        wait_all_ranks: bool,
    ) -> Res<String> {
        let Some(name) = self.resolve_group(group)? else {
            let r = self.world()?.rank;
            self.event(
                EventKind::Warn,
                error::non_member_warning("monitored_barrier", r),
            );
            return Ok("not a member: no-op".into());
        };
        let me = self.world()?.rank;
        let pg = self.pgs.get_mut(&name).expect("pg");
        if pg.config.backend_for("cpu").ok() != Some("gloo") {
            return Err(error::monitored_barrier_needs_cpu());
        }
        pg.monitored += 1;
        let b = Barrier {
            scope: pg.name.clone(),
            label: format!("{} ({})", pg.label, pg.name),
            ranks: pg.ranks.clone(),
            tag: format!("{}/gloo/monitored/{}", pg.name, pg.monitored),
            timeout_ms: timeout_ms.unwrap_or_else(|| {
                backend::timeout_or_default_ms(None, &pg.config, self.env.scenario.time_scale)
            }),
            pg_timeout_ms: pg.timeout_ms,
        };
        let g = pg.group_rank(me).expect("a member");
        if g == 0 {
            self.monitor(&name, &b, wait_all_ranks).await?;
        } else {
            // gloo's send throws at once, outside the barrier's own wording, on a pair that has
            // already read its peer's close: rank 0's process ended before this member came
            // (user-path 7/414: `Connection closed by peer` alone, real torch 2.15).
            // (gloo's pairs all exist from the group's creation: `watch` makes this rank's.)
            self.fabric.watch(b.ranks[0]).await;
            if let Some(e) = self.fabric.has_peer_ended(b.ranks[0]) {
                return Err(e.into_c10d(None));
            }
            // gloo posts its send and its receive (each counted in its sequence number) before
            // it waits on either.
            self.count_gloo_p2p(&name, 2);
            self.check_in(&b, g)
                .await
                .map_err(|e| error::monitored_barrier_peer_errors(g, &e))?;
        }
        Ok(format!("passed ({} members)", b.ranks.len()))
    }

    /// A member other than rank 0: its answer posted, its check-in sent, the answer awaited
    /// (both under the group's timeout).
    async fn check_in(&mut self, b: &Barrier, g: usize) -> Res<()> {
        let root = b.ranks[0];
        self.post_recv(root, &b.tag(g, false)).await?;
        self.gloo_send(b, root, &b.tag(g, true), b.pg_timeout_ms)
            .await?;
        let deadline_ms = self.now() + b.pg_timeout_ms;
        self.gloo_recv(b, root, &b.tag(g, false), deadline_ms, b.pg_timeout_ms)
            .await
    }

    /// Rank 0: every check-in's receive posted, then awaited in rank order; then every answer
    /// sent, awaited the same way.
    /// Each receive and send counts in gloo's sequence number as it is posted.
    async fn monitor(&mut self, name: &str, b: &Barrier, wait_all: bool) -> Res<()> {
        let members: Vec<usize> = (1..b.ranks.len()).collect();
        self.count_gloo_p2p(name, members.len() as u64);
        for &g in &members {
            // A member whose process ended before rank 0 came: posting its receive throws at
            // once on a pair that read the close, outside the barrier's words (user-path
            // 7/515: bare `Connection closed by peer`, real torch 2.15).
            self.fabric.watch(b.ranks[g]).await;
            if let Some(e) = self.fabric.has_peer_ended(b.ranks[g]) {
                return Err(e.into_c10d(None));
            }
            self.post_recv(b.ranks[g], &b.tag(g, true)).await?;
        }
        // gloo takes its start before posting, which costs it no time; the model's notices
        // cost virtual ticks (a real rank's `Timed out waiting 3000ms`, not 2998).
        let start_ms = self.now();
        let mut failed = Vec::new();
        for &g in &members {
            let left = self.time_left(b, start_ms, wait_all, g, &members, &failed)?;
            let r = self
                .gloo_recv(b, b.ranks[g], &b.tag(g, true), self.now() + left, left)
                .await;
            self.monitor_outcome(b, g, r, wait_all, &mut failed)?;
        }
        if !failed.is_empty() {
            return Err(error::monitored_barrier_missing(&failed, b.timeout_ms));
        }
        self.count_gloo_p2p(name, members.len() as u64);
        for &g in &members {
            self.send_notice(b.ranks[g], &b.tag(g, false)).await?;
        }
        for &g in &members {
            let left = self.time_left(b, start_ms, wait_all, g, &members, &failed)?;
            let r = self
                .await_ready_and_send(b, b.ranks[g], &b.tag(g, false), left)
                .await;
            self.monitor_outcome(b, g, r, wait_all, &mut failed)?;
        }
        if !failed.is_empty() {
            return Err(error::monitored_barrier_missing(&failed, b.timeout_ms));
        }
        Ok(())
    }

    /// `n` more gloo sends or receives posted on group `name` (R32: gloo's sequence number).
    fn count_gloo_p2p(&mut self, name: &str, n: u64) {
        if let Some(pg) = self.pgs.get_mut(name) {
            pg.gloo_p2p += n;
        }
    }

    /// What rank 0's next wait gets: all of the barrier's time with `wait_all_ranks`, else
    /// what is left of it (gloo's `getRemainingTime`; none left fails before waiting).
    fn time_left(
        &self,
        b: &Barrier,
        start_ms: u64,
        wait_all: bool,
        g: usize,
        members: &[usize],
        failed: &[usize],
    ) -> Res<u64> {
        if wait_all {
            return Ok(b.timeout_ms);
        }
        let used = self.now().saturating_sub(start_ms);
        if used >= b.timeout_ms {
            let processed: Vec<usize> = members
                .iter()
                .copied()
                .filter(|m| *m < g && !failed.contains(m))
                .collect();
            return Err(error::monitored_barrier_no_time(
                g,
                b.timeout_ms,
                &processed,
            ));
        }
        Ok(b.timeout_ms - used)
    }

    /// One of rank 0's waits ended: a failure is raised at once, or with `wait_all_ranks`
    /// logged (gloo's `LOG(ERROR)`) and counted.
    fn monitor_outcome(
        &mut self,
        b: &Barrier,
        g: usize,
        r: Res<()>,
        wait_all: bool,
        failed: &mut Vec<usize>,
    ) -> Res<()> {
        let Err(e) = r else { return Ok(()) };
        if !wait_all {
            return Err(error::monitored_barrier_rank_failed(g, b.timeout_ms, &e));
        }
        let line = error::monitored_barrier_rank_log(g, b.timeout_ms);
        self.event(EventKind::Warn, line);
        failed.push(g);
        Ok(())
    }

    /// A gloo receive posted: its ready notice to the sender.
    async fn post_recv(&self, peer: usize, tag: &str) -> Res<()> {
        self.fabric
            .send(peer, &p2p::ready_tag(tag), &[])
            .await
            .map_err(|e| e.into_c10d(None))
    }

    /// A gloo send posted: its notice to the receiver.
    async fn send_notice(&self, peer: usize, tag: &str) -> Res<()> {
        self.fabric
            .send(peer, &p2p::send_notice_tag(tag), &[])
            .await
            .map_err(|e| e.into_c10d(None))
    }

    /// A gloo send: its notice, its receiver's ready notice awaited up to `timeout_ms`, then
    /// the check-in's one element.
    async fn gloo_send(&mut self, b: &Barrier, peer: usize, tag: &str, timeout_ms: u64) -> Res<()> {
        self.send_notice(peer, tag).await?;
        self.await_ready_and_send(b, peer, tag, timeout_ms).await
    }

    async fn await_ready_and_send(
        &mut self,
        b: &Barrier,
        peer: usize,
        tag: &str,
        timeout_ms: u64,
    ) -> Res<()> {
        let deadline_ms = self.now() + timeout_ms;
        let timeout_error = error::gloo_send_timeout(timeout_ms);
        let what = format!("monitored_barrier: send to rank {peer} (waits for its recv)");
        let wait = self.mb_wait(b, peer, Dir::Send, what, deadline_ms, &timeout_error);
        self.gloo_wait_for(wait, peer, &p2p::ready_tag(tag), &b.scope)
            .await
            .map_err(|e| e.into_c10d(Some(timeout_error)))?;
        self.fabric
            .send(peer, tag, &[0; 8])
            .await
            .map_err(|e| e.into_c10d(None))
    }

    /// A gloo receive already posted, awaited until `deadline_ms` (`timeout_ms` for its text).
    async fn gloo_recv(
        &mut self,
        b: &Barrier,
        peer: usize,
        tag: &str,
        deadline_ms: u64,
        timeout_ms: u64,
    ) -> Res<()> {
        // A check-in that came before a timeout closed the group's pairs completed its posted
        // receive: gloo's wait on it returns at once (7/347: with wait_all_ranks, rank 0 names
        // only the members whose check-ins had not come, real torch 2.15).
        if self.fabric.pairs_closed(&b.scope) && self.fabric.try_recv(peer, tag).is_some() {
            let _ = self.fabric.try_recv(peer, &p2p::send_notice_tag(tag));
            return Ok(());
        }
        let timeout_error = error::gloo_recv_timeout(timeout_ms);
        let what = format!("monitored_barrier: recv from rank {peer}");
        let wait = self.mb_wait(b, peer, Dir::Recv, what, deadline_ms, &timeout_error);
        let r = self.gloo_wait_for(wait, peer, tag, &b.scope).await;
        // The sender's notice came before its data: done with.
        let _ = self.fabric.try_recv(peer, &p2p::send_notice_tag(tag));
        r.map(|_| ()).map_err(|e| e.into_c10d(Some(timeout_error)))
    }

    /// The rank's wait in a monitored barrier's message with `peer`.
    fn mb_wait(
        &self,
        b: &Barrier,
        peer: usize,
        dir: Dir,
        what: String,
        deadline_ms: u64,
        timeout_error: &C10dError,
    ) -> Wait {
        Wait {
            step: self.step,
            on: WaitOn::P2p { dir },
            what: format!("{what} on group {}", b.label),
            group: Some(b.label.clone()),
            seq: None,
            peers: vec![peer],
            since_ms: self.now(),
            deadline_ms: Some(deadline_ms),
            timeout_error: Some(timeout_error.clone().into()),
        }
    }
}
