#!/usr/bin/env bash
# Makes tests/fixtures/models/calibrated.toml: a timing model fitted by `scen bench --hw
# --calibrate` on real oneCCL (CPU) on this machine, 2 and 4 ranks, the ops the diffusion
# patterns use. tests/sim/keeps_its_word.rs checks that a scenario charged with it takes the
# time `scen bench --pattern --model` predicts (a model with per-op [[ops]] costs).
# Needs oneCCL (scripts/install-oneccl-cpu.sh; ONECCL_ROOT). Usage: scripts/make-model-fixture.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${ONECCL_ROOT:=$HOME/.cache/oneccl-cpu}"
export ONECCL_ROOT
. scripts/oneccl-env.sh
cargo build --release --quiet --bin scen
out=tests/fixtures/models/calibrated.toml
two=$(mktemp)
tmp=$(mktemp)
trap 'rm -f "$two" "$tmp"' EXIT
calibrate() {
  target/release/scen bench --hw --calibrate "$@" \
    --op all_reduce,all_gather,all_to_all,broadcast --sizes 8K:16M:2 --warmup 2 --iters 5 >/dev/null
}
# The second calibration starts from the first (--model): it replaces only its own rank
# count's entries, so both land in one file.
calibrate --ranks 2 --model-out "$two"
calibrate --ranks 4 --model "$two" --model-out "$tmp"
mv "$tmp" "$out"
rm -f "$two"
trap - EXIT
echo "wrote $out"
