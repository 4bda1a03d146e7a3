//! `scen bench --hw --path torch`: the sweep timed through real `torch.distributed`, one Python
//! process per rank (bench_rank.py, torchrun's environment, the backend init_process_group would
//! pick: xccl on XPU, nccl on CUDA, gloo on CPU). Each rank prints one JSON line per job; the
//! launcher averages times over ranks and sums `#wrong` (nccl-tests' convention, as the oneCCL
//! path). The caller gives each job's element count, so both paths time the same buffers.

use crate::{python, TorchError};
use scen_core::perf::BenchOp;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The rank program.
pub const RANK_PROGRAM: &str = include_str!("bench_rank.py");
/// How long no rank may print anything before the run is declared stuck.
const SILENCE_LIMIT: Duration = Duration::from_secs(180);

/// What the rank processes run.
#[derive(Debug, Clone, PartialEq)]
pub struct TorchBenchSpec {
    /// Each job's op and elements of each rank's send buffer.
    pub jobs: Vec<(BenchOp, usize)>,
    pub dtype: String,
    pub redop: String,
    pub ranks: usize,
    pub warmup: usize,
    pub iters: usize,
    /// Extra environment for the ranks (`--env K=V`).
    pub env: Vec<(String, String)>,
    /// The interpreter (else torch mode's discovery: $SCEN_PYTHON, the install script's venv).
    pub python: Option<PathBuf>,
}

/// One job, averaged over ranks (times) and summed (wrong elements).
#[derive(Debug, Clone, PartialEq)]
pub struct TorchJob {
    pub index: usize,
    pub count: usize,
    pub time_us: f64,
    pub median_us: Option<f64>,
    pub wrong: u64,
}

/// A finished run: what torch was and each job's result, in job order.
#[derive(Debug, Clone, PartialEq)]
pub struct TorchBench {
    pub torch: String,
    pub backend: String,
    pub device: String,
    pub jobs: Vec<TorchJob>,
}

/// The spec as bench_rank.py reads it (SCEN_BENCH_SPEC).
pub fn spec_json(spec: &TorchBenchSpec) -> String {
    serde_json::json!({
        "jobs": spec.jobs.iter().map(|(op, c)| serde_json::json!([op.name(), c])).collect::<Vec<_>>(),
        "dtype": spec.dtype,
        "redop": spec.redop,
        "warmup": spec.warmup,
        "iters": spec.iters,
    })
    .to_string()
}

enum Line {
    Text(String),
    Closed(usize),
}

/// The ranks and their scratch directory (scen_procs: ended and removed however this ends).
type Ranks = scen_procs::ranks::Ranks;

fn io(what: &str, e: impl std::fmt::Display) -> TorchError {
    TorchError::Io(format!("{what}: {e}"))
}

fn spawn(spec: &TorchBenchSpec, py: &Path, tx: &mpsc::Sender<Line>) -> Result<Ranks, TorchError> {
    let mut ranks =
        Ranks::new("scen-bench-torch").map_err(|e| io("creating the run directory", e))?;
    let program = ranks.dir.join("bench_rank.py");
    std::fs::write(&program, RANK_PROGRAM).map_err(|e| io("writing bench_rank.py", e))?;
    let port = scen_procs::port::below_ephemeral()
        .and_then(|l| Ok(l.local_addr()?.port()))
        .map_err(|e| io("picking MASTER_PORT", e))?;
    let json = spec_json(spec);
    for rank in 0..spec.ranks {
        let (_, log) = ranks.log(rank).map_err(|e| io("creating a rank log", e))?;
        let mut cmd = Command::new(py);
        scen_procs::group::die_with_parent(&mut cmd);
        cmd.arg("-u")
            .arg(&program)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", port.to_string())
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("WORLD_SIZE", spec.ranks.to_string())
            .env("LOCAL_WORLD_SIZE", spec.ranks.to_string())
            .env("SCEN_BENCH_SPEC", &json)
            .envs(spec.env.iter().map(|(k, v)| (k, v)));
        let mut child = cmd
            .spawn()
            .map_err(|e| io(&format!("starting rank {rank} ({})", py.display()), e))?;
        let out = child.stdout.take();
        ranks.children.push(child);
        let tx = tx.clone();
        std::thread::spawn(move || {
            if let Some(out) = out {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(Line::Text(line)).is_err() {
                        return;
                    }
                }
            }
            let _ = tx.send(Line::Closed(rank));
        });
    }
    Ok(ranks)
}

