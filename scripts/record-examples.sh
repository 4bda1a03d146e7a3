#!/usr/bin/env bash
# Re-makes the recorded scenarios of examples/ with `scen record` (docs/record.md): the five-op
# test (examples/five_ops/test_xpu_distributed.py, seed 000) run for real under torchrun with
# 4 ranks on CPU/gloo, written as recorded and re-targeted to XPU/xccl; and a failing job
# (examples/skip_rank/skip_all_reduce.py: one rank skips a collective). The five-op run's raw
# records are kept (examples/five_ops/records, `--keep`) and the re-targeted scenario is made
# from them (`--from`), without running the job again; tests/sim/record.rs checks that both
# scenarios come out of those records byte for byte.
# Needs torch (scripts/install-torch-cpu.sh): its venv's torchrun is used when none is on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet
scen=target/debug/scen
dir=examples/five_ops
rm -rf "$dir/records"
"$scen" record -o "$dir/five_ops_gloo_w4.recorded.toml" --keep "$dir/records" \
  -- torchrun --nproc-per-node 4 "$dir/test_xpu_distributed.py" --backend gloo
"$scen" record -o "$dir/five_ops_xccl_w4.retargeted.toml" --platform xpu --backend xccl \
  --from "$dir/records"
"$scen" record -o examples/skip_rank/skip_all_reduce_gloo_w2.recorded.toml \
  -- torchrun --nproc-per-node 2 examples/skip_rank/skip_all_reduce.py
"$scen" check "$dir/five_ops_gloo_w4.recorded.toml"
"$scen" check "$dir/five_ops_xccl_w4.retargeted.toml"
"$scen" check examples/skip_rank/skip_all_reduce_gloo_w2.recorded.toml
