# Real-torch check (scripts/torch-checks/filestore.sh): init_method="file://PATH" (FileStore
# rendezvous) on gloo, one case per argv[1]; argv[2] is the store file's path, argv[3] the world
# size, RANK comes from the environment. Each rank prints "rank R <t>s OK <what>" or
# "rank R <t>s EXC <type>: <message>" (t: seconds since this rank started) and whether the store
# file exists at that point.
import os, sys, time
from datetime import timedelta
import torch, torch.distributed as dist

T0 = time.monotonic()
case, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = int(os.environ["RANK"])
# INIT_URL (e.g. tcp://127.0.0.1:29677) runs a case over a TCPStore instead, for contrast.
url = os.environ.get("INIT_URL", "file://" + path)
TO = timedelta(seconds=float(os.environ.get("TIMEOUT_S", "3")))


def say(what):
    t = time.monotonic() - T0
    print(f"rank {r} {t:.1f}s {what} (file {'exists' if os.path.exists(path) else 'absent'})",
          flush=True)


def init(rank=None, world_size=None, u=None):
    dist.init_process_group("gloo", init_method=u or url, timeout=TO,
                            rank=r if rank is None else rank,
                            world_size=n if world_size is None else world_size)


def ar():
    t = torch.ones(4) * (r + 1)
    dist.all_reduce(t)
    return t[0].item()


try:
    if case == "ok":  # a: init, all_reduce, barrier, destroy
        init(); say("init ok"); v = ar(); dist.barrier(); say(f"all_reduce {v} barrier ok")
        dist.destroy_process_group(); say("destroyed")
    elif case == "ok_nodestroy":  # a': init, all_reduce, exit without destroy_process_group
        init(); v = ar(); say(f"all_reduce {v}")
    elif case == "absent":  # b: the last rank never calls init (it exits at once)
        if r == n - 1:
            say("exits without init"); sys.exit(0)
        init(); say("init ok")
    elif case == "absent0":  # b': rank 0 never calls init (with tcp:// it hosts the store)
        if r == 0:
            say("exits without init"); sys.exit(0)
        init(); say("init ok")
    elif case == "exit0":  # c: rank 0 leaves after init; the others then all_reduce
        init(); say("init ok")
        if r == 0:
            sys.exit(0)
        time.sleep(1); v = ar(); say(f"all_reduce {v}")
    elif case == "exit0_newgroup":  # c': rank 0 leaves after init; the others make a group
        init(); say("init ok")
        if r == 0:
            sys.exit(0)
        time.sleep(1); g = dist.new_group([1, 2] if n > 2 else [1]); say("new_group ok")
        t = torch.ones(2); dist.all_reduce(t, group=g); say(f"all_reduce on it {t[0].item()}")
    elif case == "late":  # d: the last rank sleeps 2 s before init
        if r == n - 1:
            time.sleep(2)
        init(); say("init ok"); v = ar(); say(f"all_reduce {v}")
    elif case == "late5":  # d': the last rank sleeps 5 s (past the 3 s timeout) before init
        if r == n - 1:
            time.sleep(5)
        init(); say("init ok"); v = ar(); say(f"all_reduce {v}")
    elif case == "reinit":  # e: destroy, then init again on the same path
        init(); v = ar(); say(f"first all_reduce {v}")
        dist.destroy_process_group(); say("destroyed")
        init(); say("second init ok"); v = ar(); say(f"second all_reduce {v}")
        dist.destroy_process_group(); say("destroyed again")
    elif case == "reinit_fresh":  # e': destroy, then init again on a fresh path
        init(); v = ar(); say(f"first all_reduce {v}")
        dist.destroy_process_group(); say("destroyed")
        init(u=url + ".2"); say("second init ok"); v = ar(); say(f"second all_reduce {v}")
    elif case == "hang":  # f (first half): init, all_reduce, then hang (to be killed -9)
        init(); v = ar(); say(f"all_reduce {v}, now hanging"); time.sleep(60)
    elif case == "ws":  # g: the last rank says world_size n-1
        init(world_size=n - 1 if r == n - 1 else n); say("init ok"); v = ar(); say(f"all_reduce {v}")
    elif case == "ws1":  # g: rank 1 says world_size n-1 (still in range)
        init(world_size=n - 1 if r == 1 else n); say("init ok"); v = ar(); say(f"all_reduce {v}")
    elif case == "rank_oob":  # g': the last rank says rank n (out of range)
        init(rank=n if r == n - 1 else r); say("init ok")
    elif case == "no_rank":  # g'': file:// with no rank given
        dist.init_process_group("gloo", init_method=url, timeout=TO, world_size=n); say("init ok")
    elif case == "relative":  # file://relative (netloc, no path)
        dist.init_process_group("gloo", init_method="file://fstore_rel", timeout=TO, rank=r,
                                world_size=n); say("init ok")
    elif case == "query":  # rank/world_size in the URL query
        dist.init_process_group("gloo", init_method=f"{url}?rank={r}&world_size={n}",
                                timeout=TO); say("init ok"); v = ar(); say(f"all_reduce {v}")
    else:
        raise SystemExit(f"unknown case {case}")
except Exception as e:
    say(f"EXC {type(e).__name__}: {e!s}".replace("\n", "\\n"))
