//! One job across nodes: the launchers' rendezvous and their link during the run.
//!
//! `scen run --hw F --nnodes N --node-rank I --master-addr A --master-port P` on N machines is
//! one job. Before any rank starts, node 0's launcher serves a rendezvous on `A:P+1` (JSON
//! lines over TCP); every other node's launcher connects (retrying until the rendezvous
//! deadline) and presents the job's identity: a digest of the scenario file's bytes, nnodes,
//! `A:P` and the optional `--job-id` (SCEN_HW_JOB_ID), like torchrun's `--rdzv-id`. A launcher
//! with another identity, a node rank out of range or already taken is refused with the reason.
//! Node 0 answers with the job's token (drawn by node 0, or `None` when SCEN_HW_JOB_TOKEN was
//! set by the user, who then sets the same value on every node) and, once every node has
//! joined, with `start`: only then do launchers start their ranks. If a node has not joined by
//! the deadline, every launcher that did gets `abort` naming the missing nodes and their ranks,
//! and reports that verdict instead of starting ranks (torchrun's RendezvousTimeoutError).
//!
//! During the run the connections stay open (a star around node 0, which relays): each
//! launcher announces its ranks' ends (`end`), a heartbeat every second (`beat`) and, when it
//! finishes, which of its ranks it stopped unfinished (`bye`). A connection that closes without
//! `bye`, or is silent for [`SILENT_LOST_MS`], means that node is lost (its launcher died, so
//! its ranks did: they die with their launcher): its unfinished ranks end as failed there, so
//! this node's watchdog sees its ranks' waits on them as hopeless and reports.

use crate::net::unix_ms;
use scen_core::outcome::Failure;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

pub const MAGIC: &str = "scen-rdzv";
pub const VERSION: u32 = 1;
/// The environment variable naming the job (as `--job-id`).
pub const JOB_ID_ENV: &str = "SCEN_HW_JOB_ID";
/// A peer launcher silent this long is lost (it beats every second).
pub const SILENT_LOST_MS: u64 = 10_000;
const BEAT_MS: u64 = 1_000;

/// One message between launchers, one JSON line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Ctl {
    Join {
        magic: String,
        version: u32,
        job: String,
        nnodes: usize,
        node_rank: usize,
        host: String,
        pid: u32,
    },
    /// Joined; `token` is the job's (None: each node's own SCEN_HW_JOB_TOKEN).
    Welcome {
        token: Option<String>,
        job: String,
    },
    Refused {
        reason: String,
    },
    Start,
    Abort {
        reason: String,
    },
    /// A rank's end: `failed` = (step, why), None = completed.
    End {
        rank: usize,
        failed: Option<(usize, Failure)>,
    },
    /// Node `node`'s launcher is gone: its ranks `ranks` ended unfinished (`why`).
    Gone {
        node: usize,
        ranks: Vec<usize>,
        why: String,
    },
    Beat,
    /// Node `node`'s launcher finished; `unfinished` are the ranks it stopped.
    Bye {
        node: usize,
        unfinished: Vec<usize>,
        why: String,
    },
}

fn send(w: &mut TcpStream, m: &Ctl) -> std::io::Result<()> {
    let mut line = serde_json::to_string(m).map_err(std::io::Error::other)?;
    line.push('\n');
    w.write_all(line.as_bytes())
}

fn recv(r: &mut BufReader<TcpStream>) -> std::io::Result<Ctl> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    serde_json::from_str(&line).map_err(std::io::Error::other)
}

/// FNV-1a, 64 bits: a stable digest (not a secret) for the job's identity.
pub fn fnv64(bytes: &[u8], mut h: u64) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}
const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// What a launcher presents at the rendezvous.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The digest every node must agree on (hex).
    pub job: String,
    /// How reports name the job: `--job-id`, else `scen-<digest>`.
    pub label: String,
    pub nnodes: usize,
    pub node_rank: usize,
    pub per_node: usize,
    pub master_addr: String,
    pub master_port: u16,
    pub timeout_ms: u64,
}

