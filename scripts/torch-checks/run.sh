#!/usr/bin/env bash
# The real-PyTorch runs behind the texts scen models for diagnosis and validation (issue 12 item 7;
# docs/diagnosis.md, "TORCH_DISTRIBUTED_DEBUG=DETAIL" and "Validation per PyTorch 2.15"). Each
# program prints "rank R EXC <type>: <message>" or "OK" per rank; compare with the scenarios
# that cite them. Needs a CPU PyTorch (gloo); PY/TORCHRUN default to the project's torch venv.
# Usage: scripts/torch-checks/run.sh   (2-7 minutes on 2 cores; ports 29611-29655 on localhost)
set -u
cd "$(dirname "$0")"
PY=${PY:-$HOME/.cache/scen-torch/venv/bin/python}
TORCHRUN=${TORCHRUN:-$HOME/.cache/scen-torch/venv/bin/torchrun}
show() { grep -E "EXC|OK|ok|done|enforce" | sed 's/TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))/<cpu options>/g'; }

echo "== DETAIL (detail_mismatch_shape_gloo.toml, detail_missing_rank_monitored_barrier.toml)"
for c in shape op dtype a2a_uneven a2a_bad count reduceop root; do
  echo "-- $c"; TORCH_DISTRIBUTED_DEBUG=DETAIL timeout 60 "$TORCHRUN" --nproc-per-node 3 --master-port 29611 detail.py "$c" 2>&1 | show
done
for c in skip0 shape2d barrier_vs_ar seq a2a_vs_ar; do
  echo "-- $c"; TORCH_DISTRIBUTED_DEBUG=DETAIL timeout 60 "$TORCHRUN" --nproc-per-node 2 --master-port 29611 detail2.py "$c" 2>&1 | show
done

echo "== all_to_all_single split disagreement on gloo (diagnose/splits.rs)"
for c in more less; do
  echo "-- $c"; timeout 60 "$TORCHRUN" --nproc-per-node 3 --master-port 29611 a2a.py "$c" 2>&1 | show
done

echo "== backend names (unknown_backend_name.toml)"
for b in mpi2 xcll cpu:gloo,xpu:xcll mpi; do
  echo "-- $b"; timeout 60 "$TORCHRUN" --nproc-per-node 1 --master-port 29612 be.py "$b" 2>&1 | show
done

echo "== WORLD_SIZE differs (world_size_differs_store_host.toml)"
export MASTER_ADDR=127.0.0.1 MASTER_PORT=29633
(RANK=0 WORLD_SIZE=3 timeout 60 "$PY" ws.py 2>&1 | show &)
sleep 0.5; RANK=1 WORLD_SIZE=2 timeout 60 "$PY" ws.py 2>&1 | show; sleep 8

echo "== two jobs on one TCPStore port (tcp_port_reused_by_running_job_keys.toml)"
(timeout 60 "$TORCHRUN" --nproc-per-node 2 --master-port 29655 jobA.py >/dev/null 2>&1 &)
sleep 6
(timeout 60 "$PY" jobB.py 0 2>&1 | show &)
timeout 60 "$PY" jobB.py 1 2>&1 | show
sleep 16
