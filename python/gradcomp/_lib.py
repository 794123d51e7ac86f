"""ctypes bindings of libgradcomp.so: finding the library, the prototypes
the package calls, the structs it fills, and the error handler that turns
the library's reports into Python exceptions.

The library is looked up, in order, at $GRADCOMP_LIB (a path), next to this
file (a copy setup.py bundles at install time), in the build tree this
package sits in (../lib/.libs), and where the system loader finds
-lgradcomp (a `make install`)."""
import ctypes
import ctypes.util
import os
import threading

c_size = ctypes.c_size_t
c_u8p = ctypes.POINTER(ctypes.c_uint8)
c_sizep = ctypes.POINTER(ctypes.c_size_t)

GC_F32, GC_F64 = 4, 8
GC_UP, GC_DOWN, GC_LEDGER_BCAST = 0, 1, 2

_ERRNAMES = {1: "EINVAL", 2: "EDOM", 3: "ENOMEM", 4: "EBADLEN", 5: "ECORRUPT",
             6: "ENOSPACE", 7: "EIO", 8: "EFORMAT", 9: "EDIVERGE",
             10: "ECUDA", 11: "EMPI", 12: "EUNSUP"}


class GradcompError(Exception):
    """A libgradcomp call failed: `code` is its status (GC_EINVAL = 1, ...),
    `reason` the message the library reported (what gradcomp's programs
    print).  Argument errors (EINVAL, EDOM, EBADLEN) are also ValueErrors:
    see InvalidInput."""

    def __init__(self, code, reason, what=""):
        self.code = code
        self.reason = reason
        name = _ERRNAMES.get(code, str(code))
        msg = "%s: %s (GC_%s)" % (what, reason, name) if what else \
            "%s (GC_%s)" % (reason, name)
        super().__init__(msg)


class InvalidInput(GradcompError, ValueError):
    """k > d, density outside (0,1], NaN/Inf input, wrong length, ..."""


class gc_segment(ctypes.Structure):
    _fields_ = [("offset", c_size), ("rows", c_size), ("cols", c_size)]


# Mirrors gc_compressor_params of gc_compressor.h field for field; the
# byte-identity test against `gradcomp compress` catches a drift.
class gc_compressor_params(ctypes.Structure):
    _fields_ = [("k", c_size), ("density", ctypes.c_double),
                ("levels", ctypes.c_uint), ("bucket", c_size),
                ("threshold", ctypes.c_double), ("clip", ctypes.c_double),
                ("seed", ctypes.c_uint64), ("stream", ctypes.c_uint32),
                ("ties", ctypes.c_int), ("gauss_loops", ctypes.c_uint),
                ("sample_ratio", ctypes.c_double), ("rank", ctypes.c_uint),
                ("segments", ctypes.POINTER(gc_segment)),
                ("nsegments", c_size)]


class gc_compress_info(ctypes.Structure):
    _fields_ = [("nnz", c_size), ("selected", c_size), ("loops", ctypes.c_uint)]


class gc_compressor_type(ctypes.Structure):
    # only the leading fields are read (name, summary, flags)
    _fields_ = [("name", ctypes.c_char_p), ("summary", ctypes.c_char_p),
                ("flags", ctypes.c_uint)]


# gc_algo_config of gc_algo.h.
class gc_algo_config(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("workers", c_size), ("n", c_size),
                ("dtype", ctypes.c_int),
                ("up", ctypes.POINTER(gc_compressor_type)),
                ("up_params", gc_compressor_params),
                ("down", ctypes.POINTER(gc_compressor_type)),
                ("down_params", gc_compressor_params),
                ("ef21_init", ctypes.c_int), ("momentum", ctypes.c_double),
                ("nesterov", ctypes.c_int), ("clip_norm", ctypes.c_double)]


