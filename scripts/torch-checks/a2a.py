# Real-torch check (scripts/torch-checks/run.sh): one case per argv[1].
import os, sys, torch, torch.distributed as dist
from datetime import timedelta
case = sys.argv[1]
dist.init_process_group("gloo", timeout=timedelta(seconds=5))
r = dist.get_rank(); w = dist.get_world_size()
try:
    ins = [1]*w
    if case == "more":   # rank 2 expects 2 rows from rank 0, rank 0 sends 1
        outs = [2 if (r == 2 and j == 0) else 1 for j in range(w)]
    else:                # rank 0 sends 2 rows to rank 2, rank 2 expects 1
        ins = [2 if (r == 0 and j == 2) else 1 for j in range(w)]
        outs = [1]*w
    x = torch.full((sum(ins), 2), float(r*10)) + torch.arange(sum(ins)).reshape(-1,1).float()
    y = torch.full((sum(outs), 2), -7.0)
    dist.all_to_all_single(y, x, outs, ins)
    print("rank", r, "done", y.flatten().tolist(), flush=True)
except Exception as e:
    print(f"rank {r} EXC {type(e).__name__}: {e!s}".replace("\n","\\n"), flush=True)
