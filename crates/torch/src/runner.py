# scen torch-mode runner: starts the ranks of one run as real processes with torchrun's
# environment. torch is imported once here and each rank is forked from this process, so all
# ranks start together (as the simulator's do) instead of spread over seconds of imports.
# With launcher = "torchrun" it also plays torchrun's agent: it hosts the TCPStore
# (TORCHELASTIC_USE_AGENT_STORE) and tears the other ranks down when one fails.
# Usage: python runner.py CONFIG.json   (written by `scen run --torch`; not for users).
# zygote.py imports this file as a module and calls main(CONFIG) in a forked child instead.
import json
import os
import runpy
import signal
import sys
import time


def die_with_parent():
    """PR_SET_PDEATHSIG: if our parent dies (scen killed, Ctrl-C), we get SIGKILL too."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


# One run's state, module globals so that a rank's program stays referenced until the
# interpreter's teardown (as a script's globals are), whether this file is __main__ or not.
cfg = exits = store = program_globals = None
epoch_ms = 0


def become_rank(r):
    """The forked child becomes rank r and ends as `python prog.py` ends: an exception printed
    with exit code 1, SystemExit's code, else 0 — each after the interpreter's teardown (atexit,
    destructors: the process groups' sockets, rank 0's TCPStore server), which takes a real rank
    about half a second (scripts/bench-torch-exit.py measures both). Never os._exit."""
    global program_globals
    die_with_parent()
    if store is not None:
        # The agent's store belongs to the parent: its server thread is not in this process,
        # so its destructor must never run here.
        import ctypes
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(store))
    exits.close()
    os.environ.update(r["env"])
    os.environ["SCEN_TORCH_EPOCH_MS"] = str(epoch_ms)
    sys.argv = [cfg["program"]]
    # Kept until the interpreter's teardown, as a script's globals are.
    program_globals = runpy.run_path(cfg["program"], run_name="__main__")
    sys.exit(0)


def record(rank, status, by_agent=False):
    line = dict(rank=rank, t=int(time.time() * 1000) - epoch_ms, by_agent=by_agent)
    if os.WIFSIGNALED(status):
        line["signal"] = os.WTERMSIG(status)
    else:
        line["code"] = os.WEXITSTATUS(status)
    exits.write(json.dumps(line) + "\n")


def main(config_path):
    global cfg, exits, store, epoch_ms
    die_with_parent()
    cfg = json.load(open(config_path))
    import torch  # noqa: F401
    import torch.distributed as dist
    import importlib

    for m in cfg.get("preload", []):
        importlib.import_module(m)

    exits = open(cfg["exits"], "a", buffering=1)
    if cfg.get("agent_store"):
        a = cfg["agent_store"]
        store = dist.TCPStore("127.0.0.1", a["port"], a["world_size"], is_master=True,
                              wait_for_workers=False,
                              timeout=__import__("datetime").timedelta(seconds=3600))
    epoch_ms = int(time.time() * 1000)
    # The ranks' time zero, so scen can place a stop it decides (a signal, its watchdog) on it.
    exits.write(json.dumps(dict(epoch_ms=epoch_ms)) + "\n")
    children = {}
    for r in cfg["ranks"]:
        pid = os.fork()
        if pid == 0:
            become_rank(r)
        children[pid] = r["rank"]

    torn_down = set()
    while children:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        rank = children.pop(pid, None)
        if rank is None:
            continue
        record(rank, status, by_agent=pid in torn_down)
        failed = os.WIFSIGNALED(status) or os.WEXITSTATUS(status) != 0
        if failed and cfg.get("teardown") and not torn_down:
            # torchrun's agent: one worker failed, so the group is stopped (SIGTERM to the rest)
            # at the agent's next check: it sleeps `monitor_interval` (0.1 s) between checks
            # (torch/distributed/elastic/agent/server/api.py `_invoke_run`).
            next_check(MONITOR_INTERVAL_S)
            reap_exited(children)
            for p in children:
                torn_down.add(p)
                try:
                    os.kill(p, signal.SIGTERM)
                except ProcessLookupError:
                    pass


MONITOR_INTERVAL_S = 0.1


def next_check(interval_s):
    """Sleeps until the agent's next check: checks fall every `interval_s` from the launch."""
    start = epoch_ms / 1000.0
    now = time.time()
    ticks = int((now - start) / interval_s) + 1
    time.sleep(max(0.0, start + ticks * interval_s - now))


def reap_exited(children):
    """Records the workers that exited before the agent's check (not stopped by it)."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        rank = children.pop(pid, None)
        if rank is not None:
            record(rank, status)


if __name__ == "__main__":
    main(sys.argv[1])
