#!/usr/bin/env python3
"""Writes docs/api-coverage.md: every public function of the torch.distributed that scen targets
(PyTorch 2.15), read from torch itself, with what `scen record` and the simulator do with it.

The list of functions comes from torch (distributed_c10d.__all__ and torch.distributed's own
functions); what the recorder wraps comes from scen's recorder (python/scen/recorder.py, OPS and
ALIASES). The verdict for each function is the table below: a function torch has and the table
does not is an error, so a new torch cannot add a call scen drops without anyone deciding.

Usage: scripts/api-coverage.py [--check]   (with the torch venv's python: scripts/install-torch-cpu.sh)
--check: exit 1 when docs/api-coverage.md is not what this writes.
"""
import importlib.util
import inspect
import os
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "api-coverage.md")

STEP, WIRE, REFUSED, LOCAL, GAP = ("step", "its calls", "refused", "local", "not recorded")

# function -> (what scen does, how). STEP: recorded as a scenario step of that name and simulated;
# WIRE: recorded as the torch.distributed calls it makes (what it sends); REFUSED: `scen record`
# exits 2 naming the call and its file:line; LOCAL: no communication, decides no outcome by
# itself (its result shows in the calls that follow); GAP: left out of a recording.
TABLE = {
    "init_process_group": (STEP, "backend, init_method (env://, tcp://host:port, file://), timeout, device_id, rank, world_size, store (a TCPStore or PrefixStore the program made: no rendezvous, no default_pg prefix)"),
    "destroy_process_group": (STEP, "with or without a group; a second init after it"),
    "new_group": (STEP, "ranks, backend, timeout, use_local_synchronization, sort_ranks; a non-member's NON_MEMBER handle"),
    "new_subgroups": (WIRE, "the new_group calls it makes"),
    "new_subgroups_by_enumeration": (WIRE, "the new_group calls it makes"),
    "split_group": (STEP, "parent, split_ranks (each list in the new group's order), timeout; gloo parents (another backend's is scen's limit error); backend= and pg_options= are refused"),
    "shrink_group": (STEP, "ranks_to_exclude, group, shrink_flags: torch's checks, then gloo's TypeError (gloo cannot shrink); another backend's shrink is scen's limit error; pg_options= is refused"),
    "set_timeout": (STEP, "group, timeout: the group's later collectives use it; its send/recv and works already posted keep the old one; a non-member raises"),
    "all_reduce": (STEP, "reduce op (PREMUL_SUM refused), async_op"),
    "all_reduce_coalesced": (STEP, "count of tensors"),
    "broadcast": (STEP, "src / group_src, async_op"),
    "reduce": (STEP, "dst / group_dst, reduce op"),
    "all_gather": (STEP, "a tensor_list not one per member like the tensor is refused"),
    "all_gather_coalesced": (STEP, "count of tensors"),
    "all_gather_into_tensor": (STEP, "an output not group size x input is refused, unless gloo's check raised at the call (written as that raise)"),
    "all_gather_single": (STEP, "as all_gather_into_tensor (torch 2.15: that is its alias)"),
    "reduce_scatter": (STEP, "an input_list not one per member like the output is refused"),
    "reduce_scatter_tensor": (STEP, "an input not group size x output is refused, unless gloo's check raised at the call (written as that raise: torch 2.15 gloo does)"),
    "reduce_scatter_single": (STEP, "as reduce_scatter_tensor (torch 2.15: that is its alias)"),
    "gather": (STEP, "dst; a gather_list not one per member like the tensor is refused"),
    "gather_single": (REFUSED, "a gather into one tensor: no step in the format; gloo raises at the call (`Backend gloo does not support gather_single`), written as that raise"),
    "gather_into_tensor": (REFUSED, "a gather into one tensor: no step in the format; gloo raises at the call (`Backend gloo does not support gather_single`), written as that raise"),
    "scatter": (STEP, "src; a scatter_list not one per member like the tensor is refused"),
    "all_to_all": (STEP, "lists of any sizes (uneven rows)"),
    "all_to_all_single": (STEP, "split sizes, or none"),
    "send": (STEP, "dst / group_dst, tag"),
    "recv": (STEP, "src, tag; a recv from any source that never completed is refused"),
    "isend": (STEP, "dst, tag, and its Work: posted at the call, waited at `wait` (gloo: the data goes once the recv is posted)"),
    "irecv": (STEP, "src, tag, and its Work: posted at the call, received at `wait`"),
    "batch_isend_irecv": (STEP, "its ops in order, with their peers and tags"),
    "barrier": (STEP, "async_op and its Work"),
    "monitored_barrier": (STEP, "timeout, wait_all_ranks"),
    "all_gather_object": (WIRE, "all_gather_single of the pickled sizes, then of the bytes padded to the longest"),
    "gather_object": (WIRE, "all_gather of the pickled sizes, then gather of the bytes"),
    "broadcast_object_list": (WIRE, "broadcast of the sizes, then of the bytes"),
    "scatter_object_list": (WIRE, "broadcast of the longest size, then scatters (a list of the wrong length is refused as its scatter)"),
    "send_object_list": (WIRE, "send of the sizes, then of the bytes"),
    "recv_object_list": (WIRE, "recv of the sizes, then of the bytes"),
    "record_comm": (LOCAL, "a profiling hook"),
}
LOCAL_NAMES = (
    "get_backend", "get_backend_config", "get_backend_impl", "get_default_backend_for_device",
    "get_global_rank", "get_group_rank", "get_node_local_rank", "get_pg_count",
    "get_process_group_ranks", "get_rank", "get_world_size", "is_backend_available",
    "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available",
    "is_torchelastic_launched", "is_ucc_available", "is_xccl_available", "supports_complex",
    "is_available",
)
for n in LOCAL_NAMES:
    TABLE.setdefault(n, (LOCAL, "a query"))
