#!/usr/bin/env python3
"""How long a rank's process lives after its program's last line: torch mode's forked ranks
(`scen run --torch`) against plain `python prog.py` ranks, side by side, in one run.

A rank's process outlives its program by the interpreter's teardown (atexit, destructors of the
process groups and of rank 0's TCPStore server), and peers can still use that store meanwhile:
torch mode, the oracle, must end its ranks the way a plain Python process ends (docs/torch.md).

Usage: scripts/bench-torch-exit.py [SCENARIO] [--runs N] [--python PY] [--scen BIN]
Each run alternates the two ways of launching; the table gives each rank's latency from its
`end` progress line to its process's exit (ms), median / min / max over the runs, and the ratio.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def end_times(progress_dir, world):
    """Each rank's `end` (or `fail`) progress time, ms after the epoch the ranks were given."""
    out = {}
    for r in range(world):
        path = os.path.join(progress_dir, "rank%d.jsonl" % r)
        if not os.path.exists(path):
            continue
        for line in open(path):
            ev = json.loads(line)
            if ev["ev"] in ("end", "fail"):
                out[r] = ev["t"]
    return out


def plain(py, prog, world):
    """`python prog.py` per rank, as torchrun without its agent store would start them."""
    d = tempfile.mkdtemp(prefix="scen-exit-plain-")
    port, epoch = free_port(), int(time.time() * 1000)
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1", SCEN_TORCH_PROGRESS=d, SCEN_TORCH_EPOCH_MS=str(epoch))
        procs.append(subprocess.Popen([py, prog], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    exits = {}
    pending = dict(enumerate(procs))
    while pending:
        for r, p in list(pending.items()):
            if p.poll() is not None:
                exits[r] = int(time.time() * 1000) - epoch
                del pending[r]
        time.sleep(0.002)
    ends = end_times(d, world)
    return [exits[r] - ends[r] for r in sorted(ends)]


def torch_mode(scen, scenario, world):
    d = tempfile.mkdtemp(prefix="scen-exit-torch-")
    subprocess.run([scen, "run", "--torch", scenario, "--keep", d], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    ends = end_times(d, world)
    exits = {}
    for line in open(os.path.join(d, "exits.jsonl")):
        e = json.loads(line)
        if "rank" in e:  # (the first line is the runner's epoch)
            exits[e["rank"]] = e["t"]
    return [exits[r] - ends[r] for r in sorted(ends) if r in exits]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default="scenarios/five_ops_gloo_fallback_w4.toml")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--python", default=os.path.expanduser("~/.cache/scen-torch/venv/bin/python"))
    ap.add_argument("--scen", default=os.path.join(ROOT, "target/debug/scen"))
    a = ap.parse_args()
    prog = os.path.join(tempfile.mkdtemp(prefix="scen-exit-"), "prog.py")
    subprocess.run([a.scen, "export", "--torch", a.scenario, "-o", prog], check=True,
                   stderr=subprocess.DEVNULL)
    world = int(subprocess.run([a.python, "-c", "import re,sys;t=open(sys.argv[1]).read();"
                                "print(re.search(r'--nproc-per-node (\\d+)', t).group(1))", prog],
                               capture_output=True, text=True, check=True).stdout)
    got = {"plain python": [], "scen run --torch": []}
    for _ in range(a.runs):
        got["plain python"] += plain(a.python, prog, world)
        got["scen run --torch"] += torch_mode(a.scen, a.scenario, world)
    print("# exit latency: a rank's `end` line to its process's exit, ms (%s, %d ranks, %d runs)"
          % (a.scenario, world, a.runs))
    print("%-18s %8s %8s %8s %6s" % ("launch", "median", "min", "max", "n"))
    for k, v in got.items():
        if not v:
            print("%-18s %8s" % (k, "no data"))
            continue
        print("%-18s %8.0f %8.0f %8.0f %6d" % (k, statistics.median(v), min(v), max(v), len(v)))
    if got["plain python"] and got["scen run --torch"]:
        ratio = statistics.median(got["scen run --torch"]) / statistics.median(got["plain python"])
        print("torch mode / plain python (median): %.2f" % ratio)


if __name__ == "__main__":
    main()
