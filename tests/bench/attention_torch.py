#!/usr/bin/python3
"""PyTorch's side of compare_attention.sh: torch.nn.MultiheadAttention
(self-attention, batch_first, every position valid), forward and backward
per step, timed as pstrain-attention-bench times multi_head_attention.

  attention_torch.py --length 50 --dim 64 --heads 4 --batch 256 --threads 2
Prints "forward ms: X" and "forward+backward ms: Y" (medians).
"""
import argparse
import statistics
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--length", type=int, default=50)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    layer = torch.nn.MultiheadAttention(a.dim, a.heads, batch_first=True)
    x = (torch.rand(a.batch, a.length, a.dim) - 0.5).requires_grad_(True)
    dy = torch.rand(a.batch, a.length, a.dim) - 0.5
    forward, step = [], []
    for s in range(a.warmup + a.steps):
        layer.zero_grad(set_to_none=True)
        x.grad = None
        start = time.perf_counter()
        y, _ = layer(x, x, x, need_weights=False)
        middle = time.perf_counter()
        y.backward(dy)
        end = time.perf_counter()
        if s >= a.warmup:
            forward.append((middle - start) * 1e3)
            step.append((end - start) * 1e3)
    print("attention L=%d d=%d heads=%d batch=%d threads=%d" %
          (a.length, a.dim, a.heads, a.batch, a.threads))
    print("forward ms: %.2f" % statistics.median(forward))
    print("forward+backward ms: %.2f" % statistics.median(step))


if __name__ == "__main__":
    main()
