"""What the two DDP examples share: data loaders (IDX and CIFAR-10's binary
format, no torchvision), the P-process launcher on 127.0.0.1 and the epoch
loop that prints accuracy, bytes per direction and xi per epoch."""
import gzip
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gradcomp.torch  # noqa: E402  (the build tree's package if not installed)


def data_dir(arg):
    d = arg or os.environ.get("GRADCOMP_DATA") or "data"
    if not os.path.isdir(d):
        sys.exit("no data folder %s: pass --data DIR or set GRADCOMP_DATA" % d)
    return d


def read_idx(path):
    """An IDX file (MNIST's format), gzipped or not, as a NumPy array."""
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            with (gzip.open if p.endswith(".gz") else open)(p, "rb") as f:
                raw = f.read()
            break
    else:
        sys.exit("missing %s (or .gz)" % path)
    if len(raw) < 4 or raw[0] or raw[1] or raw[2] != 8:
        sys.exit("%s: not an IDX file of unsigned bytes" % path)
    nd = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    body = np.frombuffer(raw, np.uint8, offset=4 + 4 * nd)
    if body.size != int(np.prod(dims)):
        sys.exit("%s: %d bytes of data for dimensions %s" % (path, body.size, dims))
    return body.reshape(dims)


def mnist(folder):
    d = os.path.join(folder, "mnist")
    out = []
    for part in ("train", "t10k"):
        x = read_idx(os.path.join(d, "%s-images-idx3-ubyte" % part))
        y = read_idx(os.path.join(d, "%s-labels-idx1-ubyte" % part))
        out.append((torch.from_numpy(x.reshape(len(x), -1).astype(np.float32) / 255.0),
                    torch.from_numpy(y.astype(np.int64))))
    return out


def cifar10(folder):
    """CIFAR-10's binary version: data_batch_1..5.bin and test_batch.bin in
    folder/cifar10 (or its cifar-10-batches-bin/)."""
    d = os.path.join(folder, "cifar10")
    if os.path.isdir(os.path.join(d, "cifar-10-batches-bin")):
        d = os.path.join(d, "cifar-10-batches-bin")

    def load(names):
        xs, ys = [], []
        for nm in names:
            p = os.path.join(d, nm)
            if not os.path.exists(p):
                sys.exit("missing %s (tools/fake-cifar10 writes a stand-in)" % p)
            raw = np.fromfile(p, np.uint8)
            if raw.size % 3073:
                sys.exit("%s: %d bytes is not a whole number of 3073-byte "
                         "records" % (p, raw.size))
            raw = raw.reshape(-1, 3073)
            ys.append(raw[:, 0].astype(np.int64))
            xs.append(raw[:, 1:].reshape(-1, 3, 32, 32))
        x = np.concatenate(xs).astype(np.float32) / 255.0
        mean = x.mean(axis=(0, 2, 3), keepdims=True)
        std = x.std(axis=(0, 2, 3), keepdims=True) + 1e-6
        return torch.from_numpy((x - mean) / std), torch.from_numpy(np.concatenate(ys))
    return (load(["data_batch_%d.bin" % i for i in range(1, 6)]),
            load(["test_batch.bin"]))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(fn, world, *args):
    """Run fn(rank, world, port, *args) in `world` processes (gloo on
    127.0.0.1)."""
    mp.spawn(fn, args=(world, free_port()) + args, nprocs=world, join=True)


def train(rank, world, port, make_model, data, method, compressor, params, a):
    """One rank: DDP with gradcomp's hook; rank 0 prints one row per epoch."""
    torch.set_num_threads(max(1, a.threads))
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=world)
    torch.manual_seed(a.seed)
    (xtr, ytr), (xte, yte) = data
    if a.train_subset:
        xtr, ytr = xtr[:a.train_subset], ytr[:a.train_subset]
    if a.test_subset:
        xte, yte = xte[:a.test_subset], yte[:a.test_subset]
    model = make_model()
    ddp = DDP(model)
    state, hook = gradcomp.torch.comm_hook(method, compressor, start_iter=a.start_iter,
                                           probe_every=a.probe_every, **params)
    ddp.register_comm_hook(state, hook)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    g = torch.Generator().manual_seed(a.seed)
    per = a.batch
    if rank == 0:
        print("%-6s %5s %8s %12s %12s %8s %8s %7s" % ("method", "epoch", "test_acc",
              "bytes_up", "bytes_down", "xi", "xi_bi", "s"), flush=True)
    for epoch in range(a.epochs):
        t0 = time.time()
        perm = torch.randperm(len(xtr), generator=g)   # the same on every rank
        steps = len(xtr) // (per * world)
        up0, down0, np0 = state.ledger.total_up, state.ledger.total_down, len(state.probes)
        model.train()
        for s in range(steps):
            idx = perm[(s * world + rank) * per:(s * world + rank + 1) * per]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
        if rank == 0:
            model.eval()
            with torch.no_grad():
                correct = sum(int((model(xte[i:i + 500]).argmax(1) == yte[i:i + 500]).sum())
                              for i in range(0, len(xte), 500))
            pr = state.probes[np0:]
            xi = np.mean([p["xi"] for p in pr]) if pr else float("nan")
            xb = np.mean([p["xi_bi"] for p in pr]) if pr else float("nan")
            print("%-6s %5d %8.4f %12d %12d %8.4f %8.4f %7.1f" % (
                method, epoch + 1, correct / len(xte), state.ledger.total_up - up0,
                state.ledger.total_down - down0, xi, xb, time.time() - t0), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def common_args(p, lr, batch):
    p.add_argument("--data", help="data folder (default $GRADCOMP_DATA, else data)")
    p.add_argument("--methods", default="uni,bi", help="comma-separated (default uni,bi)")
    p.add_argument("--compressor", default="topk", help="any of gradcomp.compressors() (topk)")
    p.add_argument("--density", type=float, default=0.001, help="rho = K/d (0.001)")
    p.add_argument("--workers", type=int, default=2, help="processes (2)")
    p.add_argument("--epochs", type=int, default=1, help="epochs (1)")
    p.add_argument("--batch", type=int, default=batch, help="per-worker batch (%d)" % batch)
    p.add_argument("--lr", type=float, default=lr, help="SGD step size (%g)" % lr)
    p.add_argument("--momentum", type=float, default=0.0, help="SGD momentum (0)")
    p.add_argument("--start-iter", type=int, default=0, help="dense steps first (0)")
    p.add_argument("--probe-every", type=int, default=50, help="xi every N steps (50)")
    p.add_argument("--train-subset", type=int, default=0, help="first N training images (all)")
    p.add_argument("--test-subset", type=int, default=0, help="first N test images (all)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process (1)")
    p.add_argument("--seed", type=int, default=1, help="seed (1)")
