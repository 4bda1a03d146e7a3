#!/usr/bin/env bash
# Reproduces the communicator-creation hang of oneCCL's KVS (docs/hw.md, "Watchdog"; the
# 1-rank hang seen once in CI): oneCCL binds its KVS server (and its control socket) to the
# lowest free port from 4096 on 127.0.0.1, so a port a killed job's rank 0 held is the next
# job's; the killed job's other ranks keep connecting to it until they are ended, and the KVS
# server thread of the job that now holds it dies on their request ("make_client_request:
# unknown request mode"): that job's ranks wait in communicator creation forever.
#
# Two runs of a 2-rank xccl job whose rank 1 joins the communicator 4 s late (so rank 0's KVS
# is up meanwhile): a control run, and one where a foreign client (bash's /dev/tcp, standing
# for the orphan) connects to rank 0's lowest listening port, the KVS server's, and sends a
# request that is not its own. It touches that port only, while rank 0 holds it.
#
# usage: scripts/kvs-foreign-client.sh      needs oneCCL; builds the debug binary unless
# SCEN_BIN is set. Exit status: 0 when the control completes and the foreign run hangs.
set -u
cd "$(dirname "$0")/.."
export ONECCL_ROOT=${ONECCL_ROOT:-$HOME/.cache/oneccl-cpu}
. scripts/oneccl-env.sh
if [ -z "${SCEN_BIN:-}" ]; then
  cargo build --quiet --bin scen || exit 2
  SCEN_BIN=target/debug/scen
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/late_join_w2.toml" <<'EOF'
[scenario]
description = "rank 1 joins the communicator 4 s after rank 0"
[world]
ranks_per_node = 2
platform = "xpu"
[[step]]
op = "init_process_group"
backend = "xccl"
[[step]]
op = "sleep"
on = "rank == 1"
ms = 4000
[[step]]
op = "all_reduce"
fill = "rank + 1"
expect = "3"
[[expect]]
outcome = "completes"
EOF

rank0_of() { # rank 0's pid among launcher $1's children
  for p in $(pgrep -P "$1"); do
    tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q __hw-rank || continue
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx RANK=0 && echo "$p"
  done
}

run() { # $1: control | foreign
  "$SCEN_BIN" run --hw "$WORK/late_join_w2.toml" --max-wall-s 20 > "$WORK/$1.out" 2>&1 &
  local launcher=$! port=""
  sleep 2.5
  local r0; r0=$(rank0_of "$launcher")
  if [ -n "$r0" ]; then
    port=$(ss -ltnp | grep "pid=$r0," | awk '{print $4}' | sed 's/.*://' | sort -n | head -1)
  fi
  echo "$1: rank 0 (pid ${r0:-?}) listens on KVS port ${port:-?}"
  if [ "$1" = foreign ] && [ -n "$port" ]; then
    exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'x%.0s' $(seq 4096) >&3 && sleep 1
    exec 3>&-
  fi
  wait "$launcher"
  local rc=$?
  echo "$1: exit $rc"
  grep -E "^  rank +[0-9]+: (completes|hangs)" "$WORK/$1.out" | cut -c1-160
  grep -o "CCL_ERROR| internal_kvs_server.cpp[^|]*" "$WORK/$1.out" | head -2
  return $rc
}

run control; control=$?
run foreign; foreign=$?
[ "$control" = 0 ] && [ "$foreign" != 0 ]
