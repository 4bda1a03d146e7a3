# scen bench --hw --path torch: one rank of the sweep, timed through torch.distributed (started by
# crates/torch/src/bench.rs with torchrun's environment). The spec is SCEN_BENCH_SPEC (JSON:
# jobs [[op, count]], dtype, redop, warmup, iters); one JSON line per job goes to stdout. Values
# are hw's (crates/hw/src/bench/values.rs): input(r, i) = (r + i) % 4, so #wrong counts real
# corruption only.
import json, os, sys, time
import torch
import torch.distributed as dist

OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN,
       "product": dist.ReduceOp.PRODUCT, "avg": getattr(dist.ReduceOp, "AVG", None)}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
          "f64": torch.float64, "i32": torch.int32, "i64": torch.int64}


def device_and_backend(local):
    """As init_process_group would choose: xccl on XPU, nccl on CUDA, else gloo on CPU."""
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        torch.xpu.set_device(local)
        return torch.device("xpu", local), "xccl", torch.xpu.synchronize
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
        return torch.device("cuda", local), "nccl", torch.cuda.synchronize
    return torch.device("cpu"), "gloo", lambda: None


def inp(r, i, redop):
    """Element i (int64 tensor) of rank r's (int or tensor) send buffer, as float64."""
    if redop == "product":
        return torch.where(torch.as_tensor(r) == 0, i % 4 + 1, torch.ones_like(i)).double()
    return ((r + i) % 4).double()


def reduced(n, i, redop):
    acc = inp(0, i, redop)
    for r in range(1, n):
        v = inp(r, i, redop)
        acc = {"max": torch.maximum, "min": torch.minimum,
               "product": torch.mul}.get(redop, torch.add)(acc, v)
    return acc / n if redop == "avg" else acc


def expected(op, n, me, count, recv_len, redop):
    """What rank `me` must hold after `op` (None where the op leaves it undefined)."""
    j = torch.arange(recv_len, dtype=torch.int64)
    if op == "all_reduce" or (op == "reduce" and me == 0):
        return reduced(n, j, redop)
    if op == "broadcast":
        return inp(0, j, redop)
    if op == "all_gather":
        return inp(j // count, j % count, redop)
    if op == "reduce_scatter":
        return reduced(n, me * (count // n) + j, redop)
    if op == "all_to_all":
        c = count // n
        return inp(j // c, me * c + j % c, redop)
    return None


def job(op, count, spec, me, n, dev, sync, rop):
    dt = DTYPES[spec["dtype"]]
    send = inp(me, torch.arange(count, dtype=torch.int64), spec["redop"]).to(dt).to(dev)
    recv_len = {"all_gather": count * n, "reduce_scatter": count // n}.get(op, count)
    recv = torch.empty(recv_len, dtype=dt, device=dev)
    calls = {
        # In place, as torch.distributed is called: the check below redoes one call on fresh data.
        "all_reduce": lambda: dist.all_reduce(send, op=rop),
        "broadcast": lambda: dist.broadcast(send, src=0),
        "reduce": lambda: dist.reduce(send, dst=0, op=rop),
        "all_gather": lambda: dist.all_gather_into_tensor(recv, send),
        "reduce_scatter": lambda: dist.reduce_scatter_tensor(recv, send, op=rop),
        "all_to_all": lambda: dist.all_to_all_single(recv, send),
    }
    call = calls[op]
    for _ in range(spec["warmup"]):
        call()
    sync()
    iters = max(spec["iters"], 1)
    block = max(iters // 8, 1)
    total, per_call, left = 0.0, [], iters
    while left > 0:
        k = min(block, left)
        t0 = time.perf_counter()
        for _ in range(k):
            call()
        sync()
        s = time.perf_counter() - t0
        total += s
        per_call.append(s * 1e6 / k)
        left -= k
    if op in ("all_reduce", "broadcast", "reduce"):
        send.copy_(inp(me, torch.arange(count, dtype=torch.int64), spec["redop"]).to(dt))
        call()
        sync()
        recv = send
    want = expected(op, n, me, count, recv_len, spec["redop"])
    wrong = 0 if want is None else int((recv.cpu() != want.to(dt)).sum())
    per_call.sort()
    m = len(per_call)
    med = per_call[m // 2] if m % 2 else (per_call[m // 2 - 1] + per_call[m // 2]) / 2
    return {"time_us": total * 1e6 / iters, "median_us": med, "wrong": wrong}


def main():
    spec = json.loads(os.environ["SCEN_BENCH_SPEC"])
    me, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev, backend, sync = device_and_backend(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend=backend, rank=me, world_size=n)
    rop = OPS[spec["redop"]]
    out = sys.stdout
    out.write(json.dumps({"hello": {"torch": torch.__version__, "backend": backend,
                                    "device": str(dev)}}) + "\n")
    out.flush()
    for index, (op, count) in enumerate(spec["jobs"]):
        r = {"index": index, "count": count, "time_us": 0.0, "median_us": None, "wrong": 0}
        if count > 0:
            r.update(job(op, count, spec, me, n, dev, sync, rop))
        out.write(json.dumps(r) + "\n")
        out.flush()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
