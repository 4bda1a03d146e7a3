"""scen's call recorder: what a torch.distributed program did, rank by rank, for `scen record`.

`scen record -- torchrun ... prog.py` puts this file (and a sitecustomize.py that calls
`install()`) first on PYTHONPATH and sets SCEN_RECORD_DIR; the program itself is not changed.
When torch.distributed is imported, its public API is wrapped: init_process_group, new_group,
destroy_process_group, every collective and point-to-point call, Work.wait. Each call becomes
one JSON line in SCEN_RECORD_DIR/proc<pid>.jsonl, written and flushed as it happens (a rank
that dies still leaves what it did), with the user's file:line (the first frame outside torch
and this file). The process's end is recorded too: `exit`, or `raise` with the exception.
Without SCEN_RECORD_DIR `install()` does nothing. The record format is read by scen's
crates/core/src/record (docs/record.md).
"""

import functools
import itertools
import importlib.abc
import importlib.util
import json
import os
import sys
import threading
import time
import traceback

ENV_DIR = "SCEN_RECORD_DIR"
ENV_LIFE = "SCEN_RECORD_LIFE"  # the socket of scen record's lifelines (a process's real end)
_ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_PORT",
             "TORCHELASTIC_RUN_ID", "TORCH_DIST_INIT_BARRIER", "TORCH_DISTRIBUTED_DEBUG",
             "TORCH_XCCL_BLOCKING_WAIT", "ZE_AFFINITY_MASK")
_HERE = os.path.abspath(__file__)
_state = threading.local()
_lock = threading.Lock()
_out = {"fd": None}
_next = itertools.count()  # call numbers; next() is atomic under the GIL
_groups = {}  # id(ProcessGroup) -> (handle, the object, kept so its id stays unique)
_works = {}  # id(Work) -> (work name, the object, its batch_isend_irecv call's number or None)
_failed_batches = set()  # batch_isend_irecv calls whose wait raised (recorded once)
_counts = {"group": 0, "work": 0, "store": 0}
_TORCH_DIR = None


def _lifeline():
    """A connection to `scen record` that the kernel closes when this process has ended, its
    interpreter's teardown done: scen notes the time (`gone`), how long the process lived on
    after its program (its peers still reach its sockets meanwhile)."""
    path = os.environ.get(ENV_LIFE)
    if not path:
        return None
    try:
        import socket
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(b"%d\n" % os.getpid())
        return s
    except OSError:
        return None  # never let the recorder break the program


def _drop_lifeline():
    """A forked child must not hold its parent's lifeline open."""
    s = _out.pop("life", None)
    if s is not None:
        s.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_drop_lifeline)


def _write(rec):
    """One record, one line, written at once (O_APPEND) so a killed rank keeps what it wrote."""
    with _lock:
        if _out.get("pid") != os.getpid():
            _out["fd"] = None  # a forked child records to a file of its own
        if _out["fd"] is None:
            _out["pid"] = os.getpid()
            _out["life"] = _lifeline()
            path = os.path.join(os.environ[ENV_DIR], "proc%d.jsonl" % os.getpid())
            _out["fd"] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            env = {k: os.environ[k] for k in _ENV_KEYS if k in os.environ}
            head = dict(ev="proc", pid=os.getpid(), env=env, argv=sys.argv)
            os.write(_out["fd"], (json.dumps(head) + "\n").encode())
        os.write(_out["fd"], (json.dumps(rec) + "\n").encode())


def _where():
    """file:line of the innermost frame outside torch and this file (the user's call)."""
    f = sys._getframe(1)
    while f is not None:
        name = os.path.abspath(f.f_code.co_filename)
        if name != _HERE and not (_TORCH_DIR and name.startswith(_TORCH_DIR)) \
                and not name.startswith("<frozen"):
            return "%s:%d" % (name, f.f_lineno)
        f = f.f_back
    return "?:0"


_DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "float64": "f64",
           "int64": "i64", "int32": "i32", "int8": "i8", "uint8": "u8", "bool": "bool"}


def _tensor(t):
    if t is None or not hasattr(t, "shape"):
        return None
    dt = str(t.dtype).replace("torch.", "")
    return dict(shape=[int(d) for d in t.shape], dtype=_DTYPES.get(dt, dt), device=t.device.type)


