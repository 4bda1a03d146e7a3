//! Rank-to-rank messages: the transport under gloo pairs, device communicators and send/recv.
//!
//! Each rank process listens on one port; a sender opens one connection per peer on first use
//! and tags every message (`comm/seq`), so messages of different groups and calls never mix.
//! The receiving side files messages per (source, tag) in arrival order. Real TCP on the
//! [`Net`] it is given: turmoil in the simulator, the OS in hardware mode.
//!
//! A gloo pair is one full-duplex socket, so a rank learns its peer's death on either
//! direction: besides the readers of incoming connections, a watcher reads each outgoing one
//! (peers never write on it) for its close, and a gloo receive that blocks on a peer this rank
//! has no connection to opens one ([`Fabric::watch`]): a peer that dies while others wait on
//! it fails them at once, as real gloo's full mesh does.
//!
//! A process that exits closes its connections with a FIN. One that is killed (a crash fault's
//! SIGKILL, gloo's size check aborting it) stops reading at once but its sockets close only
//! when the kernel has torn the process down ([`KILL_TEARDOWN_MS`]); whatever a peer sent it
//! that it never read (what arrived after its death, and, in the simulator, what arrived in
//! the millisecond of its death and was never taken: see
//! [`Life::unread_at_death`]) makes TCP reset that peer's connection: the peer reads
//! "Connection reset by peer", the others a close.

use super::duplex::Duplex;
use super::inbox::Inbox;
pub use super::inbox::Life;
use super::peer_addrs::{self, PeerAddr};
use crate::c10d::error::{self, C10dError};
use crate::net::{Clock, Net};
use crate::wire::{frame_buf, read_frame, write_built_frame, write_frame, Dec, Enc, WireError};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use tokio::sync::Mutex;

/// Why a receive did not produce a message. What a rank raises for each is
/// [`FabricError::into_c10d`]'s, with the texts of c10d/error.rs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FabricError {
    /// No message before the deadline.
    #[error("no message before the deadline")]
    Timeout,
    /// The peer's process closed its connection (it ended).
    #[error("rank {} closed its connection", .0.rank)]
    PeerClosed(Peer),
    /// The peer's process reset its connection (it died with this rank's data unread).
    #[error("rank {} reset its connection", .0.rank)]
    PeerReset(Peer),
    /// An earlier wait of this rank in the same gloo context timed out, and gloo closed the
    /// context's pairs then (`context_->signalException`, gloo/transport/tcp/unbound_buffer.cc).
    #[error("this rank's pairs of the group were closed by its own timeout")]
    PairsClosed,
    /// The peer's address could not be connected to.
    #[error("rank {peer} could not be reached: {reason}")]
    Unreachable { peer: usize, reason: String },
    /// The connection failed or carried a malformed frame.
    #[error("{0}")]
    Wire(#[from] WireError),
}

/// A peer as a lost connection names it: its rank, and `[ip]:port` as gloo prints a pair's peer
/// ([`Fabric::peer_address`]), so every peer-loss text carries the address the same way.
#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    pub rank: usize,
    pub address: String,
}

impl FabricError {
    /// The error a rank raises: `timeout` is its backend's timeout error, if it has one.
    pub fn into_c10d(self, timeout: Option<C10dError>) -> C10dError {
        match self {
            FabricError::Timeout => timeout.unwrap_or_else(error::timed_out),
            FabricError::PeerClosed(p) => error::peer_closed(&p.address),
            FabricError::PeerReset(p) => error::peer_reset(&p.address),
            FabricError::PairsClosed => error::gloo_pairs_closed(),
            FabricError::Unreachable { peer, reason } => error::peer_unreachable(peer, &reason),
            FabricError::Wire(w) => error::transport(&w.to_string()),
        }
    }
}

/// How long a killed process's sockets outlive it: SIGKILL stops its threads at once, but the
/// kernel closes its files only after unmapping its memory (`do_exit`: `exit_mm` before
/// `exit_files`), which for a PyTorch process takes milliseconds. What peers send it meanwhile
/// stays unread, so their connections reset. Measured with real PyTorch 2.15 (docs/torch.md,
/// scenarios/gloo_crash_resets_senders.toml).
pub const KILL_TEARDOWN_MS: u64 = 10;