impl Identity {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        scenario_bytes: &[u8],
        job_id: Option<&str>,
        nnodes: usize,
        node_rank: usize,
        per_node: usize,
        master_addr: &str,
        master_port: u16,
        timeout_ms: u64,
    ) -> Identity {
        let mut h = fnv64(scenario_bytes, FNV_START);
        let rest = format!(
            "|nnodes={nnodes}|master={master_addr}:{master_port}|job_id={}",
            job_id.unwrap_or("")
        );
        h = fnv64(rest.as_bytes(), h);
        let job = format!("{h:016x}");
        Identity {
            label: job_id
                .map(str::to_string)
                .unwrap_or_else(|| format!("scen-{}", &job[..12])),
            job,
            nnodes,
            node_rank,
            per_node,
            master_addr: master_addr.into(),
            master_port,
            timeout_ms,
        }
    }

    pub fn ranks_of(&self, node: usize) -> Vec<usize> {
        (node * self.per_node..(node + 1) * self.per_node).collect()
    }

    pub fn rdzv_port(&self) -> Result<u16, String> {
        self.master_port.checked_add(1).ok_or_else(|| {
            "--master-port 65535 leaves no port for the launchers' rendezvous (it uses master_port + 1)".to_string()
        })
    }

    fn endpoint(&self) -> String {
        format!("{}:{}", self.master_addr, self.master_port as u32 + 1)
    }
}

/// How the rendezvous ended for this launcher.
pub enum Outcome {
    /// Every node joined: the job's token (None: the user's SCEN_HW_JOB_TOKEN on each node) and
    /// the link to the other launchers.
    Started { token: Option<String>, mesh: Mesh },
    /// The job did not come together (a node missing): the verdict's text.
    Failed { reason: String },
}

/// Node 0: serves the rendezvous until every node joined or the deadline.
pub fn host(id: &Identity, token: Option<String>) -> Result<Outcome, String> {
    let port = id.rdzv_port()?;
    let local = matches!(id.master_addr.as_str(), "127.0.0.1" | "localhost");
    let bind = if local { "127.0.0.1" } else { "0.0.0.0" };
    let listener = TcpListener::bind((bind, port)).map_err(|e| {
        format!(
            "node 0 cannot serve the launchers' rendezvous on {bind}:{port} (master_port + 1): {e}"
        )
    })?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let deadline = unix_ms() + id.timeout_ms;
    let mut joined: Vec<Option<(TcpStream, String)>> = (0..id.nnodes).map(|_| None).collect();
    while joined.iter().skip(1).any(Option::is_none) && unix_ms() < deadline {
        let conn = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(_) => continue,
        };
        let _ = conn.set_nonblocking(false);
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
        let _ = conn.set_nodelay(true);
        let Ok(mut w) = conn.try_clone() else {
            continue;
        };
        let mut r = BufReader::new(conn);
        let reply = match recv(&mut r) {
            Ok(Ctl::Join {
                magic,
                version,
                job,
                nnodes,
                node_rank,
                host,
                pid,
            }) => {
                if magic != MAGIC || version != VERSION {
                    Err(format!("rendezvous protocol {magic} v{version}, this launcher speaks {MAGIC} v{VERSION}"))
                } else if job != id.job || nnodes != id.nnodes {
                    Err(format!("it belongs to another job: its identity (scenario digest, --nnodes {nnodes}, master address, job id) differs from job {}'s", id.label))
                } else if node_rank == 0 || node_rank >= id.nnodes {
                    Err(format!(
                        "--node-rank {node_rank} is not a joining node of --nnodes {}",
                        id.nnodes
                    ))
                } else if joined[node_rank].is_some() {
                    Err(format!("node {node_rank} already joined this job"))
                } else {
                    Ok((node_rank, format!("{host} pid {pid}")))
                }
            }
            _ => continue,
        };
        match reply {
            Ok((node, who)) => {
                let welcome = Ctl::Welcome {
                    token: token.clone(),
                    job: id.label.clone(),
                };
                if send(&mut w, &welcome).is_ok() {
                    tracing::info!("rendezvous: node {node} ({who}) joined job {}", id.label);
                    joined[node] = Some((w, who));
                }
            }
            Err(reason) => {
                tracing::warn!("rendezvous: refused a launcher: {reason}");
                let _ = send(&mut w, &Ctl::Refused { reason });
            }
        }
    }
    let missing: Vec<usize> = (1..id.nnodes).filter(|n| joined[*n].is_none()).collect();
    if !missing.is_empty() {
        let reason = missing_text(id, &missing);
        for (w, _) in joined.iter_mut().flatten() {
            let _ = send(
                w,
                &Ctl::Abort {
                    reason: reason.clone(),
                },
            );
        }
        return Ok(Outcome::Failed { reason });
    }
    refuse_latecomers(listener, id.label.clone());
    let mut links = Vec::new();
    for (node, j) in joined.into_iter().enumerate() {
        if let Some((mut w, _)) = j {
            send(&mut w, &Ctl::Start).map_err(|e| format!("starting node {node}: {e}"))?;
            links.push((node, w));
        }
    }
    Ok(Outcome::Started {
        token,
        mesh: Mesh::new(id, links),
    })
}

