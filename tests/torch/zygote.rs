//! The tests' zygote (crates/torch/src/zygote.rs) never leaves a process behind or hangs a
//! run: a zygote killed while a run's ranks sleep makes that run an error naming the zygote
//! within seconds, with its runner and ranks gone, and a dropped zygote is gone.

use scen_torch::zygote::Zygote;
use scen_torch::{TorchError, TorchOptions};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SLEEPERS: &str = "# Two ranks sleeping a minute after init: a run to break.\n[scenario]\ndescription = \"sleepers\"\n\n[world]\nranks_per_node = 2\nplatform = \"cpu\"\n\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n\n[[step]]\nop = \"sleep\"\nms = 60000\n";

/// `pid`'s descendants, from /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // `pid (comm) state ppid ...`: comm may hold spaces, so read after its `)`.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if let Some(pp) = ppid {
            parent_of.push((p, pp));
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parent_of.iter().filter(|x| x.1 == p).map(|x| x.0));
        i += 1;
    }
    out.remove(0);
    out
}

/// Whether `pid` is a live process (a zombie is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().to_string()))
        .is_some_and(|r| !r.starts_with('Z') && !r.starts_with('X'))
}

fn gone_within(pids: &[u32], limit: Duration) -> Result<(), String> {
    let t = Instant::now();
    while pids.iter().any(|p| alive(*p)) {
        if t.elapsed() > limit {
            let left: Vec<&u32> = pids.iter().filter(|p| alive(**p)).collect();
            return Err(format!("still alive after {limit:?}: {left:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Kills a zygote while its run's ranks sleep: the run ends with an error naming the zygote.
fn killed_zygote_fails_the_run(python: &Path) -> Result<(), String> {
    let z = Arc::new(Zygote::start(python).map_err(|e| e.to_string())?);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("sleepers.toml");
    std::fs::write(&file, SLEEPERS).map_err(|e| e.to_string())?;
    let s = scen_core::scenario::load_file(&file).map_err(|e| e.to_string())?;
    let keep = dir.path().join("run");
    let o = TorchOptions {
        python: Some(python.to_path_buf()),
        keep_dir: Some(keep.clone()),
        max_wall_ms: Some(120_000),
        zygote: Some(z.clone()),
        ..Default::default()
    };
    let run = std::thread::spawn(move || scen_torch::run(&s, None, &o));
    let sleeping = |r: usize| {
        std::fs::read_to_string(keep.join(format!("rank{r}.jsonl")))
            .is_ok_and(|t| t.contains("\"ev\": \"start\", \"step\": 1"))
    };
    let t = Instant::now();
    while !(sleeping(0) && sleeping(1)) && t.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let family = descendants(z.pid());
    if family.len() < 3 {
        return Err(format!(
            "want a runner and 2 ranks under the zygote, found {family:?}"
        ));
    }
    scen_procs::group::kill_process(z.pid()).map_err(|e| e.to_string())?;
    let killed = Instant::now();
    let result = run.join().map_err(|_| "the run panicked".to_string())?;
    let took = killed.elapsed();
    match result {
        Err(TorchError::Zygote(why)) if took < Duration::from_secs(20) => {
            let text = TorchError::Zygote(why).to_string();
            if !text.contains(&format!("zygote pid {}", z.pid())) || !text.contains("SIGKILL") {
                return Err(format!("the error does not name the zygote and its end: {text}"));
            }
        }
        other => {
            return Err(format!(
                "after the zygote was killed the run gave {other:?} after {took:?}, want a zygote error within 20 s"
            ))
        }
    }
    gone_within(&family, Duration::from_secs(10))
}

/// Both checks; see the module comment.
pub fn never_leaves_a_process(python: &Path) -> Result<(), String> {
    killed_zygote_fails_the_run(python)?;
    let z = Zygote::start(python).map_err(|e| e.to_string())?;
    let pid = z.pid();
    if !alive(pid) {
        return Err(format!("zygote {pid} is not running after its start"));
    }
    drop(z);
    gone_within(&[pid], Duration::from_secs(5))
}
