//! The model's network and clock in hardware mode: OS TCP sockets through tokio, and the wall
//! clock counted from the launcher's start (so every rank's events share one time line).

use scen_core::net::{Clock, Net};
use std::io;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// OS sockets. `host` is the address peers use to reach this process; `bind_ip` where it listens.
#[derive(Clone, Debug)]
pub struct TokioNet {
    pub host: String,
    pub bind_ip: String,
    /// This launch's job token (SCEN_HW_JOB_TOKEN): the TCPStore refuses other jobs' processes.
    pub job_token: Option<String>,
    /// With a job token, whether the TCPStore a rank hosts lets in PyTorch clients, which have
    /// no token (SCEN_HW_ALLOW_TORCH_CLIENTS=1; docs/hw.md "Under torchrun").
    pub allow_torch_clients: bool,
    /// Under torchrun with TORCHELASTIC_USE_AGENT_STORE=True: the agent hosts a real PyTorch
    /// TCPStore, which the ranks use in PyTorch's protocol.
    pub agent_store_is_pytorch: bool,
}

/// Set to 1, a store with a job token lets in PyTorch clients too.
pub const ALLOW_TORCH_CLIENTS_ENV: &str = "SCEN_HW_ALLOW_TORCH_CLIENTS";

/// Whether torchrun's agent hosts the store: PyTorch's own test,
/// `os.environ.get("TORCHELASTIC_USE_AGENT_STORE", None) == str(True)`
/// (torch/distributed/rendezvous.py, `_torchelastic_use_agent_store`).
pub fn agent_store_env(env: &std::collections::BTreeMap<String, String>) -> bool {
    env.get("TORCHELASTIC_USE_AGENT_STORE").map(String::as_str) == Some("True")
}

impl Net for TokioNet {
    type Stream = TcpStream;
    type Listener = TcpListener;

    async fn bind(&self, port: u16) -> io::Result<TcpListener> {
        TcpListener::bind((self.bind_ip.as_str(), port)).await
    }

    fn local_port(&self, l: &TcpListener) -> u16 {
        l.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    async fn accept(&self, l: &TcpListener) -> io::Result<(TcpStream, String)> {
        let (s, peer) = l.accept().await?;
        s.set_nodelay(true)?;
        Ok((s, peer.to_string()))
    }

    async fn connect(&self, host: &str, port: u16) -> io::Result<TcpStream> {
        let s = TcpStream::connect((host, port)).await?;
        s.set_nodelay(true)?;
        Ok(s)
    }

    fn host_name(&self) -> String {
        self.host.clone()
    }

    fn reset(&self, stream: &mut TcpStream) {
        // SO_LINGER 0: close() sends a RST at once (tokio's deprecation is about a positive
        // linger, whose close blocks the thread; a zero one does not).
        #[allow(deprecated)]
        let _ = stream.set_linger(Some(Duration::ZERO));
    }

    fn ip_of(&self, host: &str) -> String {
        use std::net::ToSocketAddrs;
        (host, 0)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .map(|a| a.ip().to_string())
            .unwrap_or_else(|| host.to_string())
    }

    fn store_token(&self) -> Option<String> {
        self.job_token.clone()
    }

    fn store_accepts_torch_clients(&self) -> bool {
        self.allow_torch_clients
    }

    fn agent_store_is_pytorch(&self) -> bool {
        self.agent_store_is_pytorch
    }
}

/// Milliseconds since `epoch_unix_ms` (the launcher's start), from the wall clock.
#[derive(Clone, Copy, Debug)]
pub struct WallClock {
    pub epoch_unix_ms: u64,
}

pub use scen_procs::watch::unix_ms;

impl Clock for WallClock {
    fn now_ms(&self) -> u64 {
        unix_ms().saturating_sub(self.epoch_unix_ms)
    }

    async fn sleep_until_ms(&self, t_ms: u64) {
        let now = self.now_ms();
        if t_ms > now {
            tokio::time::sleep(Duration::from_millis(t_ms - now)).await;
        }
    }
}