def _tensors(ts):
    return [_tensor(t) for t in ts] if isinstance(ts, (list, tuple)) else None


def _group(g):
    import torch.distributed as dist
    if g is None or g is dist.GroupMember.WORLD:
        return "WORLD"
    if isinstance(g, int) and g == dist.GroupMember.NON_GROUP_MEMBER:
        return "NON_MEMBER"
    h = _groups.get(id(g))
    return h[0] if h else "UNKNOWN"


def _op_name(op):
    s = str(op).split(".")[-1].lower()
    return "product" if s == "product" else s


def _now_ms():
    """Wall-clock milliseconds: the time between calls, and between ranks' first calls."""
    return int(time.time() * 1000)


def _timeout_ms(t):
    """A timedelta, or the seconds monitored_barrier also takes (torch converts them)."""
    if t is None:
        return None
    if isinstance(t, (int, float)):
        return int(t * 1000)
    return int(t.total_seconds() * 1000)


def _args(fn, a, kw):
    """The call's arguments by name, from the real function's signature."""
    import inspect
    try:
        b = inspect.signature(fn).bind_partial(*a, **kw)
    except TypeError:
        return {}
    return dict(b.arguments)


def _describe(op, v):
    """The record fields of one call, from its bound arguments `v`."""
    d = {}
    if "group" in v or op not in ("init_process_group", "new_group"):
        d["group"] = _group(v.get("group"))
    if "async_op" in v:
        d["async_op"] = bool(v["async_op"])
    for k in ("op",):
        if k in v and v[k] is not None:
            d["reduce_op"] = _op_name(v[k])
    for k in ("src", "dst", "group_src", "group_dst"):
        if k in v and v[k] is not None:
            d[k] = int(v[k])
    if v.get("tag"):
        d["tag"] = int(v["tag"])
    for k in ("tensor", "output", "input", "output_tensor", "input_tensor"):
        if k in v:
            d[k] = _tensor(v[k])
    for k in ("tensors", "tensor_list", "output_tensor_list", "input_tensor_list", "gather_list",
              "scatter_list", "input_list", "output_list"):
        if k in v and v[k] is not None:
            d[k] = _tensors(v[k])
    for k in ("output_split_sizes", "input_split_sizes", "ranks"):
        if k in v and v[k] is not None:
            d[k] = [int(x) for x in v[k]]
    if op == "init_process_group":
        for k in ("backend", "init_method"):
            if v.get(k) is not None:
                d[k] = str(v[k])
        if v.get("device_id") is not None:
            d["device_id"] = str(v["device_id"])
        for k in ("rank", "world_size"):
            if v.get(k) is not None and int(v[k]) >= 0:
                d[k] = int(v[k])
        if v.get("store") is not None:
            # A store the program made: its handle; another (refused: steps.rs) as true.
            d["store"] = (_store_ref(v["store"]) or {}).get("store", True)
    if op == "new_group":
        if v.get("backend") is not None:
            d["backend"] = str(v["backend"])
        if v.get("use_local_synchronization"):
            d["use_local_synchronization"] = True
        if v.get("sort_ranks") is False:
            d["sort_ranks"] = False
        if v.get("device_id") is not None:
            d["device_id"] = str(v["device_id"])
    if op == "shrink_group":
        rx = v.get("ranks_to_exclude")
        d["ranks_to_exclude"] = [int(x) for x in rx] if isinstance(rx, list) else str(rx)
        if v.get("shrink_flags") is not None:
            d["shrink_flags"] = int(v["shrink_flags"])
        if v.get("pg_options") is not None:
            d["pg_options"] = str(v["pg_options"])
    if op == "split_group":
        d["group"] = _group(v.get("parent_pg"))
        if v.get("split_ranks") is not None:
            d["split_ranks"] = [[int(x) for x in s] for s in v["split_ranks"]]
        for k in ("backend", "pg_options"):
            if v.get(k) is not None:
                d[k] = str(v[k])
    if v.get("timeout") is not None:
        d["timeout_ms"] = _timeout_ms(v["timeout"])
    if op == "monitored_barrier" and v.get("wait_all_ranks"):
        d["wait_all_ranks"] = True
    if op == "batch_isend_irecv":
        d["ops"] = [dict(op=getattr(p.op, "__name__", str(p.op)), peer=int(p.peer),
                         tensor=_tensor(p.tensor), group=_group(p.group),
                         tag=int(getattr(p, "tag", 0) or 0))
                    for p in v.get("p2p_op_list") or []]
    return d