/// A rank's line: the hello (torch, backend, device) or a job.
fn parse(line: &str) -> Option<Result<(String, String, String), TorchJob>> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if let Some(h) = v.get("hello") {
        let s = |k: &str| h[k].as_str().unwrap_or("").to_string();
        return Some(Ok((s("torch"), s("backend"), s("device"))));
    }
    Some(Err(TorchJob {
        index: v["index"].as_u64()? as usize,
        count: v["count"].as_u64()? as usize,
        time_us: v["time_us"].as_f64()?,
        median_us: v["median_us"].as_f64(),
        wrong: v["wrong"].as_u64()?,
    }))
}

/// Averages one job's per-rank results (times) and sums their wrong elements.
pub fn combine(per_rank: &[TorchJob]) -> TorchJob {
    let n = per_rank.len().max(1) as f64;
    let med: Vec<f64> = per_rank.iter().filter_map(|r| r.median_us).collect();
    TorchJob {
        index: per_rank.first().map_or(0, |r| r.index),
        count: per_rank.first().map_or(0, |r| r.count),
        time_us: per_rank.iter().map(|r| r.time_us).sum::<f64>() / n,
        median_us: (!med.is_empty()).then(|| med.iter().sum::<f64>() / med.len() as f64),
        wrong: per_rank.iter().map(|r| r.wrong).sum(),
    }
}

/// Runs the spec; `progress(done, job)` as each job completes on every rank.
pub fn run(
    spec: &TorchBenchSpec,
    progress: &mut dyn FnMut(usize, &TorchJob),
) -> Result<TorchBench, TorchError> {
    if spec.ranks == 0 {
        return Err(TorchError::Io("--ranks must be at least 1".into()));
    }
    let (py, _) = python::find(spec.python.as_deref())?;
    if !py.exists() {
        return Err(TorchError::Unavailable(format!(
            "{} does not exist; run scripts/install-torch-cpu.sh",
            py.display()
        )));
    }
    let (tx, rx) = mpsc::channel();
    let mut ranks = spawn(spec, &py, &tx)?;
    drop(tx);
    let r = gather(spec, &rx, &mut ranks, progress);
    ranks.end(if r.is_ok() {
        Duration::from_secs(10)
    } else {
        Duration::ZERO
    });
    r
}

