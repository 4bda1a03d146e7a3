//! turmoil's loopback queue (scen's patch, vendor/turmoil/PATCHES.md) must not change a single
//! trace. Ranks of a node share a turmoil host, so most messages are loopback; upstream turmoil
//! delivers each through a spawned tokio task that sleeps one tick, the patch from a queue on
//! the host at the points tokio would have run those tasks. Every shipped scenario is run both
//! ways, at its own seed and at a perturbing seed (seeded yields and late wake-ups reorder a
//! node's tasks, which is where a different delivery order would show): the same trace hash.

use scen::suite;
use scen_core::scenario::load_file;
use std::path::Path;

#[test]
fn the_loopback_queue_keeps_every_trace() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = suite::discover(&[root.join("scenarios")], None).expect("scenarios/ exists");
    assert!(files.len() > 100, "only {} scenarios found", files.len());
    let mut runs = 0;
    for file in &files {
        let name = file.file_stem().unwrap().to_string_lossy().to_string();
        let mut s = load_file(file).unwrap_or_else(|e| panic!("{name}: {e}"));
        let own_seed = s.sim.seed;
        for seed in [own_seed, own_seed.wrapping_add(7)] {
            s.sim.seed = seed;
            s.sim.loopback_queue = true;
            let queued = scen_sim::simulate(&s, None).unwrap_or_else(|e| panic!("{name}: {e}"));
            s.sim.loopback_queue = false;
            let tasks = scen_sim::simulate(&s, None).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                queued.trace_hash, tasks.trace_hash,
                "{name} at seed {seed}: the loopback queue changed the trace"
            );
            runs += 1;
        }
    }
    println!("{runs} runs, each the same trace with and without the loopback queue");
}