def _wrap(op, fn):
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        if getattr(_state, "inside", False):
            return fn(*a, **kw)  # torch calling its own API: not the user's call
        _state.inside = True
        try:
            i = next(_next)
            try:
                rec = dict(ev="call", i=i, op=op, at=_where(), t=_now_ms(),
                           **_describe(op, _args(fn, a, kw)))
            except Exception as e:  # never let the recorder break the program
                rec = dict(ev="call", i=i, op=op, at=_where(), t=_now_ms(),
                           note="not described: %r" % e)
            _write(rec)
            try:
                ret = fn(*a, **kw)
            except BaseException as e:
                _write(dict(ev="error", i=i, t=_now_ms(), exc=type(e).__name__, msg=_message(e)))
                raise
            _write(dict(ev="done", i=i, t=_now_ms(), **_result(op, ret, a, kw, i)))
            return ret
        finally:
            _state.inside = False
    return wrapper


# A program's own c10d Store: making one, and each method that reads, writes or waits on it.
# A TCPStore or PrefixStore the program makes is recorded with its arguments and a handle ("s1",
# "s2", ... per process, in order of making); set, get, add, check, wait, compare_set,
# delete_key and num_keys on such a store or on the default group's (`_get_default_store()`)
# are steps, recorded with their arguments (a value as text: one that is not UTF-8 reaches the
# scenario with replacement characters, which no step but compare_set compares, and such a
# compare_set is refused). Every other store and method has no step in the format and is
# recorded by name only, so that `scen record` refuses it (crates/core/src/record/steps.rs)
# rather than run the program without it. torch's own use (its rendezvous,
# _store_based_barrier, its C++ backends) is not the program's and passes.
STORE_CLASSES = ("TCPStore", "FileStore", "HashStore", "PrefixStore")
STORE_METHODS = ("set", "get", "add", "append", "check", "compare_set", "delete_key", "wait",
                 "num_keys", "list_keys", "multi_get", "multi_set", "queue_push", "queue_pop",
                 "queue_len", "barrier", "set_timeout")
# Each recorded method's parameters after self, in order.
STORE_STEPS = {"set": ("key", "value"), "get": ("key",), "add": ("key", "amount"),
               "check": ("keys",), "wait": ("keys", "timeout"),
               "compare_set": ("key", "expected_value", "desired_value"),
               "delete_key": ("key",), "num_keys": ()}
# TCPStore's parameters after self, in order (torch 2.15).
TCP_STORE_ARGS = ("host_name", "port", "world_size", "is_master", "timeout", "wait_for_workers",
                  "multi_tenant", "master_listen_fd", "use_libuv")
_stores = {}  # id(store) -> (handle, weakref to it, the store it wraps, kept alive with it)


def _store_ref(s):
    """Where a call's store is: {"store": handle} for one the program made (and still has),
    {"default_store": True} for the default group's, else None (a store scen does not know)."""
    entry = _stores.get(id(s))
    if entry is not None and entry[1]() is s:
        return {"store": entry[0]}
    try:
        import torch.distributed as dist
        if s is dist.distributed_c10d._get_default_store():
            return {"default_store": True}
    except Exception:
        pass
    return None


def _store_args(op, a, kw):
    """A step's arguments of a call on a store scen knows, else {} (refused by name)."""
    method = op[len("Store."):]
    where = _store_ref(a[0]) if method in STORE_STEPS and a else None
    if where is None:
        return {}
    named = dict(zip(STORE_STEPS[method], a[1:]))
    named.update(kw)
    out = dict(where)
    for name, v in named.items():
        if name == "timeout":
            out["timeout_ms"] = _timeout_ms(v)
        elif isinstance(v, (bytes, bytearray)):
            try:
                out[name] = bytes(v).decode("utf-8")
            except UnicodeDecodeError:
                # A value only compare_set reads: its bytes decide what it sets, and a scenario
                # holds text, so such a compare_set is refused rather than compared otherwise.
                if method == "compare_set":
                    return {}
                out[name] = bytes(v).decode("utf-8", "replace")
        elif isinstance(v, (list, tuple)):
            out[name] = [str(k) for k in v]
        else:
            out[name] = v if isinstance(v, int) and not isinstance(v, bool) else str(v)
    return out


