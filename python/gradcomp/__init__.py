"""gradcomp: the compressors, wire format, error-feedback memories, byte
ledger and probes of libgradcomp, on NumPy arrays and CPU torch tensors.

    import gradcomp, numpy as np
    x = np.random.default_rng(0).standard_normal(10_000).astype(np.float32)
    msg = gradcomp.compress("topk", x, density=0.01)
    len(msg), bytes(msg)          # the wire message, as gradcomp sends it
    y = msg.decode()              # the dense C(x)
    gradcomp.delta_hat(x, y)      # 1 - |C(x)-x|^2/|x|^2

Arrays are passed to the library without a copy: 1-D (or any shape,
flattened) C-contiguous float32/float64 NumPy arrays or CPU torch tensors.
Errors of the library raise GradcompError (InvalidInput for bad arguments)
with the library's own message.  gradcomp.torch holds the DDP hook."""
import ctypes
import math

import numpy as np

from . import _lib
from ._lib import GradcompError, InvalidInput, GC_F32, GC_F64, GC_UP, GC_DOWN

__all__ = ["compress", "compressors", "Compressor", "Message", "ErrorFeedback",
           "Ledger", "delta_hat", "xi", "xi_bi", "GradcompError",
           "InvalidInput", "library_path", "GC_UP", "GC_DOWN"]

__version__ = "0.1.0"
library_path = _lib.path
lib = _lib.lib

# ---------------------------------------------------------------- arrays --


def _is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _view(x, what="x", writable=False):
    """(address, n, dtype code, kind) of a contiguous float32/float64 array
    or CPU tensor, without copying.  Anything else raises TypeError or
    ValueError naming the problem."""
    if _is_torch(x):
        import torch
        if x.device.type != "cpu":
            raise ValueError("%s: a %s tensor; gradcomp takes CPU tensors "
                             "(x.cpu())" % (what, x.device.type))
        if x.dtype not in (torch.float32, torch.float64):
            raise TypeError("%s: dtype %s; gradcomp takes float32 or float64"
                            % (what, x.dtype))
        if not x.is_contiguous():
            raise ValueError("%s: the tensor is not contiguous; pass "
                             "x.contiguous()" % what)
        if writable and x.requires_grad and x.is_leaf:
            raise ValueError("%s: a leaf tensor that requires grad; pass "
                             "x.detach()" % what)
        code = GC_F32 if x.dtype == torch.float32 else GC_F64
        return x.data_ptr(), x.numel(), code, "torch"
    if not isinstance(x, np.ndarray):
        raise TypeError("%s: expected a NumPy array or a torch tensor, got %s"
                        % (what, type(x).__name__))
    if x.dtype not in (np.float32, np.float64):
        raise TypeError("%s: dtype %s; gradcomp takes float32 or float64"
                        % (what, x.dtype))
    if not x.flags.c_contiguous:
        raise ValueError("%s: the array is not C-contiguous; pass "
                         "np.ascontiguousarray(x)" % what)
    if writable and not x.flags.writeable:
        raise ValueError("%s: the array is read-only" % what)
    code = GC_F32 if x.dtype == np.float32 else GC_F64
    return x.ctypes.data, x.size, code, "numpy"


def _dtype(code):
    return np.float32 if code == GC_F32 else np.float64


def _wrap_c(ptr, n, code):
    """A NumPy view of n values the library owns (valid until its next
    step); callers copy."""
    if not ptr:
        return None
    ct = ctypes.c_float if code == GC_F32 else ctypes.c_double
    return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ct)), (n,))


# ----------------------------------------------------------- compressors --


def compressors():
    """{name: summary} of every registered compressor."""
    out = {}
    types = lib.gc_compressor_types()
    i = 0
    while types[i]:
        t = types[i].contents
        out[t.name.decode()] = t.summary.decode()
        i += 1
    return out


_FIELDS = {"k": int, "density": float, "levels": int, "bucket": int,
           "threshold": float, "clip": float, "seed": int, "stream": int,
           "gauss_loops": int, "sample_ratio": float, "rank": int}


def _type_by_name(name):
    t = lib.gc_compressor_type_by_name(name.encode())
    if not t:
        raise ValueError("unknown compressor '%s'; valid names: %s"
                         % (name, " ".join(compressors())))
    return t


