//! Everything scen does without real processes of its own, in one test binary (one link of
//! the project instead of one per file, as turmoil and nextest group theirs): the CLI end to
//! end, the simulator's faults, schedules, scale and payloads, diagnoses, reports, logs, input
//! errors and the fuzzers' crash reproducers. Each file below is one concern; `cargo test NAME`
//! still runs the tests whose path (`file::test`) contains NAME, e.g. `cargo test
//! report_schema` or `cargo test --test sim diagnosis::`.
//!
//! The other integration binaries: `scenarios` (the shipped corpus against its snapshots),
//! `hw` (real processes: hardware mode and `scen bench --hw`) and `torch` (real PyTorch).

#[path = "sim/bad_input.rs"]
mod bad_input;
#[path = "sim/cli.rs"]
mod cli;
#[path = "sim/collectives_matrix.rs"]
mod collectives_matrix;
#[path = "sim/common.rs"]
mod common;
#[path = "sim/diagnosis.rs"]
mod diagnosis;
#[path = "sim/doc_refs.rs"]
mod doc_refs;
#[path = "sim/faults.rs"]
mod faults;
#[path = "sim/format_errors.rs"]
mod format_errors;
#[path = "sim/fr.rs"]
mod fr;
#[path = "sim/fuzz_crashes.rs"]
mod fuzz_crashes;
#[path = "sim/keeps_its_word.rs"]
mod keeps_its_word;
#[path = "sim/launcher.rs"]
mod launcher;
#[path = "sim/logging.rs"]
mod logging;
#[path = "sim/loopback_queue.rs"]
mod loopback_queue;
#[path = "sim/memory.rs"]
mod memory;
#[path = "sim/record.rs"]
mod record;
#[path = "sim/reliability.rs"]
mod reliability;
#[path = "sim/report_schema.rs"]
mod report_schema;
#[path = "sim/schedule.rs"]
mod schedule;
#[path = "sim/sglang_scenarios.rs"]
mod sglang_scenarios;
#[path = "sim/store_loops.rs"]
mod store_loops;
#[path = "sim/subgroup_bytes.rs"]
mod subgroup_bytes;
#[path = "sim/suite_cli.rs"]
mod suite_cli;
#[path = "sim/symbolic_payloads.rs"]
mod symbolic_payloads;
#[path = "sim/wheel.rs"]
mod wheel;
#[path = "sim/world_sizes.rs"]
mod world_sizes;
