//! The bridge from collective algorithms to the fabric: one [`Link`] per collective call.
//!
//! It maps group ranks to global ranks, tags messages with the call, applies the backend's
//! timeout rule (gloo: per-op timeout; xccl: none unless blocking wait; nccl: the watchdog) and
//! tells the probe what the rank is waiting for, so a hang can name the missing peer. On gloo
//! it also keeps gloo's rendezvous: a collective's send goes out only once its receiver has
//! posted ([`Held`]), so a sender that dies first has sent nothing.

use super::fabric::{self, Fabric, FabricError};
use crate::algo::{CollectiveError, Link, LinkError};
use crate::c10d::error::{self, C10dError};
use crate::net::{Clock, Net};
use crate::probe::Probe;
use crate::trace::{Dir, Wait, WaitOn};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;

/// What a collective call is, for wait records and errors.
#[derive(Clone)]
pub struct CallInfo {
    pub proc_rank: usize,
    pub step: usize,
    pub group: String,
    pub seq: u64,
    pub op: String,
    /// The timeout rule: deadline and the error raised at it; `None` waits forever.
    pub timeout: Option<(u64, C10dError)>,
    /// gloo sees a peer's exit as a closed connection; oneCCL/NCCL keep waiting.
    pub peer_exit_is_error: bool,
    /// A device group's call (xccl/nccl) rather than a host (gloo) one: its link class.
    pub device: bool,
    /// gloo's timeout for each wait of the call (every `waitSend`/`waitRecv` has its own).
    pub wait_ms: Option<u64>,
    /// The gloo context the call's pairs belong to (its process group's name): a timeout
    /// closes them all ([`Fabric::close_pairs`]).
    pub pairs: String,
    /// Each message costs its sender the timing model's price (`Clock::charge`); false when
    /// the call was charged as a whole (runtime/cost.rs).
    pub per_message_cost: bool,
}

pub struct FabricLink<'a, N: Net, C: Clock, P: Probe> {
    pub fabric: &'a Rc<Fabric<N>>,
    pub clock: &'a C,
    pub probe: &'a P,
    /// Global ranks of the group, in group-rank order.
    pub members: &'a [usize],
    pub me: usize,
    /// The call's message tag; [`Link::next_call`] moves it to the next of `next_tags`.
    pub tag: RefCell<String>,
    /// The tags of the calls this one goes on as (gloo's list reduce_scatter), in order.
    pub next_tags: RefCell<Vec<String>>,
    pub info: CallInfo,
    /// The c10d error behind the last failure (LinkError only carries text).
    pub error: RefCell<Option<C10dError>>,
    /// Receive wait records already built, by peer (see `recv_wait`).
    pub recv_waits: RefCell<Vec<(usize, Wait)>>,
    /// gloo's unbound sends whose receiver's ready notice has not come yet
    /// ([`Link::send_when_ready`]).
    pub held: RefCell<Held>,
}

/// A gloo call's sends held until their receivers post (pair.cc's `localPendingSend_`), and
/// per member how many went out and how many ready notices the call's waits took.
#[derive(Default)]
pub struct Held {
    /// (member, message, logical bytes), in posting order.
    sends: Vec<(usize, Vec<u8>, usize)>,
    sent: BTreeMap<usize, usize>,
    notices_taken: BTreeMap<usize, usize>,
}

/// How many peers' receive wait records one call keeps (a ring has one peer per direction;
/// calls that receive from every peer build the rest as they go).
const RECV_WAITS_KEPT: usize = 2;

impl<N: Net, C: Clock, P: Probe> FabricLink<'_, N, C, P> {
    fn fail(&self, e: C10dError) -> LinkError {
        let text = e.to_string();
        *self.error.borrow_mut() = Some(e);
        LinkError::Failed(text)
    }

    /// The c10d error of a fabric error (peer losses carry the peer's address).
    fn map(&self, e: FabricError) -> LinkError {
        let timeout = self.info.timeout.as_ref().map(|(_, e)| e.clone());
        self.fail(e.into_c10d(timeout))
    }

    /// The wait record for a blocking receive from `peer`. A call receives from the same few
    /// peers many times (a ring: n - 1 times from its predecessor), so the record is built once
    /// per peer and copied with the current time.
    fn recv_wait(&self, peer: usize) -> Wait {
        let mut cached = self.recv_waits.borrow_mut();
        if let Some((_, w)) = cached.iter().find(|(p, _)| *p == peer) {
            return Wait {
                since_ms: self.clock.now_ms(),
                ..w.clone()
            };
        }
        let what = format!(
            "{} #{} on group {}: recv from rank {peer}",
            self.info.op, self.info.seq, self.info.group
        );
        let w = self.wait_for(peer, WaitOn::Transfer { dir: Dir::Recv }, what);
        if cached.len() < RECV_WAITS_KEPT {
            cached.push((peer, w.clone()));
        }
        w
    }

    /// The wait record for a receive from `peer`.
    pub fn wait_for(&self, peer: usize, on: WaitOn, what: String) -> Wait {
        Wait {
            step: self.info.step,
            on,
            what,
            group: Some(self.info.group.clone()),
            seq: Some(self.info.seq),
            peers: vec![peer],
            since_ms: self.clock.now_ms(),
            deadline_ms: self.info.timeout.as_ref().map(|(d, _)| *d),
            timeout_error: self.info.timeout.as_ref().map(|(_, e)| e.clone().into()),
        }
    }
}

