#!/usr/bin/env bash
# scen's communication benchmark, in one run (issue 10's targets; docs/bench.md):
#  1. hw busbw of scen's oneCCL loop as % of a bare oneCCL loop, interleaved in the same
#     processes (--raw), all_reduce at 1, 16, 64 MiB on 2 and 4 ranks;
#  2. the timing model's error after calibration, all_reduce / all_gather / all_to_all at
#     64 KiB-64 MiB on 2 and 4 ranks;
#  3. the simulator's wall time per predicted collective (Wan Ulysses pattern at 64 ranks and a
#     full op sweep).
# Needs oneCCL (scripts/install-oneccl-cpu.sh). Env: SCEN (binary; default: release build),
# ITERS (default 20), WARMUP (default 5), RANKS (default "2 4").
set -euo pipefail
cd "$(dirname "$0")/.."
export ONECCL_ROOT=${ONECCL_ROOT:-$HOME/.cache/oneccl-cpu}
if [[ -z "${SCEN:-}" ]]; then
  cargo build --release --quiet
  SCEN=target/release/scen
fi
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
RANKS=${RANKS:-"2 4"}
echo "# scripts/bench.sh on $(hostname) at $(date -u +%FT%TZ); $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# scen: $SCEN; oneCCL: $ONECCL_ROOT; warmup $WARMUP, iters $ITERS"

echo
echo "## 1. scen's hw loop vs the raw oneCCL loop (busbw, same processes, interleaved)"
for n in $RANKS; do
  "$SCEN" bench --hw --raw --op all_reduce --sizes 1M,16M,64M --ranks "$n" \
    --warmup "$WARMUP" --iters "$ITERS"
done

echo
echo "## 2. timing model error after calibration (64 KiB - 64 MiB)"
model_dir=$(mktemp -d)
trap 'rm -rf "$model_dir"' EXIT
for n in $RANKS; do
  "$SCEN" bench --hw --calibrate --op all_reduce,all_gather,all_to_all --sizes 64K:64M:4 \
    --ranks "$n" --warmup "$WARMUP" --iters "$ITERS" -o "$model_dir/model-$n.toml"
  echo "# fitted model ($n ranks):"
  sed 's/^/#   /' "$model_dir/model-$n.toml"
done

echo
echo "## 3. simulator wall time per predicted collective"
start=$(date +%s%N)
"$SCEN" bench --pattern wan-ulysses --ulysses 64 --heads 64 --seq 4096 --head-dim 64
end=$(date +%s%N)
echo "# scen bench --pattern wan-ulysses --ulysses 64: $(( (end - start) / 1000000 )) ms of wall time for the whole command (target < 1 s)"
"$SCEN" bench --op all --sizes 4K:64M --ranks 64 | grep '^# prediction'