/// How long after a gloo wait's deadline its pair closure reaches the peers: the timed-out
/// thread's wake-up, its `signalException` closing the sockets, the peer's device thread reading
/// the EOF and waking the peer's wait. Measured with real torch 2.15 (gloo, 2 ranks, plain
/// processes, 2026-11-29, /tmp probe in docs/rules/c10d.md#r29): a peer whose own deadline came
/// 0-4 ms after the first rank's timed out itself in 15 of 15 runs, 5-7 ms later it read the
/// closure in 7 of 15, 8-12 ms later in 6 of 6. scen takes the middle, 6 ms: a peer due within
/// it times out itself (user-path 7/1590, 7/70, 7/1366), one due after reads the closure.
pub const GLOO_CLOSURE_DELAY_MS: u64 = 6;

/// An outgoing connection: writers take turns; its watcher reads the same stream.
type Conn<N> = Rc<Mutex<Duplex<<N as Net>::Stream>>>;

/// One rank's endpoint.
pub struct Fabric<N: Net> {
    net: N,
    me: usize,
    port: u16,
    /// Where each peer listens, by rank (`None`: not learned yet). A rank learns every member
    /// of every group it joins (W entries on each of W ranks in a large world), so host names
    /// are kept once per thread ([`peer_addrs`]), and a peer names its host by index.
    peers: RefCell<Vec<Option<PeerAddr>>>,
    out: RefCell<BTreeMap<usize, Conn<N>>>,
    /// Incoming connections by peer: a killed process resets those with data unread.
    accepted: Accepted<N>,
    /// The watchers of outgoing connections.
    watchers: RefCell<Vec<tokio::task::JoinHandle<()>>>,
    inbox: Rc<Inbox>,
    acceptor: RefCell<Option<tokio::task::JoinHandle<()>>>,
    /// gloo contexts (process groups, by name) whose pairs this rank closed when one of its
    /// waits there timed out ([`Fabric::close_pairs`]).
    closed_scopes: RefCell<BTreeSet<String>>,
}

/// Handles on the incoming connections, by peer.
type Accepted<N> = Rc<RefCell<BTreeMap<usize, Duplex<<N as Net>::Stream>>>>;

impl<N: Net> Fabric<N> {
    /// Binds a port and starts accepting peers (tasks are spawned on the current LocalSet);
    /// `life` tells it when the process is killed.
    pub async fn start(net: N, me: usize, life: Life) -> Result<Rc<Self>, FabricError> {
        let listener = net
            .bind(0)
            .await
            .map_err(|e| FabricError::Wire(WireError::Io(e.to_string())))?;
        let port = net.local_port(&listener);
        let inbox = Rc::new(Inbox {
            life,
            ..Inbox::default()
        });
        let accepted = Accepted::<N>::default();
        let (n2, ib, acc) = (net.clone(), inbox.clone(), accepted.clone());
        let acceptor =
            tokio::task::spawn_local(async move { accept_loop(n2, listener, ib, acc).await });
        Ok(Rc::new(Fabric {
            acceptor: RefCell::new(Some(acceptor)),
            net,
            me,
            port,
            peers: RefCell::default(),
            out: RefCell::new(BTreeMap::new()),
            accepted,
            inbox,
            closed_scopes: RefCell::default(),
            watchers: RefCell::default(),
        }))
    }

    /// The process exits: stop accepting, close every connection (peers see EOF), resetting
    /// both directions of those with a peer's data unread: once killed, whatever arrived since
    /// (and, in the simulator, in the millisecond of the death: [`Life::unread_at_death`]). A
    /// message already in the inbox before does not count: gloo's loop reads every message as
    /// it arrives (notices, and data for a posted buffer: gloo sends only then; the one gloo's
    /// size check aborts on too), so an exiting process leaves nothing unread
    /// (scenarios/mismatch_count_gloo.toml, reduce_longer_on_root_aborts_gloo.toml).
    pub fn shutdown(&self) {
        if let Some(a) = self.acceptor.borrow_mut().take() {
            a.abort();
        }
        for w in self.watchers.borrow_mut().drain(..) {
            w.abort();
        }
        let out = std::mem::take(&mut *self.out.borrow_mut());
        let accepted = std::mem::take(&mut *self.accepted.borrow_mut());
        let mut resets = self.inbox.unread.borrow().clone();
        resets.extend(self.inbox.unread_at_death());
        for (peer, c) in out {
            if resets.contains(&peer) {
                if let Ok(m) = c.try_lock() {
                    m.with(|s| self.net.reset(s));
                }
            }
        }
        for (peer, s) in accepted {
            if resets.contains(&peer) {
                s.with(|s| self.net.reset(s));
            }
        }
    }

