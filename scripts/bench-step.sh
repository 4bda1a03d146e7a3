#!/usr/bin/env bash
# A scenario step against the bare loop (issue 32; docs/bench.md "Scenario steps"): busbw of a
# 16 MiB all_reduce step of `scen run --hw` (values filled per element and checked by `expect`)
# and of `scen bench --hw`'s loop, each as % of the bare C-API loop (scripts/bench-baseline.sh:
# oneCCL's C API on libccl.so.2, its own processes), at 2 and 4 ranks. The three run in turn,
# REPEAT times, the order rotated each repeat (a shared machine's load hits all alike); each
# repeat prints its ratios side by side, then the median and the min-max band per rank count.
#
# step_us: a step's time in steady state, from rank 0's trace: (done of the last step - done of
#   the first) / (STEPS - 1); the first step, which creates the communicator and computes the
#   fill and the expected values once, is left out as the loops leave out their warmup.
# all_us: the same from the communicator's creation to the last step: the first step included.
# inside: rank 0's time inside oneCCL's calls over its process's time (the report's device_time).
# gap_us: rank 0's time outside the collective calls per step in steady state (from one call's
#   end to the next one's start in the report's call records: fill, check, digest, trace, IPC),
#   within one run, so free of the noise between runs that the ratios carry.
#
# Env: SCEN (binary; default: release build), STEPS (default 50), REPEAT (default 5),
# RANKS (default "2 4"), SIZE_ELEMS (f32 elements, default 4194304 = 16 MiB),
# FILL / EXPECT (default per element: "rank + i % 7" and its sum).
set -euo pipefail
cd "$(dirname "$0")/.."
export ONECCL_ROOT=${ONECCL_ROOT:-$HOME/.cache/oneccl-cpu}
. scripts/oneccl-env.sh
if [[ -z "${SCEN:-}" ]]; then
  cargo build --release --quiet
  SCEN=target/release/scen
fi
STEPS=${STEPS:-50}
REPEAT=${REPEAT:-5}
RANKS=${RANKS:-"2 4"}
ELEMS=${SIZE_ELEMS:-4194304}
FILL=${FILL:-"rank + i % 7"}
EXPECT=${EXPECT:-"world_size * (world_size - 1) / 2 + world_size * (i % 7)"}
BYTES=$((ELEMS * 4))
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bash scripts/bench-baseline.sh --ranks 2 --op all_reduce --sizes 4K --iters 1 --warmup 0 >/dev/null

scenario() { # ranks
  {
    printf '[scenario]\ndescription = "%s x %s-byte all_reduce, values checked"\n' "$STEPS" "$BYTES"
    printf '[world]\nnodes = 1\nranks_per_node = %s\nplatform = "xpu"\n' "$1"
    printf '[[step]]\nop = "init_process_group"\nbackend = "xccl"\n'
    for ((i = 0; i < STEPS; i++)); do
      printf '[[step]]\nop = "all_reduce"\nshape = [%s]\nfill = "%s"\nexpect = "%s"\n' "$ELEMS" "$FILL" "$EXPECT"
    done
    printf '[[expect]]\noutcome = "completes"\n'
  } >"$dir/step$1.toml"
}

step() { # ranks -> "step_us all_us inside%"
  "$SCEN" run --hw "$dir/step$1.toml" --format json >"$dir/r.json" || { echo "scen run failed" >&2; exit 1; }
  python3 - "$dir/r.json" "$STEPS" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); steps = int(sys.argv[2])
assert r["passed"], "expectations failed"
ev = [e for e in r["trace"] if e["rank"] == 0]
done = [e["t_ms"] for e in ev if e["kind"] == "done" and "values as expected" in e["text"]]
assert len(done) == steps, f"{len(done)} checked steps, want {steps}"
ready = [e["t_ms"] for e in ev if "device communicator ready" in e["text"]][0]
step_us = (done[-1] - done[0]) * 1000 / (steps - 1)
all_us = (done[-1] - ready) * 1000 / steps
calls = sorted((c for c in r["calls"] if c["rank"] == 0), key=lambda c: c["seq"])[1:]
gaps = [b["t_start_ms"] - a["t_end_ms"] for a, b in zip(calls, calls[1:])]
gap_us = 1000 * sum(gaps) / len(gaps)
d = [x for x in r.get("device_time", []) if x["rank"] == 0][0]
print(f"{step_us:.0f} {all_us:.0f} {gap_us:.0f} {d['inside_us']} {d['of_us']}")
EOF
}

bare() { # ranks -> us per call
  bash scripts/bench-baseline.sh --ranks "$1" --op all_reduce --sizes "$BYTES" --warmup 1 --iters $((STEPS - 1)) \
    | python3 -c 'import json,sys; r=json.load(sys.stdin)["rows"][0]; assert r["wrong"]==0; print(round(r["hw"]["time_us"]))'
}

bench() { # ranks -> us per call
  "$SCEN" bench --hw --op all_reduce --sizes "$BYTES" --ranks "$1" --warmup 1 --iters $((STEPS - 1)) --format json \
    | python3 -c 'import json,sys; r=json.load(sys.stdin)["rows"][0]; assert r["wrong"]==0; print(round(r["hw"]["time_us"]))'
}

load() { cut -d' ' -f1 /proc/loadavg; }
echo "# scripts/bench-step.sh at $(date -u +%FT%TZ) on $(nproc) cores; scen: $SCEN; $STEPS steps of $BYTES bytes (f32 all_reduce)"
echo "# fill \"$FILL\", expect \"$EXPECT\"; $REPEAT repeats, order rotated; ratios = busbw / bare busbw = bare_us / x_us"
printf '%5s %4s %6s %9s %9s %9s %9s %8s %8s %8s %7s %7s\n' ranks rep load bare_us step_us all_us bench_us step% all% bench% inside gap_us
for n in $RANKS; do
  scenario "$n"
  for ((k = 0; k < REPEAT; k++)); do
    l0=$(load)
    for who in $(case $((k % 3)) in 0) echo bare step bench ;; 1) echo step bench bare ;; 2) echo bench bare step ;; esac); do
      case $who in
        bare) b=$(bare "$n") ;;
        step) read -r s a g in of <<<"$(step "$n")" ;;
        bench) h=$(bench "$n") ;;
      esac
    done
    inside=$(python3 -c "print(f'{100*$in/max(1,$of):.0f}%')")
    echo "$n $k $l0 $b $s $a $h" | awk '{printf "%5d %4d %6s %9d %9d %9d %9d %7.1f%% %7.1f%% %7.1f%%", $1, $2, $3, $4, $5, $6, $7, 100*$4/$5, 100*$4/$6, 100*$4/$7}'
    echo " $(printf '%7s %7s' "$inside" "$g")"
    echo "$n $b $s $a $h $g" >>"$dir/all"
  done
done
echo "# per rank count: median [min-max] over repeats of each ratio"
python3 - "$dir/all" <<'EOF'
import sys, statistics as st
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
for n in sorted({r[0] for r in rows}):
    rs = [r for r in rows if r[0] == n]
    def band(i):
        v = [r[1] / r[i] * 100 for r in rs]
        return f"{st.median(v):5.1f}% [{min(v):.1f}-{max(v):.1f}]"
    gap = [r[5] for r in rs]
    print(f"# {int(n)} ranks: step {band(2)}  all steps {band(3)}  scen bench {band(4)}  "
          f"(bare {st.median(r[1] for r in rs)/1000:.1f} ms per call; outside oneCCL per "
          f"step {st.median(gap)/1000:.2f} ms [{min(gap)/1000:.2f}-{max(gap)/1000:.2f}]; medians)")
EOF