TABLE.update({
    "init_device_mesh": (WIRE, "the new_group calls it makes; a 1-D mesh is the world group (a mesh made by splitting is refused on use)"),
    "breakpoint": (REFUSED, "torch 2.15 sets every group's timeout to 3600 s, stops one rank in pdb and then runs a barrier: what follows is the debugging session's"),
    "rendezvous": (REFUSED, "a rendezvous a program drives itself: its store is the program's own (init_process_group's own is simulated)"),
    "register_rendezvous_handler": (REFUSED, "a custom init_method scheme: its store is the program's own code"),
})

# Arguments and uses that decide outcomes, beyond the functions (issue 30's list).
USES = [
    ("time between calls", STEP, "a sleep step (>= 200 ms between calls, a late start >= 1 s, before a raise or exit)"),
    ("a rank's own exception", STEP, "a raise step with its text and file:line"),
    ("a rank's own exit (sys.exit, exit, os._exit)", STEP, "an exit step with its code (os._exit: without teardown); a `raise SystemExit(n)` written out is recorded as completed"),
    ("a rank's signal to itself (os.kill(os.getpid(), sig), signal.raise_signal, os.abort)", STEP, "an exit step with its signal, when its default action ends the process"),
    ("a rank stopped by torchrun's agent", STEP, "written as stopped by it, with the agent's check and stop as the run measured them (`[world] agent_check_ms`, `agent_stop_ms`)"),
    ("a job cut by --timeout-s", STEP, "`outcome = \"running\"` with `after_s`"),
    ("`work.wait(timeout=)`", STEP, "a wait step with timeout_s (an isend/irecv's: gloo's own send/recv timeout, counted from the wait)"),
    ("each rank's MASTER_PORT", STEP, "a [[world.rank]] env per rank where ranks differ"),
    ("TORCH_DISTRIBUTED_DEBUG, TORCH_DIST_INIT_BARRIER, TORCH_XCCL_BLOCKING_WAIT, ZE_AFFINITY_MASK", STEP, "world env where every rank agrees"),
    ("tensor values", GAP, "each tensor is filled with its rank: a program whose control flow depends on a reduced value takes the recorded path"),
    ("the default group's store (`_get_default_store()`): set, get, add, check, wait, compare_set, delete_key, num_keys", STEP, "get_default_store (the program holds the store past destroy_process_group) and store_* steps: keys under the default group's prefix, a get or wait blocks up to the store's (or wait's) timeout, and a store whose host exited raises torch's own texts"),
    ("a program's own TCPStore and PrefixStore, and set, get, add, check, wait, compare_set, delete_key, num_keys on them", STEP, "tcp_store and prefix_store steps (handles s1, s2, ... per process; a master freed before its program ended, port 0, multi_tenant, master_listen_fd and use_libuv=False are refused), store_* steps naming their `store`, and init_process_group(store=) on one; a master's server closes when the program's globals are freed in its teardown (`globals_freed_ms`, measured by `scen record`), one init_process_group holds when its process ends"),
    ("other direct Store use (making a FileStore / HashStore; append, multi_get, multi_set, queue_push, set_timeout, ... on any store; a store scen does not know)", REFUSED, "no step in the format: the program's own call is refused with its file:line (init_process_group's and torch's own store traffic is simulated)"),
]


