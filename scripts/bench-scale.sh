#!/usr/bin/env bash
# scen's scale benchmark (issue 11 item 5): how the simulator's wall time, peak memory and trace
# grow with the world. It generates two families of worlds, 8 ranks per node:
#   c10d    init_process_group (xccl) + 4 new_groups on every rank + 8 collectives of 1 MiB
#           (all_reduce / broadcast / reduce on WORLD, on a full-world group, on each half);
#   sglang  newest start-up (v2) tp2 x ulysses x ring x cfg2 x dp + one denoise step + barrier
#           (as scenarios/sglang_golden_*.toml express it; dp grows with the world);
# runs each once with `scen run` (release build) and prints wall time, peak RSS (of the scen
# process, getrusage of the child), CPU time (user + system: the honest number on a loaded machine), trace events (from the verdict's `trace:` line) and, per family, the
# fitted exponent of time and memory between 64 and 1024 ranks (log-log slope).
#
# Usage: scripts/bench-scale.sh [MAX_RANKS]      (default 4096; 8 64 256 1024 4096 up to it)
# Env:   SCEN (binary; default: cargo build --release), TIMEOUT_S (per run, default 300),
#        FAMILIES (default "c10d sglang"), SIZES (default "8 64 256 1024 4096"), COLL_BYTES (default 1048576), KEEP_DIR (write the
#        generated scenarios and outputs there and keep them, e.g. to profile one),
#        PAYLOADS (values | symbolic: written as `[sim] payloads` into the c10d scenarios; unset:
#        the scenario default, values while the world fits scen's tensor limits, else symbolic),
#        REPEAT (runs per size, default 1: the row is the run with the least CPU; a 64-rank run
#        takes a few hundredths of a second, so one slow run moves the fitted exponent).
# A run over TIMEOUT_S prints "timeout"; a scenario scen refuses prints its first error line.
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_RANKS=${1:-4096}
TIMEOUT_S=${TIMEOUT_S:-300}
FAMILIES=${FAMILIES:-"c10d sglang"}
COLL_BYTES=${COLL_BYTES:-1048576}
case "${PAYLOADS:-}" in ""|values|symbolic) ;; *) echo "PAYLOADS must be values or symbolic" >&2; exit 2 ;; esac
if [[ -z "${SCEN:-}" ]]; then
  cargo build --release --quiet --bin scen
  SCEN=target/release/scen
fi
if [[ -n "${KEEP_DIR:-}" ]]; then
  work=$KEEP_DIR
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
echo "# scripts/bench-scale.sh on $(hostname) at $(date -u +%FT%TZ); $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# scen: $SCEN (built $(date -u -r "$SCEN" +%FT%TZ); worktree at $(git rev-parse --short HEAD 2>/dev/null || echo '?')); timeout ${TIMEOUT_S}s per run"
echo "# cpu_s (user + system of the run) is the number to compare on a shared machine; wall_s follows the load"
echo "# c10d payloads: ${PAYLOADS:-scenario default}; runs per size: ${REPEAT:-1} (least CPU shown)"

python3 - "$SCEN" "$work" "$MAX_RANKS" "$TIMEOUT_S" "$COLL_BYTES" $FAMILIES <<'PY'
import math, os, re, sys, time

scen, work, max_ranks, timeout_s, coll_bytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
families = sys.argv[6:]
sizes = [int(w) for w in os.environ.get("SIZES", "8 64 256 1024 4096").split()]
sizes = [w for w in sizes if w <= max_ranks]
PER_NODE = 8

def world(w, platform="xpu"):
    return f"[world]\nranks_per_node = {PER_NODE}\nnodes = {w // PER_NODE}\nplatform = \"{platform}\"\n"

def c10d(w):
    elems = coll_bytes // 4
    half = w // 2
    lo = list(range(0, half))
    hi = list(range(half, w))
    s = f"# scale benchmark: c10d init + 4 new_groups + 8 collectives of {coll_bytes} bytes, {w} ranks\n"
    s += f"[scenario]\ndescription = \"bench-scale c10d w{w}\"\n\n" + world(w)
    s += "\n[[step]]\nop = \"init_process_group\"\nbackend = \"xccl\"\ndevice_id = \"xpu:{local_rank}\"\n"
    s += "\n[[step]]\nop = \"new_group\"\nas = \"all\"\n"
    s += f"\n[[step]]\nop = \"new_group\"\nranks = {lo}\nas = \"lo\"\n"
    s += f"\n[[step]]\nop = \"new_group\"\nranks = {hi}\nas = \"hi\"\n"
    s += f"\n[[step]]\nop = \"new_group\"\nranks = {list(range(0, w, 2))}\nas = \"even\"\n"
    colls = [
        ("all_reduce", None, None), ("broadcast", None, "src = 0"),
        ("all_reduce", "all", None), ("reduce", "all", "dst = 0"),
        ("all_reduce", "lo", None), ("all_reduce", "hi", None),
        ("all_reduce", "even", None), ("all_reduce", None, None),
    ]
    for op, group, extra in colls:
        s += f"\n[[step]]\nop = \"{op}\"\nshape = [{elems}]\n"
        if group:
            s += f"group = \"{group}\"\n"
            if group == "lo": s += f"on = \"rank < {half}\"\n"
            if group == "hi": s += f"on = \"rank >= {half}\"\n"
            if group == "even": s += "on = \"rank % 2 == 0\"\n"
        if extra: s += extra + "\n"
    s += "\n[[step]]\nop = \"barrier\"\n\n[[expect]]\noutcome = \"completes\"\n"
    if os.environ.get("PAYLOADS"):
        s += f"\n[sim]\npayloads = \"{os.environ['PAYLOADS']}\"\n"
    return s

