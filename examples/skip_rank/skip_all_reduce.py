#!/usr/bin/env python3
"""A failing job to record: the last rank skips the second all_reduce (a rank-dependent branch
left in by mistake) and goes on to create a group, where it waits in the TCPStore for the
others; they wait for it in the all_reduce until gloo's 5 s timeout fails them, and torchrun's
agent then stops the last rank (SIGTERM).

    torchrun --nproc-per-node 2 skip_all_reduce.py

scripts/record-examples.sh records it with `scen record` (examples/skip_rank/README.md).
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def main():
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=5))
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.ones(4) * (rank + 1)
    dist.all_reduce(t)
    if rank != world - 1:
        dist.all_reduce(t)
    group = dist.new_group(list(range(world)), timeout=timedelta(seconds=60))
    dist.all_reduce(t, group=group)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