    /// A gloo receive blocks on `peer`: make sure this rank has a connection to it, so it
    /// learns of the peer's death (gloo's pairs all exist from the group's creation on).
    pub async fn watch(&self, peer: usize) {
        let known = self.peers.borrow().get(peer).copied().flatten().is_some();
        if !known || self.out.borrow().contains_key(&peer) || self.inbox.has_ended(peer) {
            return;
        }
        if self.inbox.incoming.borrow().contains(&peer) {
            return;
        }
        if self.conn(peer).await.is_err() {
            // Nobody listens there any more: the peer's process is gone.
            self.inbox.ended(peer, false);
        }
    }

    /// Completes once `peer`'s process has ended (its connection closed or reset), as a gloo
    /// pair with it learns; how it ended comes back, for the error that names it. A rank with
    /// no connection to `peer` opens one first ([`Fabric::watch`]).
    pub async fn peer_ended(&self, peer: usize) -> FabricError {
        self.watch(peer).await;
        loop {
            let changed = self.inbox.changed.notified();
            match self.inbox.closed.borrow().get(&peer) {
                Some(true) => return FabricError::PeerReset(self.peer(peer)),
                Some(false) => return FabricError::PeerClosed(self.peer(peer)),
                None => {}
            }
            changed.await;
        }
    }

    /// How `peer`'s process ended, if this rank has learned it has.
    pub fn has_peer_ended(&self, peer: usize) -> Option<FabricError> {
        match self.inbox.closed.borrow().get(&peer) {
            Some(true) => Some(FabricError::PeerReset(self.peer(peer))),
            Some(false) => Some(FabricError::PeerClosed(self.peer(peer))),
            None => None,
        }
    }

    /// `[ip]:port` of `peer`, as gloo names a pair's peer in its errors.
    pub fn peer_address(&self, peer: usize) -> String {
        let addr = self.peers.borrow().get(peer).copied().flatten();
        match addr {
            Some((h, port)) => {
                let host = peer_addrs::host_name(h);
                format!("[{}]:{port}", self.net.ip_of(&host))
            }
            None => format!("[rank {peer}]"),
        }
    }

    /// `peer` as its lost connection's error names it.
    fn peer(&self, rank: usize) -> Peer {
        Peer {
            rank,
            address: self.peer_address(rank),
        }
    }

    /// `host:port` peers use to reach this rank.
    pub fn address(&self) -> String {
        format!("{}:{}", self.net.host_name(), self.port)
    }

    /// Records where a peer listens (learned through a rendezvous).
    pub fn learn(&self, peer: usize, address: &[u8]) {
        if let Some(addr) = peer_addrs::parse(address) {
            put_peer(&mut self.peers.borrow_mut(), peer, addr);
        }
    }

    /// Records where `peer` listens, as a group's store key says, unless this rank knows `peer`
    /// listens elsewhere and another rank it knows listens at `address`: then that rank wrote
    /// the key (two different groups sharing a name, R25) and is returned, and nothing is
    /// learned. A peer first learned here is taken as the key's writer (the default group's
    /// mesh, whose name no other group has), so the check costs nothing in the common case.
    pub fn learn_unless_other(&self, peer: usize, address: &[u8]) -> Option<usize> {
        let addr = peer_addrs::parse(address)?;
        let mut peers = self.peers.borrow_mut();
        match peers.get(peer).copied().flatten() {
            Some(known) if known == addr => return None,
            Some(_) => {
                if let Some(r) = peers.iter().position(|a| *a == Some(addr)) {
                    return Some(r);
                }
            }
            None => {}
        }
        put_peer(&mut peers, peer, addr);
        None
    }

