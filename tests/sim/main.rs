//! Everything scen does without real processes of its own, in one test binary (one link of
//! the project instead of one per file, as turmoil and nextest group theirs): the CLI end to
//! end, the simulator's faults, schedules, scale and payloads, diagnoses, reports, logs, input
//! errors and the fuzzers' crash reproducers. Each file below is one concern; `cargo test NAME`
//! still runs the tests whose path (`file::test`) contains NAME, e.g. `cargo test
//! report_schema` or `cargo test --test sim diagnosis::`.
//!
//! The other integration binaries: `scenarios` (the shipped corpus against its snapshots),
//! `hw` (real processes: hardware mode and `scen bench --hw`) and `torch` (real PyTorch).

mod bad_input;
mod cli;
mod collectives_matrix;
mod common;
mod diagnosis;
mod doc_refs;
mod faults;
mod file_store;
mod fn_lengths;
mod format_errors;
mod fr;
mod fuzz_crashes;
mod hostile_strings;
mod keeps_its_word;
mod launcher;
mod logging;
mod loopback_queue;
mod memory;
mod own_store;
mod record;
mod reliability;
mod report_schema;
mod scale_hashes;
mod schedule;
mod sglang_scenarios;
mod sglang_symbolic;
mod split_shrink;
mod store_loops;
mod subgroup_bytes;
mod suite_cli;
mod symbolic_payloads;
mod wheel;
mod world_sizes;
