"""gradcomp.torch: a DDP communication hook that runs gradcomp's
parameter-server algorithms over torch.distributed.

    state, hook = gradcomp.torch.comm_hook("bi", "topk", density=0.001)
    model.register_comm_hook(state, hook)
    ...
    state.ledger.total_up, state.ledger.total_down     # bytes so far

Per DDP bucket (its flattened gradient g, length n), on every rank p of P:
  1. every rank says whether its g is finite (one tiny all-reduce); a
     non-finite g anywhere raises on every rank before this bucket's
     memories move (with several buckets, those DDP reduced earlier in
     the same step have stepped already; the step counter does not move,
     and backward raises, so the optimizer does not step either);
  2. worker p: the library's gc_worker_step (error feedback on lr*g with
     lr = 1, then the compressor; stream = p) -> an uplink message;
  3. all-gather of the message lengths, then of the messages padded to the
     longest: every rank holds all P uplink messages;
  4. every rank runs the same gc_server_step on them (a replica of the
     server: bi's server memory and downlink compression are computed
     identically everywhere, so the ranks stay in sync without a
     broadcast) and decodes the downlink into the update D that
     gc_worker_apply would subtract, which the hook returns as the
     bucket's gradient: the optimizer then steps by its lr times D.
The memories are in gradient units (the library's lr is 1, the
optimizer's step size comes after): with a constant step size lr this is
theory.md's (a)/(b), its memories divided by lr.  Call comm_hook after
dist.init_process_group (the state reads the rank and the world size).

The ledger counts what the parameter server would carry: each worker's
uplink message, and the downlink once per receiving worker, as
gc_algo_record_step counts a parameter server's.
state_dict()/load_state_dict() hold every memory, the step counter, the
ledger and the configuration as plain Python objects (picklable), so a
resumed run continues bit-identically.  Memories are kept per bucket,
keyed by (bucket index, bucket length), and follow the parameters: when DDP
rebuilds its buckets (after the first step, and again in a resumed run),
each parameter's slice of the old memories moves to its place in the new
bucket, so no memory is reset.  start_iter = N sends dense gradients (the
average, summed in rank order) for the first N steps.
"""
import ctypes

import numpy as np
import torch
import torch.distributed as dist

from . import _lib, delta_hat, xi as _xi, xi_bi as _xi_bi, make_params
from ._lib import GC_F32, GC_F64, InvalidInput

lib = _lib.lib

METHODS = ("uni", "bi", "downlink", "doublesqueeze", "sgd")


class HookLedger:
    """Bytes per direction per step: rows [step, up, down], summed over the
    buckets of the step; up: the P workers' uplink messages, down: the
    downlink counted once per receiving worker (as gc_algo_record_step
    counts a parameter server's)."""

    def __init__(self, workers):
        self.workers = workers
        self.rows = []

    def add(self, step, up, down):
        if self.rows and self.rows[-1][0] == step:
            self.rows[-1][1] += up
            self.rows[-1][2] += down
        else:
            self.rows.append([step, up, down])

    @property
    def total_up(self):
        return sum(r[1] for r in self.rows)

    @property
    def total_down(self):
        return sum(r[2] for r in self.rows)

    def state(self):
        return {"workers": self.workers, "rows": [list(r) for r in self.rows]}

    def load(self, d):
        self.workers = d["workers"]
        self.rows = [list(r) for r in d["rows"]]


GC_COMP_NEEDS_SHAPE = 1 << 4


