//! One job across nodes on 127.0.0.1: several `scen run --hw --nnodes N --node-rank I`
//! launchers (docs/hw.md "Several machines"), and srun/mpirun simulated by setting their
//! variables on plain processes that each run one rank.

use super::{alive, load, options, shm_names, wait_for_ranks, OutputInThread};
use scen_hw::HwError;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// False (after printing why) when this machine has no oneCCL.
fn hw_here(rel: &str) -> bool {
    match scen_hw::launcher::check_eligible(&load(rel), &options(), true) {
        Err(HwError::Unavailable(why)) => {
            assert!(
                std::env::var("SCEN_HW_REQUIRED").as_deref() != Ok("1"),
                "SCEN_HW_REQUIRED=1 but {why}"
            );
            println!("skip: multi-node test of {rel}: {why}");
            false
        }
        _ => true,
    }
}

/// A port P with P and P + 1 free (the store and the launchers' rendezvous).
fn port_pair() -> u16 {
    let seed = std::process::id() as u64 * 7919
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64)
            .unwrap_or(0);
    for i in 0..2_000u64 {
        let p = 20_000 + ((seed + i * 13) % 11_000) as u16;
        let a = std::net::TcpListener::bind(("127.0.0.1", p));
        let b = std::net::TcpListener::bind(("127.0.0.1", p + 1));
        if a.is_ok() && b.is_ok() {
            return p;
        }
    }
    panic!("no free port pair");
}

/// `scen run --hw REL --nnodes N --node-rank I --master-addr 127.0.0.1 --master-port P`.
fn node(rel: &str, nnodes: usize, node_rank: usize, port: u16, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_scen"));
    c.args(["run", "--hw", rel, "--max-wall-s", "60"])
        .args(["--nnodes", &nnodes.to_string()])
        .args(["--node-rank", &node_rank.to_string()])
        .args(["--master-addr", "127.0.0.1"])
        .args(["--master-port", &port.to_string()])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove(scen_hw::launcher::JOB_TOKEN_ENV);
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}\n--- stderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The rank pids a report lists.
fn report_pids(out: &str) -> Vec<u32> {
    out.lines()
        .find_map(|l| l.trim().strip_prefix("note: rank processes (rank=pid): "))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|kv| kv.split_once('=')?.1.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// No rank process alive, no /dev/shm or /tmp entry of theirs (within 5 s).
fn assert_nothing_left(pids: &[u32], what: &str) {
    let ours = || -> Vec<String> {
        let mut v: Vec<String> = shm_names()
            .into_iter()
            .filter(|n| pids.iter().any(|p| n.starts_with(&format!("{p}:"))))
            .collect();
        if let Ok(d) = std::fs::read_dir("/tmp") {
            v.extend(
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| pids.iter().any(|p| n.starts_with(&format!("scen-hw-{p}-")))),
            );
        }
        v
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && (pids.iter().any(|p| alive(*p)) || !ours().is_empty()) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let orphans: Vec<&u32> = pids.iter().filter(|p| alive(**p)).collect();
    assert!(orphans.is_empty(), "{what}: orphans {orphans:?}");
    assert_eq!(ours(), Vec::<String>::new(), "{what}: leftover files");
}

fn run_nodes(rel: &str, nnodes: usize, extra: impl Fn(usize) -> Vec<&'static str>) -> Vec<Output> {
    let port = port_pair();
    let kids: Vec<_> = (0..nnodes)
        .map(|n| node(rel, nnodes, n, port, &extra(n)).output_in_thread())
        .collect();
    kids.into_iter()
        .map(|k| k.join().expect("joins").expect("runs"))
        .collect()
}

#[test]
fn two_and_three_launchers_make_one_job() {
    let _jobs = super::oneccl_jobs(false);
    for (rel, nnodes, per_node) in [
        ("tests/hw/five_ops_xccl_2x2.toml", 2, 2),
        ("tests/hw/five_ops_xccl_3x1.toml", 3, 1),
    ] {
        if !hw_here(rel) {
            return;
        }
        let t = Instant::now();
        let outs = run_nodes(rel, nnodes, |_| vec![]);
        println!(
            "{rel}: {nnodes} launchers took {} ms",
            t.elapsed().as_millis()
        );
        let mut label = None;
        for (n, o) in outs.iter().enumerate() {
            let out = text(o);
            assert!(o.status.success(), "node {n}:\n{out}");
            assert!(
                out.contains(&format!("expectations: {per_node}/{per_node} hold")),
                "node {n}:\n{out}"
            );
            let ranks: Vec<usize> = (n * per_node..(n + 1) * per_node).collect();
            let me = format!(": node {n} of {nnodes} (ranks {ranks:?})");
            let line = out
                .lines()
                .find(|l| l.contains(&me))
                .unwrap_or_else(|| panic!("node {n} names its job and node:\n{out}"));
            let job = line.split(':').next().map(str::to_string);
            assert_eq!(label.get_or_insert(job.clone()), &job, "one job");
            let token = if n == 0 {
                "job token drawn by this launcher"
            } else {
                "job token fetched from node 0's launcher"
            };
            assert!(line.contains(token), "{line}");
            assert_nothing_left(&report_pids(&out), rel);
        }
    }
}

#[test]
fn a_node_that_never_comes_is_named_within_the_rendezvous_timeout() {
    let rel = "tests/hw/five_ops_xccl_2x2.toml";
    if !hw_here(rel) {
        return;
    }
    let t = Instant::now();
    let o = node(rel, 2, 0, port_pair(), &["--rdzv-timeout-s", "2"])
        .output()
        .expect("runs");
    let ms = t.elapsed().as_millis();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(ms < 8_000, "took {ms} ms");
    assert!(
        out.contains("RendezvousTimeoutError: node 1 (ranks [2, 3]) did not join job scen-")
            && out.contains("within 2 s; no rank of the job was started"),
        "{out}"
    );
    // And the other way round: node 1 alone names node 0.
    let o = node(rel, 2, 1, port_pair(), &["--rdzv-timeout-s", "1"])
        .output()
        .expect("runs");
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("node 0 (ranks [0, 1]) never came"), "{out}");
}

