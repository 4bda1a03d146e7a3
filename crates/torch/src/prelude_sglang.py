
# ---- scen prelude, sglang part: real sglang's start-up, its new_group calls recorded ------------
# The sglang steps below call real sglang (pinned SGLANG_VERSION, `scripts/install-torch-cpu.sh
# --sglang`), not a translation. Every torch.distributed.new_group call it makes is reported as a
# progress line (`new_group [ranks] backend`), so scen can compare the sequence with the model's.
import sglang  # noqa: E402
from sglang.multimodal_gen.runtime.distributed import parallel_state as sgl_ps  # noqa: E402
from sglang.multimodal_gen.runtime.platforms import current_platform as sgl_platform  # noqa: E402

SGLANG_VERSION = "0.5.23"
if sglang.__version__ != SGLANG_VERSION:
    raise RuntimeError("this program runs sglang %s, found %s" % (SGLANG_VERSION, sglang.__version__))

_NEW_GROUP = dist.new_group
_NEW_GROUPS = [0]


def _recorded_new_group(ranks=None, *args, **kwargs):
    # torch's signature: new_group(ranks=None, timeout=None, backend=None, ...)
    backend = kwargs.get("backend", args[1] if len(args) > 1 else None)
    _NEW_GROUPS[0] += 1
    _emit("new_group", _STEP[0], "%s %s" % (list(ranks), "default" if backend is None else backend))
    return _NEW_GROUP(ranks, *args, **kwargs)


dist.new_group = _recorded_new_group


def sglang_init_distributed_environment(st, init_method, timeout_s):
    """maybe_init_distributed_environment_and_model_parallel's first half, as the step models it."""
    device = sgl_ps.get_local_torch_device()
    sgl_platform.set_device(device)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    sgl_ps.init_distributed_environment(
        world_size=world_size, rank=int(os.environ.get("RANK", "0")),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")), distributed_init_method=init_method,
        device_id=device, backend=sgl_platform.get_torch_distributed_backend_str(),
        timeout=timeout_s)
    with_id = sgl_platform.supports_distributed_device_id()
    st.text = "sglang %s: backend %s%s world coordinator [%d ranks]; %s" % (
        SGLANG_VERSION, dist.get_backend(), " device_id=%s" % device if with_id else " (no device_id)",
        dist.get_world_size(), "no device" if sgl_platform.is_cpu() else "current device %s" % device)


def _process_group_ranks(pg):
    try:
        return dist.get_process_group_ranks(pg)
    except Exception:  # noqa: BLE001
        return None  # not a member (NON_GROUP_MEMBER) or no group


def sglang_initialize_model_parallel(st, **degrees):
    """initialize_model_parallel; the step's text lists this rank's group of every kind."""
    before = _NEW_GROUPS[0]
    sgl_ps.initialize_model_parallel(
        data_parallel_size=degrees["dp"], classifier_free_guidance_degree=degrees["cfg"],
        sequence_parallel_degree=degrees["sp"], ulysses_degree=degrees["ulysses"],
        ring_degree=degrees["ring"], tensor_parallel_degree=degrees["tp"],
        pipeline_parallel_degree=degrees["pp"], vae_parallel_size=degrees["vae"])
    groups = {}
    for kind, attr in (("world", "_WORLD"), ("dp", "_DP"), ("cfg", "_CFG"), ("pp", "_PP"),
                       ("sp", "_SP"), ("tp", "_TP"), ("moe_ep", "_SRT_MOE_EP"),
                       ("replica", "_REPLICA"), ("encoder_dp", "_ENCODER_DP"),
                       ("vae_decode", "_VAE_DECODE"), ("cfg_sp", "_CFG_SP")):
        c = getattr(sgl_ps, attr, None)
        if c is not None:
            groups[kind] = list(c.ranks)
    for kind, pg in (("ulysses", sgl_ps._SP.ulysses_group), ("ring", sgl_ps._SP.ring_group),
                     ("dit", sgl_ps._DIT), ("vae", sgl_ps._VAE)):
        ranks = _process_group_ranks(pg) if pg is not None else None
        if ranks is not None:
            groups[kind] = ranks
    st.text = "sglang %s: %d new_group calls; groups %s" % (
        SGLANG_VERSION, _NEW_GROUPS[0] - before,
        " ".join("%s=%s" % (k, groups[k]) for k in sorted(groups)))
# ---- end of the sglang prelude ---------------------------------------------------------------
