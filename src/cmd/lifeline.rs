//! When each recorded process really ended. A rank's program ends at its last line, but its
//! process lives on through the interpreter's teardown (destructors of its process groups,
//! rank 0's TCPStore server), and peers still reach its sockets meanwhile: how long that takes
//! decides races (a peer's timeout against its close, torchrun's agent against a raise). Each
//! recorded process connects to a Unix socket here (python/scen/recorder.py `_lifeline`); the
//! kernel closes the connection when the process is gone, and the time is appended to its
//! record as a `gone` line.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long to wait, once the launcher ended, for the last processes' connections to close.
const SETTLE: Duration = Duration::from_millis(300);

/// The listening socket and what it heard: pid -> wall-clock ms of its end.
pub struct Lifelines {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    /// The accept loop's passes: `finish` waits for one whole pass, so a connection made just
    /// before the launcher ended is taken.
    rounds: Arc<AtomicU64>,
    open: Arc<Mutex<usize>>,
    gone: Arc<Mutex<BTreeMap<u64, u64>>>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Lifelines {
    /// Listens at `path` (in the recording's private directory) until [`Lifelines::finish`].
    pub fn listen(path: &Path) -> std::io::Result<Lifelines> {
        let listener = UnixListener::bind(path)?;
        listener.set_nonblocking(true)?;
        let l = Lifelines {
            path: path.to_path_buf(),
            stop: Arc::new(AtomicBool::new(false)),
            rounds: Arc::new(AtomicU64::new(0)),
            open: Arc::new(Mutex::new(0)),
            gone: Arc::new(Mutex::new(BTreeMap::new())),
        };
        let (stop, rounds) = (l.stop.clone(), l.rounds.clone());
        let (open, gone) = (l.open.clone(), l.gone.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => watch(s, open.clone(), gone.clone()),
                    Err(_) => {
                        rounds.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
            }
        });
        Ok(l)
    }

    /// The socket's path, for the recorded processes' environment.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops listening, waits briefly for connections still open, and appends each ended
    /// process's `gone` line to its record (`proc<pid>.jsonl` in `records`).
    pub fn finish(self, records: &Path) {
        let t = Instant::now();
        let seen = self.rounds.load(Ordering::Relaxed);
        while self.rounds.load(Ordering::Relaxed) < seen + 2 && t.elapsed() < SETTLE {
            std::thread::sleep(Duration::from_millis(1));
        }
        while *self.open.lock().expect("lifelines") > 0 && t.elapsed() < SETTLE {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stop.store(true, Ordering::Relaxed);
        let gone = self.gone.lock().expect("lifelines").clone();
        for (pid, t_ms) in gone {
            let file = records.join(format!("proc{pid}.jsonl"));
            if !file.exists() {
                continue;
            }
            if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&file) {
                let _ = writeln!(f, "{{\"ev\": \"gone\", \"t\": {t_ms}}}");
            }
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One process's connection: its pid, then nothing until the kernel closes it.
fn watch(s: UnixStream, open: Arc<Mutex<usize>>, gone: Arc<Mutex<BTreeMap<u64, u64>>>) {
    *open.lock().expect("lifelines") += 1;
    std::thread::spawn(move || {
        let _ = s.set_nonblocking(false);
        let mut r = BufReader::new(s);
        let mut line = String::new();
        let pid = r
            .read_line(&mut line)
            .ok()
            .and_then(|_| line.trim().parse::<u64>().ok());
        let mut sink = [0u8; 64];
        while matches!(r.read(&mut sink), Ok(n) if n > 0) {}
        let t = now_ms();
        if let Some(pid) = pid {
            gone.lock().expect("lifelines").insert(pid, t);
        }
        *open.lock().expect("lifelines") -= 1;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection's end is its process's: the time lands in that pid's record, as its last
    /// line; a pid with no record gets nothing, and the socket file goes.
    #[test]
    fn a_closed_lifeline_is_its_process_gone() {
        let dir = tempfile::tempdir().unwrap();
        let records = dir.path().join("records");
        std::fs::create_dir(&records).unwrap();
        std::fs::write(
            records.join("proc41.jsonl"),
            "{\"ev\": \"proc\", \"pid\": 41}\n",
        )
        .unwrap();
        let l = Lifelines::listen(&dir.path().join("life.sock")).unwrap();
        let before = now_ms();
        for pid in [41, 42] {
            let mut s = UnixStream::connect(l.path()).unwrap();
            writeln!(s, "{pid}").unwrap();
        }
        l.finish(&records);
        let text = std::fs::read_to_string(records.join("proc41.jsonl")).unwrap();
        let last = text.lines().last().unwrap();
        let t: u64 = last
            .strip_prefix("{\"ev\": \"gone\", \"t\": ")
            .and_then(|x| x.strip_suffix('}'))
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        assert!(t >= before, "{t} < {before}");
        assert!(!records.join("proc42.jsonl").exists());
        assert!(!dir.path().join("life.sock").exists());
    }
}