impl<N: Net, C: Clock, P: Probe> Link for FabricLink<'_, N, C, P> {
    fn next_call(&self) {
        let mut next = self.next_tags.borrow_mut();
        if !next.is_empty() {
            *self.tag.borrow_mut() = next.remove(0);
            *self.held.borrow_mut() = Held::default();
        }
    }
    fn rank(&self) -> usize {
        self.me
    }

    fn size(&self) -> usize {
        self.members.len()
    }

    fn takes_short_broadcast(&self) -> bool {
        !self.info.device
    }

    async fn send(&self, to: usize, data: Vec<u8>, bytes: usize) -> Result<(), LinkError> {
        let peer = self.members[to];
        let (me, device) = (self.info.proc_rank, self.info.device);
        if self.info.per_message_cost {
            self.clock.charge(me, peer, device, bytes).await;
        }
        let tag = self.tag.borrow().clone();
        match self.fabric.send(peer, &tag, &data).await {
            Err(
                FabricError::PeerClosed(_)
                | FabricError::PeerReset(_)
                | FabricError::Unreachable { .. },
            ) if !self.info.peer_exit_is_error => {
                self.wait_out_exited(peer, Dir::Send).await.map(|_| ())
            }
            r => r.map_err(|e| self.map(e)),
        }
    }

    async fn send_when_ready(
        &self,
        to: usize,
        data: Vec<u8>,
        bytes: usize,
    ) -> Result<(), LinkError> {
        if self.info.device {
            return self.send(to, data, bytes).await;
        }
        self.held.borrow_mut().sends.push((to, data, bytes));
        self.release().await?;
        let held = self.held.borrow().sends.iter().any(|(m, _, _)| *m == to);
        if !held {
            return Ok(());
        }
        // gloo's send, finding no ready notice, tells the receiver it has one
        // (NOTIFY_SEND_READY): a receiver that died leaves it unread and resets this pair.
        let r = self
            .fabric
            .send(self.members[to], &self.send_notice_tag(), &[])
            .await;
        r.map_err(|e| self.map(e))
    }

    async fn post_recv(&self, from: usize) -> Result<(), LinkError> {
        if !self.info.device {
            // The notice rides the pair; a dead peer shows in the wait that follows.
            let _ = self
                .fabric
                .send(self.members[from], &self.ready_tag(), &[])
                .await;
        }
        Ok(())
    }

    async fn wait_sent(&self, to: &[usize], recvs: &[usize]) -> Result<usize, LinkError> {
        if self.info.device {
            return Ok(0);
        }
        let ms = self.info.wait_ms.unwrap_or(0);
        let timeout = error::gloo_send_timeout(ms);
        let tag = self.ready_tag();
        let watch = self.pending(recvs, &self.tag.borrow());
        let wait = self.wait_any((to, &tag), &watch, Dir::Send, "waits for its recv", timeout);
        let (i, _) = self.releasing(wait).await?;
        *self
            .held
            .borrow_mut()
            .notices_taken
            .entry(to[i])
            .or_default() += 1;
        self.release().await?;
        Ok(i)
    }

    async fn recv_any(
        &self,
        from: &[usize],
        sends: &[usize],
    ) -> Result<(usize, Vec<u8>), LinkError> {
        if self.info.device {
            return Ok((0, self.recv(from[0]).await?));
        }
        let timeout = error::gloo_recv_timeout(self.info.wait_ms.unwrap_or(0));
        let watch = self.pending(sends, &self.ready_tag());
        let tag = self.tag.borrow().clone();
        let wait = self.wait_any(
            (from, &tag),
            &watch,
            Dir::Recv,
            "waits for its message",
            timeout,
        );
        let (i, m) = self.releasing(wait).await?;
        // The sender's notice of this message, if it held it: read with it.
        let _ = self
            .fabric
            .try_recv(self.members[from[i]], &self.send_notice_tag());
        Ok((i, m))
    }

    async fn misfit_arrival<T>(
        &self,
        from: &[usize],
        misfit: &dyn Fn(usize, &[u8]) -> Option<T>,
    ) -> (usize, T) {
        if self.info.device {
            return std::future::pending().await;
        }
        let tag = self.tag.borrow().clone();
        loop {
            let changed = self.fabric.changed();
            if let Some(found) = self.first_misfit(from, &tag, misfit) {
                return found;
            }
            changed.await;
        }
    }

    async fn recv(&self, from: usize) -> Result<Vec<u8>, LinkError> {
        let peer = self.members[from];
        // Already here: the rank does not block, so there is no wait to record.
        let tag = self.tag.borrow().clone();
        if let Some(m) = self.fabric.try_recv(peer, &tag) {
            return Ok(m);
        }
        self.probe
            .set_wait(self.info.proc_rank, Some(self.recv_wait(peer)));
        if self.info.peer_exit_is_error {
            self.fabric.watch(peer).await;
        }
        let deadline = self.info.timeout.as_ref().map(|(d, _)| *d);
        let r = match self.fabric.recv(self.clock, peer, &tag, deadline).await {
            Err(FabricError::PeerClosed(_) | FabricError::PeerReset(_))
                if !self.info.peer_exit_is_error =>
            {
                self.wait_out_exited(peer, Dir::Recv).await
            }
            r => r.map_err(|e| self.map(e)),
        };
        self.probe.set_wait(self.info.proc_rank, None);
        r
    }
}