    async fn conn(&self, peer: usize) -> Result<Conn<N>, FabricError> {
        if let Some(c) = self.out.borrow().get(&peer) {
            return Ok(c.clone());
        }
        let (host, port) = self
            .peers
            .borrow()
            .get(peer)
            .copied()
            .flatten()
            .map(|(h, port)| (peer_addrs::host_name(h), port))
            .ok_or_else(|| FabricError::Unreachable {
                peer,
                reason: "address unknown".into(),
            })?;
        let mut s = self.net.connect(&host, port).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::ConnectionRefused {
                // Nobody listens there any more: the peer's process is gone. gloo's pairs all
                // exist from the group's creation on, so its pair saw the close long ago.
                FabricError::PeerClosed(self.peer(peer))
            } else {
                FabricError::Unreachable {
                    peer,
                    reason: e.to_string(),
                }
            }
        })?;
        write_frame(&mut s, &Enc::default().u64(self.me as u64).done()).await?;
        let s = Duplex::new(s);
        let (r, inbox) = (s.handle(), self.inbox.clone());
        let w = tokio::task::spawn_local(watch_loop(r, peer, inbox));
        self.watchers.borrow_mut().push(w);
        let c = Rc::new(Mutex::new(s));
        self.out.borrow_mut().insert(peer, c.clone());
        Ok(c)
    }

    /// Sends one tagged message to `peer`; returns once it is handed to the network.
    pub async fn send(&self, peer: usize, tag: &str, data: &[u8]) -> Result<(), FabricError> {
        let c = self.conn(peer).await?;
        let mut s = c.lock().await;
        write_built_frame(&mut *s, &tagged_frame(tag, data))
            .await
            .map_err(|e| match e {
                WireError::Closed if self.inbox.closed.borrow().get(&peer) == Some(&true) => {
                    FabricError::PeerReset(self.peer(peer))
                }
                WireError::Closed => FabricError::PeerClosed(self.peer(peer)),
                other => FabricError::Wire(other),
            })
    }

    /// The next message from `peer` with `tag` if it has already arrived (no waiting).
    pub fn try_recv(&self, peer: usize, tag: &str) -> Option<Vec<u8>> {
        self.inbox.take(peer, tag)
    }

    /// The first of the messages from `peer` with `tag` that have arrived and not been taken,
    /// in arrival order, for which `f` (with its position in that order) says something; they
    /// stay.
    pub fn find_queued<T>(
        &self,
        peer: usize,
        tag: &str,
        mut f: impl FnMut(usize, &[u8]) -> Option<T>,
    ) -> Option<T> {
        let queues = self.inbox.queues.borrow();
        let q = queues.get(&peer)?.get(tag)?;
        q.iter().enumerate().find_map(|(k, (_, _, m))| f(k, m))
    }

    /// How many messages from `peer` with `tag` wait in the inbox.
    pub fn queued(&self, peer: usize, tag: &str) -> usize {
        let queues = self.inbox.queues.borrow();
        queues
            .get(&peer)
            .and_then(|q| q.get(tag))
            .map_or(0, |q| q.len())
    }

    /// Takes the `k`-th message from `peer` with `tag` out of the inbox, read (gloo's loop
    /// thread read a message for a posted receive as it arrived, the one it aborted on too).
    pub fn drop_queued(&self, peer: usize, tag: &str, k: usize) {
        let mut queues = self.inbox.queues.borrow_mut();
        if let Some(q) = queues.get_mut(&peer).and_then(|by_tag| by_tag.get_mut(tag)) {
            if let Some((_, seq, _)) = q.remove(k) {
                self.inbox.last_taken.set(seq);
            }
        }
    }

    /// The process dies reading the message it took last (gloo's size check aborting it in
    /// its loop thread): what arrived before that one was read, and only what came after can
    /// be unread at its death (7/616: a peer whose notices came first read the close).
    pub fn died_reading(&self) {
        self.inbox.died_reading();
    }

    /// Completes at the next change of this rank's inbox (a message, a peer's end) after the
    /// call: look, then await it, and nothing is missed in between.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.inbox.changed.notified()
    }

    /// Takes the next message from `peer` with `tag`, waiting up to `deadline_ms` (None: forever).
    pub async fn recv<C: Clock>(
        &self,
        clock: &C,
        peer: usize,
        tag: &str,
        deadline_ms: Option<u64>,
    ) -> Result<Vec<u8>, FabricError> {
        self.recv_any(clock, &[peer], tag, deadline_ms, None)
            .await
            .map(|(_, m)| m)
    }

    /// A wait of this rank in gloo context `scope` timed out: gloo signals the timeout to every
    /// pair of the context (`Application timeout caused pair closure`) and closes them, so its
    /// `members`' operations with this rank in `scope` fail with a closed connection, and its
    /// own later operations there with that text. Other groups' pairs are other sockets. The
    /// peers learn it [`GLOO_CLOSURE_DELAY_MS`] later (a task of its own: the rank raises now).
    pub async fn close_pairs<C: Clock>(self: &Rc<Self>, clock: &C, scope: &str, members: &[usize]) {
        if !self.closed_scopes.borrow_mut().insert(scope.to_string()) {
            return;
        }
        // This rank's other waits in the context fail at once, as gloo's pending operations do.
        self.inbox.changed.notify_waiters();
        let (fabric, clock, scope) = (self.clone(), clock.clone(), scope.to_string());
        let members = members.to_vec();
        let at_ms = clock.now_ms() + GLOO_CLOSURE_DELAY_MS;
        tokio::task::spawn_local(async move {
            clock.sleep_until_ms(at_ms).await;
            fabric.tell_closed(&scope, &members).await;
        });
    }

    /// Tells the members of `scope` that used a pair with this rank that it closed them.
    async fn tell_closed(&self, scope: &str, members: &[usize]) {
        // gloo's pairs all exist; this model opens a connection when a pair first carries
        // something. A pair that never did has no operation waiting on it now, and a peer that
        // later blocks on this rank watches it (`watch`) and sees its process end: so only
        // used pairs are told. Telling every member opened a connection per pair, O(W²) when
        // a W-rank group times out (6 KiB each: 833 MB at 400 ranks, an abort at 1000).
        let used = |m: usize| {
            self.out.borrow().contains_key(&m) || self.inbox.incoming.borrow().contains(&m)
        };
        for &m in members.iter().filter(|&&m| m != self.me && used(m)) {
            let _ = self.send(m, &closed_tag(scope), &[]).await;
        }
    }

    /// Whether a timeout in gloo context `scope` closed this rank's pairs there.
    pub fn pairs_closed(&self, scope: &str) -> bool {
        self.closed_scopes.borrow().contains(scope)
    }

    /// Takes the next message with `tag` from the first of `peers` that has one (its index in
    /// `peers` comes back), waiting up to `deadline_ms` (None: forever). While none has, a
    /// peer whose connection ended fails the wait: gloo signals a pair's error to every
    /// buffer with an operation pending on it. With `scope` (a gloo context), pairs closed by
    /// a timeout there ([`Fabric::close_pairs`]) fail it too, this rank's or a peer's.
    pub async fn recv_any<C: Clock>(
        &self,
        clock: &C,
        peers: &[usize],
        tag: &str,
        deadline_ms: Option<u64>,
        scope: Option<&str>,
    ) -> Result<(usize, Vec<u8>), FabricError> {
        self.recv_any_watching(clock, (peers, tag), &[], deadline_ms, scope)
            .await
    }

    /// [`Fabric::recv_any`], also failed by the end of a `watch` peer's connection while its
    /// (peer, tag) message has not arrived: the buffer's other pending operations (gloo's
    /// `signalException` reaches every operation of an unbound buffer, a pending send to a
    /// peer that exits fails the buffer's receive too).
    pub async fn recv_any_watching<C: Clock>(
        &self,
        clock: &C,
        (peers, tag): (&[usize], &str),
        watch: &[(usize, String)],
        deadline_ms: Option<u64>,
        scope: Option<&str>,
    ) -> Result<(usize, Vec<u8>), FabricError> {
        let closed = scope.map(closed_tag);
        loop {
            let changed = self.inbox.changed.notified();
            if scope.is_some_and(|s| self.closed_scopes.borrow().contains(s)) {
                return Err(FabricError::PairsClosed);
            }
            if let Some(c) = &closed {
                if let Some(&p) = peers.iter().find(|&&p| self.inbox.has(p, c)) {
                    return Err(FabricError::PeerClosed(self.peer(p)));
                }
            }
            for (i, &p) in peers.iter().enumerate() {
                if let Some(m) = self.inbox.take(p, tag) {
                    return Ok((i, m));
                }
            }
            let pending = watch
                .iter()
                .filter(|(p, t)| !self.inbox.has(*p, t))
                .map(|(p, _)| *p);
            for p in peers.iter().copied().chain(pending) {
                match self.inbox.closed.borrow().get(&p) {
                    Some(true) => return Err(FabricError::PeerReset(self.peer(p))),
                    Some(false) => return Err(FabricError::PeerClosed(self.peer(p))),
                    None => {}
                }
            }
            match deadline_ms {
                Some(d) if clock.now_ms() >= d => return Err(FabricError::Timeout),
                Some(d) => {
                    tokio::select! {
                        _ = changed => {}
                        _ = clock.sleep_until_ms(d) => {}
                    }
                }
                None => changed.await,
            }
        }
    }
}