def _new_store_args(op, a, kw):
    """A TCPStore's or PrefixStore's arguments and the handle it gets ("as"); steps.rs refuses
    what the format cannot say (port 0, multi_tenant, master_listen_fd, use_libuv=False, a
    store it does not know)."""
    _counts["store"] += 1
    out = {"as": "s%d" % _counts["store"]}
    if op == "PrefixStore":
        named = dict(zip(("prefix", "store"), a[1:]), **kw)
        out["prefix"] = str(named.get("prefix"))
        out.update(_store_ref(named.get("store")) or {})
        return out
    named = dict(zip(TCP_STORE_ARGS, a[1:]), **kw)
    out.update(host=str(named.get("host_name")), port=int(named.get("port")),
               is_master=bool(named.get("is_master", False)),
               wait_for_workers=bool(named.get("wait_for_workers", True)))
    if named.get("world_size") is not None:
        out["world_size"] = int(named["world_size"])
    if named.get("timeout") is not None:
        out["timeout_ms"] = _timeout_ms(named["timeout"])
    if named.get("multi_tenant"):
        out["multi_tenant"] = True
    if named.get("master_listen_fd") is not None:
        out["master_listen_fd"] = True
    if not named.get("use_libuv", True):
        out["use_libuv"] = False
    return out


def _made_store(args, i, a, kw):
    """A store the program made: known by its handle while it lives. A PrefixStore keeps the
    store it wraps alive (torch does, under the Python object); a master TCPStore freed before
    the program ended is noted ("freed"), which steps.rs refuses (scen holds a program's stores
    until its process ends)."""
    import weakref
    s = a[0]
    inner = kw.get("store", a[2] if len(a) > 2 else None) if "prefix" in args else None
    _stores[id(s)] = (args["as"], weakref.ref(s), inner)
    master = bool(args.get("is_master"))
    if master:
        _out["masters"] = True

    def freed(key=id(s)):
        _stores.pop(key, None)
        if master and not _out.get("ended"):
            try:
                _write(dict(ev="freed", i=i, t=_now_ms()))
            except Exception:
                pass
    weakref.finalize(s, freed).atexit = False


def _wrap_store(op, fn):
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        caller = os.path.abspath(sys._getframe(1).f_code.co_filename)
        if getattr(_state, "inside", False) or caller == _HERE \
                or (_TORCH_DIR and caller.startswith(_TORCH_DIR)):
            return fn(*a, **kw)
        i = next(_next)
        try:
            if op.startswith("Store."):
                args = _store_args(op, a, kw)
            elif op in ("TCPStore", "PrefixStore"):
                args = _new_store_args(op, a, kw)
            else:
                args = {}
        except Exception:  # never let the recorder break the program
            args = {}
        _write(dict(ev="call", i=i, op=op, at=_where(), t=_now_ms(), **args))
        try:
            ret = fn(*a, **kw)
        except BaseException as e:
            _write(dict(ev="error", i=i, t=_now_ms(), exc=type(e).__name__, msg=_message(e)))
            raise
        if "as" in args:
            try:
                _made_store(args, i, a, kw)
            except Exception:
                pass
        _write(dict(ev="done", i=i, t=_now_ms()))
        return ret
    return wrapper


def _patch_stores(c10d_ext):
    store = getattr(c10d_ext, "Store", None)
    for m in STORE_METHODS:
        fn = getattr(store, m, None)
        if fn is not None:
            setattr(store, m, _wrap_store("Store." + m, fn))
    for name in STORE_CLASSES:
        cls = getattr(c10d_ext, name, None)
        if cls is not None:
            cls.__init__ = _wrap_store(name, cls.__init__)