impl<N: Net, C: Clock, P: Probe> FabricLink<'_, N, C, P> {
    /// [`Link::misfit_arrival`]'s look at the messages already here (a member's k-th one is
    /// for its k-th receive in `from`); the misfit found is taken, read by the loop thread
    /// that aborts on it.
    fn first_misfit<T>(
        &self,
        from: &[usize],
        tag: &str,
        misfit: &dyn Fn(usize, &[u8]) -> Option<T>,
    ) -> Option<(usize, T)> {
        let mut seen: Vec<usize> = Vec::new();
        for &m in from {
            if seen.contains(&m) {
                continue;
            }
            seen.push(m);
            let posted: Vec<usize> = (0..from.len()).filter(|&i| from[i] == m).collect();
            let found = self.fabric.find_queued(self.members[m], tag, |k, msg| {
                let i = *posted.get(k)?;
                misfit(i, msg).map(|t| (k, i, t))
            });
            if let Some((k, i, t)) = found {
                self.fabric.drop_queued(self.members[m], tag, k);
                return Some((i, t));
            }
        }
        None
    }

    /// Sends every held message whose receiver's ready notice has come, in posting order per
    /// member (gloo's loop thread does it as the notice arrives).
    async fn release(&self) -> Result<(), LinkError> {
        let tag = self.ready_tag();
        loop {
            let next = {
                let h = self.held.borrow();
                h.sends.iter().position(|(to, _, _)| {
                    let taken = h.notices_taken.get(to).copied().unwrap_or(0);
                    let came = taken + self.fabric.queued(self.members[*to], &tag);
                    came > h.sent.get(to).copied().unwrap_or(0)
                })
            };
            let Some(i) = next else { return Ok(()) };
            let (to, data, bytes) = {
                let mut h = self.held.borrow_mut();
                let m = h.sends.remove(i);
                *h.sent.entry(m.0).or_default() += 1;
                m
            };
            self.send(to, data, bytes).await?;
        }
    }

    /// `wait`, while held sends go out as their notices come. Neither is cut short: a send
    /// under way finishes even when the wait ends meanwhile, and the wait goes on while a
    /// send is under way (its own timeout may be writing to the same connection).
    async fn releasing<T>(
        &self,
        wait: impl Future<Output = Result<T, LinkError>>,
    ) -> Result<T, LinkError> {
        tokio::pin!(wait);
        let mut done: Option<Result<T, LinkError>> = None;
        loop {
            let changed = self.fabric.changed();
            {
                let release = self.release();
                tokio::pin!(release);
                loop {
                    tokio::select! {
                        biased;
                        r = &mut release => match r {
                            Ok(()) => break,
                            Err(e) => return done.unwrap_or(Err(e)),
                        },
                        r = &mut wait, if done.is_none() => done = Some(r),
                    }
                }
            }
            if let Some(r) = done {
                return r;
            }
            if self.held.borrow().sends.is_empty() {
                return wait.await;
            }
            tokio::select! {
                biased;
                r = &mut wait => return r,
                _ = changed => {}
            }
        }
    }

    /// The tag of the notices a gloo receiver sends when it posts a receive.
    fn ready_tag(&self) -> String {
        fabric::ready_tag(&self.tag.borrow())
    }

    /// The tag of the notices a gloo sender sends when its receiver has not posted yet.
    fn send_notice_tag(&self) -> String {
        fabric::send_notice_tag(&self.tag.borrow())
    }

    /// gloo's wait for one of a call's pending operations with the members `on` (in posting
    /// order): the first message with `tag` from any of them, within the call's per-wait
    /// timeout; a pair that ends fails it.
    /// The buffer's other pending operations with `members`, each done once its (peer, `tag`)
    /// message arrives.
    fn pending(&self, members: &[usize], tag: &str) -> Vec<(usize, String)> {
        members
            .iter()
            .map(|&m| (self.members[m], tag.to_string()))
            .collect()
    }

    async fn wait_any(
        &self,
        (on, tag): (&[usize], &str),
        watch: &[(usize, String)],
        dir: Dir,
        why: &str,
        timeout: C10dError,
    ) -> Result<(usize, Vec<u8>), LinkError> {
        let peers: Vec<usize> = on.iter().map(|&m| self.members[m]).collect();
        let what = format!(
            "{} #{} on group {}: {} rank {} ({why})",
            self.info.op,
            self.info.seq,
            self.info.group,
            verb(dir),
            peers[0]
        );
        let deadline = self.info.wait_ms.map(|ms| self.clock.now_ms() + ms);
        let mut w = self.wait_for(peers[0], WaitOn::Transfer { dir }, what);
        w.peers = peers.clone();
        w.peers.dedup();
        w.deadline_ms = deadline;
        w.timeout_error = deadline.map(|_| timeout.clone().into());
        self.probe.set_wait(self.info.proc_rank, Some(w));
        for &p in &peers {
            self.fabric.watch(p).await;
        }
        let r = self
            .fabric
            .recv_any_watching(
                self.clock,
                (&peers, tag),
                watch,
                deadline,
                Some(&self.info.pairs),
            )
            .await;
        if let Err(FabricError::Timeout) = r {
            self.fabric
                .close_pairs(self.clock, &self.info.pairs, self.members)
                .await;
        }
        let r = r.map_err(|e| match e {
            FabricError::Timeout => self.fail(timeout),
            other => self.map(other),
        });
        self.probe.set_wait(self.info.proc_rank, None);
        r
    }

    /// A peer's message does not fit this call (another op, size or dtype width). oneCCL and
    /// NCCL do not check (docs/rules/oneccl.md §4: all_reduce of 1024 vs 2048 floats hangs both ranks;
    /// docs/diagnosis.md): the call never completes, until a timeout rule applies (or forever).
    /// gloo's pair enforces the message size, so gloo callers keep the error instead.
    pub async fn wait_out_mismatch(&self, why: &str) -> CollectiveError {
        let what = format!(
            "{} #{} on group {}: {why}; the backend does not check and keeps waiting",
            self.info.op, self.info.seq, self.info.group
        );
        let on = WaitOn::Unchecked {
            why: why.to_string(),
        };
        let mut w = self.wait_for(0, on, what);
        w.peers = self
            .members
            .iter()
            .copied()
            .filter(|m| *m != self.members[self.me])
            .collect();
        self.probe.set_wait(self.info.proc_rank, Some(w));
        let deadline = self.info.timeout.as_ref().map(|(d, _)| *d);
        let r = super::rank::wait_out_peer_exit::<_, ()>(self.clock, deadline).await;
        match r {
            Ok(_) => CollectiveError::Mismatch(why.to_string()),
            Err(e) => CollectiveError::Link(self.map(e)),
        }
    }

    /// oneCCL/NCCL do not notice a peer's exit: record the wait and block until a timeout rule
    /// applies (or forever).
    async fn wait_out_exited(&self, peer: usize, dir: Dir) -> Result<Vec<u8>, LinkError> {
        let what = format!(
            "{} #{} on group {}: {} rank {peer}, whose process has exited (the backend does not notice)",
            self.info.op, self.info.seq, self.info.group, verb(dir)
        );
        let w = self.wait_for(peer, WaitOn::ExitedPeer { dir }, what);
        self.probe.set_wait(self.info.proc_rank, Some(w));
        let deadline = self.info.timeout.as_ref().map(|(d, _)| *d);
        super::rank::wait_out_peer_exit(self.clock, deadline)
            .await
            .map_err(|e| self.map(e))
    }
}

/// How a wait's text says its direction: `recv from rank 2`, `send to rank 3`.
fn verb(dir: Dir) -> &'static str {
    match dir {
        Dir::Recv => "recv from",
        Dir::Send => "send to",
    }
}
