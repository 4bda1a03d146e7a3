#!/usr/bin/env bash
# scen's communication benchmark, in one run (issue 10's targets; docs/bench.md):
#  1. hw busbw of scen's oneCCL loop as % of a bare oneCCL loop, interleaved in the same
#     processes (--raw), all_reduce at 1, 16, 64 MiB on 2 and 4 ranks;
#  2. the timing model's error after calibration, all_reduce / all_gather / all_to_all at
#     64 KiB-64 MiB on 2 and 4 ranks: in-sample (the calibration sweep, from 8 KiB) and
#     out-of-sample (a fresh measurement predicted with the written model);
#  3. the simulator's wall time per predicted collective (Wan Ulysses pattern at 64 ranks and a
#     full op sweep).
# Every hw number is the median of REPEAT sweeps run in the same processes; the machine's load
# is printed before each part (a shared 2-core machine: read the load next to the numbers).
# Needs oneCCL (scripts/install-oneccl-cpu.sh). Env: SCEN (binary; default: release build),
# ITERS (default 10), WARMUP (default 3), REPEAT (default 3), RANKS (default "2 4"),
# NICE (default 0: the ranks compete with other jobs at normal priority).
set -euo pipefail
cd "$(dirname "$0")/.."
export ONECCL_ROOT=${ONECCL_ROOT:-$HOME/.cache/oneccl-cpu}
if [[ -z "${SCEN:-}" ]]; then
  cargo build --release --quiet
  SCEN=target/release/scen
fi
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-3}
REPEAT=${REPEAT:-3}
RANKS=${RANKS:-"2 4"}
NICE=${NICE:-0}
hw=(nice -n "$NICE" "$SCEN" bench --hw --warmup "$WARMUP" --iters "$ITERS" --repeat "$REPEAT")
load() { echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"; }
t0=$(date +%s)
echo "# scripts/bench.sh on $(hostname) at $(date -u +%FT%TZ); $(nproc) cores"
echo "# scen: $SCEN; oneCCL: $ONECCL_ROOT; warmup $WARMUP, iters $ITERS, median of $REPEAT sweeps"

echo
echo "## 1. scen's hw loop vs the raw oneCCL loop (busbw, same processes, interleaved)"
for n in $RANKS; do
  load
  "${hw[@]}" --raw --op all_reduce --sizes 1M,16M,64M --ranks "$n"
done

echo
echo "## 2. timing model error after calibration (64 KiB - 64 MiB)"
# The calibration sweep starts at 8 KiB so that oneCCL's direct all_gather (<= 32 KiB per rank)
# has 3 sizes or more of its own on 4 ranks; the error that counts is the 64 KiB - 64 MiB rows.
model_dir=$(mktemp -d)
trap 'rm -rf "$model_dir"' EXIT
model="$model_dir/model.toml"
for n in $RANKS; do
  load
  echo "# calibration sweep, $n ranks (in-sample error: err%)"
  base=()
  [[ -f "$model" ]] && base=(--model "$model")
  "${hw[@]}" --calibrate --op all_reduce,all_gather,all_to_all --sizes 8K:64M:2 \
    --ranks "$n" "${base[@]}" --model-out "$model"
done
echo "# fitted model (both rank counts):"
sed 's/^/#   /' "$model"
for n in $RANKS; do
  load
  echo "# fresh measurement, $n ranks, predicted with the model above (out-of-sample error: err%)"
  "${hw[@]}" --sim --model "$model" --op all_reduce,all_gather,all_to_all --sizes 64K:64M:4 \
    --ranks "$n" | grep -v '^# prediction'
done

echo
echo "## 3. simulator wall time per predicted collective"
start=$(date +%s%N)
"$SCEN" bench --pattern wan-ulysses --ulysses 64 --heads 64 --seq 4096 --head-dim 64
end=$(date +%s%N)
echo "# scen bench --pattern wan-ulysses --ulysses 64: $(( (end - start) / 1000000 )) ms of wall time for the whole command (target < 1 s)"
"$SCEN" bench --op all --sizes 4K:64M --ranks 64 | grep '^# prediction'
echo
echo "# scripts/bench.sh took $(( $(date +%s) - t0 )) s"