def _result(op, ret, a, kw, i):
    import torch.distributed as dist
    out = {}
    if op == "init_process_group":
        out.update(rank=dist.get_rank(), world_size=dist.get_world_size(),
                   backend=str(dist.get_backend()))
    elif op in ("new_group", "split_group", "shrink_group"):
        _counts["group"] += 1
        handle = "g%d" % _counts["group"]
        if isinstance(ret, int):
            out.update(handle=handle, member=False)
        else:
            _groups[id(ret)] = (handle, ret)
            out.update(handle=handle, member=True)
    elif op in ("recv", "irecv") and isinstance(ret, int):
        out.update(src=ret)
    if ret is not None and op not in ("new_group", "split_group", "shrink_group"):
        works = ret if isinstance(ret, list) else [ret]
        names = []
        for w in works:
            if hasattr(w, "wait") and not isinstance(w, int):
                _counts["work"] += 1
                name = "w%d" % _counts["work"]
                # A batch's works carry the batch call's number: the scenario's
                # batch_isend_irecv step waits for its operations itself.
                _works[id(w)] = (name, w, i if op == "batch_isend_irecv" else None)
                names.append(name)
        if names:
            out["works"] = names
    return out


def _message(e):
    text = str(e)
    cut = text.find("\nException raised from ")
    return (text[:cut] if cut >= 0 else text).strip()


def _wrap_wait(orig):
    @functools.wraps(orig)
    def wait(self, *a, **kw):
        entry = _works.get(id(self))
        if entry is None or getattr(_state, "inside", False):
            return orig(self, *a, **kw)
        if entry[2] is not None:
            # A batch_isend_irecv work's wait is the batch call's own (not a call of its own):
            # while it waits the batch call runs again ("reopen", then "done" once more), so a
            # rank killed or cut in it is in the batch's step, and what it raises is that
            # call's error (the rank fails in the batch's step, as the simulator's does,
            # rather than in a raise of the program after it).
            batch = entry[2]
            if batch not in _failed_batches:
                _write(dict(ev="reopen", i=batch, t=_now_ms()))
            try:
                ret = orig(self, *a, **kw)
            except BaseException as e:
                if batch not in _failed_batches:
                    _failed_batches.add(batch)
                    _write(dict(ev="error", i=batch, t=_now_ms(), exc=type(e).__name__,
                                msg=_message(e)))
                raise
            if batch not in _failed_batches:
                _write(dict(ev="reclose", i=batch, t=_now_ms()))
            return ret
        _state.inside = True
        try:
            i = next(_next)
            rec = dict(ev="call", i=i, op="wait", work=entry[0], at=_where(), t=_now_ms())
            t = kw.get("timeout", a[0] if a else None)
            if t is not None:
                try:
                    if _timeout_ms(t) > 0:  # 0: c10d's kNoTimeout, the default
                        rec["timeout_ms"] = _timeout_ms(t)
                except Exception:
                    rec["note"] = "timeout not read: %r" % (t,)
            _write(rec)
            try:
                ret = orig(self, *a, **kw)
            except BaseException as e:
                _write(dict(ev="error", i=i, t=_now_ms(), exc=type(e).__name__, msg=_message(e)))
                raise
            _write(dict(ev="done", i=i, t=_now_ms()))
            return ret
        finally:
            _state.inside = False
    return wait


OPS = ("init_process_group", "new_group", "destroy_process_group", "all_reduce", "broadcast",
       "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "reduce",
       "gather", "scatter", "all_to_all", "all_to_all_single", "send", "recv", "isend", "irecv",
       "batch_isend_irecv", "barrier", "monitored_barrier", "all_reduce_coalesced",
       "all_gather_coalesced", "all_gather_single", "reduce_scatter_single",
       # No step in the scenario format: recorded so that `scen record` refuses them by name
       # rather than leave them out (crates/core/src/record/steps.rs, NO_STEP).
       "gather_single", "gather_into_tensor", "set_timeout", "split_group", "shrink_group",
       "breakpoint", "rendezvous", "register_rendezvous_handler")

# torch 2.15's own names for the `*_tensor` collectives (those are now aliases of these, which
# take the same arguments). Object collectives (all_gather_object, gather_object) call them
# directly: recorded, they are what those send on the wire (sizes, then the pickled bytes).
ALIASES = {"all_gather_single": "all_gather_into_tensor",
           "reduce_scatter_single": "reduce_scatter_tensor"}