fn gather(
    spec: &TorchBenchSpec,
    rx: &mpsc::Receiver<Line>,
    ranks: &mut Ranks,
    progress: &mut dyn FnMut(usize, &TorchJob),
) -> Result<TorchBench, TorchError> {
    let n = spec.ranks;
    let mut hello = None;
    let mut got: Vec<Vec<TorchJob>> = vec![Vec::new(); spec.jobs.len()];
    let mut done = 0;
    let mut out: Vec<Option<TorchJob>> = vec![None; spec.jobs.len()];
    while done < spec.jobs.len() {
        let during = || {
            spec.jobs
                .get(done)
                .map(|(op, c)| format!("{op} of {c} elements"))
                .unwrap_or_default()
        };
        let line = rx.recv_timeout(SILENCE_LIMIT).map_err(|_| {
            TorchError::Io(format!(
                "no rank reported for 180 s (during {}): stuck",
                during()
            ))
        })?;
        match line {
            Line::Text(t) => match parse(&t) {
                Some(Ok(h)) => hello = Some(h),
                Some(Err(j)) if j.index < got.len() => {
                    let i = j.index;
                    got[i].push(j);
                    if got[i].len() == n {
                        let c = combine(&got[i]);
                        done += 1;
                        progress(done, &c);
                        out[i] = Some(c);
                    }
                }
                _ => {}
            },
            Line::Closed(r) => {
                if got.iter().all(|g| g.len() == n) {
                    continue;
                }
                std::thread::sleep(Duration::from_millis(200));
                let tail = ranks.tail(r);
                if tail.contains("No module named 'torch'") {
                    return Err(TorchError::Unavailable(format!(
                        "{} cannot import torch; run scripts/install-torch-cpu.sh",
                        py_name(spec)
                    )));
                }
                return Err(TorchError::Io(format!(
                    "rank {r} went away during {}: {tail}",
                    during()
                )));
            }
        }
    }
    let (torch, backend, device) = hello.unwrap_or_default();
    Ok(TorchBench {
        torch,
        backend,
        device,
        jobs: out.into_iter().flatten().collect(),
    })
}

fn py_name(spec: &TorchBenchSpec) -> String {
    python::find(spec.python.as_deref())
        .map(|(p, _)| p.display().to_string())
        .unwrap_or_else(|_| "the Python".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_lines_parse_and_combine_as_nccl_tests() {
        let h = parse(r#"{"hello": {"torch": "2.15.0", "backend": "gloo", "device": "cpu"}}"#);
        assert_eq!(h, Some(Ok(("2.15.0".into(), "gloo".into(), "cpu".into()))));
        let j = |t: f64, w: u64| match parse(&format!(
            r#"{{"index": 1, "count": 8, "time_us": {t}, "median_us": {t}, "wrong": {w}}}"#
        )) {
            Some(Err(j)) => j,
            other => panic!("{other:?}"),
        };
        let c = combine(&[j(10.0, 0), j(30.0, 2)]);
        assert_eq!((c.index, c.count, c.time_us, c.wrong), (1, 8, 20.0, 2));
        assert_eq!(c.median_us, Some(20.0));
        assert!(parse("Traceback (most recent call last):").is_none());
    }

    #[test]
    fn the_spec_names_ops_as_the_program_does() {
        let s = TorchBenchSpec {
            jobs: vec![(BenchOp::AllToAll, 16)],
            dtype: "f32".into(),
            redop: "sum".into(),
            ranks: 2,
            warmup: 1,
            iters: 2,
            env: vec![],
            python: None,
        };
        let v: serde_json::Value = serde_json::from_str(&spec_json(&s)).unwrap();
        assert_eq!(v["jobs"][0][0], "all_to_all");
        for op in BenchOp::ALL {
            assert!(
                RANK_PROGRAM.contains(&format!("\"{}\": lambda", op.name())),
                "{op}"
            );
        }
    }

    /// The values check itself, on the real interpreter when there is one (skipped visibly
    /// otherwise): a right all_to_all result has no wrong element, a flipped one is counted.
    #[test]
    fn the_programs_expected_values_catch_a_flipped_element() {
        let Ok((py, _)) = python::find(None) else {
            println!("skip: no Python with torch");
            return;
        };
        if !py.exists() {
            println!("skip: {} does not exist", py.display());
            return;
        }
        let program = RANK_PROGRAM.replace("if __name__ == \"__main__\":", "if False:");
        let code = format!(
            "{program}\nimport torch\nn, c = 2, 8\nfor me in range(n):\n  got = torch.cat([inp(r, torch.arange(c), 'sum')[me*c//n:(me+1)*c//n] for r in range(n)])\n  want = expected('all_to_all', n, me, c, c, 'sum')\n  assert int((got != want).sum()) == 0\n  got[3] = 99\n  assert int((got != want).sum()) == 1\nprint('ok')\n"
        );
        let out = Command::new(&py).arg("-c").arg(code).output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "ok",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