/// Late or stray launchers are told the job has started (the listener lives on).
fn refuse_latecomers(listener: TcpListener, label: String) {
    std::thread::spawn(move || {
        let _ = listener.set_nonblocking(false);
        for conn in listener.incoming().flatten() {
            let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
            if let Ok(mut w) = conn.try_clone() {
                let _ = send(
                    &mut w,
                    &Ctl::Refused {
                        reason: format!("job {label}'s rendezvous is closed: every node joined and its ranks started"),
                    },
                );
            }
        }
    });
}

fn missing_text(id: &Identity, missing: &[usize]) -> String {
    let nodes: Vec<String> = missing
        .iter()
        .map(|n| format!("node {n} (ranks {:?})", id.ranks_of(*n)))
        .collect();
    format!(
        "{} did not join job {}'s rendezvous at {} within {} s; no rank of the job was started",
        nodes.join(", "),
        id.label,
        id.endpoint(),
        id.timeout_ms.div_ceil(1000)
    )
}

/// Node 1..N: joins node 0's rendezvous, retrying until the deadline.
pub fn join(id: &Identity, own_token: Option<String>) -> Result<Outcome, String> {
    let port = id.rdzv_port()?;
    let deadline = unix_ms() + id.timeout_ms;
    let mut last_err = String::from("nothing answered");
    let (w, mut r, token) = loop {
        if unix_ms() >= deadline {
            return Ok(Outcome::Failed {
                reason: format!(
                    "node 0's launcher (job {}'s rendezvous host at {}) did not answer within {} s ({last_err}); node 0 (ranks {:?}) never came, so no rank of this node was started",
                    id.label,
                    id.endpoint(),
                    id.timeout_ms.div_ceil(1000),
                    id.ranks_of(0)
                ),
            });
        }
        let addrs: Vec<_> = (id.master_addr.as_str(), port)
            .to_socket_addrs()
            .map(|a| a.collect())
            .unwrap_or_default();
        let conn = addrs
            .iter()
            .find_map(|a| TcpStream::connect_timeout(a, Duration::from_secs(1)).ok());
        let Some(conn) = conn else {
            last_err = format!("connecting to {}: refused or unreachable", id.endpoint());
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        let _ = conn.set_nodelay(true);
        let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
        let wait = Duration::from_millis(deadline.saturating_sub(unix_ms()).max(1) + 3_000);
        let _ = conn.set_read_timeout(Some(wait));
        let Ok(mut w) = conn.try_clone() else {
            continue;
        };
        let mut r = BufReader::new(conn);
        let hello = Ctl::Join {
            magic: MAGIC.into(),
            version: VERSION,
            job: id.job.clone(),
            nnodes: id.nnodes,
            node_rank: id.node_rank,
            host: crate::launch_env::hostname(),
            pid: std::process::id(),
        };
        if let Err(e) = send(&mut w, &hello) {
            last_err = e.to_string();
            continue;
        }
        match recv(&mut r) {
            Ok(Ctl::Welcome { token, .. }) => break (w, r, token),
            Ok(Ctl::Refused { reason }) => {
                return Err(format!(
                    "node 0's launcher at {} refused node {}: {reason}",
                    id.endpoint(),
                    id.node_rank
                ))
            }
            Ok(other) => last_err = format!("unexpected answer {other:?}"),
            Err(e) => last_err = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let token = match (token, own_token) {
        (Some(t), None) => Some(t),
        (None, Some(t)) => Some(t),
        (None, None) => return Err(format!("node 0 runs job {} with a SCEN_HW_JOB_TOKEN of its own: set the same SCEN_HW_JOB_TOKEN on node {}", id.label, id.node_rank)),
        (Some(_), Some(_)) => return Err(format!("SCEN_HW_JOB_TOKEN is set on node {} but not on node 0: set it on every node or on none", id.node_rank)),
    };
    match recv(&mut r) {
        Ok(Ctl::Start) => {}
        Ok(Ctl::Abort { reason }) => return Ok(Outcome::Failed { reason }),
        Ok(other) => return Err(format!("rendezvous: unexpected message {other:?}")),
        Err(e) => {
            return Ok(Outcome::Failed {
                reason: format!(
                    "node 0's launcher left job {}'s rendezvous before the job started ({e}); no rank of this node was started",
                    id.label
                ),
            })
        }
    }
    let _ = w.set_read_timeout(None);
    drop(r);
    Ok(Outcome::Started {
        token,
        mesh: Mesh::new(id, vec![(0, w)]),
    })
}

/// What a link's reader hands the launcher.
pub enum Remote {
    Msg { from: usize, ctl: Ctl },
    Lost { node: usize, why: String },
}

/// The launcher's links to the other launchers during the run.
pub struct Mesh {
    pub node_rank: usize,
    pub nnodes: usize,
    pub per_node: usize,
    pub label: String,
    links: Vec<(usize, TcpStream)>,
    announced: BTreeSet<usize>,
    byes: BTreeSet<usize>,
    last_beat_ms: u64,
}

impl Mesh {
    fn new(id: &Identity, links: Vec<(usize, TcpStream)>) -> Mesh {
        Mesh {
            node_rank: id.node_rank,
            nnodes: id.nnodes,
            per_node: id.per_node,
            label: id.label.clone(),
            links,
            announced: BTreeSet::new(),
            byes: BTreeSet::new(),
            last_beat_ms: 0,
        }
    }

    pub fn is_hub(&self) -> bool {
        self.node_rank == 0
    }

    pub fn node_of(&self, rank: usize) -> usize {
        rank / self.per_node.max(1)
    }

    /// One reader thread per link; `deliver` returns false once the launcher stops listening.
    pub fn spawn_readers<F>(&self, deliver: F)
    where
        F: Fn(Remote) -> bool + Send + Clone + 'static,
    {
        for (node, w) in &self.links {
            let Ok(conn) = w.try_clone() else { continue };
            let _ = conn.set_read_timeout(Some(Duration::from_millis(SILENT_LOST_MS)));
            let node = *node;
            let deliver = deliver.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn);
                loop {
                    match recv(&mut r) {
                        Ok(ctl) => {
                            if !deliver(Remote::Msg { from: node, ctl }) {
                                return;
                            }
                        }
                        Err(e) => {
                            let why = if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                            ) {
                                format!("its launcher was silent for {} s", SILENT_LOST_MS / 1000)
                            } else {
                                format!("its launcher's connection closed ({e})")
                            };
                            deliver(Remote::Lost { node, why });
                            return;
                        }
                    }
                }
            });
        }
    }

    /// Sends to every link but `except`'s.
    pub fn broadcast(&mut self, m: &Ctl, except: Option<usize>) {
        for (node, w) in self.links.iter_mut() {
            if Some(*node) != except {
                let _ = send(w, m);
            }
        }
    }

    /// A beat every second.
    pub fn tick(&mut self, now_unix_ms: u64) {
        if now_unix_ms >= self.last_beat_ms + BEAT_MS {
            self.last_beat_ms = now_unix_ms;
            self.broadcast(&Ctl::Beat, None);
        }
    }

    /// Announces a local rank's end once.
    pub fn announce_end(&mut self, rank: usize, failed: Option<(usize, Failure)>) {
        if self.announced.insert(rank) {
            self.broadcast(&Ctl::End { rank, failed }, None);
        }
    }

    /// Node `node` said goodbye: its connection closing next is not a loss.
    pub fn said_bye(&mut self, node: usize) {
        self.byes.insert(node);
    }

    pub fn has_said_bye(&self, node: usize) -> bool {
        self.byes.contains(&node)
    }

    /// The launcher ends: which of its ranks it stopped unfinished, and why.
    pub fn bye(&mut self, unfinished: Vec<usize>, why: String) {
        let node = self.node_rank;
        self.broadcast(
            &Ctl::Bye {
                node,
                unfinished,
                why,
            },
            None,
        );
        for (_, w) in &self.links {
            let _ = w.shutdown(std::net::Shutdown::Write);
        }
    }
}

