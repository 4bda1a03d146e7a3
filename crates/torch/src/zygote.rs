//! A zygote for callers that make many torch-mode runs (the parity tests, the differential
//! oracle): one Python process (zygote.py) imports torch once and, per run, forks the process
//! that `python runner.py CONFIG` is after its own `import torch`. Each run so saves torch's
//! import (about 1.8 s of CPU) while its ranks stay what they are: forked children of a process
//! that imported torch, exiting as Python exits. `scen run --torch` keeps starting runner.py.
//!
//! The zygote dies with the thread that started it (PR_SET_PDEATHSIG: a keeper thread of its
//! own, living as long as the zygote), ends when its stdin closes (this process gone), and is
//! SIGKILLed on drop; its children die with it. A zygote that died is an error naming it.

use crate::TorchError;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const ZYGOTE: &str = include_str!("zygote.py");
/// How long the zygote may take to import torch (as the runner's start limit).
const READY_LIMIT: Duration = Duration::from_secs(180);
/// How long a fork request may take to be answered.
const FORK_LIMIT: Duration = Duration::from_secs(30);
/// Lines of the zygote's stderr kept for the error that reports its death.
const TAIL_LINES: usize = 8;

/// One run's runner process, forked by a zygote.
#[derive(Debug, Clone, Copy)]
pub struct Forked {
    id: u64,
    /// Its pid, also its process group's id.
    pub pid: i32,
}