def _candidates():
    env = os.environ.get("GRADCOMP_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, "libgradcomp.so")]
    tree = os.path.normpath(os.path.join(here, "..", "..", "lib", ".libs"))
    out.append(os.path.join(tree, "libgradcomp.so"))
    found = ctypes.util.find_library("gradcomp")
    if found:
        out.append(found)
    return out


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("gradcomp: libgradcomp.so not found; build the tree "
                      "(make), `make install`, or set GRADCOMP_LIB to its "
                      "path.  Tried: " + "; ".join(tried))


lib, path = _load()

_PROTOS = {
    # errors
    "gc_set_error_handler": (ctypes.c_void_p, [ctypes.c_void_p]),
    "gc_last_error": (ctypes.c_char_p, []),
    "gc_last_error_code": (ctypes.c_int, []),
    "gc_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    # compressors
    "gc_compressor_types": (ctypes.POINTER(ctypes.POINTER(gc_compressor_type)), []),
    "gc_compressor_type_by_name": (ctypes.POINTER(gc_compressor_type), [ctypes.c_char_p]),
    "gc_compressor_params_default": (None, [ctypes.POINTER(gc_compressor_params)]),
    "gc_compressor_alloc": (ctypes.c_void_p, [ctypes.POINTER(gc_compressor_type), c_size,
                                              ctypes.POINTER(gc_compressor_params)]),
    "gc_compressor_free": (None, [ctypes.c_void_p]),
    "gc_compressor_max_bytes": (c_size, [ctypes.c_void_p]),
    "gc_compressor_k": (c_size, [ctypes.c_void_p]),
    "gc_compressor_n": (c_size, [ctypes.c_void_p]),
    "gc_compressor_state_bytes": (c_size, [ctypes.c_void_p]),
    "gc_compressor_state_save": (None, [ctypes.c_void_p, ctypes.c_void_p]),
    "gc_compressor_state_load": (None, [ctypes.c_void_p, ctypes.c_void_p]),
    "gc_compress_f32": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32,
                                       ctypes.c_void_p, c_size, c_sizep,
                                       ctypes.POINTER(gc_compress_info)]),
    "gc_compress_f64": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32,
                                       ctypes.c_void_p, c_size, c_sizep,
                                       ctypes.POINTER(gc_compress_info)]),
    "gc_decompress_add_f32": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, c_size,
                                             ctypes.c_uint32, ctypes.c_float, ctypes.c_void_p]),
    "gc_decompress_add_f64": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, c_size,
                                             ctypes.c_uint32, ctypes.c_double, ctypes.c_void_p]),
    # error feedback
    "gc_ef_alloc": (ctypes.c_void_p, [ctypes.c_int, c_size, ctypes.c_int, ctypes.c_void_p]),
    "gc_ef_free": (None, [ctypes.c_void_p]),
    "gc_ef_reset": (None, [ctypes.c_void_p]),
    "gc_ef_step": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.c_double, ctypes.c_uint32, ctypes.c_void_p, c_size,
                                  c_sizep, ctypes.POINTER(gc_compress_info)]),
    "gc_ef_memory": (ctypes.c_void_p, [ctypes.c_void_p]),
    "gc_ef_accumulator": (ctypes.c_void_p, [ctypes.c_void_p]),
    "gc_ef_sent": (ctypes.c_void_p, [ctypes.c_void_p]),
    "gc_ef_state_bytes": (c_size, [ctypes.c_void_p]),
    "gc_ef_state_save": (None, [ctypes.c_void_p, ctypes.c_void_p]),
    "gc_ef_state_load": (None, [ctypes.c_void_p, ctypes.c_void_p]),
    # ledger
    "gc_ledger_alloc": (ctypes.c_void_p, [c_size]),
    "gc_ledger_free": (None, [ctypes.c_void_p]),
    "gc_ledger_record": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint32, c_size,
                                        ctypes.c_int, c_size]),
    "gc_ledger_total": (ctypes.c_uint64, [ctypes.c_void_p, ctypes.c_int]),
    "gc_ledger_step_total": (ctypes.c_uint64, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int]),
    "gc_ledger_worker_total": (ctypes.c_uint64, [ctypes.c_void_p, c_size, ctypes.c_int]),
    "gc_ledger_write_csv": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
    "gc_ledger_rows": (c_size, [ctypes.c_void_p]),
    "gc_algo_record_step": (ctypes.c_int, [ctypes.POINTER(gc_algo_config), ctypes.c_void_p,
                                           ctypes.c_uint32, c_sizep, c_size]),
    # algorithms: one worker / the server
    "gc_algo_config_default": (None, [ctypes.POINTER(gc_algo_config)]),
    "gc_algo_config_check": (ctypes.c_int, [ctypes.POINTER(gc_algo_config)]),
    "gc_algo_by_name": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]),
    "gc_algo_max_up_bytes": (c_size, [ctypes.POINTER(gc_algo_config)]),
    "gc_algo_max_down_bytes": (c_size, [ctypes.POINTER(gc_algo_config)]),
    "gc_worker_alloc": (ctypes.c_void_p, [ctypes.POINTER(gc_algo_config), c_size]),
    "gc_worker_free": (None, [ctypes.c_void_p]),
    "gc_server_alloc": (ctypes.c_void_p, [ctypes.POINTER(gc_algo_config)]),
    "gc_server_free": (None, [ctypes.c_void_p]),
    "gc_first_nonfinite": (c_size, [ctypes.c_int, ctypes.c_void_p, c_size]),
    "gc_worker_step": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double,
                                      ctypes.c_uint32, ctypes.c_void_p, c_size, c_sizep]),
    "gc_server_step": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                      c_sizep, ctypes.c_double, ctypes.c_uint32,
                                      ctypes.c_void_p, c_size, c_sizep]),
    "gc_worker_apply": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, c_size,
                                       ctypes.c_uint32, ctypes.c_void_p]),
    "gc_worker_decode_down": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, c_size,
                                             ctypes.c_uint32, ctypes.c_double,
                                             ctypes.c_void_p]),
    "gc_worker_memory": (ctypes.c_void_p, [ctypes.c_void_p]),
    "gc_worker_accumulator": (ctypes.c_void_p, [ctypes.c_void_p]),
    "gc_worker_sent": (ctypes.c_void_p, [ctypes.c_void_p]),
    "gc_server_memory": (ctypes.c_void_p, [ctypes.c_void_p]),
    "gc_server_sent": (ctypes.c_void_p, [ctypes.c_void_p]),
    "gc_server_support_union": (c_size, [ctypes.c_void_p]),
    "gc_worker_state_bytes": (c_size, [ctypes.c_void_p]),
    "gc_worker_state_save": (None, [ctypes.c_void_p, ctypes.c_void_p]),
    "gc_worker_state_load": (None, [ctypes.c_void_p, ctypes.c_void_p]),
    "gc_server_state_bytes": (c_size, [ctypes.c_void_p]),
    "gc_server_state_save": (None, [ctypes.c_void_p, ctypes.c_void_p]),
    "gc_server_state_load": (None, [ctypes.c_void_p, ctypes.c_void_p]),
}
for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