/// The tag of a gloo receive's ready notice for the message tagged `tag` (pair.cc's
/// NOTIFY_RECV_READY): collectives (runtime/link.rs) and send/recv (rank/p2p.rs) alike.
pub fn ready_tag(tag: &str) -> String {
    format!("{tag}/ready")
}

/// The tag of a gloo send's notice to its receiver for the message tagged `tag`, written when
/// the receiver has not posted yet (pair.cc's NOTIFY_SEND_READY).
pub fn send_notice_tag(tag: &str) -> String {
    format!("{tag}/send")
}

/// The tag of the notice that a rank closed its pairs of gloo context `scope`.
fn closed_tag(scope: &str) -> String {
    format!("{scope}/gloo/pairs-closed")
}

/// `peer` listens at `addr`.
fn put_peer(peers: &mut Vec<Option<PeerAddr>>, peer: usize, addr: PeerAddr) {
    if peers.len() <= peer {
        peers.resize(peer + 1, None);
    }
    peers[peer] = Some(addr);
}

/// A dropped endpoint (its process exited or was killed) stops accepting and closes its
/// connections.
impl<N: Net> Drop for Fabric<N> {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A message's frame: its tag, then its data, each length-prefixed (as `Enc::str` and
/// `Enc::bytes` write them), built in one buffer of the right size.
fn tagged_frame(tag: &str, data: &[u8]) -> Vec<u8> {
    let mut body = frame_buf(8 + tag.len() + data.len());
    body.extend_from_slice(&(tag.len() as u32).to_le_bytes());
    body.extend_from_slice(tag.as_bytes());
    body.extend_from_slice(&(data.len() as u32).to_le_bytes());
    body.extend_from_slice(data);
    body
}

/// Accepts peers; the readers live in a JoinSet so aborting this task closes them all.
async fn accept_loop<N: Net>(
    net: N,
    listener: N::Listener,
    inbox: Rc<Inbox>,
    accepted: Accepted<N>,
) {
    let mut readers = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = net.accept(&listener).await else {
            continue;
        };
        let (inbox, accepted) = (inbox.clone(), accepted.clone());
        readers.spawn_local(async move {
            let _ = read_loop(Duplex::new(stream), inbox, accepted).await;
        });
        while readers.try_join_next().is_some() {}
    }
}

