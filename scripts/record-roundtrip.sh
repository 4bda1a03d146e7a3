#!/usr/bin/env bash
# The `scen record` round trip over every shipped scenario (tests/torch/record.rs): each
# torch-eligible scenario whose run completes is exported, run for real under `scen record`
# and the recording simulated; outcomes and call records must match the original's. `cargo
# test --test torch` runs a fixed subset; this runs them all (about 75 s on 2 cores) and
# prints the count and every scenario left out with the reason. Needs torch
# (scripts/install-torch-cpu.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
SCEN_RECORD_ALL=1 SCEN_TORCH_REQUIRED=1 cargo test --test torch -- record
