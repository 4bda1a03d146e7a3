# Real-torch check (scripts/torch-checks/run.sh): one case per argv[1].
import os, torch.distributed as dist
from datetime import timedelta
try:
    dist.init_process_group("gloo", timeout=timedelta(seconds=5))
    print(os.environ["RANK"], "init ok", flush=True)
except Exception as e:
    print(os.environ["RANK"], f"EXC {type(e).__name__}: {e!s}".replace("\n","\\n"), flush=True)
