# Real-torch check (scripts/torch-checks/run.sh): one case per argv[1].
import sys, torch.distributed as dist
from datetime import timedelta
try:
    dist.init_process_group(sys.argv[1], timeout=timedelta(seconds=5))
    print("init ok", flush=True)
except Exception as e:
    print(f"EXC {type(e).__name__}: {e!s}".replace("\n","\\n"), flush=True)
