//! The model's network in the simulator: turmoil TCP, one host per node.
//!
//! Streams are wrapped to count activity (bytes moved, connections made); the driver uses the
//! count to tell "messages still in flight" from "nothing can happen but a timer".

use crate::schedule::{Gate, Schedule};
use scen_core::net::Net;
use std::cell::Cell;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use turmoil::net::{TcpListener, TcpStream};

/// Counts anything that moved; shared by all nodes.
#[derive(Clone, Default)]
pub struct Activity(Rc<Cell<u64>>);

impl Activity {
    pub fn bump(&self) {
        self.0.set(self.0.get() + 1);
    }
    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

#[derive(Clone)]
pub struct SimNet {
    pub host: String,
    pub nodes: usize,
    pub activity: Activity,
    /// Seeded yields at every connect, accept, read and write (schedule.rs).
    pub schedule: Schedule,
}

pub struct SimStream {
    inner: TcpStream,
    activity: Activity,
    reads: Gate,
    writes: Gate,
}

impl SimStream {
    fn new(inner: TcpStream, net: &SimNet) -> SimStream {
        SimStream {
            inner,
            activity: net.activity.clone(),
            reads: net.schedule.gate(),
            writes: net.schedule.gate(),
        }
    }
}

impl AsyncRead for SimStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let inner = &mut this.inner;
        let r = this
            .reads
            .around(cx, |cx| Pin::new(inner).poll_read(cx, buf));
        if r.is_ready() {
            self.activity.bump();
        }
        r
    }
}

impl AsyncWrite for SimStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let inner = &mut this.inner;
        let r = this
            .writes
            .around(cx, |cx| Pin::new(inner).poll_write(cx, buf));
        if r.is_ready() {
            self.activity.bump();
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl SimNet {
    fn resolve(&self, host: &str) -> io::Result<IpAddr> {
        // Every 127.x.y.z is this host's loopback (Linux routes all of 127/8 to `lo`), and a
        // TCPStore listens on every address: `tcp://127.0.0.2:PORT` reaches a store on this
        // node as `127.0.0.1` does (real torch 2.15).
        let loopback = host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback());
        if host == "localhost" || loopback {
            return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
        }
        let known = host
            .strip_prefix("node")
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n < self.nodes);
        if known {
            Ok(turmoil::lookup(host))
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("failed to resolve host {host}: Name or service not known"),
            ))
        }
    }
}

impl Net for SimNet {
    type Stream = SimStream;
    type Listener = TcpListener;

    async fn bind(&self, port: u16) -> io::Result<TcpListener> {
        TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).await
    }

    fn local_port(&self, l: &TcpListener) -> u16 {
        l.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    async fn accept(&self, l: &TcpListener) -> io::Result<(SimStream, String)> {
        let (s, peer) = l.accept().await?;
        self.activity.bump();
        self.schedule.point().await;
        Ok((SimStream::new(s, self), peer.to_string()))
    }

    async fn connect(&self, host: &str, port: u16) -> io::Result<SimStream> {
        let ip = self.resolve(host)?;
        self.schedule.point().await;
        self.activity.bump();
        let r = TcpStream::connect((ip, port)).await;
        self.activity.bump();
        Ok(SimStream::new(r?, self))
    }

    fn host_name(&self) -> String {
        self.host.clone()
    }

    fn reset(&self, stream: &mut SimStream) {
        stream.inner.reset_on_drop();
    }

    fn ip_of(&self, host: &str) -> String {
        self.resolve(host)
            .map(|ip| ip.to_string())
            .unwrap_or_else(|_| host.to_string())
    }
}
