# ---- scen prelude: identity, the scenario's faults, progress lines, tensors -------------------
# Not part of the scenario's program: helpers the steps below use. Progress goes to
# $SCEN_TORCH_PROGRESS/rank<R>.jsonl when `scen run --torch` started this program, else to stderr.
import json
import math
import os
import signal
import sys
import threading
import time

RANK = int(os.environ.get("RANK", "0"))
_T0 = time.time()
for _k, _v in ENV_OVERRIDES.get(RANK, {}).items():
    os.environ[_k] = _v
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))
WORLD_SIZE = int(os.environ.get("WORLD_SIZE", "1"))
LOCAL_WORLD_SIZE = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
NODE = int(os.environ.get("GROUP_RANK", "0"))
_VARS = dict(rank=float(RANK), local_rank=float(LOCAL_RANK), node=float(NODE),
             world_size=float(WORLD_SIZE), local_world_size=float(LOCAL_WORLD_SIZE))
_PROGRESS = os.environ.get("SCEN_TORCH_PROGRESS")
_EPOCH_MS = float(os.environ.get("SCEN_TORCH_EPOCH_MS", _T0 * 1000))
_OUT = None
if _PROGRESS:
    _OUT = os.open(os.path.join(_PROGRESS, "rank%d.jsonl" % RANK), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def _now_ms():
    return max(0, int(time.time() * 1000 - _EPOCH_MS))


def _emit(ev, step=None, text="", **more):
    if _OUT is not None:
        line = json.dumps(dict(ev=ev, step=step, text=text, t=_now_ms(), **more)) + "\n"
        os.write(_OUT, line.encode())
    else:
        where = "" if step is None else " #%d" % (step + 1)
        print("[rank %d]%s %s %s" % (RANK, where, ev, text), file=sys.stderr, flush=True)


_STEP = [0]


def _crash_timer():
    ms = CRASH_AT_MS.get(RANK)
    if ms is not None:
        def kill():
            _emit("crash", _STEP[0], "SIGKILL by fault")
            os.kill(os.getpid(), signal.SIGKILL)
        t = threading.Timer(max(0.0, (ms - _now_ms()) / 1000.0), kill)
        t.daemon = True
        t.start()


class step:
    """One scenario step: progress lines around it, the crash fault at its start."""

    def __init__(self, index, line):
        self.index, self.line = index, line
        self.text = ""

    def __enter__(self):
        _STEP[0] = self.index
        _emit("start", self.index, self.line)
        if CRASH_AT_STEP.get(RANK) == self.index:
            _emit("crash", self.index, "SIGKILL by fault")
            os.kill(os.getpid(), signal.SIGKILL)
        return self

    def __exit__(self, ty, e, tb):
        if e is None:
            _emit("done", self.index, self.text)
        return False


def _format_number(v):
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def _error_message(e):
    text = str(e)
    cut = text.find("\nException raised from ")
    if cut >= 0:
        text = text[:cut]
    return text.strip()


def run(main):
    """Runs the program; a raised exception ends this rank failed, as in a real script."""
    if _PROGRESS:
        _emit("hello", None, str(os.getpid()))
    delay = LATE_START_MS.get(RANK)
    if delay:
        time.sleep(delay / 1000.0)
    _crash_timer()
    try:
        main()
    except SystemExit as e:
        # sys.exit(code): the process's exit status says how it ended (the launcher reads it).
        if e.code in (None, 0):
            _emit("end", None, "")
        raise
    except BaseException as e:
        exc, msg = type(e).__name__, _error_message(e)
        _emit("fail", _STEP[0], "%s: %s" % (exc, msg), exc=exc, msg=msg)
        # Raised on, as in a real script: Python prints it and the process ends with the
        # interpreter's teardown (sockets, the TCPStore server, atexit), not at once.
        raise
    _emit("end", None, "")


def exception(name, text):
    """A raise step's exception that is not a plain builtin: class `name` (a subclass of the
    builtin of that name, else of Exception, as the program's own class) whose str() is `text`
    verbatim, so Python prints `name: text` as the step says (KeyError would print a repr)."""
    import builtins
    base = getattr(builtins, name, None)
    if not (isinstance(base, type) and issubclass(base, Exception)):
        base = Exception
    cls = type(name, (base,), dict(__str__=lambda self: text, __module__="__main__",
                                   __qualname__=name))
    return cls(text)


# -- tensors ---------------------------------------------------------------------------------
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from datetime import timedelta  # noqa: E402

# torch.distributed reads TORCH_DISTRIBUTED_DEBUG once, at import. Under `scen run --torch` torch
# was imported before this rank's environment (ENV_OVERRIDES above) was set, so read it again.
dist.set_debug_level_from_env()

DTYPES = dict(f32=torch.float32, bf16=torch.bfloat16, f16=torch.float16, f64=torch.float64,
              i64=torch.int64, i32=torch.int32, i8=torch.int8, u8=torch.uint8, bool=torch.bool)
OPS = dict(sum=dist.ReduceOp.SUM, min=dist.ReduceOp.MIN, max=dist.ReduceOp.MAX,
           product=dist.ReduceOp.PRODUCT, avg=dist.ReduceOp.AVG, band=dist.ReduceOp.BAND,
           bor=dist.ReduceOp.BOR, bxor=dist.ReduceOp.BXOR)


def _cast(v, dtype):
    if dtype == "bool":
        return bool(v != 0)
    if dtype in ("i64", "i32", "i8", "u8"):
        return int(v)
    return float(v)


def tensor(dtype, shape, device, fill, per_tensor=None):
    """Element i (flat) is fill(vars with i, n, k), cast like scen's tensors."""
    n = 1
    for d in shape:
        n *= d
    per = per_tensor or n
    vals = []
    for i in range(n):
        v = dict(_VARS, i=float(i % per), n=float(per), k=float(i // per))
        vals.append(fill(**v))
    if dtype in ("i64", "i32", "i8", "u8"):
        flat = torch.tensor([int(x) for x in vals], dtype=torch.int64).to(DTYPES[dtype])
    elif dtype == "bool":
        flat = torch.tensor([x != 0 for x in vals], dtype=torch.bool)
    else:
        flat = torch.tensor(vals, dtype=torch.float64).to(DTYPES[dtype])
    return flat.reshape(shape).to(device)


def _fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def digest(t, dtype):
    head = dtype.encode()
    for d in t.shape:
        head += int(d).to_bytes(8, "little")
    body = t.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
    return _fnv1a(head + body)


def summarize(t, dtype):
    vals = t.detach().cpu().reshape(-1).double().tolist()
    shown = ", ".join(_format_number(v) for v in vals[:8])
    more = ", ... (%d values)" % len(vals) if len(vals) > 8 else ""
    return "[%s%s] digest %016x" % (shown, more, digest(t, dtype))


class ValueMismatch(Exception):
    pass


def outvars(kind="flat", chunk_elems=(), per_tensor=0):
    """Where output element i sits (scen's layouts): the k, chunk, j, i, n of an expect formula."""
    starts = [0]
    for c in chunk_elems:
        starts.append(starts[-1] + c)

    def at(i, total):
        if kind in ("tensors", "tensor_chunks"):
            per = max(per_tensor, 1)
            k, local, n = i // per, i % per, per
        else:
            k, local, n = 0, i, total
        c = 0
        while c + 1 < len(starts) and starts[c + 1] <= local:
            c += 1
        c = min(c, max(len(starts) - 2, 0))
        return dict(k=float(k), i=float(local), n=float(n), chunk=float(c), j=float(local - starts[c]))
    return at


def check(st, t, dtype, expect, layout=None, extra=None):
    """Records the result on the step; raises ValueMismatch like scen's check."""
    st.text = summarize(t, dtype)
    if expect is None:
        return
    vals = t.detach().cpu().reshape(-1).double().tolist()
    layout = layout or outvars()
    for i, got in enumerate(vals):
        v = dict(_VARS, **layout(i, len(vals)))
        v.update(extra or {})
        want = expect(**v)
        want_t = tensor(dtype, [1], "cpu", lambda **_: want).double().item()
        # scen's rule: exact (NaN matches NaN) unless the step allows expect_ulps ulps.
        same = got == want_t or (math.isnan(got) and math.isnan(want_t))
        if not same and not abs(got - want_t) <= expect.ulps * _ulp(dtype, want_t):
            raise ValueMismatch("element %d: got %s, expected %s" % (i, _format_number(got), _format_number(want_t)))
    st.text += " (values as expected)"


def formula(src):
    """A scenario formula (already in Python syntax) over the rank and element variables."""
    code = compile(src, "<scenario formula>", "eval")
    names = {"math": math, "abs": abs, "min": min, "max": max, "float": float}
    return lambda **v: float(eval(code, names, v))


def expected(src, ulps):
    """An `expect` formula; results may be `ulps` units in the last place off (0: exact)."""
    f = formula(src)
    f.ulps = ulps
    return f


def _ulp(dtype, v):
    """One unit in the last place of `dtype` at `v` (core's DType::ulp); 0 for integers."""
    fmt = FLOAT_FORMATS.get(dtype)
    if fmt is None:
        return 0.0
    mantissa_bits, min_exp = fmt
    if v == 0 or math.isnan(v) or math.isinf(v):
        e = min_exp
    else:
        e = max(math.floor(math.log2(abs(v))), min_exp)
    return 2.0 ** (e - mantissa_bits)


def value(src):
    """A formula over the rank variables only, evaluated now."""
    return formula(src)(**_VARS)


def file_url(u):
    """`file://PATH` moved under this run's directory for this rank's node (SCEN_FILE_ROOT): a
    run never meets another run's FileStore file, and ranks of different nodes open different
    files, as on hosts that share no filesystem (scen's model: c10d/store/file.rs). Without
    SCEN_FILE_ROOT (an exported program) the path stays as written. The path's directories are
    made, as the scenario's program has them."""
    if not u.startswith("file://"):
        return u
    root = os.environ.get("SCEN_FILE_ROOT", "")
    rest = u[len("file://"):]
    cut = rest.find("/")
    if cut < 0:
        return u  # no path: PyTorch raises "path missing" itself
    path = rest[cut:].split("?", 1)[0]
    os.makedirs(os.path.dirname(root + path) or "/", exist_ok=True)
    return "file://" + rest[:cut] + root + rest[cut:]


def expand_env(s):
    """`${VAR}` / `${VAR:-default}` from this process's environment, as scen expands them."""
    out = ""
    while "${" in s:
        start = s.index("${")
        out += s[:start]
        end = s.find("}", start)
        if end < 0:
            return out + s[start:]
        inner = s[start + 2:end]
        name, _, default = inner.partition(":-")
        v = os.environ.get(name, "")
        out += v if v else default
        s = s[end + 1:]
    return out + s


def num(v):
    return _format_number(v)


def splits(src, members):
    """Split sizes (rows per member) from a formula over j and the rank."""
    f = formula(src)
    return [max(int(f(**dict(_VARS, j=float(j)))), 0) for j in range(members)]


def ms(v):
    return timedelta(milliseconds=v)


# What the program holds until its process ends (get_default_store steps: the store, and on the
# rank that hosts it its server, outlive destroy_process_group).
HELD = []
# The stores the program made (tcp_store / prefix_store steps), by name: held until the process
# ends, as the simulator holds them.
STORES = {}


def bound(f):
    """`f` with the values its free variables have now: an async call's finish, kept until its
    `wait`, must check the tensor of its own step, not the one a later step named `t` too."""
    import types
    cells = tuple(types.CellType(c.cell_contents) for c in (f.__closure__ or ()))
    return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, cells)
# ---- end of the prelude ----------------------------------------------------------------------
