#!/usr/bin/env python3
"""Speed rows of gradcomp's DDP hook (a benchmark, not a test).

At d values (default 2.5e7, float32) and density rho (0.001), per call:
  c      the bare library: one worker's error feedback + top-K encode
         (gc_worker_step) and the server's aggregate + decode of the P
         messages (gc_server_step) + decoding the update (gc_worker_decode_down),
         called straight through ctypes on preallocated buffers;
  hook   gradcomp.torch's hook on a bucket of d values (the same library
         calls plus the finite check, the collectives and the bookkeeping);
  torch  a plain PyTorch top-K hook: acc = g + eps, torch.topk(|acc|),
         eps = acc - C(acc), all-gather of indices and values, the average;
and the ratios hook/c (the overhead of the Python layer and the
collectives) and hook/torch.  Each row is the median of --reps calls after
one warm-up, in a gloo group of --workers processes on 127.0.0.1 (default
1: the collectives are local copies and the compression work is what is
compared; with P > 1 every rank runs the same calls and rank 0 prints, the
bare row's server decoding P copies of its own message).

    python3 python/bench.py [--d 25000000] [--density 0.001] [--reps 5] [--workers 2]"""
import argparse
import ctypes
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gradcomp  # noqa: E402
import gradcomp.torch as gt  # noqa: E402
from gradcomp import _lib  # noqa: E402


class Bucket:
    def __init__(self, t, params):
        self.t, self.params = t, params

    def buffer(self):
        return self.t

    def index(self):
        return 0

    def is_last(self):
        return True

    def parameters(self):
        return self.params


def torch_topk_hook(state, bucket):
    """The plain PyTorch top-K + error feedback hook of the comparison."""
    g = bucket.buffer()
    eps = state.setdefault("eps", torch.zeros_like(g))
    acc = g + eps
    k = max(1, int(state["density"] * g.numel()))
    _, idx = torch.topk(acc.abs(), k, sorted=False)
    vals = acc[idx]
    eps.copy_(acc)
    eps[idx] = 0
    world = dist.get_world_size()
    gi = [torch.empty_like(idx) for _ in range(world)]
    gv = [torch.empty_like(vals) for _ in range(world)]
    dist.all_gather(gi, idx)
    dist.all_gather(gv, vals)
    out = torch.zeros_like(g)
    for i, v in zip(gi, gv):
        out.index_add_(0, i, v)
    out.div_(world)
    fut = torch.futures.Future()
    fut.set_result(out)
    return fut


def median_time(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def bare_c(g, density, reps, world):
    """gc_worker_step + gc_server_step + gc_worker_decode_down on preallocated
    buffers: what the hook calls, without Python around it."""
    lib = _lib.lib
    n = g.numel()
    st = gt.GradcompHookState("uni", "topk", density=density)
    st.rank = 0             # worker 0 and a server of `world` messages
    b = gt._Bucket(st, n, _lib.GC_F32)
    ln, dl = ctypes.c_size_t(0), ctypes.c_size_t(0)
    out = torch.zeros(n)
    ptrs = (ctypes.c_void_p * world)(*[b.up.data_ptr()] * world)
    lens = (ctypes.c_size_t * world)()
    step = [0]

    def once():
        s = step[0]
        _lib.check(lib.gc_worker_step(b.w, g.data_ptr(), 1.0, s, b.up.data_ptr(),
                                      b.up_cap, ctypes.byref(ln)))
        for i in range(world):
            lens[i] = ln.value
        _lib.check(lib.gc_server_step(b.s, ptrs, lens, 1.0, s, b.down.data_ptr(),
                                      b.down_cap, ctypes.byref(dl)))
        out.zero_()
        _lib.check(lib.gc_worker_decode_down(b.w, b.down.data_ptr(), dl.value, s,
                                             1.0, out.data_ptr()))
        step[0] += 1
    return median_time(once, reps)


def run(rank, world, port, a):
    if a.threads:
        torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=world)
    out = print if rank == 0 else (lambda *x, **k: None)
    out("# gradcomp %s; torch %s, %d threads; %d process(es); rho = %g; "
        "median of %d" % (gradcomp.library_path, torch.__version__,
                          torch.get_num_threads(), world, a.density, a.reps))
    out("%12s %10s %10s %10s %8s %9s" % ("d", "c_ms", "hook_ms", "torch_ms",
                                        "hook/c", "hook/torch"))
    gen = torch.Generator().manual_seed(rank)
    for d in a.d:
        n = int(d)
        g = torch.randn(n, generator=gen)
        param = torch.nn.Parameter(torch.empty(0))
        tc = bare_c(g, a.density, a.reps, world)
        state, hook = gt.comm_hook("uni", "topk", density=a.density)
        # the hook writes its update into the bucket: time it on a copy
        th = median_time(lambda: hook(state, Bucket(g.clone(), [param])).wait(), a.reps)
        tcl = median_time(lambda: g.clone(), a.reps)
        ts = {"density": a.density}
        tt = median_time(lambda: torch_topk_hook(ts, Bucket(g, [param])).wait(), a.reps)
        th -= tcl
        out("%12d %10.2f %10.2f %10.2f %8.3f %9.3f"
            % (n, tc * 1e3, th * 1e3, tt * 1e3, th / tc, th / tt), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d", type=float, nargs="+", default=[2.5e7],
                   help="bucket lengths (2.5e7)")
    p.add_argument("--density", type=float, default=0.001, help="rho (0.001)")
    p.add_argument("--reps", type=int, default=5, help="timed calls per row (5)")
    p.add_argument("--workers", type=int, default=1, help="processes (1)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads per process (0: torch's default)")
    a = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    if a.workers == 1:
        run(0, 1, port, a)
    else:
        import torch.multiprocessing as mp
        mp.spawn(run, args=(a.workers, port, a), nprocs=a.workers, join=True)


if __name__ == "__main__":
    main()