def make_params(params, n=None):
    """A gc_compressor_params from keyword arguments named as the options
    of `gradcomp compress` (k, density, levels, bucket, threshold, clip,
    seed, stream, ties='low'|'high', gauss_loops, sample_ratio, rank,
    shape=(rows, cols) or a list of (offset, rows, cols) segments).  Returns
    (params, keep-alive)."""
    p = _lib.gc_compressor_params()
    lib.gc_compressor_params_default(ctypes.byref(p))
    keep = None
    for key, val in params.items():
        if key in _FIELDS:
            if isinstance(val, bool) or not isinstance(val, (int, float, np.number)):
                raise TypeError("%s: expected a number, got %r" % (key, val))
            if _FIELDS[key] is int:
                if int(val) != val or val < 0:
                    raise ValueError("%s: expected a non-negative integer, "
                                     "got %r" % (key, val))
                val = int(val)
            if key == "k" and val == 0:
                raise ValueError("k: k must be at least 1 (got 0)")
            setattr(p, key, _FIELDS[key](val))
        elif key == "ties":
            if val not in ("low", "high"):
                raise ValueError("ties: 'low' or 'high', got %r" % (val,))
            p.ties = 0 if val == "low" else 1
        elif key in ("shape", "segments"):
            segs = [(0,) + tuple(val)] if key == "shape" else list(val)
            arr = (_lib.gc_segment * len(segs))()
            for i, s in enumerate(segs):
                arr[i].offset, arr[i].rows, arr[i].cols = (int(v) for v in s)
            p.segments = ctypes.cast(arr, ctypes.POINTER(_lib.gc_segment))
            p.nsegments = len(segs)
            keep = arr
        else:
            raise TypeError("unknown compressor parameter '%s' (valid: %s, "
                            "ties, shape, segments)" % (key, ", ".join(_FIELDS)))
    if "k" in params and "density" in params:
        raise ValueError("give either k or density, not both")
    return p, keep


class Compressor:
    """An instance of a registered compressor for vectors of length n:
    compress(x, step) -> Message.  Keep one per tensor and reuse it (it
    owns its workspaces; PowerSGD keeps its warm start across calls)."""

    def __init__(self, name, n, **params):
        self.name = name
        self.n = int(n)
        self.params = dict(params)
        self._type = _type_by_name(name)
        p, self._keep = make_params(params)
        _lib.clear_reports()
        self._c = lib.gc_compressor_alloc(self._type, self.n, ctypes.byref(p))
        if not self._c:
            _lib.raise_alloc("%s (d = %d)" % (name, self.n))
        self.max_bytes = lib.gc_compressor_max_bytes(self._c)
        self._buf = (ctypes.c_uint8 * max(self.max_bytes, 1))()

    def __del__(self):
        c = getattr(self, "_c", None)
        if c:
            lib.gc_compressor_free(c)
            self._c = None

    @property
    def k(self):
        """The resolved k of a sparsifier (0 for the other types)."""
        return lib.gc_compressor_k(self._c)

    def compress(self, x, step=0):
        addr, n, code, kind = _view(x)
        if n != self.n:
            raise ValueError("x: length %d, the compressor is for d = %d"
                             % (n, self.n))
        ln = ctypes.c_size_t(0)
        info = _lib.gc_compress_info()
        f = lib.gc_compress_f32 if code == GC_F32 else lib.gc_compress_f64
        _lib.clear_reports()
        st = f(self._c, addr, step, self._buf, self.max_bytes,
               ctypes.byref(ln), ctypes.byref(info))
        _lib.check(st, "%s on a vector of d = %d" % (self.name, n))
        return Message(self, ctypes.string_at(self._buf, ln.value), step, code,
                       kind, info)

    def state_dict(self):
        nb = lib.gc_compressor_state_bytes(self._c)
        buf = ctypes.create_string_buffer(nb)
        if nb:
            lib.gc_compressor_state_save(self._c, buf)
        return {"name": self.name, "n": self.n, "state": buf.raw}

    def load_state_dict(self, d):
        nb = lib.gc_compressor_state_bytes(self._c)
        if d["name"] != self.name or d["n"] != self.n or len(d["state"]) != nb:
            raise ValueError("state of %s d=%d does not fit %s d=%d"
                             % (d["name"], d["n"], self.name, self.n))
        if nb:
            lib.gc_compressor_state_load(self._c, d["state"])