async fn read_loop<S: tokio::io::AsyncRead + Unpin>(
    mut s: Duplex<S>,
    inbox: Rc<Inbox>,
    accepted: Rc<RefCell<BTreeMap<usize, Duplex<S>>>>,
) -> Result<(), WireError> {
    let hello = read_frame(&mut s).await?;
    let peer = Dec::new(&hello).u64()? as usize;
    accepted.borrow_mut().insert(peer, s.handle());
    inbox.incoming.borrow_mut().insert(peer);
    let reset;
    let result = loop {
        let frame = match read_tagged(&mut s).await {
            Ok(f) => f,
            Err(e) => {
                reset = e.kind() == std::io::ErrorKind::ConnectionReset;
                break Err(WireError::from(e));
            }
        };
        let mut d = Dec::new(&frame);
        let tag = d.str_ref()?;
        let data = d.bytes()?;
        inbox.put(peer, tag, data);
    };
    accepted.borrow_mut().remove(&peer);
    inbox.incoming.borrow_mut().remove(&peer);
    inbox.ended(peer, reset);
    result
}

/// Reads an outgoing connection, on which the peer never writes, until it ends: the peer's
/// process closed (or reset) it. A peer with an incoming connection open is left to that
/// connection's reader, which delivers the messages sent before the end first.
async fn watch_loop<S: tokio::io::AsyncRead + Unpin>(
    mut s: Duplex<S>,
    peer: usize,
    inbox: Rc<Inbox>,
) {
    use tokio::io::AsyncReadExt;
    let mut b = [0u8; 64];
    let reset = loop {
        match s.read(&mut b).await {
            Ok(0) => break false,
            Ok(_) => continue,
            Err(e) => break e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    };
    if !inbox.incoming.borrow().contains(&peer) {
        inbox.ended(peer, reset);
    }
}

/// [`read_frame`] keeping the socket's own error, so a reset is told from a close.
async fn read_tagged<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await?;
    let n = u32::from_le_bytes(len) as usize;
    if n > crate::wire::MAX_FRAME_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {n} bytes exceeds the limit"),
        ));
    }
    let mut body = vec![0u8; n];
    s.read_exact(&mut body).await?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_frames_read_back_as_tag_and_data() {
        let frame = tagged_frame("pg0/xccl/7", b"\x01\x02\x03");
        let body = Enc::default()
            .str("pg0/xccl/7")
            .bytes(b"\x01\x02\x03")
            .done();
        assert_eq!(&frame[..4], &(body.len() as u32).to_le_bytes());
        assert_eq!(&frame[4..], &body[..]);
    }
}
