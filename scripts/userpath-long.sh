#!/usr/bin/env bash
# Issue 30's long run of the user-path oracle (tests/torch/userpath.rs), in chunks that survive
# a stop: about 15 s a program for both launchers on a 2-core machine, so 2,000 programs take
# about 8 h, longer than one sitting. Each chunk's log is kept in OUT; a rerun skips the chunks
# whose log is complete, and a chunk cut short (stop, kill, reboot) is run again whole. All
# chunks must come from one build: OUT/build holds the git trees of what the run builds and
# runs (crates, src, python, tests/torch, Cargo.lock), and another is refused (the figures would
# mix two versions of scen); a commit that changed only docs or scripts runs on. JOBS workers
# take chunks in turn (a chunk is claimed by a lock directory naming its worker's pid; a dead
# worker's claim is dropped): a program's real runs sleep and wait for timeouts part of their
# time, so 2 workers on 2 cores do about 1.3 times the programs an hour (12 s a program), at
# the price of a loaded machine (gloo's timeouts fire tens of ms late, in any order: more
# programs whose real runs differ from one another). At the end (and with
# `--sum` at any time) it adds up every finished chunk's `userpath: done` lines into the figures
# `cargo test` prints, and runs the generator dry over all programs for how often each row of
# docs/api-coverage.md is drawn.
#
# Usage: scripts/userpath-long.sh [--sum]
#   PROGRAMS (2000), SEED (7), CHUNK (20 programs), JOBS (1), OUT (target/userpath-long),
#   PYTHON bin dir on PATH as for `cargo test --test torch` (SCEN_TORCH_REQUIRED=1 is set).
# Exit: 0 all chunks done, 1 a chunk's test run failed to finish (its log says why), 2 usage.
set -euo pipefail
PROGRAMS=${PROGRAMS:-2000}
SEED=${SEED:-7}
CHUNK=${CHUNK:-20}
OUT=${OUT:-target/userpath-long}
SUM_ONLY=0
case "${1:-}" in
  --sum) SUM_ONLY=1 ;;
  "") ;;
  *) echo "usage: $0 [--sum]" >&2; exit 2 ;;
esac
JOBS=${JOBS:-1}
mkdir -p "$OUT"
head=$(git rev-parse HEAD)
# The build a run's figures are of: the trees of what it compiles and runs.
build_of() { git rev-parse "$1:crates" "$1:src" "$1:python" "$1:tests/torch" "$1:Cargo.lock" | sha1sum | cut -c1-16; }
build=$(build_of HEAD)
[ -f "$OUT/build" ] || { [ -f "$OUT/commit" ] && build_of "$(cat "$OUT/commit")" > "$OUT/build"; } || true
if [ -f "$OUT/build" ] && [ "$(cat "$OUT/build")" != "$build" ]; then
  echo "error: $OUT holds chunks of build $(cat "$OUT/build") (commit $(cat "$OUT/commit" 2>/dev/null)), HEAD $head builds $build; use another OUT" >&2
  exit 2
