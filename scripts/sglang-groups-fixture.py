# Records what real sglang (multimodal_gen) builds at start-up on this machine: every
# torch.distributed.new_group call in order (ranks, backend argument) and each rank's group of
# every kind. Run by scripts/sglang-groups-fixture.sh under torchrun on CPU (gloo); it writes
# crates/core/testdata/sglang_0.5.23_groups.json, which crates/core/tests/sglang_golden.rs
# compares with the model's "0.5.23" version.
# Usage (one config): torchrun --nproc-per-node W sglang-groups-fixture.py OUT_DIR TP ULYSSES RING CFG
import json
import os
import sys

import torch.distributed as dist

CALLS = []
_new_group = dist.new_group


def recording_new_group(ranks=None, *args, **kwargs):
    backend = kwargs.get("backend", args[1] if len(args) > 1 else None)
    CALLS.append(dict(ranks=list(ranks), backend=None if backend is None else str(backend)))
    return _new_group(ranks, *args, **kwargs)


dist.new_group = recording_new_group

import sglang  # noqa: E402
from sglang.multimodal_gen.runtime.distributed import parallel_state as ps  # noqa: E402

out_dir, tp, ulysses, ring, cfg = sys.argv[1], *map(int, sys.argv[2:6])
ps.maybe_init_distributed_environment_and_model_parallel(
    tp_size=tp, sp_size=ulysses * ring, cfg_degree=cfg, ulysses_degree=ulysses,
    ring_degree=ring, distributed_init_method="env://")

COORDINATORS = dict(dp="_DP", cfg="_CFG", pp="_PP", sp="_SP", tp="_TP", replica="_REPLICA",
                    encoder_dp="_ENCODER_DP", vae_decode="_VAE_DECODE", cfg_sp="_CFG_SP",
                    moe_ep="_SRT_MOE_EP", world="_WORLD")
groups = {}
for kind, attr in COORDINATORS.items():
    c = getattr(ps, attr)
    if c is not None:
        groups[kind] = dict(ranks=list(c.ranks), unique_name=c.unique_name)
for kind, pg in (("ulysses", ps._SP.ulysses_group), ("ring", ps._SP.ring_group),
                 ("dit", ps._DIT)):
    groups[kind] = dict(ranks=dist.get_process_group_ranks(pg))
rank = dist.get_rank()
with open(os.path.join(out_dir, "rank%d.json" % rank), "w") as f:
    json.dump(dict(sglang=sglang.__version__, backend=dist.get_backend(), calls=CALLS,
                   groups=groups), f)
dist.barrier()
dist.destroy_process_group()
