#!/usr/bin/env bash
# Kill test of `scen run --hw` (issue 12): many trials of killing a random rank at a random
# moment, and of killing the launcher itself (SIGKILL and SIGTERM). Counts orphaned processes,
# leftover files (the trial's ranks' /dev/shm/<pid>:* files, /tmp/scen-hw-<launcher pid>-*)
# and runs not reported within the scenario's timeout + 5 s. Files are attributed by pid
# because other programs (other scen runs) may create and remove theirs meanwhile. tests/hw.rs runs a few trials of the same kind on every `cargo test`.
#
# usage: nice -n 10 scripts/kill-test.sh [RANK_TRIALS=50] [LAUNCHER_TRIALS=50]
#        KILL_TEST_LAUNCHER=torchrun scripts/kill-test.sh ...   # the launcher playing torchrun's
#        agent (its TCPStore, its stop of the others after a failure; docs/hw.md "Under torchrun")
# needs oneCCL (scripts/install-oneccl-cpu.sh); builds the debug binary unless SCEN_BIN is set.
# Exit status: 0 when every count is 0, 1 otherwise.
set -u
cd "$(dirname "$0")/.."
RANK_TRIALS=${1:-50}
LAUNCHER_TRIALS=${2:-50}
SCENARIO=tests/hw/kill_trials_w4.toml
LAUNCHER=${KILL_TEST_LAUNCHER:-processes}
TIMEOUT_S=10                     # the scenario's init_process_group timeout_s
LIMIT_MS=$(( (TIMEOUT_S + 5) * 1000 ))
export ONECCL_ROOT=${ONECCL_ROOT:-$HOME/.cache/oneccl-cpu}
. scripts/oneccl-env.sh
if [ -z "${SCEN_BIN:-}" ]; then
  cargo build --quiet || exit 2
  SCEN_BIN=target/debug/scen
fi
"$SCEN_BIN" doctor | grep -q "^  found: .*libccl" || { echo "kill-test: oneCCL not found (scripts/install-oneccl-cpu.sh)"; exit 2; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
now_ms() { date +%s%3N; }
rand_ms() { echo $(( 100 + RANDOM % $1 )); }
children() { # the rank processes and the cleanup guard of launcher $1
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$(awk '{print $4}' /proc/$p/stat 2>/dev/null)" = "$1" ] || continue
    tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q "__hw-r" && echo "$p"
  done
}
alive() { [ -r /proc/$1/stat ] && ! awk '{exit ($3 != "Z")}' /proc/$1/stat 2>/dev/null; }
shm_list() { ls /dev/shm 2>/dev/null | sort; }
tmp_list() { ls -d /tmp/scen-hw-"$1"-* 2>/dev/null | sort; }  # what a launcher of pid $1 left

orphans=0; leftovers=0; unreported=0; late=0; trials=0; max_ms=0
trial() { # $1 = rank | KILL | TERM
  local target=$1 shm=$2
  trials=$((trials + 1))
  shm_list > "$WORK/shm.before"
  local t0; t0=$(now_ms)
  CCL_ATL_SHM=$shm "$SCEN_BIN" run --hw "$SCENARIO" --launcher "$LAUNCHER" --max-wall-s 60 > "$WORK/out" 2>&1 &
  local l=$!
  local kids=""
  for _ in $(seq 100); do kids=$(children $l); [ "$(echo "$kids" | wc -w)" -ge 5 ] && break; sleep 0.05; done
  sleep "$(printf '0.%03d' "$(rand_ms 800)")"; [ $((RANDOM % 2)) = 0 ] && sleep 1
  local ranks; ranks=$(for p in $kids; do tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q __hw-rank && echo $p; done)
  case $target in
    rank) set -- $ranks; [ $# -gt 0 ] && kill -KILL "$(eval echo \${$((RANDOM % $# + 1))})" 2>/dev/null ;;
    *) kill -"$target" $l ;;
  esac
  { wait $l; } 2>/dev/null; local rc=$?
  local ms=$(( $(now_ms) - t0 ))
  [ $ms -gt $max_ms ] && max_ms=$ms
  if [ "$target" != KILL ]; then
    grep -q "^outcome:" "$WORK/out" || { unreported=$((unreported + 1)); echo "trial $trials ($target): no report (rc $rc)"; }
    [ $ms -le $LIMIT_MS ] || { late=$((late + 1)); echo "trial $trials ($target): reported after $ms ms"; }
  fi
  # Give the ranks' death signal and the cleanup guard up to 5 s.
  for _ in $(seq 100); do
    local any=0
    for p in $kids; do alive $p && any=1; done
    local ours=""
    for p in $kids; do ours="$ours$(comm -13 "$WORK/shm.before" <(shm_list) | grep "^$p:")"; done
    [ $any = 0 ] && [ -z "$ours" ] && break
    sleep 0.05
  done
  for p in $kids; do alive $p && { orphans=$((orphans + 1)); echo "trial $trials ($target): orphan $p"; kill -KILL $p; }; done
  # /dev/shm files of this trial's processes (oneCCL names them <pid>:...), and any scen-hw
  # temp dir. Other new /dev/shm files belong to other programs and are only shown.
  local new_shm left
  new_shm=$(comm -13 "$WORK/shm.before" <(shm_list))
  left=$( (for p in $kids; do echo "$new_shm" | grep "^$p:"; done; tmp_list $l) | grep -c .)
  [ "$left" -gt 0 ] && { leftovers=$((leftovers + left)); echo "trial $trials ($target): $left leftover file(s):" $new_shm $(tmp_list $l); }
  [ "$left" = 0 ] && [ -n "$new_shm" ] && echo "trial $trials ($target): not ours, left alone:" $new_shm
  # torchrun's agent's store (its port is in the report's note) must be closed.
  local port; port=$(grep -o "TCPStore listening on 127.0.0.1:[0-9]*" "$WORK/out" | head -1 | cut -d: -f2)
  if [ -n "$port" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    leftovers=$((leftovers + 1)); echo "trial $trials ($target): the agent's store port $port still listens"
  fi
}
for i in $(seq "$RANK_TRIALS"); do trial rank $((i % 2)); done
echo "random rank killed: $trials trials"
rank_trials=$trials
for i in $(seq "$LAUNCHER_TRIALS"); do
  if [ $((i % 2)) = 0 ]; then trial KILL $(( (i / 2) % 2 )); else trial TERM $(( (i / 2) % 2 )); fi
done
echo "launcher killed (SIGKILL and SIGTERM alternately): $((trials - rank_trials)) trials"
echo "launcher: $LAUNCHER"
echo "trials: $trials  orphans: $orphans  leftover files: $leftovers  unreported: $unreported  reported later than timeout+5s ($LIMIT_MS ms): $late  slowest run: $max_ms ms"
[ $((orphans + leftovers + unreported + late)) = 0 ]
