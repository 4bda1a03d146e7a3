//! The watchdog under CPU load (issue 32): a 2-rank run of many large all_reduces, on a host
//! this test loads itself (busy processes on every core, twice over), must complete every time.
//! Before the watchdog decided from evidence, a rank still returning from a call its peer had
//! completed looked hung after its silence (1 in 48 such runs at 1 s of silence; the short
//! silence here makes that likely). `scripts/load-hang-test.sh` runs the long version (50 × 16
//! MiB, ≥ 50 runs) and counts the false hang verdicts.

use super::*;
use scen_core::scenario::parse;
use std::process::{Child, Command, Stdio};

/// Busy-loop processes, `per_core` per core, killed and reaped on drop (also on a panic).
pub struct Load(Vec<Child>);

impl Load {
    pub fn start(per_core: usize) -> Load {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let mut procs = Vec::new();
        for _ in 0..cores * per_core {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "while :; do :; done"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            // Gone with this test process even if it is killed.
            scen_procs::group::die_with_parent(&mut cmd);
            match cmd.spawn() {
                Ok(c) => procs.push(c),
                Err(e) => println!("load: cannot start a busy process: {e}"),
            }
        }
        Load(procs)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A 2-rank xccl scenario of `steps` all_reduces of `numel` f32 each, values checked.
pub fn all_reduces(steps: usize, numel: usize) -> String {
    let mut s = String::from(
        "[scenario]\ndescription = \"all_reduces under load: every one completes with correct values\"\n\
         [world]\nranks_per_node = 2\nplatform = \"xpu\"\n\
         [[step]]\nop = \"init_process_group\"\nbackend = \"xccl\"\n",
    );
    for i in 0..steps {
        s.push_str(&format!(
            "[[step]]\nid = \"ar{}\"\nop = \"all_reduce\"\nshape = [{numel}]\nfill = \"rank + 1\"\nexpect = \"3\"\n",
            i + 1
        ));
    }
    s.push_str("[[expect]]\noutcome = \"completes\"\n");
    s
}

/// Ranks the report calls hung.
fn hung(r: &scen_core::report::Report) -> Vec<usize> {
    (0..r.ranks.len())
        .filter(|i| matches!(r.ranks[*i], RankVerdict::Hung { .. }))
        .collect()
}

#[test]
fn large_all_reduces_under_load_complete_without_a_false_hang() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("all_reduces_under_load.toml");
    // 4 MiB each: large enough that a return takes a while on a loaded host, small enough for
    // CI (a debug build checks the values).
    let text = all_reduces(12, 1 << 20);
    std::fs::write(&file, &text).expect("writes the scenario");
    let s = parse(&text, &file.display().to_string(), "under_load").expect("parses");
    let o = HwOptions {
        // No silence at all: only evidence may decide (the old rule, silence plus "waits in
        // another call", called a hang in the second run this way).
        quiet_ms: 0,
        ..options()
    };
    let _jobs = oneccl_jobs(false);
    let load = Load::start(2);
    println!("load: {} busy processes", load.len());
    let t = Instant::now();
    for run in 1..=3 {
        let r = match scen_hw::run(&s, &file, &o) {
            Ok(r) => r,
            Err(HwError::Unavailable(why)) => {
                assert!(
                    std::env::var("SCEN_HW_REQUIRED").as_deref() != Ok("1"),
                    "SCEN_HW_REQUIRED=1 but {why}"
                );
                println!("skip: the watchdog under load: {why}");
                return;
            }
            Err(e) => panic!("run {run}: {e}"),
        };
        println!(
            "run {run}: {} ms, {} s so far",
            r.end_ms,
            t.elapsed().as_secs()
        );
        assert_eq!(
            hung(&r),
            Vec::<usize>::new(),
            "run {run}: a false hang under load; stall: {:?}\nnotes:\n  {}",
            r.final_stall,
            r.notes.join("\n  ")
        );
        assert!(
            r.expectations_hold(),
            "run {run}: {:?}\nnotes:\n  {}",
            r.expectations,
            r.notes.join("\n  ")
        );
        assert_cleaned_up(&r);
    }
}