fi
echo "$build" > "$OUT/build"
[ -f "$OUT/commit" ] || echo "$head" > "$OUT/commit"
# A chunk's log is complete when it has both launchers' tally lines.
complete() { [ -f "$1" ] && [ "$(grep -c "^userpath (seed $SEED, " "$1")" = 2 ]; }
# Claims a chunk for this worker: an atomic mkdir; a claim whose worker is gone is dropped.
claim() {
  if mkdir "$1.lock" 2>/dev/null; then echo "$2" > "$1.lock/pid"; return 0; fi
  owner=$(cat "$1.lock/pid" 2>/dev/null || echo 0)
  if [ "$owner" != 0 ] && ! kill -0 "$owner" 2>/dev/null; then
    rm -rf "$1.lock"
    mkdir "$1.lock" 2>/dev/null && { echo "$2" > "$1.lock/pid"; return 0; }
  fi
  return 1
}
worker() {
  a=0
  while [ "$a" -lt "$PROGRAMS" ]; do
    b=$((a + CHUNK - 1)); [ "$b" -ge "$PROGRAMS" ] && b=$((PROGRAMS - 1))
    log="$OUT/chunk-$(printf %05d "$a")-$(printf %05d "$b").log"
    if ! complete "$log" && claim "$log" "$1"; then
      start=$(date +%s)
      SCEN_USERPATH_ONLY=$(seq -s, "$a" "$b") cargo test -q --test torch -- userpath --nocapture \
        > "$log.part.$1" 2>&1 || true
      mv "$log.part.$1" "$log"
      rm -rf "$log.lock"
      complete "$log" || { echo "error: chunk $a-$b did not finish: $log" >&2; return 1; }
      echo "chunk $a-$b: $(($(date +%s) - start)) s ($(date -u +%H:%M), worker $1)"
    fi
    a=$((b + 1))
  done
}
if [ "$SUM_ONLY" = 0 ]; then
  export SCEN_TORCH_REQUIRED=1 SCEN_USERPATH_SEED="$SEED"
  cargo test -q --test torch --no-run 2>/dev/null || { echo "error: the torch tests do not build" >&2; exit 1; }
  pids=""
  j=0
  while [ "$j" -lt "$JOBS" ]; do
    ( worker "$BASHPID" ) &
    pids="$pids $!"
    j=$((j + 1))
  done
  rc=0
  for p in $pids; do wait "$p" || rc=1; done
  [ "$rc" = 0 ] || exit 1
fi
SCEN_USERPATH_DRY=1 SCEN_USERPATH_PROGRAMS="$PROGRAMS" SCEN_USERPATH_SEED="$SEED" \
  cargo test -q --test torch -- userpath --nocapture 2>/dev/null | grep '^userpath rows' > "$OUT/rows.txt" || true
echo "# long run: seed $SEED, build $build (chunks started at commit $(cat "$OUT/commit"); HEAD $head), chunks in $OUT"
cat "$OUT"/chunk-*.log | awk -v seed="$SEED" '
  /^userpath: done / {
    split($3, id, "/"); l = $4; sub(":", "", l)
    p[l]++; r[l] += num($0, "ranks "); o[l] += num($0, "outcome "); t[l] += num($0, "text ")
    fo[l] += num($0, "first-run outcome "); ft[l] += num($0, "first-run outcome [0-9]+, text ")
    v[l] += num($0, "varies ")
    if ($0 ~ /self holds/) { sh[l]++; st[l]++ } else if ($0 ~ /self FAILS/) { st[l]++ }
    if ($0 ~ /INTERNAL ERROR/) ie[l]++
    if ($0 ~ /, refused: /) ro[l]++
    if ($0 ~ /BAD REFUSAL/) rb[l]++
    if (num($0, "outcome ") < num($0, "ranks ") || num($0, "text ") < num($0, "ranks ")) d[l] = d[l] " " id[2]
  }
  function num(s, key,   m) { if (match(s, key "[0-9]+")) { m = substr(s, RSTART, RLENGTH); sub(/.* /, "", m); return m + 0 } return 0 }
  function pct(a, n) { return n ? sprintf("%.1f%%", 100 * a / n) : "-" }
  END {
    for (l in p) {
      printf "userpath long run (seed %s, %s): %d programs, %d ranks compared: outcome %s, exact text %s (first real run only: %s, %s; %d program(s) whose real runs differ from one another); recording simulates to its own recorded outcome: %d/%d; internal errors (exit 3): %d; refused: %d (naming call and line), %d not; differ:%s\n", \
        seed, l, p[l], r[l], pct(o[l], r[l]), pct(t[l], r[l]), pct(fo[l], r[l]), pct(ft[l], r[l]), v[l], sh[l], st[l], ie[l], ro[l], rb[l], d[l] ? d[l] : " none"
    }
  }' | sort
cat "$OUT/rows.txt"