def check_layout(lib_, path_):
    """The structs above mirror the C headers: a library built from other
    headers would read and write them at the wrong offsets, so refuse it
    (ImportError naming the struct and both sizes)."""
    for fn, cls in (("gc_compressor_params_size", gc_compressor_params),
                    ("gc_algo_config_size", gc_algo_config)):
        f = getattr(lib_, fn, None)
        if f is None:
            raise ImportError("gradcomp: %s has no %s: a library older than "
                              "this package" % (path_, fn))
        f.restype = c_size
        f.argtypes = []
        if f() != ctypes.sizeof(cls):
            raise ImportError("gradcomp: %s is %d bytes in %s, %d in this "
                              "package: the package and the library come from "
                              "different versions (rebuild both from one tree)"
                              % (cls.__name__, f(), path_, ctypes.sizeof(cls)))


check_layout(lib, path)

# The library reports through one replaceable handler (gc_errno.h); ours
# records the reason instead of printing it, so that the exception carries
# it.  Reports may come from the library's OpenMP threads, hence the lock
# and a process-wide record rather than a thread-local one.
_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p,
                            ctypes.c_int, ctypes.c_int)
_lock = threading.Lock()
_reports = []


def _record(reason, file, line, code):
    with _lock:
        _reports.append((code, (reason or b"").decode("utf-8", "replace")))
        del _reports[:-8]


_handler = _HANDLER(_record)   # kept alive for the life of the process
lib.gc_set_error_handler(ctypes.cast(_handler, ctypes.c_void_p))


def clear_reports():
    with _lock:
        del _reports[:]


def raise_for(code, what=""):
    """Raise the exception of a non-zero status, with the library's last
    reported reason."""
    with _lock:
        reason = _reports[-1][1] if _reports else ""
        del _reports[:]
    if not reason:
        reason = (lib.gc_last_error() or b"").decode() or \
            lib.gc_strerror(code).decode()
    cls = InvalidInput if code in (1, 2, 4) else GradcompError
    raise cls(code, reason, what)


def check(code, what=""):
    if code:
        raise_for(code, what)


def raise_alloc(what):
    """After an allocator returned NULL: its status and reason."""
    code = lib.gc_last_error_code() or 3
    raise_for(code, what)