class Message:
    """One wire message: bytes(msg) is what gradcomp sends, len(msg) its
    length; decode() gives the dense C(x), add_to(y, scale) adds
    scale*C(x) to y in place.  info: nnz, selected and loops of the call."""

    def __init__(self, comp, data, step, code, kind, info=None):
        self.compressor = comp
        self.data = data
        self.step = step
        self.dtype_code = code
        self.kind = kind
        self.nnz = info.nnz if info else None
        self.selected = info.selected if info else None

    def __bytes__(self):
        return self.data

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return "<gradcomp.Message %s d=%d %d bytes>" % (
            self.compressor.name, self.compressor.n, len(self.data))

    def add_to(self, y, scale=1.0):
        addr, n, code, _ = _view(y, "y", writable=True)
        if n != self.compressor.n:
            raise ValueError("y: length %d, the message is for d = %d"
                             % (n, self.compressor.n))
        f = lib.gc_decompress_add_f32 if code == GC_F32 else lib.gc_decompress_add_f64
        _lib.clear_reports()
        st = f(self.compressor._c, self.data, len(self.data), self.step,
               scale, addr)
        _lib.check(st, "decoding a %s message" % self.compressor.name)
        return y

    def decode(self):
        """The dense C(x): a NumPy array, or a torch tensor when x was one,
        of x's dtype."""
        y = np.zeros(self.compressor.n, dtype=_dtype(self.dtype_code))
        self.add_to(y)
        if self.kind == "torch":
            import torch
            return torch.from_numpy(y)
        return y


def compress(name, x, step=0, **params):
    """Compress x (flattened) with the registered compressor `name` at
    iteration `step`; params as the options of `gradcomp compress`
    (density=0.01, k=10, levels=4, seed=1, ...).  Returns a Message."""
    addr, n, code, kind = _view(x)
    if n == 0:
        raise InvalidInput(4, "the vector is empty", name)
    return Compressor(name, n, **params).compress(x, step)


# ------------------------------------------------------- error feedback --

EF_KINDS = {"none": 0, "before": 1, "after": 2, "dgc": 3, "ef21": 4}


class ErrorFeedback:
    """An error-feedback memory (gc_ef.h) of one sender for vectors of
    length n, dtype float32/float64, kind 'before' (acc = eps + lr g, the
    default), 'after' (DoubleSqueeze), 'dgc', 'ef21' or 'none'.
    step(g, compressor, lr, step) -> Message sends C(acc) and updates the
    memory; on an error the memory is left as it was."""

    def __init__(self, n, dtype=np.float32, kind="before"):
        if kind not in EF_KINDS:
            raise ValueError("kind: one of %s, got %r" % (", ".join(EF_KINDS), kind))
        self.n = int(n)
        self.kind = kind
        self.code = GC_F32 if np.dtype(dtype) == np.float32 else GC_F64
        if np.dtype(dtype) not in (np.float32, np.float64):
            raise TypeError("dtype: float32 or float64, got %s" % np.dtype(dtype))
        _lib.clear_reports()
        self._e = lib.gc_ef_alloc(EF_KINDS[kind], self.n, self.code, None)
        if not self._e:
            _lib.raise_alloc("error-feedback memory (d = %d)" % self.n)

    def __del__(self):
        e = getattr(self, "_e", None)
        if e:
            lib.gc_ef_free(e)
            self._e = None

    def step(self, g, compressor, lr=1.0, step=0):
        addr, n, code, kind = _view(g, "g")
        if n != self.n or code != self.code:
            raise ValueError("g: length %d %s, the memory is d = %d %s" % (
                n, np.dtype(_dtype(code)).name, self.n,
                np.dtype(_dtype(self.code)).name))
        ln = ctypes.c_size_t(0)
        info = _lib.gc_compress_info()
        _lib.clear_reports()
        st = lib.gc_ef_step(self._e, compressor._c, addr, lr, step,
                            compressor._buf, compressor.max_bytes,
                            ctypes.byref(ln), ctypes.byref(info))
        _lib.check(st, "error feedback with %s" % compressor.name)
        return Message(compressor, ctypes.string_at(compressor._buf, ln.value),
                       step, code, kind, info)

    def reset(self):
        lib.gc_ef_reset(self._e)

    @property
    def memory(self):
        """A copy of the memory (eps, DGC's v, EF21's h)."""
        v = _wrap_c(lib.gc_ef_memory(self._e), self.n, self.code)
        return None if v is None else v.copy()

    @property
    def accumulator(self):
        v = _wrap_c(lib.gc_ef_accumulator(self._e), self.n, self.code)
        return None if v is None else v.copy()

    def state_dict(self):
        nb = lib.gc_ef_state_bytes(self._e)
        buf = ctypes.create_string_buffer(nb)
        lib.gc_ef_state_save(self._e, buf)
        return {"kind": self.kind, "n": self.n, "dtype": self.code,
                "state": buf.raw}

    def load_state_dict(self, d):
        nb = lib.gc_ef_state_bytes(self._e)
        if (d["kind"], d["n"], d["dtype"]) != (self.kind, self.n, self.code) \
                or len(d["state"]) != nb:
            raise ValueError("state of a %s memory d=%d does not fit this %s "
                             "memory d=%d" % (d["kind"], d["n"], self.kind, self.n))
        lib.gc_ef_state_load(self._e, d["state"])


