#!/usr/bin/env bash
# Does the calibrated model generalise (issue 31, "a model that generalises"; docs/bench.md)?
#  1. calibrate on a sweep (all_reduce / all_gather / all_to_all, CAL_SIZES, default 8K:64M:2):
#     the calibration's own held-out error (each size predicted by a fit without it) beside the
#     sweep's noise (the spread of its repeats);
#  2. SWEEPS fresh sweeps (default 2) at sizes the calibration did not see (FRESH_SIZES, default
#     12K:48M:2, i.e. 1.5x each calibrated size), predicted with the written model: each sweep's
#     median and max error beside its own noise;
#     and how far the fresh sweeps lie from each other (the same sizes measured minutes apart:
#     drift no model of one sweep can follow);
#  3. with OLD_SCEN=binary (an older scen, whose --calibrate wrote `max_bytes` ranges), a second
#     calibration by that binary right after the first, and the same fresh measurements
#     predicted by its model too (this scen reads the old file; joined with jq).
# Prints the figures side by side at the end. Every hw number is the median of REPEAT sweeps
# (default 5) in the same processes; the load average is printed before each part (a shared
# machine: read it next to the numbers). Needs oneCCL (scripts/install-oneccl-cpu.sh) and jq.
# Env: SCEN (default: a release build), RANKS ("2"), ITERS (30), WARMUP (3), REPEAT (5),
# NICE (10), CAL_SIZES, FRESH_SIZES, SWEEPS, OLD_SCEN, KEEP (a directory: keep the models and
# the fresh sweeps' JSON reports there).
set -euo pipefail
cd "$(dirname "$0")/.."
export ONECCL_ROOT=${ONECCL_ROOT:-$HOME/.cache/oneccl-cpu}
if [[ -z "${SCEN:-}" ]]; then
  cargo build --release --quiet
  SCEN=target/release/scen
fi
RANKS=${RANKS:-2}
ITERS=${ITERS:-30}
WARMUP=${WARMUP:-3}
REPEAT=${REPEAT:-5}
NICE=${NICE:-10}
CAL_SIZES=${CAL_SIZES:-8K:64M:2}
FRESH_SIZES=${FRESH_SIZES:-12K:48M:2}
SWEEPS=${SWEEPS:-2}
OPS=all_reduce,all_gather,all_to_all
hw=(nice -n "$NICE" "$SCEN" bench --hw --warmup "$WARMUP" --iters "$ITERS" --repeat "$REPEAT"
  --op "$OPS")
load() { cut -d' ' -f1-3 /proc/loadavg; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
summary=()
t0=$(date +%s)
echo "# scripts/bench-fit.sh on $(hostname) at $(date -u +%FT%TZ); $(nproc) cores"
echo "# scen: $SCEN; oneCCL: $ONECCL_ROOT; warmup $WARMUP, iters $ITERS, median of $REPEAT sweeps"

# The fresh report's rows predicted by another model: median and max |error| against its med_us.
old_errors() {
  local report=$1 n=$2
  "$SCEN" bench --model "$dir/old-$n.toml" --op "$OPS" --sizes "$FRESH_SIZES" --ranks "$n" \
    --format json >"$dir/old.json"
  jq -r -s '
    [.[0].rows, .[1].rows] | transpose
    | map((.[0].hw_median_us // .[0].hw.time_us) as $m | (.[1].sim.time_us - $m) / $m | fabs)
    | sort
    | "median \(.[(length / 2 | floor)] * 1000 | round / 10)%, max \(max * 1000 | round / 10)% over \(length) sizes"
  ' "$report" "$dir/old.json"
}

# Two reports of the same sizes: (max - min) / mean of each size's med_us, median and max.
between() {
  jq -r -s '
    [.[0].rows, .[1].rows] | transpose
    | map([.[] | (.hw_median_us // .hw.time_us)] | ((max - min) / add * 2))
    | sort
    | "median \(.[(length / 2 | floor)] * 1000 | round / 10)%, max \(max * 1000 | round / 10)% over \(length) sizes"
  ' "$1" "$2"
}

for n in $RANKS; do
  model="$dir/model-$n.toml"
  l=$(load)
  echo
  echo "## $n ranks: calibration, $CAL_SIZES (load average $l)"
  "${hw[@]}" --calibrate --sizes "$CAL_SIZES" --ranks "$n" --model-out "$model" | tee "$dir/cal.txt"
  line=$(grep '^# model error vs machine noise' "$dir/cal.txt" | sed 's/^# model error vs machine noise: //')
  summary+=("$n ranks, calibration $CAL_SIZES (load $l): $line")
  echo "# the model written:"
  sed 's/^/#   /' "$model"
  if [[ -n "${OLD_SCEN:-}" ]]; then
    echo "## $n ranks: calibration by $OLD_SCEN, $CAL_SIZES (load average $(load))"
    nice -n "$NICE" "$OLD_SCEN" bench --hw --warmup "$WARMUP" --iters "$ITERS" --repeat "$REPEAT" \
      --op "$OPS" --calibrate --sizes "$CAL_SIZES" --ranks "$n" --model-out "$dir/old-$n.toml" \
      | grep '^# per-op cost\|^# error after'
  fi
  for s in $(seq 1 "$SWEEPS"); do
    l=$(load)
    echo
    echo "## $n ranks: fresh sweep $s of $SWEEPS, $FRESH_SIZES, predicted with the model above (load average $l)"
    "${hw[@]}" --sim --model "$model" --sizes "$FRESH_SIZES" --ranks "$n" -o "$dir/fresh-$s.json" \
      | grep -v '^# prediction' | tee "$dir/fresh.txt"
    line=$(grep '^# model error vs machine noise' "$dir/fresh.txt" | sed 's/^# model error vs machine noise: //')
    summary+=("$n ranks, fresh sweep $s $FRESH_SIZES (load $l): $line")
    if [[ -n "${OLD_SCEN:-}" ]]; then
      summary+=("$n ranks, fresh sweep $s predicted by $OLD_SCEN's model instead: $(old_errors "$dir/fresh-$s.json" "$n")")
    fi
  done
  if (( SWEEPS >= 2 )); then
    summary+=("$n ranks, fresh sweeps 1 and 2 differ from each other by: $(between "$dir/fresh-1.json" "$dir/fresh-2.json")")
  fi
done

if [[ -n "${KEEP:-}" ]]; then
  mkdir -p "$KEEP" && cp "$dir"/*.toml "$dir"/fresh-*.json "$KEEP"/
fi
echo
echo "## summary: model error vs machine noise"
printf '# %s\n' "${summary[@]}"
echo "# scripts/bench-fit.sh took $(( $(date +%s) - t0 )) s"
