#!/bin/sh
# Issue 30's long run of the user-path oracle (tests/torch/userpath.rs), in chunks that survive
# a stop: about 12 s a program for both launchers on a 2-core machine, so 2,000 programs take
# about 7 h, longer than one sitting. Each chunk's log is kept in OUT; a rerun skips the chunks
# whose log is complete, and a chunk cut short (stop, kill, reboot) is run again whole. All
# chunks must come from one commit: OUT/commit holds it, and a different HEAD is refused (the
# figures would mix two versions of scen). At the end (and with `--sum` at any time) it adds up
# every finished chunk's `userpath: done` lines into the figures `cargo test` prints, and runs
# the generator dry over all programs for how often each row of docs/api-coverage.md is drawn.
#
# Usage: scripts/userpath-long.sh [--sum]
#   PROGRAMS (2000), SEED (7), CHUNK (20 programs), OUT (target/userpath-long),
#   PYTHON bin dir on PATH as for `cargo test --test torch` (SCEN_TORCH_REQUIRED=1 is set).
# Exit: 0 all chunks done, 1 a chunk's test run failed to finish (its log says why), 2 usage.
set -eu
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
mkdir -p "$OUT"
head=$(git rev-parse HEAD)
if [ -f "$OUT/commit" ] && [ "$(cat "$OUT/commit")" != "$head" ]; then
  echo "error: $OUT holds chunks of commit $(cat "$OUT/commit"), HEAD is $head; use another OUT" >&2
  exit 2
fi
echo "$head" > "$OUT/commit"
# A chunk's log is complete when it has both launchers' tally lines.
complete() { [ -f "$1" ] && [ "$(grep -c "^userpath (seed $SEED, " "$1")" = 2 ]; }
if [ "$SUM_ONLY" = 0 ]; then
  export SCEN_TORCH_REQUIRED=1 SCEN_USERPATH_SEED="$SEED"
  a=0
  while [ "$a" -lt "$PROGRAMS" ]; do
    b=$((a + CHUNK - 1)); [ "$b" -ge "$PROGRAMS" ] && b=$((PROGRAMS - 1))
    log="$OUT/chunk-$(printf %05d "$a")-$(printf %05d "$b").log"
    if ! complete "$log"; then
      start=$(date +%s)
      SCEN_USERPATH_ONLY=$(seq -s, "$a" "$b") cargo test -q --test torch -- userpath --nocapture \
        > "$log.part" 2>&1 || true
      mv "$log.part" "$log"
      complete "$log" || { echo "error: chunk $a-$b did not finish: $log" >&2; exit 1; }
      echo "chunk $a-$b: $(($(date +%s) - start)) s ($(date -u +%H:%M))"
    fi
    a=$((b + 1))
  done
fi
SCEN_USERPATH_DRY=1 SCEN_USERPATH_PROGRAMS="$PROGRAMS" SCEN_USERPATH_SEED="$SEED" \
  cargo test -q --test torch -- userpath --nocapture 2>/dev/null | grep '^userpath rows' > "$OUT/rows.txt" || true
echo "# long run: seed $SEED, commit $head, chunks in $OUT"
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
