#!/usr/bin/env bash
# The real-PyTorch runs behind scen's file:// (FileStore) rendezvous model (c10d/store/file.rs;
# docs/rules/c10d.md#r15 and the gloo_file_* scenarios). Each case starts its ranks as plain
# processes (`RANK=r python filestore.py CASE PATH N &`), each printing "rank R <t>s OK ..." or
# "rank R <t>s EXC <type>: <message>" with its time since start and whether the store file
# exists then; the line after each case gives the wall time and whether the file is left.
# Needs a CPU PyTorch (gloo); PY defaults to the project's torch venv. TIMEOUT_S (default 3)
# is the init timeout; INIT_URL=tcp://127.0.0.1:PORT runs a case over a TCPStore for contrast.
# Usage: scripts/torch-checks/filestore.sh [CASE...]   (all cases: ~2 minutes on 2 cores)
set -u
cd "$(dirname "$0")"
PY=${PY:-$HOME/.cache/scen-torch/venv/bin/python}
D=$(mktemp -d /tmp/scen-filestore-XXXXXX)
trap 'rm -rf "$D"' EXIT

run() { # CASE N
  local c=$1 n=$2 start
  rm -f "$D/$c" "$D/$c.2"
  echo "-- $c (world $n${INIT_URL:+, $INIT_URL}, timeout ${TIMEOUT_S:-3} s)"
  start=$(date +%s.%N)
  for r in $(seq 0 $((n - 1))); do
    RANK=$r timeout 60 "$PY" filestore.py "$c" "$D/$c" "$n" 2>&1 | grep -E "^rank" &
  done
  wait
  echo "   wall $(echo "$(date +%s.%N) - $start" | bc | cut -c1-4) s; file after: $(ls "$D/$c" 2>/dev/null || echo absent)"
}

# f: a run killed (-9) mid-way leaves its file; a run on the same path then reads its keys.
stale() {
  rm -f "$D/stale"
  echo "-- stale (a run killed -9 after its all_reduce, then case ok on the same path)"
  local pids=""
  for r in 0 1; do
    RANK=$r "$PY" filestore.py hang "$D/stale" 2 >"$D/hang$r.out" 2>&1 &
    pids="$pids $!"
  done
  sleep 6
  kill -9 $pids  # the two ranks this function started, by their ids
  wait
  grep -h -E "^rank" "$D"/hang*.out
  for r in 0 1; do RANK=$r timeout 60 "$PY" filestore.py ok "$D/stale" 2 2>&1 | grep -E "^rank" & done
  wait
  echo "   file after: $(ls "$D/stale" 2>/dev/null || echo absent)"
}

cases=${*:-ok ok_nodestroy absent absent0 exit0 exit0_newgroup late late5 reinit reinit_fresh ws1 ws rank_oob no_rank relative query stale tcp_exit0_newgroup timeouts}
for c in $cases; do
  case $c in
    stale) stale ;;
    tcp_exit0_newgroup) INIT_URL=tcp://127.0.0.1:29677 run exit0_newgroup 3 ;;
    timeouts) TIMEOUT_S=5 run absent 3; TIMEOUT_S=2.5 run absent 2 ;;
    no_rank | relative | query) run "$c" 2 ;;
    *) run "$c" 3 ;;
  esac
done