def patch(dist):
    """Wraps the public API of the torch.distributed module `dist` (once)."""
    global _TORCH_DIR
    if getattr(dist, "_scen_recorded", False) or not dist.is_available():
        return
    import torch
    _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    c10d = getattr(dist, "distributed_c10d", None)
    for op in OPS:
        fn = getattr(dist, op, None)
        if fn is not None:
            w = _wrap(ALIASES.get(op, op), fn)
            setattr(dist, op, w)
            # The same object in distributed_c10d: torch compares with its own globals
            # (P2POp accepts only `isend`/`irecv`), and torch's own callers are recorded too
            # (calls made inside a recorded call are not).
            if c10d is not None and getattr(c10d, op, None) is fn:
                setattr(c10d, op, w)
    try:
        from torch._C._distributed_c10d import Work
        Work.wait = _wrap_wait(Work.wait)
    except Exception:
        pass
    try:
        import torch._C._distributed_c10d as c10d_ext
        _patch_stores(c10d_ext)
    except Exception:
        pass
    # Taking the default group's store: the program then holds it (and, on the rank that hosts
    # it, its server) past destroy_process_group.
    if c10d is not None and getattr(c10d, "_get_default_store", None) is not None:
        c10d._get_default_store = _wrap_store("get_default_store", c10d._get_default_store)
    dist._scen_recorded = True
    hook = sys.excepthook

    def excepthook(ty, e, tb):
        try:
            frames = [f for f in traceback.extract_tb(tb)
                      if os.path.abspath(f.filename) != _HERE
                      and not (_TORCH_DIR and os.path.abspath(f.filename).startswith(_TORCH_DIR))]
            at = "%s:%d" % (os.path.abspath(frames[-1].filename), frames[-1].lineno) if frames else "?:0"
            _out["ended"] = True
            _write(dict(ev="raise", exc=ty.__name__, msg=_message(e), at=at, t=_now_ms()))
        except Exception:
            pass
        hook(ty, e, tb)
    sys.excepthook = excepthook
    import atexit
    atexit.register(_at_exit)


class _GlobalsFreed:
    """Planted in the program's globals: freed when they are, early in the interpreter's
    teardown, and a TCPStore the program holds there closes its server then (measured, torch
    2.15: 9 ms apart, 0.2 s after the program's end of a 0.7 s teardown). Written only where
    the program made a master store; all it needs is bound here, as module globals may be
    gone by then."""

    def __del__(self, out=_out, write=os.write, now=time.time, pid=os.getpid):
        try:
            if out.get("masters") and out.get("fd") is not None and out.get("pid") == pid():
                write(out["fd"], b'{"ev": "globals", "t": %d}\n' % int(now() * 1000))
        except Exception:
            pass


def _plant_globals_sentinel():
    main = sys.modules.get("__main__")
    if main is not None:
        main.__dict__.setdefault("__scen_globals_freed__", _GlobalsFreed())


def _at_exit():
    """The program has ended: a master store it frees from here on goes with its globals."""
    _out["ended"] = True
    if _out["fd"] is not None:
        _write(dict(ev="exit", t=_now_ms()))


_FATAL_BY_DEFAULT = (1, 3, 6, 9, 11, 15)  # SIGHUP SIGQUIT SIGABRT SIGKILL SIGSEGV SIGTERM