def sglang(w):
    tp, cfg = 2, 2
    ulysses, ring = (2, 1) if w < 16 else (2, 2)
    dp = w // (tp * cfg * ulysses * ring)
    s = f"# scale benchmark: sglang v2 start-up tp{tp} u{ulysses} r{ring} cfg{cfg} dp{dp} + one denoise step, {w} ranks\n"
    s += f"[scenario]\ndescription = \"bench-scale sglang w{w}\"\n\n" + world(w)
    s += "\n[[step]]\nop = \"init_distributed_environment\"\nversion = \"v2\"\n"
    s += f"\n[[step]]\nop = \"initialize_model_parallel\"\ntp = {tp}\nulysses = {ulysses}\nring = {ring}\ncfg = {cfg}\ndp = {dp}\n"
    s += "\n[[step]]\nop = \"denoise_step\"\nseq = 32\nheads = 12\nhead_dim = 4\nlayers = 1\n"
    s += "\n[[step]]\nop = \"barrier\"\n\n[[expect]]\noutcome = \"completes\"\n"
    return s

GEN = {"c10d": c10d, "sglang": sglang}

def run_rusage(path, report):
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        fd = os.open(report, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        errf = os.open(report + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(errf, 2)
        try:
            os.execv(scen, [scen, "run", path])
        finally:
            os._exit(127)
    deadline = t0 + timeout_s
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.wait4(pid, 0)
            return None
        time.sleep(0.02)
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    err = open(report + ".err").read()
    return wall, code, ru.ru_maxrss * 1024, ru.ru_utime + ru.ru_stime, err

def fit(pts):
    pts = [(w, v) for w, v in pts if 64 <= w <= 1024 and v]
    if len(pts) < 2:
        return None
    xs = [math.log(w) for w, _ in pts]
    ys = [math.log(v) for _, v in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den

print(f"{'family':8} {'ranks':>6} {'nodes':>6} {'wall_s':>8} {'cpu_s':>8} {'peak_MiB':>9} {'events':>9}  result")
for fam in families:
    times, cpus, mems = [], [], []
    for w in sizes:
        path = os.path.join(work, f"{fam}_w{w}.toml")
        with open(path, "w") as f:
            f.write(GEN[fam](w))
        report = os.path.join(work, f"{fam}_w{w}.out")
        r = None
        for _ in range(int(os.environ.get("REPEAT", "1"))):
            one = run_rusage(path, report)
            if one is None or r is None or one[3] < r[3]:
                r = one
            if one is None:
                break
        if r is None:
            print(f"{fam:8} {w:6} {w // PER_NODE:6} {'timeout':>8} {'-':>8} {'-':>9} {'-':>9}  over {timeout_s}s")
            sys.stdout.flush()
            break
        wall, code, rss, cpu, err = r
        events, result = "-", f"exit {code}"
        out = open(report).read()
        m = re.search(r"^trace: (\d+) events, hash (\w+)", out, re.M)
        o = re.search(r"^outcome: (.*?);", out, re.M)
        if m:
            events = m.group(1)
            result = f"exit {code}: {o.group(1) if o else '?'}; hash {m.group(2)}"
        elif err.strip():
            result += ": " + err.strip().splitlines()[0][:110]
        print(f"{fam:8} {w:6} {w // PER_NODE:6} {wall:8.2f} {cpu:8.2f} {rss / 2**20:9.0f} {events:>9}  {result}")
        sys.stdout.flush()
        if code == 0:
            times.append((w, wall))
            cpus.append((w, cpu))
            mems.append((w, rss))
    f = lambda e: "n/a" if e is None else f"W^{e:.2f}"
    print(f"# {fam}: fitted growth 64..1024 ranks: wall {f(fit(times))}, cpu {f(fit(cpus))}, memory {f(fit(mems))}")
    sys.stdout.flush()
PY