def _shaped(T, params, shapes):
    """PowerSGD and other shaped compressors get the bucket's layer
    matrices as segments (a weight out x in..., rows = its first
    dimension); vectors, and matrices thinner than the rank, go raw."""
    if not T.contents.flags & GC_COMP_NEEDS_SHAPE or "segments" in params \
            or "shape" in params:
        return params
    r = params.get("rank", 2)
    segs, off = [], 0
    for shp in shapes:
        numel = int(np.prod(shp)) if len(shp) else 1
        if len(shp) >= 2 and min(shp[0], numel // shp[0]) >= r:
            segs.append((off, shp[0], numel // shp[0]))
        off += numel
    if not segs:
        raise InvalidInput(1, "%s needs a layer matrix of rank >= %d in the "
                           "bucket; this one holds none" % (T.contents.name.decode(), r))
    return dict(params, segments=segs)


class _Bucket:
    """The worker and the server replica of one bucket key."""

    def __init__(self, st, n, code, shapes=()):
        cfg = _lib.gc_algo_config()
        lib.gc_algo_config_default(ctypes.byref(cfg))
        kind = ctypes.c_int(0)
        _lib.check(lib.gc_algo_by_name(st.method.encode(), ctypes.byref(kind)),
                   "method")
        cfg.kind = kind.value
        cfg.workers = st.world
        cfg.n = n
        cfg.dtype = code
        cfg.up = lib.gc_compressor_type_by_name(st.compressor.encode())
        cfg.down = lib.gc_compressor_type_by_name(st.down.encode())
        up, self._keep_up = make_params(_shaped(cfg.up, st.params, shapes))
        down, self._keep_down = make_params(_shaped(cfg.down, st.down_params, shapes))
        cfg.up_params = up
        cfg.down_params = down
        self.cfg = cfg
        self.n = n
        self.code = code
        self.shapes = [tuple(x) for x in shapes]
        self.layout = None
        self.used = -1          # the last step that used this bucket
        _lib.clear_reports()
        _lib.check(lib.gc_algo_config_check(ctypes.byref(cfg)), "comm_hook")
        self.w = lib.gc_worker_alloc(ctypes.byref(cfg), st.rank)
        if not self.w:
            _lib.raise_alloc("comm_hook worker (bucket of %d values)" % n)
        self.s = lib.gc_server_alloc(ctypes.byref(cfg))
        if not self.s:
            lib.gc_worker_free(self.w)
            _lib.raise_alloc("comm_hook server (bucket of %d values)" % n)
        self.up_cap = lib.gc_algo_max_up_bytes(ctypes.byref(cfg))
        self.down_cap = lib.gc_algo_max_down_bytes(ctypes.byref(cfg))
        self.up = torch.empty(max(self.up_cap, 1), dtype=torch.uint8)
        self.down = torch.empty(max(self.down_cap, 1), dtype=torch.uint8)

    def __del__(self):
        if getattr(self, "w", None):
            lib.gc_worker_free(self.w)
            self.w = None
        if getattr(self, "s", None):
            lib.gc_server_free(self.s)
            self.s = None

    def state(self):
        nw = lib.gc_worker_state_bytes(self.w)
        ns = lib.gc_server_state_bytes(self.s)
        bw = ctypes.create_string_buffer(nw)
        bs = ctypes.create_string_buffer(ns)
        lib.gc_worker_state_save(self.w, bw)
        lib.gc_server_state_save(self.s, bs)
        return {"worker": bw.raw, "server": bs.raw, "dtype": self.code,
                "shapes": self.shapes,
                "layout": [list(x) for x in self.layout]}

    def load(self, d):
        if len(d["worker"]) != lib.gc_worker_state_bytes(self.w) or \
                len(d["server"]) != lib.gc_server_state_bytes(self.s) or \
                d["dtype"] != self.code:
            raise ValueError("comm_hook state: a bucket of %d values does not "
                             "match the saved one" % self.n)
        lib.gc_worker_state_load(self.w, d["worker"])
        lib.gc_server_state_load(self.s, d["server"])

    def _views(self):
        """Writable views of the worker's and the server's memories (None
        where the method has none).  The library hands them out read-only
        for probes; the hook writes them only between steps, to move a
        memory to a rebuilt bucket."""
        out = []
        for ptr in (lib.gc_worker_memory(self.w), lib.gc_server_memory(self.s)):
            out.append(_as_np(ptr, self.n, self.code) if ptr else None)
        return out

    def memory(self):
        """A copy of this worker's error memory (NumPy)."""
        v = self._views()[0]
        return None if v is None else v.copy()

    def give_up(self, orphans):
        """Put each parameter's memories into orphans[ordinal]."""
        views = self._views()
        off = 0
        for o, k in self.layout:
            orphans[o] = tuple(None if v is None else v[off:off + k].copy()
                               for v in views)
            off += k

    def adopt(self, orphans, layout):
        """Take the memories of this layout's parameters out of orphans."""
        views = self._views()
        off = 0
        for o, k in layout:
            got = orphans.pop(o, None)
            if got is not None:
                for v, m in zip(views, got):
                    if v is not None and m is not None and len(m) == k:
                        v[off:off + k] = m
            off += k


class GradcompHookState:
    """The state DDP passes to the hook: configuration, step counter,
    per-bucket memories and the ledger.  Build it with comm_hook()."""

    def __init__(self, method, compressor, process_group=None, start_iter=0,
                 down=None, down_params=None, probe_every=0, **params):
        if method not in METHODS:
            raise ValueError("method: one of %s, got %r" % (", ".join(METHODS), method))
        for name in (compressor, down or compressor):
            if not lib.gc_compressor_type_by_name(name.encode()):
                import gradcomp
                raise ValueError("unknown compressor '%s'; valid names: %s"
                                 % (name, " ".join(gradcomp.compressors())))
        make_params(params)                      # checks the names now
        make_params(down_params or params)
        if not dist.is_initialized():
            raise RuntimeError("gradcomp.torch: call dist.init_process_group "
                               "before comm_hook (the state needs the rank and "
                               "the world size)")
        if start_iter < 0:
            raise ValueError("start_iter must be >= 0, got %r" % start_iter)
        self.method = method
        self.compressor = compressor
        self.params = dict(params)
        self.down = down or compressor
        self.down_params = dict(down_params if down_params is not None else params)
        self.start_iter = int(start_iter)
        self.probe_every = int(probe_every)
        self.process_group = process_group
        self.rank = dist.get_rank(process_group)
        self.world = dist.get_world_size(process_group)
        self.step = 0
        self.ledger = HookLedger(self.world)
        self.probes = []            # dicts of PROBE_COLUMNS
        self._buckets = {}          # (index, length) -> _Bucket
        self._pending = {}          # loaded states not yet matched to a bucket
        self._orphans = {}          # ordinal -> memories between layouts
        self._ordinal = {}          # id(parameter) -> ordinal
        self._keep = []
        self.allocations = 0        # bucket states created (rebuilds add some)

    # -- checkpoints ------------------------------------------------------
    def _config(self):
        return {"method": self.method, "compressor": self.compressor,
                "params": self.params, "down": self.down,
                "down_params": self.down_params, "start_iter": self.start_iter,
                "world": self.world}

    def state_dict(self):
        """Everything the hook carries between steps, as plain objects."""
        bks = dict(self._pending)
        for key, b in self._buckets.items():
            bks[key] = b.state()
        return {"version": 1, "config": self._config(), "rank": self.rank,
                "step": self.step, "ledger": self.ledger.state(),
                "probes": list(self.probes), "buckets": bks,
                "orphans": {o: tuple(None if m is None else m.copy() for m in v)
                            for o, v in self._orphans.items()}}

    def load_state_dict(self, d):
        if d.get("version") != 1:
            raise ValueError("comm_hook state: unknown version %r" % d.get("version"))
        if d["config"] != self._config():
            raise ValueError("comm_hook state: saved with %r, this hook is %r"
                             % (d["config"], self._config()))
        if d["rank"] != self.rank:
            raise ValueError("comm_hook state: saved by rank %d, loaded on rank "
                             "%d (each rank keeps its own memories)"
                             % (d["rank"], self.rank))
        self.step = d["step"]
        self.ledger.load(d["ledger"])
        self.probes = list(d["probes"])
        self._buckets = {}
        self._pending = dict(d["buckets"])
        self._orphans = dict(d["orphans"])

    def write_csv(self, path):
        """state.probes as CSV (PROBE_COLUMNS; one row per bucket and probe
        step; NaN where a value is undefined, as log.csv writes it)."""
        with open(path, "w") as f:
            f.write(",".join(PROBE_COLUMNS) + "\n")
            for r in self.probes:
                f.write(",".join(repr(r[c]) if isinstance(r[c], float) else str(r[c])
                                 for c in PROBE_COLUMNS) + "\n")

    def __getstate__(self):
        raise TypeError("pickle state.state_dict(), not the hook state (it "
                        "holds the process group and C objects)")

    # -- per bucket -------------------------------------------------------
    def _layout(self, bucket):
        """The bucket's parameters as (ordinal, numel) in bucket order.  A
        parameter's ordinal is its place in the first buckets this state
        saw (index order, then bucket order): DDP's initial bucket
        assignment depends only on the model, so a resumed run numbers its
        parameters the same way."""
        out = []
        for p in bucket.parameters():
            o = self._ordinal.get(id(p))
            if o is None:
                o = self._ordinal[id(p)] = len(self._ordinal)
                self._keep.append(p)      # ids stay unique while we hold them
            out.append((o, p.numel()))
        return tuple(out)

    def _bucket(self, index, n, code, layout, shapes, step):
        key = (index, n)
        b = self._buckets.get(key)
        if b is not None and b.layout == layout:
            b.used = step
            return b
        pend = self._pending.get(key)
        if b is None and pend is not None and tuple(map(tuple, pend["layout"])) == layout:
            b = _Bucket(self, n, code, shapes)
            self.allocations += 1
            b.load(pend)
            b.layout = layout
            del self._pending[key]
        else:
            # DDP rebuilt its buckets (after the first step, or in a resumed
            # run): the memories follow the parameters, never reset.  The
            # buckets of the old layout (those not used yet in this step)
            # give their memories up per parameter; this step's new buckets
            # take them.
            self._harvest(step)
            b = _Bucket(self, n, code, shapes)
            self.allocations += 1
            b.layout = layout
            if self._orphans:
                b.adopt(self._orphans, layout)
        b.used = step
        self._buckets[key] = b
        return b

    def _harvest(self, step):
        olds = [b for b in self._buckets.values() if b.used < step]
        self._buckets = {k: b for k, b in self._buckets.items() if b.used >= step}
        for key, d in self._pending.items():
            ob = _Bucket(self, key[1], d["dtype"], d.get("shapes", ()))
            ob.load(d)
            ob.layout = tuple(map(tuple, d["layout"]))
            olds.append(ob)
        for ob in olds:
            ob.give_up(self._orphans)
        self._pending = {}

    def memory(self, index=0):
        """This rank's worker error memory of bucket `index` (a copy), or
        None before the bucket's first compressed step."""
        for (i, n), b in self._buckets.items():
            if i == index:
                return b.memory()
        return None


def _check_bucket(t):
    if t.device.type != "cpu":
        raise ValueError("gradcomp.torch: the bucket is on %s; the hook runs "
                         "on CPU tensors" % t.device)
    if t.dtype not in (torch.float32, torch.float64):
        raise TypeError("gradcomp.torch: bucket dtype %s; float32 or float64"
                        % t.dtype)
    if not t.is_contiguous():
        raise ValueError("gradcomp.torch: the bucket is not contiguous")


def _dense(state, g, pg):
    """A dense step (start_iter): the average of the gradients, summed in
    rank order on every rank (an all-gather, not an all-reduce, whose
    summation order depends on the algorithm: every rank and a replay get
    the same bits), counted as dense messages both ways."""
    parts = [torch.empty_like(g) for _ in range(state.world)]
    dist.all_gather(parts, g, group=pg)
    out = torch.zeros_like(g)
    for t in parts:
        out += t
    out.div_(state.world)
    nb = g.numel() * g.element_size()
    state.ledger.add(state.step, nb * state.world, nb * state.world)
    return out


def hook(state, bucket):
    """The DDP communication hook: register with
    model.register_comm_hook(state, hook)."""
    pg = state.process_group
    g = bucket.buffer()
    _check_bucket(g)
    n = g.numel()
    code = GC_F32 if g.dtype == torch.float32 else GC_F64
    step = state.step
    _refuse_nonfinite(g, n, code, bucket.index(), step, pg)
    layout = state._layout(bucket)     # numbers the parameters at step 0
    if step < state.start_iter:
        out = _dense(state, g, pg)
    else:
        shapes = [tuple(p.shape) for p in bucket.parameters()]
        out = _compressed(state, bucket.index(), g, n, code, step, pg, layout,
                          shapes)
    if bucket.is_last():
        state.step += 1
    fut = torch.futures.Future()
    fut.set_result(out)
    return fut


def _refuse_nonfinite(g, n, code, index, step, pg):
    """Raise on every rank, before any rank's memory moves, when any rank's
    bucket holds NaN or Inf (a worker step refuses its own gradient, but a
    rank whose gradient is finite would have stepped by then): the
    library's vectorised check of g, then one small all-reduce."""
    first = lib.gc_first_nonfinite(code, g.data_ptr(), n)
    bad = torch.tensor([0 if first == n else 1], dtype=torch.int32)
    dist.all_reduce(bad, group=pg)
    if bad.item():
        where = (" (this rank: index %d)" % first) if first < n else ""
        raise InvalidInput(2, "a non-finite gradient (NaN or Inf) in bucket "
                           "%d on %d rank(s) at step %d%s; the error memories "
                           "are left as they were"
                           % (index, bad.item(), step, where))


def _compressed(state, index, g, n, code, step, pg, layout, shapes):
    b = state._bucket(index, n, code, layout, shapes, step)
    P = state.world
    ln = ctypes.c_size_t(0)
    _lib.clear_reports()
    st = lib.gc_worker_step(b.w, g.data_ptr(), 1.0, step, b.up.data_ptr(),
                            b.up_cap, ctypes.byref(ln))
    # every rank learns every status with the lengths, so that a failure on
    # one rank raises on all instead of leaving the others in a collective
    mine = torch.tensor([ln.value if st == 0 else -st], dtype=torch.int64)
    lens = [torch.empty(1, dtype=torch.int64) for _ in range(P)]
    dist.all_gather(lens, mine, group=pg)
    lens = [int(x.item()) for x in lens]
    if st:
        _lib.raise_for(st, "comm_hook worker %d, bucket %d, step %d"
                       % (state.rank, index, step))
    if min(lens) < 0:
        raise InvalidInput(-min(lens), "comm_hook: rank %d failed its worker "
                           "step (bucket %d, step %d)"
                           % (lens.index(min(lens)), index, step))
    top = max(max(lens), 1)
    msgs = [torch.empty(top, dtype=torch.uint8) for _ in range(P)]
    dist.all_gather(msgs, b.up[:top], group=pg)
    ptrs = (ctypes.c_void_p * P)(*[m.data_ptr() for m in msgs])
    up_len = (ctypes.c_size_t * P)(*lens)
    dl = ctypes.c_size_t(0)
    delta = None
    if state.probe_every and step % state.probe_every == 0 and \
            state.method == "bi":
        mem = lib.gc_server_memory(b.s)
        if mem:
            delta = _as_np(mem, n, code).copy()
    _lib.clear_reports()
    st = lib.gc_server_step(b.s, ptrs, up_len, 1.0, step, b.down.data_ptr(),
                            b.down_cap, ctypes.byref(dl))
    _lib.check(st, "comm_hook server, bucket %d, step %d" % (index, step))
    if state.probe_every and step % state.probe_every == 0:
        _probe(state, b, index, g, n, code, step, pg, delta, sum(lens),
               dl.value * P)
    # The update D goes into the bucket's own buffer (as DDP's all-reduce
    # hook does): the worker step has read g, and a fresh tensor of d
    # values would cost its page faults at every step.  D is what
    # gc_worker_apply subtracts (the library's lr is 1), decoded with
    # scale +1 into zeros: D exactly, +0.0 where the downlink has nothing.
    out = g
    out.zero_()
    st = lib.gc_worker_decode_down(b.w, b.down.data_ptr(), dl.value, step,
                                   1.0, out.data_ptr())
    _lib.check(st, "comm_hook decoding the downlink, bucket %d" % index)
    state.ledger.add(step, sum(lens), dl.value * P)
    return out


def _as_np(ptr, n, code):
    """A NumPy view of n library-owned values at ptr."""
    ct = ctypes.c_float if code == GC_F32 else ctypes.c_double
    return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ct)), (n,))