/// The failure a rank of a lost or finished node ends with, seen from another node.
pub fn remote_failure(text: String) -> Failure {
    Failure::Raised {
        exception: "NodeLost".into(),
        message: text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(node_rank: usize, port: u16, job_id: Option<&str>, timeout_ms: u64) -> Identity {
        Identity::new(
            b"[world]\n",
            job_id,
            2,
            node_rank,
            1,
            "127.0.0.1",
            port,
            timeout_ms,
        )
    }

    /// A free (p, p + 1) pair; each call starts past the last one's, so tests running at the
    /// same time in this process never share a pair (both would find the first free one).
    fn port_pair() -> u16 {
        static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(21_000);
        loop {
            let p = NEXT.fetch_add(7, std::sync::atomic::Ordering::Relaxed);
            assert!(p < 31_000, "no free port pair");
            if TcpListener::bind(("127.0.0.1", p)).is_ok()
                && TcpListener::bind(("127.0.0.1", p + 1)).is_ok()
            {
                return p;
            }
        }
    }

    #[test]
    fn two_launchers_agree_on_node_0s_token() {
        let p = port_pair();
        let h = std::thread::spawn(move || host(&id(0, p, None, 5_000), Some("abc".into())));
        match join(&id(1, p, None, 5_000), None).unwrap() {
            Outcome::Started { token, .. } => assert_eq!(token.as_deref(), Some("abc")),
            Outcome::Failed { reason } => panic!("{reason}"),
        }
        assert!(matches!(h.join().unwrap(), Ok(Outcome::Started { .. })));
    }

    #[test]
    fn another_job_is_refused_and_a_missing_node_is_named() {
        let p = port_pair();
        let h = std::thread::spawn(move || host(&id(0, p, Some("a"), 1_500), Some("t".into())));
        let e = match join(&id(1, p, Some("b"), 1_500), None) {
            Err(e) => e,
            Ok(_) => panic!("joined another job"),
        };
        assert!(e.contains("another job"), "{e}");
        match h.join().unwrap() {
            Ok(Outcome::Failed { reason }) => {
                assert!(
                    reason.starts_with("node 1 (ranks [1]) did not join job a's rendezvous"),
                    "{reason}"
                )
            }
            _ => panic!("expected a failed rendezvous"),
        }
    }
}