def _exit_status(code):
    """The status sys.exit(code) gives the process: None 0, an int its low byte, else 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1  # a message: Python prints it and exits 1


def _own_end(rec):
    """The program ending its process by its own hand (sys.exit, os._exit, a fatal signal to
    itself) on the main thread of a recorded rank: written before it happens, since a signal
    leaves no other trace. A call recorded after it means the exit was caught (parse.rs)."""
    if _out["fd"] is None or _out.get("pid") != os.getpid() or getattr(_state, "inside", False) \
            or threading.current_thread() is not threading.main_thread():
        return
    try:
        _out["ended"] = True
        rec.update(ev="end", at=_where(), t=_now_ms())
        _write(rec)
    except Exception:
        pass


def _ends_own_process(pid, sig):
    import signal
    try:
        sig = int(sig)
        default = sig == signal.SIGKILL or signal.getsignal(sig) in (signal.SIG_DFL, None)
    except (TypeError, ValueError):
        return None
    return sig if pid == os.getpid() and default and sig in _FATAL_BY_DEFAULT else None


def _patch_ends():
    """Wraps the ways a program ends its own process, so its recording ends the same way."""
    import builtins
    import signal

    def wrap(fn, rec_of):
        @functools.wraps(fn)
        def wrapper(*a, **kw):
            rec = rec_of(*a, **kw)
            if rec is not None:
                _own_end(rec)
            return fn(*a, **kw)
        return wrapper

    def exit_rec(status=None, *_a, **_kw):
        return dict(how="exit", code=_exit_status(status))

    def now_rec(status=0, *_a, **_kw):
        return dict(how="os._exit", code=_exit_status(status))

    def kill_rec(pid=None, sig=None, *_a, **_kw):
        s = _ends_own_process(pid, sig)
        return dict(how="signal", signal=s) if s is not None else None

    def raise_rec(sig=None, *_a, **_kw):
        return kill_rec(os.getpid(), sig)

    sys.exit = wrap(sys.exit, exit_rec)
    os._exit = wrap(os._exit, now_rec)
    os.kill = wrap(os.kill, kill_rec)
    os.abort = wrap(os.abort, lambda *a, **kw: kill_rec(os.getpid(), signal.SIGABRT))
    signal.raise_signal = wrap(signal.raise_signal, raise_rec)
    # site's Quitter objects: `exit(3)` at a script's top. A `raise SystemExit(3)` written
    # out is not seen (replacing the builtin class would change what `except SystemExit`
    # catches): its rank is recorded as completed (docs/record.md).
    for name in ("exit", "quit"):
        if hasattr(builtins, name):
            setattr(builtins, name, wrap(getattr(builtins, name), exit_rec))


_ELASTIC_ERRORS = "torch.distributed.elastic.multiprocessing.errors"


def patch_agent(errors):
    """In torchrun's agent: each failed worker's exit status as the agent sees it (its
    `ProcessFailure`), so a worker it stopped after its program ended is recorded as stopped,
    not completed. Written to the agent's own file (a process without calls, which scen
    record reads for these only)."""
    cls = getattr(errors, "ProcessFailure", None)
    post = getattr(cls, "__post_init__", None)
    if post is None or getattr(post, "_scen", False):
        return

    def __post_init__(self):
        post(self)
        try:
            _write(dict(ev="worker_exit", pid=int(self.pid), exitcode=int(self.exitcode),
                        t=_now_ms()))
        except Exception:
            pass
    __post_init__._scen = True
    cls.__post_init__ = __post_init__


class _Finder(importlib.abc.MetaPathFinder):
    """Patches torch.distributed right after it is imported (torch imports it itself), and
    torchrun's failure records in its agent."""

    PATCHES = {"torch.distributed": patch, _ELASTIC_ERRORS: patch_agent}

    def __init__(self):
        self.todo = set(self.PATCHES)

    def find_spec(self, name, path, target=None):
        if name not in self.todo:
            return None
        self.todo.discard(name)
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if self.todo:
                sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        orig = spec.loader.exec_module
        fix = self.PATCHES[name]

        def exec_module(module):
            orig(module)
            try:
                fix(module)
            except Exception as e:
                print("scen record: could not patch %s: %r" % (name, e), file=sys.stderr)
        spec.loader.exec_module = exec_module
        return spec


def install():
    """Records this process when SCEN_RECORD_DIR is set; else does nothing."""
    if not os.environ.get(ENV_DIR):
        return
    if importlib.util.find_spec("torch") is None:
        # Said once per interpreter so scen can tell the user what to install.
        _write(dict(ev="no_torch", python=sys.executable))
        return
    _patch_ends()
    _plant_globals_sentinel()
    finder = _Finder()
    for name, fix in _Finder.PATCHES.items():
        mod = sys.modules.get(name)
        if mod is not None:
            finder.todo.discard(name)
            fix(mod)
    if finder.todo:
        sys.meta_path.insert(0, finder)