# ---------------------------------------------------------------- ledger --


class Ledger:
    """The byte ledger (gc_algo.h): one row per message, per step, worker and
    direction (GC_UP, GC_DOWN)."""

    def __init__(self, workers=1):
        self.workers = int(workers)
        self._l = lib.gc_ledger_alloc(self.workers)
        if not self._l:
            _lib.raise_alloc("ledger")
        self._rows = []

    def __del__(self):
        l_ = getattr(self, "_l", None)
        if l_:
            lib.gc_ledger_free(l_)
            self._l = None

    def record(self, step, worker, direction, nbytes):
        _lib.clear_reports()
        _lib.check(lib.gc_ledger_record(self._l, step, worker, direction,
                                        nbytes), "ledger")
        self._rows.append((step, worker, direction, nbytes))

    def total(self, direction):
        return lib.gc_ledger_total(self._l, direction)

    def step_total(self, step, direction):
        return lib.gc_ledger_step_total(self._l, step, direction)

    def worker_total(self, worker, direction):
        return lib.gc_ledger_worker_total(self._l, worker, direction)

    def rows(self):
        """[(step, worker, direction, bytes)] as recorded."""
        return list(self._rows)

    def write_csv(self, path):
        _lib.clear_reports()
        _lib.check(lib.gc_ledger_write_csv(self._l, str(path).encode()),
                   str(path))

    def __getstate__(self):
        return {"workers": self.workers, "rows": self._rows}

    def __setstate__(self, d):
        self.__init__(d["workers"])
        for r in d["rows"]:
            self.record(*r)


# ---------------------------------------------------------------- probes --


def _np(x, what):
    if _is_torch(x):
        x = x.detach().cpu().numpy()
    x = np.asarray(x, dtype=np.float64) if isinstance(x, (list, tuple)) \
        else np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError("%s: dtype %s; float32 or float64" % (what, x.dtype))
    return x.reshape(-1)


def delta_hat(x, cx):
    """1 - |C(x) - x|^2 / |x|^2 (theory.md 4.1), in double; NaN for x = 0."""
    x = _np(x, "x").astype(np.float64)
    cx = _np(cx, "cx").astype(np.float64)
    den = float(np.dot(x, x))
    if den == 0.0:
        return math.nan
    r = cx - x
    return 1.0 - float(np.dot(r, r)) / den


def _topk_dense(v, k=None, density=None, ties="low"):
    """The library's magnitude top-K of v (double), dense."""
    kw = {"ties": ties}
    if k is not None:
        kw["k"] = k
    else:
        kw["density"] = density
    return compress("topk", v, **kw).decode()


def _mean(vs, what):
    vs = [_np(v, what).astype(np.float64) for v in vs]
    out = np.zeros_like(vs[0])
    for v in vs:        # in worker order, as the library's probe
        out += v
    return out / len(vs)


def xi(accs, sents, grads, lr=1.0, k=None, density=None, ties="low", u=1.0):
    """xi of theory.md 4.2 for one step from the workers' accumulators
    acc^p, their decoded messages m^p and gradients g^p (lists, worker
    order):  u |TopK(mean acc) - mean m| / (lr |mean g|).  TopK is the
    library's top-K with k (or density) and the tie rule of the uplink."""
    if (k is None) == (density is None):
        raise ValueError("give k or density (the uplink's)")
    a = _mean(accs, "accs")
    m = _mean(sents, "sents")
    g = _mean(grads, "grads")
    num = u * float(np.linalg.norm(_topk_dense(a, k, density, ties) - m))
    den = lr * float(np.linalg.norm(g))
    return num / den if den > 0 else (math.inf if num > 0 else math.nan)


def xi_bi(accs, sents, grads, delta, lr=1.0, k_down=None, density_down=None,
          ties="low", u=1.0):
    """xi_bi of theory.md 4.4:  u |TopK_d(delta + mean acc) - TopK_d(delta +
    mean m)| / (lr |mean g|), delta the server memory before the step."""
    if (k_down is None) == (density_down is None):
        raise ValueError("give k_down or density_down (the downlink's)")
    d = _np(delta, "delta").astype(np.float64)
    a = d + _mean(accs, "accs")
    m = d + _mean(sents, "sents")
    g = _mean(grads, "grads")
    num = u * float(np.linalg.norm(_topk_dense(a, k_down, density_down, ties)
                                   - _topk_dense(m, k_down, density_down, ties)))
    den = lr * float(np.linalg.norm(g))
    return num / den if den > 0 else (math.inf if num > 0 else math.nan)
