//! The benchmark's launcher: starts one `scen __bench-rank` process per rank, relays the
//! rendezvous (oneCCL's unique id, gloo addresses) and gathers every rank's result per job.
//! A rank that fails, dies or goes silent ends the run with its log's last lines; no process or
//! /dev/shm file is left behind.

use super::{BenchJob, BenchPath, BenchSpec, JobResult, RankJob, Wire};
use crate::launcher::{oneccl_root, ONECCL_ENV};
use crate::HwError;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long no rank may say anything before the run is declared stuck.
const SILENCE_LIMIT: Duration = Duration::from_secs(180);

enum Input {
    Msg(usize, Wire),
    Closed(usize),
}

/// The ranks and their log directory (scen_procs), plus oneCCL's /dev/shm files, which its shm
/// transport leaves named `<pid>:...`: removed when the ranks end, however the sweep ends.
struct Ranks(scen_procs::ranks::Ranks);

impl Ranks {
    fn tail(&self, rank: usize) -> String {
        self.0.tail(rank)
    }

    /// Waits up to `grace` for the ranks to exit, then kills the rest; removes their /dev/shm
    /// files (the directory goes with the inner Ranks).
    fn finish(&mut self, grace: Duration) {
        self.0.end(grace);
        let prefixes: Vec<String> = self.0.pids().iter().map(|p| format!("{p}:")).collect();
        if let Ok(dir) = std::fs::read_dir("/dev/shm") {
            for e in dir.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if prefixes.iter().any(|p| name.starts_with(p)) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

impl Drop for Ranks {
    fn drop(&mut self) {
        self.finish(Duration::ZERO);
    }
}

fn io(what: &str, e: impl std::fmt::Display) -> HwError {
    HwError::Io(format!("{what}: {e}"))
}

fn spawn(spec: &BenchSpec, exe: &Path, addr: &str) -> Result<Ranks, HwError> {
    let inner = scen_procs::ranks::Ranks::new("scen-bench")
        .map_err(|e| io("creating the log directory", e))?;
    let spec_json = serde_json::to_string(spec).map_err(|e| io("encoding the spec", e))?;
    let root = oneccl_root();
    let mut ranks = Ranks(inner);
    for rank in 0..spec.ranks {
        let (log, err) = ranks
            .0
            .log(rank)
            .map_err(|e| io("creating a rank log", e))?;
        let mut cmd = Command::new(exe);
        // A killed `scen bench` takes its ranks with it (they would spin in oneCCL forever).
        scen_procs::group::die_with_parent(&mut cmd);
        cmd.arg("__bench-rank")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("WORLD_SIZE", spec.ranks.to_string())
            .env("LOCAL_WORLD_SIZE", spec.ranks.to_string())
            .env("CCL_LOCAL_RANK", rank.to_string())
            .env("CCL_LOCAL_SIZE", spec.ranks.to_string())
            .env("SCEN_BENCH_ADDR", addr)
            .env("SCEN_BENCH_SPEC", &spec_json);
        for (k, v) in ONECCL_ENV {
            if std::env::var_os(k).is_none() {
                cmd.env(k, v);
            }
        }
        if let Some(r) = &root {
            cmd.env("ONECCL_ROOT", r);
        }
        cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
        let child = cmd
            .spawn()
            .map_err(|e| io(&format!("starting rank {rank} ({})", exe.display()), e))?;
        ranks.0.children.push(child);
    }
    Ok(ranks)
}

fn reader(conn: usize, s: TcpStream, tx: mpsc::Sender<Input>) {
    std::thread::spawn(move || {
        for line in BufReader::new(s).lines() {
            let Ok(line) = line else { break };
            match serde_json::from_str::<Wire>(&line) {
                Ok(m) => {
                    if tx.send(Input::Msg(conn, m)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(Input::Closed(conn));
    });
}

fn send(to: &mut TcpStream, m: &Wire) -> Result<(), HwError> {
    let mut line = serde_json::to_string(m).map_err(|e| io("encoding", e))?;
    line.push('\n');
    to.write_all(line.as_bytes())
        .map_err(|e| io("writing to a rank", e))
}

/// Runs `spec` on `spec.ranks` local processes; `progress(done, result)` is called as each job
/// completes on every rank. `exe`: the scen binary (default: this executable).
pub fn run(
    spec: &BenchSpec,
    exe: Option<&Path>,
    progress: &mut dyn FnMut(usize, &JobResult),
) -> Result<Vec<JobResult>, HwError> {
    if spec.ranks == 0 {
        return Err(HwError::Usage("--ranks must be at least 1".into()));
    }
    if spec.path == BenchPath::Torch {
        return Err(HwError::Usage(
            "the torch path is run by scen-torch, not this launcher".into(),
        ));
    }
    if spec.path == BenchPath::Oneccl {
        let c = oneccl_sys::candidates_with_root(oneccl_root());
        oneccl_sys::Api::load_from(c).map_err(|e| HwError::Unavailable(e.to_string()))?;
    }
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| io("bench listener", e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| io("bench listener", e))?
        .to_string();
    let exe = match exe {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe().map_err(|e| io("finding the scen binary", e))?,
    };
    let mut ranks = spawn(spec, &exe, &addr)?;
    let r = gather(spec, &listener, &mut ranks, progress);
    ranks.finish(if r.is_ok() {
        Duration::from_secs(10)
    } else {
        Duration::ZERO
    });
    r
}

fn gather(
    spec: &BenchSpec,
    listener: &TcpListener,
    ranks: &mut Ranks,
    progress: &mut dyn FnMut(usize, &JobResult),
) -> Result<Vec<JobResult>, HwError> {
    let n = spec.ranks;
    let (tx, rx) = mpsc::channel();
    let mut conns = accept_ranks(n, listener, ranks, &tx)?;
    let mut rank_of: Vec<Option<usize>> = vec![None; n];
    let mut addrs: Vec<Option<String>> = vec![None; n];
    let mut got: Vec<Vec<Option<RankJob>>> = vec![vec![None; n]; spec.jobs.len()];
    let mut results: Vec<Option<JobResult>> = vec![None; spec.jobs.len()];
    let mut reported = vec![0usize; n];
    let mut done = 0;
    while done < spec.jobs.len() {
        let m = rx.recv_timeout(SILENCE_LIMIT).map_err(|_| {
            let job = spec.jobs.get(done).map(describe).unwrap_or_default();
            HwError::Io(format!("no rank reported for 180 s (during {job}): stuck"))
        })?;
        match m {
            Input::Msg(c, Wire::Hello { rank }) if rank < n => rank_of[c] = Some(rank),
            Input::Msg(c, Wire::Uid { hex }) => {
                for (i, s) in conns.iter_mut().enumerate() {
                    if i != c {
                        send(s, &Wire::Uid { hex: hex.clone() })?;
                    }
                }
            }
            Input::Msg(_, Wire::Addr { rank, addr }) if rank < n => {
                addrs[rank] = Some(addr);
                if addrs.iter().all(Option::is_some) {
                    let all: Vec<String> = addrs.iter().flatten().cloned().collect();
                    for s in conns.iter_mut() {
                        send(s, &Wire::Addrs { addrs: all.clone() })?;
                    }
                }
            }
            Input::Msg(_, Wire::Job { rank, job }) if rank < n && job.index < got.len() => {
                let i = job.index;
                reported[rank] += 1;
                got[i][rank] = Some(job);
                if got[i].iter().all(Option::is_some) {
                    let r = combine(spec.jobs[i], &got[i]);
                    done += 1;
                    progress(done, &r);
                    results[i] = Some(r);
                }
            }
            Input::Msg(_, Wire::Failed { rank, error }) => {
                return Err(HwError::Io(format!("rank {rank}: {error}")));
            }
            Input::Msg(..) => {}
            // A rank that reported every job may exit before the others finish.
            Input::Closed(c) if rank_of[c].is_some_and(|r| reported[r] == spec.jobs.len()) => {}
            Input::Closed(c) => {
                let rank = rank_of[c].unwrap_or(c);
                std::thread::sleep(Duration::from_millis(100));
                let st = exited(ranks)
                    .map(|(_, s)| s)
                    .unwrap_or_else(|| "closed".into());
                return Err(HwError::Io(format!(
                    "rank {rank} went away during {} ({st}): {}",
                    spec.jobs.get(done).map(describe).unwrap_or_default(),
                    ranks.tail(rank)
                )));
            }
        }
    }
    Ok(results.into_iter().flatten().collect())
}

/// Every rank's connection to the launcher, each read by its own thread into `tx`; a rank that
/// exits first, or silence past the limit, is an error naming it.
fn accept_ranks(
    n: usize,
    listener: &TcpListener,
    ranks: &mut Ranks,
    tx: &mpsc::Sender<Input>,
) -> Result<Vec<TcpStream>, HwError> {
    let mut conns: Vec<TcpStream> = Vec::new();
    listener
        .set_nonblocking(true)
        .map_err(|e| io("bench listener", e))?;
    let start = Instant::now();
    while conns.len() < n {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)
                    .map_err(|e| io("bench connection", e))?;
                reader(
                    conns.len(),
                    s.try_clone().map_err(|e| io("bench connection", e))?,
                    tx.clone(),
                );
                conns.push(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Some((r, st)) = exited(ranks) {
                    return Err(HwError::Io(format!(
                        "rank {r} exited ({st}) before reaching the launcher: {}",
                        ranks.tail(r)
                    )));
                }
                if start.elapsed() > SILENCE_LIMIT {
                    return Err(HwError::Io("the ranks did not connect within 180 s".into()));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(io("accepting a rank", e)),
        }
    }
    Ok(conns)
}

fn describe(j: &BenchJob) -> String {
    format!("{} of {} bytes", j.op, j.size_bytes)
}

fn exited(ranks: &mut Ranks) -> Option<(usize, String)> {
    ranks
        .0
        .children
        .iter_mut()
        .enumerate()
        .find_map(|(r, c)| match c.try_wait() {
            Ok(Some(st)) if !st.success() => Some((r, st.to_string())),
            _ => None,
        })
}

/// nccl-tests' default: times averaged over ranks; wrong elements summed.
fn combine(job: BenchJob, per_rank: &[Option<RankJob>]) -> JobResult {
    let rs: Vec<&RankJob> = per_rank.iter().flatten().collect();
    let n = rs.len().max(1) as f64;
    let raw: Vec<f64> = rs.iter().filter_map(|r| r.raw_us).collect();
    let med: Vec<f64> = rs.iter().filter_map(|r| r.median_us).collect();
    JobResult {
        job,
        count: rs.first().map_or(0, |r| r.count),
        time_us: rs.iter().map(|r| r.time_us).sum::<f64>() / n,
        median_us: (!med.is_empty()).then(|| med.iter().sum::<f64>() / med.len() as f64),
        raw_us: (!raw.is_empty()).then(|| raw.iter().sum::<f64>() / raw.len() as f64),
        wrong: rs.iter().map(|r| r.wrong).sum(),
        spread: None,
    }
}