def torch_functions():
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        names = {n for n in c10d.__all__ if inspect.isfunction(getattr(c10d, n, None))}
        names |= {n for n in dir(dist)
                  if not n.startswith("_") and inspect.isfunction(getattr(dist, n, None))}
    return sorted(names)


def recorder():
    spec = importlib.util.spec_from_file_location(
        "scen_recorder", os.path.join(ROOT, "python", "scen", "recorder.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def render(names, rec):
    import torch
    wrapped = set(rec.OPS)
    lines = [
        "# torch.distributed coverage (generated)",
        "",
        f"Every public function of torch.distributed {torch.__version__.split('+')[0]} (read from torch by",
        "`scripts/api-coverage.py`, which writes this page; `cargo test --test torch -- api_coverage`",
        "checks it is current) and what `scen record` and the simulator do with it:",
        "",
        "- **step**: recorded as the scenario step of that name and simulated;",
        "- **its calls**: recorded as the torch.distributed calls it makes, what it sends;",
        "- **refused**: `scen record` exits 2 naming the call and its file:line;",
        "- **local**: no communication; it decides no outcome by itself;",
        "- **not recorded**: left out of a recording (a known gap, listed so).",
        "",
        "A function torch has and this table does not is an error of the script, so a new torch",
        "cannot add a call a recording drops without a decision. *wrapped*: the recorder wraps the",
        "function itself (python/scen/recorder.py).",
        "",
        "| function | scen | wrapped | how |",
        "|---|---|---|---|",
    ]
    for n in names:
        what, how = TABLE[n]
        w = "yes" if n in wrapped else ""
        lines.append(f"| `{n}` | {what} | {w} | {how} |")
    lines += ["", "Uses and arguments that decide an outcome:", "",
              "| use | scen | how |", "|---|---|---|"]
    for use, what, how in USES:
        lines.append(f"| {use} | {what} | {how} |")
    counts = {}
    for n in names:
        counts[TABLE[n][0]] = counts.get(TABLE[n][0], 0) + 1
    lines += ["", "Functions: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ".", ""]
    return "\n".join(lines)


def main():
    names = torch_functions()
    missing = [n for n in names if n not in TABLE]
    if missing:
        sys.exit(f"scripts/api-coverage.py: torch has functions the table does not classify: {missing}")
    rec = recorder()
    bad = [n for n in names if TABLE[n][0] in (STEP, REFUSED) and n not in rec.OPS]
    if bad:
        sys.exit(f"scripts/api-coverage.py: the table says these are recorded or refused, the recorder does not wrap them: {bad}")
    text = render(names, rec)
    if "--check" in sys.argv[1:]:
        old = open(OUT).read() if os.path.exists(OUT) else ""
        if old != text:
            sys.exit("docs/api-coverage.md is stale: run scripts/api-coverage.py with the torch venv's python")
        print(f"docs/api-coverage.md is current ({len(names)} functions)")
        return
    with open(OUT + ".tmp", "w") as f:
        f.write(text)
    os.replace(OUT + ".tmp", OUT)
    print(f"wrote {OUT} ({len(names)} functions)")


if __name__ == "__main__":
    main()
