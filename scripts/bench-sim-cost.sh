#!/usr/bin/env bash
# What the simulator's cost follows (issue 25 item 5): two worlds whose cost once came from the
# simulator rather than from what the ranks do, run with two builds of scen side by side.
#   latency  sglang v2 start-up at 32 ranks (4 nodes x 8: tp2 x ulysses2 x ring2 x cfg2 x dp2,
#            as scenarios/sglang_golden_w16_tp2_u2_r2_cfg2.toml with dp 2, no denoise step) with
#            `[sim] latency_ms = [0, 100000]`: every message takes up to 100 s of virtual time,
#            which turmoil used to step through one 1 ms tick at a time (the TCPStore
#            waits time out at 30 min virtual: the ranks fail, the same way before and after);
#   nodes    4096 single-rank nodes (scen's limit) rendezvous on rank 0's TCPStore and run a
#            barrier (init_process_group xccl), under `ulimit -v` (LIMIT_KB, default 4194304):
#            turmoil used to allocate a link for every pair of hosts up front (~1.6 GB);
#   nodes1024 the same with 1024 nodes, which the build before runs too (traces compared).
# Each run is measured by /usr/bin/time -v (user + system CPU seconds, peak RSS); the trace
# line (events, hash) must be the same for both builds.
#
# Usage: scripts/bench-sim-cost.sh BEFORE_SCEN AFTER_SCEN
#        (e.g. a release build of the commit before and of this one; AFTER defaults to
#        target/release/scen, built if missing)
# Env:   CASES (default "latency nodes1024 nodes"), LIMIT_KB (default 4194304), TIMEOUT_S (default 600)
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=${1:?usage: $0 BEFORE_SCEN [AFTER_SCEN]}
AFTER=${2:-}
if [[ -z "$AFTER" ]]; then
  cargo build --release --quiet --bin scen
  AFTER=target/release/scen
fi
CASES=${CASES:-"latency nodes1024 nodes"}
LIMIT_KB=${LIMIT_KB:-4194304}
TIMEOUT_S=${TIMEOUT_S:-600}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/latency.toml" <<'TOML'
[scenario]
description = "bench-sim-cost: sglang v2 start-up, 32 ranks, latency 0..100 s"

[world]
ranks_per_node = 8
nodes = 4
platform = "xpu"

[sim]
latency_ms = [0, 100000]

[[step]]
op = "init_distributed_environment"
version = "v2"

[[step]]
op = "initialize_model_parallel"
tp = 2
ulysses = 2
ring = 2
cfg = 2
dp = 2

[[step]]
op = "barrier"
TOML

for n in 1024 4096; do
  f=$work/nodes$n.toml
  [[ $n == 4096 ]] && f=$work/nodes.toml
  cat > "$f" <<TOML
[scenario]
description = "bench-sim-cost: $n single-rank nodes, rendezvous + barrier"

[world]
ranks_per_node = 1
nodes = $n
platform = "xpu"

[[step]]
op = "init_process_group"
backend = "xccl"

[[step]]
op = "barrier"

[[expect]]
outcome = "completes"
TOML
done

# Runs one build on one case; prints "cpu_s peak_MiB events hash exit note".
measure() {
  local scen=$1 name=$2
  local out=$work/$name.$3
  local rc=0
  ( ulimit -v "$LIMIT_KB"; exec timeout "$TIMEOUT_S" /usr/bin/time -v "$scen" run "$work/$name.toml" ) \
    >"$out.out" 2>"$out.err" || rc=$?
  local user sys rss trace events hash note
  user=$(sed -n 's/^\s*User time (seconds): //p' "$out.err")
  sys=$(sed -n 's/^\s*System time (seconds): //p' "$out.err")
  rss=$(sed -n 's/^\s*Maximum resident set size (kbytes): //p' "$out.err")
  trace=$(grep -m1 '^trace: ' "$out.out" || true)
  events=$(sed -n 's/^trace: \([0-9]*\) events.*/\1/p' <<<"$trace")
  hash=$(sed -n 's/.*hash \([0-9a-f]*\).*/\1/p' <<<"$trace")
  note=$(grep -v '^\s' "$out.err" | grep -v 'Command being timed\|Command exited' | head -1 | cut -c1-60 || true)
  [[ $rc == 124 ]] && note="timeout ${TIMEOUT_S}s"
  printf '%s %s %s %s %s %s\n' "$(python3 -c "print(f'{${user:-0}+${sys:-0}:.2f}')")" \
    "$(( ${rss:-0} / 1024 ))" "${events:--}" "${hash:--}" "$rc" "${note:-}"
}

echo "# scripts/bench-sim-cost.sh on $(hostname) at $(date -u +%FT%TZ); $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# before: $BEFORE   after: $AFTER   ulimit -v ${LIMIT_KB} KiB"
printf '%-8s | %8s %9s %7s %-16s %4s | %8s %9s %7s %-16s %4s | %s\n' case \
  cpu_s peak_MiB events hash exit cpu_s peak_MiB events hash exit "same trace"
for c in $CASES; do
  read -r bc bm be bh bx bn < <(measure "$BEFORE" "$c" before)
  read -r ac am ae ah ax an < <(measure "$AFTER" "$c" after)
  same=no
  [[ "$be" == "$ae" && "$bh" == "$ah" && "$bh" != "-" ]] && same=yes
  printf '%-8s | %8s %9s %7s %-16s %4s | %8s %9s %7s %-16s %4s | %s\n' "$c" \
    "$bc" "$bm" "$be" "$bh" "$bx" "$ac" "$am" "$ae" "$ah" "$ax" "$same"
  [[ -n "${bn:-}" && "$bx" != 0 ]] && echo "#   before: $bn"
  [[ -n "${an:-}" && "$ax" != 0 ]] && echo "#   after: $an"
done
