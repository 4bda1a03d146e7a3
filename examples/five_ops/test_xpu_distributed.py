#!/usr/bin/env python3
"""The five-op distributed test users run first on a new XPU box (seed 000): all_reduce,
broadcast, all_gather, send/recv and barrier, each checked, on xccl with XPU tensors, or with
`--backend gloo` (the documented fallback) on CPU tensors.

    python test_xpu_distributed.py                                   # one rank
    torchrun --nproc_per_node=2 test_xpu_distributed.py              # xccl on 2 XPUs
    torchrun --nproc_per_node=2 test_xpu_distributed.py --backend gloo

scripts/record-examples.sh records it with `scen record` (examples/five_ops/README.md).
"""
import argparse
import os

import torch
import torch.distributed as dist


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default=os.environ.get("TORCH_DISTRIBUTED_BACKEND", "xccl"),
                   help="xccl (XPU tensors) or gloo (CPU tensors)")
    return p.parse_args()


def check(name, ok, rank):
    if not ok:
        raise AssertionError(f"[Rank {rank}] {name} returned wrong values")
    print(f"[Rank {rank}] \u2713 {name}", flush=True)


def test_all_reduce(rank, world, device):
    t = torch.ones(4, device=device) * (rank + 1)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    check("All-Reduce", torch.all(t.cpu() == world * (world + 1) / 2).item(), rank)


def test_broadcast(rank, world, device):
    t = torch.arange(4, dtype=torch.float32, device=device) + rank * 100
    dist.broadcast(t, src=0)
    check("Broadcast", torch.equal(t.cpu(), torch.arange(4, dtype=torch.float32)), rank)


def test_all_gather(rank, world, device):
    t = torch.full((4,), float(rank), device=device)
    out = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(out, t)
    check("All-Gather", all(torch.all(o.cpu() == r).item() for r, o in enumerate(out)), rank)


def test_send_recv(rank, world, device):
    if world < 2:
        print(f"[Rank {rank}] - Send/Recv skipped (one rank)", flush=True)
        return
    t = torch.zeros(4, device=device)
    if rank == 0:
        t += 42
        dist.send(t, dst=1)
    elif rank == 1:
        dist.recv(t, src=0)
        check("Send/Recv", torch.all(t.cpu() == 42).item(), rank)


def test_barrier(rank, world, device):
    dist.barrier()
    check("Barrier", True, rank)


def main():
    args = parse_args()
    if not dist.is_initialized():
        dist.init_process_group(backend=args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if args.backend == "gloo":
        device = torch.device("cpu")
    else:
        torch.xpu.set_device(local_rank)
        device = torch.device(f"xpu:{local_rank}")
    print(f"Rank {rank}/{world} using {device} with {args.backend}", flush=True)
    for test in (test_all_reduce, test_broadcast, test_all_gather, test_send_recv, test_barrier):
        test(rank, world, device)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
