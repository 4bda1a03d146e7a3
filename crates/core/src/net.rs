//! What the model needs from its surroundings: a network, a clock and a probe.
//!
//! The simulator implements these with turmoil sockets and a virtual clock; the hardware mode
//! with tokio sockets and the wall clock. Everything above this line (store, rendezvous,
//! groups, collectives) is written once against these traits.

use std::future::Future;
use std::io;
use tokio::io::{AsyncRead, AsyncWrite};

/// TCP as the model uses it: listen on a port of this node, accept, connect by host name.
pub trait Net: Clone + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + 'static;
    type Listener: 'static;

    /// Binds `0.0.0.0:port` on this node (0 picks a free port).
    fn bind(&self, port: u16) -> impl Future<Output = io::Result<Self::Listener>>;
    /// The port a listener got.
    fn local_port(&self, listener: &Self::Listener) -> u16;
    /// Waits for the next connection; returns the stream and the peer's address text.
    fn accept(
        &self,
        listener: &Self::Listener,
    ) -> impl Future<Output = io::Result<(Self::Stream, String)>>;
    /// Connects to `host:port` (`localhost`/`127.0.0.1` is this node).
    fn connect(&self, host: &str, port: u16) -> impl Future<Output = io::Result<Self::Stream>>;
    /// This node's host name as peers reach it.
    fn host_name(&self) -> String;
    /// A RST rather than a FIN when `stream` closes (`SO_LINGER` 0): what a process that dies
    /// with a peer's data unread does to that peer's connection.
    /// Marks `stream` to close with a RST when dropped.
    fn reset(&self, stream: &mut Self::Stream);
    /// The IP address `host` resolves to, as gloo prints a peer (`[127.0.0.1]:PORT`).
    fn ip_of(&self, host: &str) -> String {
        host.to_string()
    }
    /// The job token TCPStore connections open with (`c10d::store`): hardware mode gives every
    /// launch its own, so a process of another job or of an earlier run is refused. `None`
    /// (the simulator, where every process belongs to the run): no handshake.
    fn store_token(&self) -> Option<String> {
        None
    }
    /// Whether a store with a job token lets in a PyTorch client (`c10d::store::torch_wire`),
    /// which cannot show a token. Without a token every client is let in.
    fn store_accepts_torch_clients(&self) -> bool {
        false
    }
    /// Whether, under torchrun, the agent's store is a real PyTorch TCPStore (hardware mode run
    /// by a real torchrun): the ranks then speak PyTorch's protocol to it. The simulator models
    /// the agent's store with scen's own.
    fn agent_store_is_pytorch(&self) -> bool {
        false
    }
}

/// Time as the model sees it, in milliseconds since the run started.
pub trait Clock: Clone + 'static {
    fn now_ms(&self) -> u64;
    /// The same time in microseconds (the simulator's clock is finer than a millisecond: a
    /// collective under a fast link model takes microseconds).
    fn now_us(&self) -> u64 {
        self.now_ms().saturating_mul(1000)
    }
    /// Completes once `now_ms() >= t_ms`.
    fn sleep_until_ms(&self, t_ms: u64) -> impl Future<Output = ()>;
    /// [`Clock::sleep_until_ms`] for a wait that stands for work under way (a loop of store
    /// requests charged at once): the simulator does not take a world waiting only on such
    /// timers for a stall.
    fn busy_until_ms(&self, t_ms: u64) -> impl Future<Output = ()> {
        self.sleep_until_ms(t_ms)
    }
    /// Microseconds one TCPStore request and its reply of `bytes` in all cost (the store link
    /// class). The simulator charges its timing model; real modes pay real time: 0.
    fn store_round_trip_us(&self, _bytes: usize) -> f64 {
        0.0
    }
    /// Whether a client's loop of store reads goes as one request (`c10d::store::seq`), charged
    /// the virtual time its requests would have taken. The simulator says yes where round trips
    /// all cost about the same; real modes, no (their loops are real requests).
    fn batches_store_loops(&self) -> bool {
        false
    }
    /// Spends `us` microseconds of modelled work (a collective call's predicted time, core's
    /// `runtime::cost`): the simulator waits that long in virtual time, as work under way (not
    /// a stall); real modes pay real time and do nothing.
    fn spend_us(&self, _us: f64) -> impl Future<Output = ()> {
        std::future::ready(())
    }
    /// The time rank `rank` spends sending `bytes` to rank `peer` (a device group's message when
    /// `device`). The simulator charges its timing model here (`perf::model`); real modes pay
    /// real time and do nothing.
    fn charge(
        &self,
        _rank: usize,
        _peer: usize,
        _device: bool,
        _bytes: usize,
    ) -> impl Future<Output = ()> {
        std::future::ready(())
    }
}
