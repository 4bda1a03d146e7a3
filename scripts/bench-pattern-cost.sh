#!/usr/bin/env bash
# What one denoise step of the models' communication costs the simulator (issue 31 item 2): for
# each pattern of `scen bench --pattern` at bench's default shapes (Wan 2.1 Ulysses 2 and 4, Flux
# TP2, CFG2; seq 4096, heads 16, head_dim 64, hidden 3072, text_len 512, 30 / 57 / 1 layers,
# DTYPE f32 as bench's default), it writes two scenarios with `[sim] payloads = "symbolic"`:
#   start   sglang v2 start-up on one node of the pattern's ranks (ulysses / tp / cfg), a warm-up
#           all_reduce on the pattern's group (its communicator is made lazily), a barrier;
#   step    the same with one denoise step of the pattern's collectives between warm-up and
#           barrier, as sglang issues them (tests/sim/keeps_its_word.rs writes the same steps);
# runs both with each build given and prints CPU seconds (user + system, getrusage of the child)
# of the step = step - start (at least 0: both runs are measured once), side by side, with the step's virtual time (end of step - end of
# start) and `scen bench --pattern`'s prediction of it under the same (default) model.
#
# Usage: scripts/bench-pattern-cost.sh [SCEN ...]   (default target/release/scen, built if
#        missing; e.g. a build of the commit before and of this one, side by side)
# Env:   PATTERNS (default "wan-ulysses:2 wan-ulysses:4 flux-tp:2 cfg:2"), DTYPE (f32),
#        SEQ (4096), TIMEOUT_S (per run, default 600), KEEP_DIR (keep the scenarios there)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -eq 0 ]]; then
  [[ -x target/release/scen ]] || cargo build --release --quiet --bin scen
  set -- target/release/scen
fi
if [[ -n "${KEEP_DIR:-}" ]]; then
  work=$KEEP_DIR
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
echo "# scripts/bench-pattern-cost.sh on $(hostname) at $(date -u +%FT%TZ); $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# worktree at $(git rev-parse --short HEAD 2>/dev/null || echo '?'); step cpu_s = cpu_s(start-up + step) - cpu_s(start-up), user + system"

python3 - "$work" "${TIMEOUT_S:-600}" "$@" <<'PY'
import os, re, subprocess, sys, time

work, timeout_s, scens = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
dtype = os.environ.get("DTYPE", "f32")
seq = int(os.environ.get("SEQ", "4096"))
sys.path.insert(0, "scripts")
import pattern_scenarios as ps

patterns = os.environ.get("PATTERNS", "wan-ulysses:2 wan-ulysses:4 flux-tp:2 cfg:2").split()


def scenario(name, n, with_step):
    what = f"bench-pattern-cost {name} {n}{' + one denoise step' if with_step else ''}"
    return ps.scenario(name, n, ps.steps(name, n, dtype, seq) if with_step else "", what)


def run_rusage(scen, path):
    pid = os.fork()
    if pid == 0:
        out = os.open(path + ".out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        err = os.open(path + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(err, 2)
        try:
            os.execv(scen, [scen, "run", path])
        finally:
            os._exit(127)
    deadline = time.monotonic() + timeout_s
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.wait4(pid, 0)
            return None, None, f"timeout {timeout_s}s"
        time.sleep(0.01)
    out = open(path + ".out").read()
    ends = [float(x) for x in re.findall(r"completes at ([0-9.]+)s", out)]
    code = os.waitstatus_to_exitcode(status)
    note = ""
    if code != 0:
        lines = open(path + ".err").read().strip().splitlines() or [f"exit {code}"]
        note = lines[0][:100]
    return ru.ru_utime + ru.ru_stime, (max(ends) * 1e3 if ends else None), note

def predicted_ms(scen, name, n):
    flag = {"wan-ulysses": "--ulysses", "flux-tp": "--tp", "cfg": "--cfg"}[name]
    args = [scen, "bench", "--pattern", name, flag, str(n), "--dtype", dtype, "--seq", str(seq)]
    r = subprocess.run(args, capture_output=True, text=True)
    m = re.search(r"^# sim: ([0-9.]+) ms of communication per denoise step", r.stdout, re.M)
    return float(m.group(1)) if m else None

def fmt(v, f):
    width = int(re.search(r"\d+", f).group())
    return f"{'-':>{width}}" if v is None else f.format(v)
head = f"{'pattern':16} {'ranks':>5}"
for i, _ in enumerate(scens):
    head += f" | {'start_cpu_s':>11} {'with_cpu_s':>10} {'step_cpu_s':>10} {'step_ms':>9} {'bench_ms':>9}"
print(head)
for i, scen in enumerate(scens):
    print(f"# [{i}] {scen} (built {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(os.path.getmtime(scen)))})")
for pat in patterns:
    name, n = pat.split(":")
    n = int(n)
    line = f"{name:16} {n:5}"
    notes = []
    for i, scen in enumerate(scens):
        paths = []
        for with_step in (False, True):
            path = os.path.join(work, f"{name}_{n}{'_step' if with_step else ''}.toml")
            with open(path, "w") as f:
                f.write(scenario(name, n, with_step))
            paths.append(path)
        c0, e0, n0 = run_rusage(scen, paths[0])
        c1, e1, n1 = run_rusage(scen, paths[1])
        step_cpu = None if c0 is None or c1 is None or n1 else max(c1 - c0, 0.0)
        step_ms = None if e0 is None or e1 is None else e1 - e0
        line += f" | {fmt(c0, '{:11.2f}')} {fmt(None if n1 else c1, '{:10.2f}')} {fmt(step_cpu, '{:10.2f}')} {fmt(step_ms, '{:9.1f}')} {fmt(predicted_ms(scen, name, n), '{:9.1f}')}"
        notes += [f"#   [{i}] {name}:{n}: {x}" for x in (n0, n1) if x]
    print(line)
    for x in notes:
        print(x)
    sys.stdout.flush()
PY