PROBE_COLUMNS = ("step", "bucket", "bytes_up", "bytes_down",
                 "support_union_over_k", "xi", "xi_bi", "delta")


def _probe(state, b, index, g, n, code, step, pg, delta, up_bytes, down_bytes):
    """One row of state.probes (PROBE_COLUMNS): the step's bytes of this
    bucket, |S|/K (the nonzeros of the average of the messages over the
    uplink's K), xi and, for bi, xi_bi of theory.md 4.2/4.4 in gradient
    units, and delta: the mean over the workers of delta-hat = 1 - |C(acc) -
    acc|^2/|acc|^2 of their uplink compressor.  The means of the workers'
    accumulators, gradients and messages cost three dense all-reduces, on
    probe steps only."""
    acc = lib.gc_worker_accumulator(b.w)
    sent = lib.gc_worker_sent(b.w)
    if not acc or not sent:
        return
    a_loc = _as_np(acc, n, code).astype(np.float64)
    m_loc = _as_np(sent, n, code).astype(np.float64)
    dh = torch.tensor([delta_hat(a_loc, m_loc)], dtype=torch.float64)
    a = torch.from_numpy(a_loc)
    gm = g.detach().to(torch.float64).clone()
    m = torch.from_numpy(m_loc)
    for t in (a, gm, m, dh):
        dist.all_reduce(t, group=pg)
        t.div_(state.world)
    p = state.params
    kw = {"k": p["k"]} if "k" in p else {"density": p.get("density", 0.01)}
    K = p["k"] if "k" in p else max(1, int(p.get("density", 0.01) * n))
    x = _xi([a.numpy()], [m.numpy()], [gm.numpy()], 1.0, ties=p.get("ties", "low"), **kw)
    xb = float("nan")
    if delta is not None:
        dp = state.down_params
        kd = {"k_down": dp["k"]} if "k" in dp else {"density_down": dp.get("density", 0.01)}
        xb = _xi_bi([a.numpy()], [m.numpy()], [gm.numpy()], delta, 1.0,
                    ties=dp.get("ties", "low"), **kd)
    row = (step, index, up_bytes, down_bytes,
           lib.gc_server_support_union(b.s) / K, x, xb, float(dh.item()))
    state.probes.append(dict(zip(PROBE_COLUMNS, row)))


def comm_hook(method, compressor, process_group=None, start_iter=0, down=None,
              down_params=None, probe_every=0, **params):
    """(state, hook) for model.register_comm_hook(state, hook).

    method: 'uni' (worker error feedback, the server broadcasts the exact
    average of the messages), 'bi' (plus a server memory and the downlink
    compressed with `down`/`down_params`, by default the uplink's),
    'downlink', 'doublesqueeze' or 'sgd'.  compressor and params: any
    registered compressor with the options of `gradcomp compress`
    (density=0.001, k=, levels=, seed=, ...).  start_iter: the first
    start_iter steps send dense gradients.  probe_every: every N steps,
    append a row per bucket to state.probes (bytes, |S|/K, xi, xi_bi for bi,
    delta-hat; state.write_csv(path) writes them); three dense all-reduces
    on those steps.  Call it after dist.init_process_group."""
    state = GradcompHookState(method, compressor, process_group=process_group,
                              start_iter=start_iter, down=down,
                              down_params=down_params, probe_every=probe_every,
                              **params)
    return state, hook
