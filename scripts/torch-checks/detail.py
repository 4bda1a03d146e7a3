# Real-torch check (scripts/torch-checks/run.sh): one case per argv[1].
import os, sys, torch, torch.distributed as dist
from datetime import timedelta
case = sys.argv[1]
dist.init_process_group("gloo", timeout=timedelta(seconds=5))
r = dist.get_rank(); w = dist.get_world_size()
try:
    if case == "shape":
        t = torch.ones(4 if r == 0 else 8)
        dist.all_reduce(t)
    elif case == "op":
        t = torch.ones(4)
        if r == 0: dist.all_reduce(t)
        else: dist.broadcast(t, 0)
    elif case == "dtype":
        t = torch.ones(4, dtype=torch.float32 if r == 0 else torch.int32)
        dist.all_reduce(t)
    elif case == "a2a_uneven":
        ins = [r + j + 1 for j in range(w)]
        outs = [j + r + 1 for j in range(w)]
        x = torch.arange(sum(ins)*2, dtype=torch.float32).reshape(-1, 2)
        y = torch.empty(sum(outs), 2)
        dist.all_to_all_single(y, x, outs, ins)
        print("rank", r, "a2a ok", y.shape, flush=True)
    elif case == "a2a_bad":
        ins = [1]*w
        outs = [2 if (r == 2 and j == 0) else 1 for j in range(w)]
        x = torch.ones(sum(ins), 2); y = torch.empty(sum(outs), 2)
        dist.all_to_all_single(y, x, outs, ins)
        print("rank", r, "a2a done", flush=True)
    elif case == "count":
        t = torch.ones(4)
        dist.all_reduce(t)
        if r == 0: dist.all_reduce(t)
    elif case == "reduceop":
        t = torch.ones(4)
        dist.all_reduce(t, op=dist.ReduceOp.SUM if r == 0 else dist.ReduceOp.MAX)
        print("rank", r, "reduceop ok", t, flush=True)
    elif case == "root":
        t = torch.ones(4)
        dist.broadcast(t, 0 if r == 0 else 1)
        print("rank", r, "root ok", flush=True)
    print("rank", r, "OK", flush=True)
except Exception as e:
    print(f"rank {r} EXC {type(e).__name__}: {e!s}".replace("\n","\\n"), flush=True)
