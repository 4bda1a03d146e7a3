# Real-torch check (scripts/torch-checks/run.sh): one case per argv[1].
import os, sys, time, torch, torch.distributed as dist
from datetime import timedelta
case = sys.argv[1]
dist.init_process_group("gloo", timeout=timedelta(seconds=4))
r = dist.get_rank(); w = dist.get_world_size()
try:
    if case == "skip0":
        if r == 0: time.sleep(7)
        else: dist.all_reduce(torch.ones(4))
    elif case == "shape2d":
        dist.all_reduce(torch.ones((2, 3) if r == 0 else (3, 2)))
    elif case == "barrier_vs_ar":
        if r == 0: dist.barrier()
        else: dist.all_reduce(torch.ones(4))
    elif case == "seq":
        dist.all_reduce(torch.ones(4))
        dist.all_reduce(torch.ones(4 if r == 0 else 5))
    elif case == "a2a_vs_ar":
        if r == 0: dist.all_to_all_single(torch.empty(4), torch.ones(4))
        else: dist.all_reduce(torch.ones(4))
    print("rank", r, "OK", flush=True)
except Exception as e:
    print(f"rank {r} EXC {type(e).__name__}: {e!s}".replace("\n","\\n"), flush=True)
