#!/usr/bin/env bash
# The bare-loop baseline for `scen bench --hw` and scenario steps (docs/bench.md, "Baseline"):
# builds scripts/baseline/oneccl_bench.c with gcc against oneCCL's C API on libccl.so.2 -- the
# API and library scen uses (crates/oneccl-sys) -- and runs it on N local ranks with its own
# launcher (this script; rank 0's unique id goes through a file). Prints a `scen bench --format
# json` report with path "baseline" on stdout, for `scen bench --compare`. No scen code or
# binary is involved: a bare loop of C calls on fixed buffers, the ceiling for scen's figures.
#
# usage: scripts/bench-baseline.sh [--ranks N] [--op all_reduce] [--sizes 1M,16M,64M]
#                                  [--dtype f32] [--redop sum] [--warmup 10] [--iters 100]
# Env: ONECCL_ROOT (default ~/.cache/oneccl-cpu); BASELINE_BIN_DIR (where the binary is built,
# default target/baseline); BASELINE_TIMEOUT (seconds for the whole run, default 600);
# BUILD_ONLY=1 builds and prints the binary's path. oneCCL's environment: as scen bench --hw
# sets it (CCL_ATL_SHM=0, CCL_YIELD=sched_yield, loopback ...), each value only where unset.
# Exit: 0 ok, 1 wrong values, 2 build failure or a rank failed / timed out (its log is printed).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export ONECCL_ROOT=${ONECCL_ROOT:-$HOME/.cache/oneccl-cpu}
src="$here/baseline/oneccl_bench.c"
bindir=${BASELINE_BIN_DIR:-$here/../target/baseline}
bin="$bindir/oneccl_bench_c"
lib="$ONECCL_ROOT/lib"
export ONECCL_ROOT

if [[ ! -f "$lib/libccl.so.2" ]]; then
  echo "bench-baseline: no oneCCL at $ONECCL_ROOT (run scripts/install-oneccl-cpu.sh)" >&2
  exit 2
fi
command -v "${CC:-gcc}" >/dev/null || { echo "bench-baseline: no ${CC:-gcc}" >&2; exit 2; }
mkdir -p "$bindir"
if [[ ! -x "$bin" || "$src" -nt "$bin" || "$0" -nt "$bin" ]]; then
  # The prototypes are in the source (oneapi/ccl.h is C++ only); the program dlopens
  # $ONECCL_ROOT/lib/libccl.so.2 as scen does.
  if ! "${CC:-gcc}" -O2 -std=c11 -Wall -Wextra "$src" -o "$bin.tmp.$$" -ldl -lm >&2; then
    echo "bench-baseline: building $src failed" >&2
    exit 2
  fi
  mv "$bin.tmp.$$" "$bin"
fi
if [[ "${BUILD_ONLY:-0}" == 1 ]]; then
  echo "$bin"
  exit 0
fi

ranks=2
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks|--nproc-per-node) ranks=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done

# The oneCCL CPU defaults scen bench --hw gives its ranks (crates/hw/src/launcher.rs ONECCL_ENV).
export CCL_PLUGIN=${CCL_PLUGIN:-ONECCL_LEGACY_CPU} CCL_KVS_IFACE=${CCL_KVS_IFACE:-lo}
export FI_PROVIDER=${FI_PROVIDER:-tcp} FI_TCP_IFACE=${FI_TCP_IFACE:-lo}
export CCL_ATL_SHM=${CCL_ATL_SHM:-0} CCL_YIELD=${CCL_YIELD:-sched_yield}
export CCL_PROCESS_LAUNCHER=${CCL_PROCESS_LAUNCHER:-none} CCL_LOG_LEVEL=${CCL_LOG_LEVEL:-error}
export CCL_KVS_CONNECTION_TIMEOUT=${CCL_KVS_CONNECTION_TIMEOUT:-30} IPATH_NO_BACKTRACE=${IPATH_NO_BACKTRACE:-1}

dir=$(mktemp -d "${TMPDIR:-/tmp}/scen-baseline.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; rm -f /dev/shm/"$p":* 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 2' INT TERM
for ((r = 0; r < ranks; r++)); do
  CCL_LOCAL_RANK=$r CCL_LOCAL_SIZE=$ranks "$bin" --rank "$r" --ranks "$ranks" --kvs "$dir/kvs" --json "$dir/report.$r" \
    "${args[@]}" >"$dir/out.$r" 2>"$dir/err.$r" &
  pids+=($!)
done
deadline=$((SECONDS + ${BASELINE_TIMEOUT:-600}))
rc=0
left=$ranks
while ((left > 0)); do
  for i in "${!pids[@]}"; do
    p=${pids[$i]}
    [[ -z "$p" ]] && continue
    if ! kill -0 "$p" 2>/dev/null; then
      wait "$p"; c=$?
      pids[$i]=""
      left=$((left - 1))
      if ((c != 0)); then
        echo "bench-baseline: rank $i exited with $c: $(tail -n 4 "$dir/err.$i" "$dir/out.$i" | tr '\n' ' ')" >&2
        rc=2
      fi
    fi
  done
  if ((rc != 0)); then break; fi
  if ((SECONDS > deadline)); then
    echo "bench-baseline: ranks still running after ${BASELINE_TIMEOUT:-600} s; killed" >&2
    rc=2
    break
  fi
  ((left > 0)) && sleep 0.05
done
if ((rc == 0)); then
  cat "$dir/report.0"
  grep -q '"wrong": [1-9]' "$dir/report.0" && rc=1
fi
exit $rc
