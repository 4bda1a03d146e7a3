//! scen's memory estimate (scenario/limits.rs `MemoryEstimate`) must bound what a run really
//! allocates, or `scen check` accepts runs that abort under the fuzzer's 4 GiB address-space
//! limit (issue 33: an uneven all_to_all_single at 4096 ranks). Generated worlds (a seeded
//! draw of nodes, ranks per node, groups and a collective's size) each run as a child
//! `scen run`, whose peak resident memory the kernel reports (`wait4`'s `ru_maxrss`, taken by a
//! small python3 parent): the estimate must be at least that peak.

use std::process::{Command, Stdio};

/// A small deterministic generator (xorshift64*), so a failure names a case that reproduces.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// One generated scenario: its world, some full-world gloo groups and one collective.
fn generate(rng: &mut Rng) -> String {
    let nodes = 1 + rng.below(25);
    let per_node = 1 + rng.below(16);
    let world = nodes * per_node;
    let mut s = format!(
        "[scenario]\ndescription = \"generated\"\n[world]\nnodes = {nodes}\nranks_per_node = {per_node}\nplatform = \"cpu\"\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n"
    );
    for g in 0..rng.below(3) {
        s.push_str(&format!(
            "[[step]]\nop = \"new_group\"\nbackend = \"gloo\"\nas = \"g{g}\"\n"
        ));
    }
    // Up to about 24 MiB of tensors over all ranks (a debug build moves them slowly).
    let per_rank_bytes = (24u64 << 20) / world / 8;
    let elems = (1 + rng.below(per_rank_bytes / 4 + 1)) * world;
    let op = ["all_reduce", "all_gather_into_tensor", "all_to_all_single"][rng.below(3) as usize];
    let elems = if op == "all_reduce" {
        elems
    } else {
        elems / world
    };
    s.push_str(&format!(
        "[[step]]\nop = \"{op}\"\nshape = [{}]\ndevice = \"cpu\"\n",
        elems.max(1) * if op == "all_to_all_single" { world } else { 1 }
    ));
    s
}

/// Forks and execs its arguments, waits, prints the child's `ru_maxrss` (KiB) and its exit code.
/// The run is started from this small process, not from the test binary: Linux keeps a
/// process's peak RSS across `exec`, so a child forked from the test process would report
/// that process's own peak (hundreds of MiB while other tests run) rather than scen's.
const MEASURE_PY: &str = r#"
import os, sys
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"#;

/// The run's exit code and peak resident set in bytes.
fn run_and_measure(file: &std::path::Path) -> (i32, u64) {
    let out = Command::new("python3")
        .args([
            "-c",
            MEASURE_PY,
            env!("CARGO_BIN_EXE_scen"),
            "run",
            "--format",
            "json",
        ])
        .arg(file)
        .stdin(Stdio::null())
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut it = text
        .split_whitespace()
        .map(|w| w.parse::<i64>().expect("a number"));
    let (kib, code) = (it.next().expect("maxrss"), it.next().expect("exit code"));
    (code as i32, kib as u64 * 1024)
}

#[test]
fn the_memory_estimate_bounds_the_peak_of_generated_worlds() {
    let dir = std::env::temp_dir().join(format!("scen-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let mut rng = Rng(0x5eed_0033);
    let mut below = Vec::new();
    let mut measured = 0;
    for case in 0..10 {
        let text = generate(&mut rng);
        let file = dir.join(format!("case{case}.toml"));
        std::fs::write(&file, &text).expect("write");
        // A draw over scen's per-rank tensor limit is refused when it loads: not a run.
        let Ok(s) = scen_core::scenario::load_file(&file) else {
            continue;
        };
        measured += 1;
        let est = s.sim.memory.total();
        let (code, peak) = run_and_measure(&file);
        assert!(matches!(code, 0 | 1), "case {case}: exit {code}\n{text}");
        eprintln!(
            "case {case}: {} ranks, estimate {} MiB, peak {} MiB",
            s.world.size(),
            est >> 20,
            peak >> 20
        );
        if est < peak {
            below.push(format!("case {case}: estimate {est} < peak {peak}\n{text}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(measured >= 6, "only {measured} generated worlds loaded");
    assert!(below.is_empty(), "{}", below.join("\n"));
}

#[test]
fn check_refuses_a_world_over_the_memory_budget() {
    // 4096 ranks in five world-sized gloo groups: the simulator's state alone is over budget.
    let dir = std::env::temp_dir().join(format!("scen-memory-refuse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let mut text = String::from("[world]\nnodes = 512\nranks_per_node = 8\nplatform = \"cpu\"\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n");
    for _ in 0..4 {
        text.push_str("[[step]]\nop = \"new_group\"\nbackend = \"gloo\"\n");
    }
    let file = dir.join("big.toml");
    std::fs::write(&file, &text).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_scen"))
        .arg("check")
        .arg(&file)
        .output()
        .expect("scen runs");
    let err = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("over scen's memory budget of 3.0 GiB"),
        "{err}"
    );
}
