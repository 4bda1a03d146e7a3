#!/usr/bin/env bash
# Load test of the hw watchdog (issue 32): RUNS runs of a 2-rank xccl scenario of STEPS
# all_reduces of MIB MiB each (values checked, `expect` completes) while busy-loop processes
# load every core (LOAD_PER_CORE per core, twice the cores by default). The program always
# completes, so a rank reported `hangs` is a false hang verdict. Prints one line per run and
# the counts: false hangs, other failures, and the runs' wall times (min/median/max).
# tests/hw/load.rs runs a short version of it on every `cargo test`.
#
# usage: scripts/load-hang-test.sh [RUNS=50] [STEPS=50] [MIB=16]
# needs oneCCL (scripts/install-oneccl-cpu.sh); builds the release binary unless SCEN_BIN is
# set. Exit status: 0 when every run completed, 1 otherwise, 2 when it cannot run.
set -u
cd "$(dirname "$0")/.."
RUNS=${1:-50}
STEPS=${2:-50}
MIB=${3:-16}
LOAD_PER_CORE=${LOAD_PER_CORE:-2}
export ONECCL_ROOT=${ONECCL_ROOT:-$HOME/.cache/oneccl-cpu}
. scripts/oneccl-env.sh
if [ -z "${SCEN_BIN:-}" ]; then
  cargo build --quiet --release --bin scen || exit 2
  SCEN_BIN=target/release/scen
fi
"$SCEN_BIN" doctor | grep -q "^  found: .*libccl" || { echo "load-hang-test: oneCCL not found (scripts/install-oneccl-cpu.sh)"; exit 2; }
command -v jq >/dev/null || { echo "load-hang-test: needs jq"; exit 2; }

WORK=$(mktemp -d)
LOAD=()
cleanup() {
  for p in "${LOAD[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

FILE=$WORK/all_reduces_under_load.toml
NUMEL=$(( MIB * 1024 * 1024 / 4 ))
{
  printf '[scenario]\ndescription = "%s x %s MiB all_reduces under load: every one completes with correct values"\n' "$STEPS" "$MIB"
  printf '[world]\nranks_per_node = 2\nplatform = "xpu"\n'
  printf '[[step]]\nop = "init_process_group"\nbackend = "xccl"\n'
  for i in $(seq 1 "$STEPS"); do
    printf '[[step]]\nid = "ar%s"\nop = "all_reduce"\nshape = [%s]\nfill = "rank + 1"\nexpect = "3"\n' "$i" "$NUMEL"
  done
  printf '[[expect]]\noutcome = "completes"\n'
} > "$FILE"
"$SCEN_BIN" check "$FILE" >/dev/null || { echo "load-hang-test: the generated scenario does not check"; exit 2; }

CORES=$(nproc)
for _ in $(seq 1 $(( CORES * LOAD_PER_CORE ))); do
  sh -c 'while :; do :; done' &
  LOAD+=($!)
done
echo "load-hang-test: $RUNS runs of $STEPS x $MIB MiB all_reduce on 2 ranks; ${#LOAD[@]} busy processes on $CORES cores; $SCEN_BIN"

false_hangs=0; other=0; times=()
for run in $(seq 1 "$RUNS"); do
  t0=$(date +%s%3N)
  "$SCEN_BIN" run --hw "$FILE" --format json --max-wall-s 600 > "$WORK/out.json" 2> "$WORK/err.txt"
  rc=$?
  ms=$(( $(date +%s%3N) - t0 ))
  times+=("$ms")
  hung=$(jq -r '[.ranks[] | select(.outcome == "hangs") | .rank] | map(tostring) | join(",")' "$WORK/out.json" 2>/dev/null)
  load=$(cut -d' ' -f1 /proc/loadavg)
  if [ -n "$hung" ]; then
    false_hangs=$((false_hangs + 1))
    echo "run $run: FALSE HANG of rank(s) $hung (exit $rc, $ms ms, load $load)"
    jq -r '.notes[]' "$WORK/out.json" 2>/dev/null | sed 's/^/    /'
  elif [ "$rc" != 0 ]; then
    other=$((other + 1))
    echo "run $run: FAILED (exit $rc, $ms ms, load $load)"
    tail -5 "$WORK/err.txt" | sed 's/^/    /'
  else
    echo "run $run: completed ($ms ms, load $load)"
  fi
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
n=${#sorted[@]}
echo "load-hang-test: $RUNS runs: $false_hangs false hang verdict(s), $other other failure(s); wall ms min ${sorted[0]} median ${sorted[$((n / 2))]} max ${sorted[$((n - 1))]}"
[ "$false_hangs" = 0 ] && [ "$other" = 0 ]