#[derive(Default)]
struct State {
    ready: Option<String>,
    forked: BTreeMap<u64, Result<i32, String>>,
    ended: BTreeSet<u64>,
    dead: Option<String>,
    stderr: VecDeque<String>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `done` says Some, the zygote died (Err with why), or `limit` passed (None).
    fn wait_for<T>(
        &self,
        limit: Duration,
        mut done: impl FnMut(&mut State) -> Option<T>,
    ) -> Result<Option<T>, String> {
        let until = Instant::now() + limit;
        let mut st = self.lock();
        loop {
            if let Some(v) = done(&mut st) {
                return Ok(Some(v));
            }
            if let Some(why) = &st.dead {
                return Err(why.clone());
            }
            let now = Instant::now();
            if now >= until {
                return Ok(None);
            }
            st = self
                .changed
                .wait_timeout(st, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// A running zygote; share it between threads (`Arc`) through [`crate::TorchOptions::zygote`].
pub struct Zygote {
    python: PathBuf,
    pid: u32,
    stdin: Mutex<Option<ChildStdin>>,
    shared: Arc<Shared>,
    keeper: Option<JoinHandle<()>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Zygote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Zygote(pid {}, {})", self.pid, self.python.display())
    }
}

impl Zygote {
    /// Starts a zygote under `python` and waits until it has imported torch.
    pub fn start(python: &Path) -> Result<Zygote, TorchError> {
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::channel();
        let (py, sh) = (python.to_path_buf(), shared.clone());
        let keeper = std::thread::Builder::new()
            .name("scen-torch-zygote".into())
            .spawn(move || keep(&py, &sh, tx))
            .map_err(|e| TorchError::Io(format!("starting the zygote's thread: {e}")))?;
        let (pid, stdin) = match rx.recv() {
            Ok(Ok(started)) => started,
            Ok(Err(e)) => {
                let _ = keeper.join();
                return Err(TorchError::Unavailable(format!(
                    "cannot start {}: {e}",
                    python.display()
                )));
            }
            Err(_) => {
                let _ = keeper.join();
                return Err(TorchError::Zygote("its thread ended at start".into()));
            }
        };
        let z = Zygote {
            python: python.to_path_buf(),
            pid,
            stdin: Mutex::new(Some(stdin)),
            shared,
            keeper: Some(keeper),
            next_id: AtomicU64::new(0),
        };
        match z.shared.wait_for(READY_LIMIT, |st| st.ready.clone()) {
            Ok(Some(_)) => Ok(z),
            Ok(None) => Err(TorchError::Unavailable(format!(
                "{} did not import torch within {} s (zygote pid {pid})",
                python.display(),
                READY_LIMIT.as_secs()
            ))),
            Err(why) => Err(TorchError::Unavailable(why)),
        }
    }

    /// The zygote's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The torch version the zygote imported.
    pub fn torch_version(&self) -> String {
        self.shared.lock().ready.clone().unwrap_or_default()
    }

    /// Forks a runner process: runner.py's main(`config`) with output to `log`.
    pub fn fork(&self, runner: &Path, config: &Path, log: &Path) -> Result<Forked, TorchError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let req = serde_json::json!({
            "id": id,
            "runner": runner.display().to_string(),
            "config": config.display().to_string(),
            "log": log.display().to_string(),
        });
        {
            let mut stdin = self.stdin.lock().unwrap_or_else(|e| e.into_inner());
            let sent = match stdin.as_mut() {
                Some(w) => writeln!(w, "{req}").and_then(|_| w.flush()),
                None => Err(std::io::ErrorKind::BrokenPipe.into()),
            };
            if let Err(e) = sent {
                let why = self.shared.lock().dead.clone();
                return Err(self.error(why.unwrap_or_else(|| format!("writing to it: {e}"))));
            }
        }
        match self.shared.wait_for(FORK_LIMIT, |st| st.forked.remove(&id)) {
            Ok(Some(Ok(pid))) => Ok(Forked { id, pid }),
            Ok(Some(Err(e))) => Err(self.error(format!("fork failed: {e}"))),
            Ok(None) => Err(self.error(format!(
                "no answer to a fork request within {} s",
                FORK_LIMIT.as_secs()
            ))),
            Err(why) => Err(self.error(why)),
        }
    }

    /// Whether the runner process `f` has ended; an error if the zygote died first.
    pub fn ended(&self, f: Forked) -> Result<bool, TorchError> {
        let st = self.shared.lock();
        if st.ended.contains(&f.id) {
            return Ok(true);
        }
        match &st.dead {
            Some(why) => Err(self.error(why.clone())),
            None => Ok(false),
        }
    }

    /// Waits (at most `limit`) until the zygote has reaped `f`, then forgets it.
    pub fn reap(&self, f: Forked, limit: Duration) {
        let _ = self
            .shared
            .wait_for(limit, |st| st.ended.remove(&f.id).then_some(()));
    }

    fn error(&self, why: String) -> TorchError {
        TorchError::Zygote(format!(
            "pid {} ({}): {why}",
            self.pid,
            self.python.display()
        ))
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        self.stdin.lock().unwrap_or_else(|e| e.into_inner()).take();
        // Not once it is reaped: its pid may be another process's by now.
        if self.shared.lock().dead.is_none() {
            let _ = scen_procs::group::kill_process(self.pid);
        }
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
    }
}

type Started = std::io::Result<(u32, ChildStdin)>;

/// The keeper thread: starts the zygote (its death signal follows this thread), reads what it
/// says until it ends, reaps it and records why it is gone.
fn keep(python: &Path, shared: &Shared, tx: mpsc::Sender<Started>) {
    let mut cmd = Command::new(python);
    cmd.arg("-c")
        .arg(ZYGOTE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    scen_procs::group::die_with_parent(&mut cmd);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = tx.send(Err(e));
            return;
        }
    };
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(stdin), Some(stdout), Some(stderr)) = (stdin, stdout, stderr) else {
        let _ = child.kill();
        let _ = child.wait();
        let _ = tx.send(Err(std::io::Error::other("no pipes to the zygote")));
        return;
    };
    let _ = tx.send(Ok((child.id(), stdin)));
    std::thread::scope(|sc| {
        sc.spawn(|| {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut st = shared.lock();
                st.stderr.push_back(line);
                if st.stderr.len() > TAIL_LINES {
                    st.stderr.pop_front();
                }
            }
        });
        read_answers(stdout, shared);
    });
    let status = child
        .wait()
        .map(|s| s.to_string())
        .unwrap_or_else(|e| e.to_string());
    let mut st = shared.lock();
    let tail: Vec<String> = st.stderr.iter().cloned().collect();
    st.dead = Some(format!(
        "it exited ({status}){}",
        if tail.is_empty() {
            String::new()
        } else {
            format!("; its last output: {}", tail.join(" | "))
        }
    ));
    shared.changed.notify_all();
}

/// The zygote's answers, one JSON object a line, into the shared state.
fn read_answers(stdout: ChildStdout, shared: &Shared) {
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let mut st = shared.lock();
        if let Some(version) = v["ready"].as_str() {
            st.ready = Some(version.to_string());
        } else if let Some(id) = v["id"].as_u64() {
            if let Some(pid) = v["pid"].as_i64() {
                st.forked.insert(id, Ok(pid as i32));
            } else if let Some(e) = v["error"].as_str() {
                st.forked.insert(id, Err(e.to_string()));
            } else if v["status"].is_i64() {
                st.ended.insert(id);
            }
        }
        shared.changed.notify_all();
    }
}
