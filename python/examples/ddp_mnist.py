#!/usr/bin/env python3
"""MNIST with a 784-128-10 MLP in 2 DDP processes (gloo, 127.0.0.1), under
gradcomp's hook: unidirectional vs bidirectional top-K at rho = 0.001.
Prints test accuracy, bytes up and down, and xi (xi_bi for bi) per epoch.

    GRADCOMP_DATA=/path/with/mnist python3 python/examples/ddp_mnist.py --epochs 3

MNIST is read from $GRADCOMP_DATA/mnist/*-idx?-ubyte[.gz] (tools/get-data)."""
import argparse

import torch

import ddp_common as C


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 10))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    C.common_args(p, lr=0.1, batch=32)
    a = p.parse_args()
    data = C.mnist(C.data_dir(a.data))
    for method in a.methods.split(","):
        C.launch(C.train, a.workers, mlp, data, method, a.compressor,
                 {"density": a.density}, a)


if __name__ == "__main__":
    main()
