# Real-torch check (scripts/torch-checks/run.sh): one case per argv[1].
import sys, torch, torch.distributed as dist
from datetime import timedelta
r = int(sys.argv[1])
try:
    dist.init_process_group("gloo", init_method="tcp://localhost:29655", rank=r, world_size=2, timeout=timedelta(seconds=5))
    print(r, "init ok", flush=True)
    t = torch.ones(2); dist.all_reduce(t); print(r, "allreduce ok", t, flush=True)
except Exception as e:
    print(r, f"EXC {type(e).__name__}: {e!s}".replace("\n","\\n"), flush=True)