#[test]
fn another_job_is_refused_at_the_rendezvous() {
    let rel = "tests/hw/five_ops_xccl_2x2.toml";
    if !hw_here(rel) {
        return;
    }
    let port = port_pair();
    let host =
        node(rel, 2, 0, port, &["--job-id", "a", "--rdzv-timeout-s", "3"]).output_in_thread();
    let o = node(rel, 2, 1, port, &["--job-id", "b", "--rdzv-timeout-s", "3"])
        .output()
        .expect("runs");
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("refused node 1: it belongs to another job"),
        "{out}"
    );
    let h = host.join().expect("joins").expect("runs");
    assert_eq!(h.status.code(), Some(1), "{}", text(&h));
}

#[test]
fn a_node_killed_mid_collective_leaves_the_other_reported_and_nothing_behind() {
    let rel = "tests/hw/multinode_kill_2x2.toml";
    let _jobs = super::oneccl_jobs(true);
    if !hw_here(rel) {
        return;
    }
    // Node 1's rank 2 SIGKILLed by its launcher inside the second all_reduce.
    let t = Instant::now();
    let outs = run_nodes(rel, 2, |n| {
        if n == 1 {
            vec!["--kill-rank", "2:4"]
        } else {
            vec![]
        }
    });
    println!("--kill-rank on node 1: {} ms", t.elapsed().as_millis());
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    let (o0, o1) = (text(&outs[0]), text(&outs[1]));
    assert_eq!(outs[0].status.code(), Some(1), "{o0}");
    assert_eq!(outs[1].status.code(), Some(1), "{o1}");
    assert!(
        o1.contains("SIGKILL: process killed by the launcher (--kill-rank 2:4)"),
        "{o1}"
    );
    assert!(
        o0.contains("rank 2 failed at step 4: SIGKILL: process killed by the launcher"),
        "node 0 heard of rank 2's death:\n{o0}"
    );
    assert!(o0.contains("all_reduce \"second\""), "{o0}");
    assert_nothing_left(&report_pids(&o0), "node 0");
    assert_nothing_left(&report_pids(&o1), "node 1");

    // Node 1's launcher itself SIGKILLed while node 0's ranks wait for its ranks.
    let port = port_pair();
    let t = Instant::now();
    let n0 = node(rel, 2, 0, port, &[]).output_in_thread();
    let mut n1 = node(rel, 2, 1, port, &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("node 1 starts");
    let ranks1 = wait_for_ranks(n1.id(), 2);
    assert_eq!(ranks1.len(), 2, "node 1's ranks started");
    std::thread::sleep(Duration::from_millis(1_800));
    // SAFETY: kill(2) on the launcher this test started.
    unsafe { libc::kill(n1.id() as i32, libc::SIGKILL) };
    let _ = n1.wait();
    let o = n0.join().expect("joins").expect("runs");
    let ms = t.elapsed().as_millis();
    let out = text(&o);
    println!("node 1's launcher SIGKILLed: node 0 reported after {ms} ms");
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(ms < 20_000, "took {ms} ms");
    assert!(
        out.contains("node 1 (job scen-") && out.contains("was lost"),
        "node 0 names the lost node:\n{out}"
    );
    assert!(out.contains("ranks [2, 3] counted as failed"), "{out}");
    assert_nothing_left(&report_pids(&out), "node 0");
    assert_nothing_left(&ranks1, "node 1 (launcher SIGKILLed)");
}

/// Two launchers playing torchrun's agents (`--launcher torchrun`): node 0's hosts the store in
/// PyTorch's protocol, node 1's ranks use it; rank 2 SIGKILLed on node 1 makes node 1's agent
/// stop rank 3, and node 0's, hearing of it over the launchers' link, stop ranks 0 and 1, all with
/// the agent's reason, long before any timeout; nothing is left.
#[test]
fn launchers_playing_torchruns_agents_stop_every_node_after_a_failure() {
    let rel = "tests/hw/multinode_kill_2x2.toml";
    if !hw_here(rel) {
        return;
    }
    let t = Instant::now();
    let outs = run_nodes(rel, 2, |n| {
        if n == 1 {
            vec!["--launcher", "torchrun", "--kill-rank", "2:4"]
        } else {
            vec!["--launcher", "torchrun"]
        }
    });
    let ms = t.elapsed().as_millis();
    println!("torchrun agents, --kill-rank on node 1: {ms} ms");
    let (o0, o1) = (text(&outs[0]), text(&outs[1]));
    assert!(o0.contains("(hw mode, launcher torchrun,"), "{o0}");
    assert!(
        o0.contains("torchrun's agent (this launcher): TCPStore listening on 127.0.0.1:"),
        "{o0}"
    );
    assert!(
        !o1.contains("TCPStore listening"),
        "node 1 hosts no store:\n{o1}"
    );
    let stopped = "SIGTERM: torchrun stopped the worker group after rank 2 failed (signal 15)";
    // Rank 0 may still sleep (step 3) when it is stopped, rank 1 waits in step 4.
    assert!(
        o0.contains("outcome: 0 completed, 2 failed, 0 hung") && o0.contains(stopped),
        "node 0's agent stops ranks 0 and 1:\n{o0}"
    );
    assert!(
        o1.contains("SIGKILL: process killed by the launcher (--kill-rank 2:4)")
            && o1.contains(stopped),
        "{o1}"
    );
    assert!(
        !o0.contains(" hangs") && !o1.contains(" hangs"),
        "{o0}\n{o1}"
    );
    assert!(ms < 10_000, "took {ms} ms");
    assert_nothing_left(&report_pids(&o0), "node 0");
    assert_nothing_left(&report_pids(&o1), "node 1");
}

/// srun and mpirun start every rank as its own process with their variables: each runs
/// `scen run --hw` for its rank; rank 0 hosts the store and the job token comes from the job's
/// id (SLURM_JOB_ID + SLURM_STEP_ID, OMPI_MCA_ess_base_jobid).
#[test]
fn srun_and_mpirun_processes_make_one_job() {
    let _jobs = super::oneccl_jobs(false);
    let rel = "tests/hw/five_ops_xccl_2x2.toml";
    if !hw_here(rel) {
        return;
    }
    // srun sets no MASTER_ADDR/MASTER_PORT: the first node of the list, 15000 + the job id's
    // last 4 digits.
    let job = loop {
        let j = 40_000 + port_pair() as u32 % 10_000;
        if std::net::TcpListener::bind(("127.0.0.1", 15_000 + (j % 10_000) as u16)).is_ok() {
            break j;
        }
    };
    let slurm = move |r: usize| -> Vec<(&'static str, String)> {
        vec![
            ("SLURM_PROCID", r.to_string()),
            ("SLURM_NTASKS", "4".into()),
            ("SLURM_LOCALID", (r % 2).to_string()),
            ("SLURM_NODEID", (r / 2).to_string()),
            ("SLURM_TASKS_PER_NODE", "2(x2)".into()),
            ("SLURM_JOB_ID", job.to_string()),
            ("SLURM_STEP_ID", "0".into()),
            ("SLURM_JOB_NODELIST", "127.0.0.1".into()),
        ]
    };
    let port = port_pair();
    let ompi = move |r: usize| -> Vec<(&'static str, String)> {
        vec![
            ("OMPI_COMM_WORLD_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_SIZE", "2".into()),
            ("OMPI_COMM_WORLD_LOCAL_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2".into()),
            ("OMPI_MCA_ess_base_jobid", "1234567".into()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.to_string()),
        ]
    };
    let port2 = port_pair();
    let pmi = move |r: usize| -> Vec<(&'static str, String)> {
        vec![
            ("PMI_RANK", r.to_string()),
            ("PMI_SIZE", "2".into()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port2.to_string()),
        ]
    };
    type Env = Box<dyn Fn(usize) -> Vec<(&'static str, String)>>;
    let cases: [(&str, &str, usize, Env, &str); 3] = [
        (
            "srun",
            rel,
            4,
            Box::new(slurm),
            "job token derived from SLURM_JOB_ID+SLURM_STEP_ID",
        ),
        (
            "mpirun",
            "scenarios/five_ops_xccl_w2.toml",
            2,
            Box::new(ompi),
            "job token derived from OMPI_MCA_ess_base_jobid",
        ),
        (
            "mpirun",
            "scenarios/five_ops_xccl_w2.toml",
            2,
            Box::new(pmi),
            "no job token: mpirun gives no job id scen knows",
        ),
    ];
    for (launcher, file, n, env, token_note) in cases {
        let t = Instant::now();
        let kids: Vec<_> = (0..n)
            .map(|r| {
                let mut c = Command::new(env!("CARGO_BIN_EXE_scen"));
                c.args(["run", "--hw", file, "--max-wall-s", "60"])
                    .current_dir(env!("CARGO_MANIFEST_DIR"))
                    .env_remove(scen_hw::launcher::JOB_TOKEN_ENV)
                    .envs(env(r));
                for v in ["RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"] {
                    if !env(r).iter().any(|(k, _)| *k == v) {
                        c.env_remove(v);
                    }
                }
                c.output_in_thread()
            })
            .collect();
        for (r, k) in kids.into_iter().enumerate() {
            let o = k.join().expect("joins").expect("runs");
            let out = text(&o);
            assert!(o.status.success(), "{launcher} rank {r}:\n{out}");
            assert!(
                out.contains(&format!(
                    "started by {launcher}: this process ran rank {r} only"
                )),
                "{out}"
            );
            assert!(out.contains("expectations: 1/1 hold"), "{out}");
            assert!(out.contains(token_note), "{launcher} rank {r}:\n{out}");
            assert_nothing_left(&report_pids(&out), launcher);
        }
        println!(
            "{launcher} ({file}, {n} processes): {} ms",
            t.elapsed().as_millis()
        );
    }
}
