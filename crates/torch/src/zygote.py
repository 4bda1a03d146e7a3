# scen torch-mode zygote: imports torch once, then for each request forks a child that becomes
# what `python runner.py CONFIG` is after its own `import torch` (runner.py's main() in a process
# of its own group, output to the run's log), so a long test run pays torch's import once.
# Protocol, one JSON object per line: stdin {"id", "runner", "config", "log"}; stdout
# {"ready": torch version} once, {"id", "pid"} (or {"id", "error"}) per request, and
# {"id", "status"} when that child has ended (reaped here: a raw wait status).
# It ends when its stdin closes and dies with its parent (PR_SET_PDEATHSIG); its children die
# with it the same way. Usage: python zygote.py   (started by crates/torch; not for users)
import importlib.util
import json
import os
import select
import signal
import sys


def die_with_parent():
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def send(obj):
    os.write(PROTO, (json.dumps(obj) + "\n").encode())


def become_runner(req):
    """In the forked child: runner.py's process for one run. Never returns: it ends as the
    runner (and each rank forked from it) ends, by the interpreter's own exit."""
    os.close(PROTO)
    os.close(WAKE_R)
    os.close(WAKE_W)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setpgid(0, 0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    spec = importlib.util.spec_from_file_location("scen_runner", req["runner"])
    runner = importlib.util.module_from_spec(spec)
    sys.modules["scen_runner"] = runner
    spec.loader.exec_module(runner)
    sys.argv = [req["runner"], req["config"]]
    runner.main(req["config"])
    sys.exit(0)


def fork(req, running):
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as e:
        send({"id": req["id"], "error": str(e)})
        return
    if pid == 0:
        # No try/except around this: an exception or exit in a rank must reach the top level
        # as it does in `python prog.py`.
        become_runner(req)
    running[pid] = req["id"]
    send({"id": req["id"], "pid": pid})


def reap(running):
    while running:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        send({"id": running.pop(pid), "status": status})


die_with_parent()
# The protocol keeps the real stdout; anything printed goes to stderr.
PROTO = os.dup(1)
os.dup2(2, 1)
import torch  # noqa: E402
import torch.distributed  # noqa: E402,F401

WAKE_R, WAKE_W = os.pipe()
os.set_blocking(WAKE_W, False)
signal.set_wakeup_fd(WAKE_W)
signal.signal(signal.SIGCHLD, lambda *_: None)
send({"ready": torch.__version__})
running = {}
pending = b""
while True:
    readable, _, _ = select.select([0, WAKE_R], [], [])
    if WAKE_R in readable:
        os.read(WAKE_R, 4096)
    reap(running)
    if 0 in readable:
        data = os.read(0, 65536)
        if not data:
            break
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            fork(json.loads(line), running)
