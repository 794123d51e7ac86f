#!/usr/bin/env python3
"""ResNet-20 (He et al. 2016, the CIFAR variant: 3 stages of 3 basic blocks,
16/32/64 channels, 0.27 M parameters) on CIFAR-10-format data in 2 DDP
processes under gradcomp's hook, uni vs bi top-K.  Prints test accuracy,
bytes up and down and xi per epoch.

    tools/fake-cifar10 /tmp/c10          # a learnable stand-in, or the real data
    GRADCOMP_DATA=/tmp/c10 python3 python/examples/ddp_cifar_resnet20.py \\
        --train-subset 2048 --test-subset 1000 --density 0.01

Data: $GRADCOMP_DATA/cifar10/{data_batch_1..5,test_batch}.bin (the binary
version of CIFAR-10)."""
import argparse

import torch.nn as nn
import torch.nn.functional as F

import ddp_common as C


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            # option A of the paper: subsample and zero-pad the channels
            self.short = lambda x: F.pad(x[:, :, ::2, ::2],
                                         (0, 0, 0, 0, (cout - cin) // 2, (cout - cin) // 2))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (self.short(x) if self.short else x))


class ResNet20(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                layers.append(Block(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn(self.conv(x))))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    C.common_args(p, lr=0.05, batch=32)
    a = p.parse_args()
    data = C.cifar10(C.data_dir(a.data))
    for method in a.methods.split(","):
        C.launch(C.train, a.workers, ResNet20, data, method, a.compressor,
                 {"density": a.density}, a)


if __name__ == "__main__":
    main()
