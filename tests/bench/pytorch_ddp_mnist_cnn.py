#!/usr/bin/env python3
"""PyTorch DistributedDataParallel reference for the TF MNIST tutorial CNN.

The data-parallel counterpart of pytorch_mnist_cnn.py (same model, reused from
that file): --world_size processes on this machine, each with
--threads_per_process intra-op and inter-op threads, gradients all-reduced by
DDP over the gloo backend on loopback (127.0.0.1, a free MASTER_PORT picked at
start). Adam lr 1e-3, --batch_size examples PER PROCESS per step, synthetic
random input (a different fixed batch per rank). The script spawns the worker
processes itself (torch.multiprocessing.spawn, i.e. fresh interpreters that
inherit this process's environment).

Run with Debian's python3-torch (/usr/bin/python3, not the pyenv python3 on
PATH):

  /usr/bin/python3 tests/bench/pytorch_ddp_mnist_cnn.py
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296 \\
      /usr/bin/python3 tests/bench/pytorch_ddp_mnist_cnn.py --steps=200

The GLIBC_TUNABLES setting (glibc malloc keeps freed memory instead of
returning it to the kernel every step) is what compare_pytorch.sh uses; it is
read by the dynamic loader at exec, so it must be in the launching command's
environment; the spawned workers inherit it. The info line reports the value
each worker actually started with.

OPENBLAS_NUM_THREADS defaults to 1 (set here before torch is imported, so both
this launcher and the workers get it) and GLOO_SOCKET_IFNAME to lo; values
already in the environment are kept.

Timing: every rank runs --warmup untimed steps, a barrier, --steps timed steps
(zero_grad, forward, loss, backward with DDP all-reduce, Adam step), a barrier.
Aggregate throughput = world_size * steps * batch_size / slowest rank's time.
The last two lines printed are exactly:
  ddp: <per-process figures and config>
  train examples/sec: X
"""

import argparse
import os
import socket
import sys
import time

# Must precede `import torch` (OpenBLAS reads it when the library loads).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from pytorch_mnist_cnn import MnistCnn, config_info, set_threads  # noqa: E402


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, args, port, results):
    set_threads(args.threads_per_process)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=args.world_size)
    try:
        torch.manual_seed(args.seed)  # identical initial weights on every rank
        model = DDP(MnistCnn())
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        g = torch.Generator().manual_seed(args.seed + 1 + rank)
        bs = args.batch_size
        x = torch.rand(bs, 1, 28, 28, generator=g)
        y = torch.randint(0, 10, (bs,), generator=g)

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

        model.train()
        for _ in range(args.warmup):
            step()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        elapsed = time.perf_counter() - t0
        dist.barrier()
        info = config_info() if rank == 0 else None
        # os.environ is built from the C environ at interpreter start, i.e. the
        # environment this worker was exec'd with. (Not /proc/self/environ:
        # glibc 2.36 cuts GLIBC_TUNABLES there at the first ':' while parsing.)
        results.put((rank, elapsed, info, os.environ.get("GLIBC_TUNABLES"),
                     os.environ.get("OPENBLAS_NUM_THREADS")))
    finally:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(
        description="PyTorch DDP (gloo, loopback) reference for the TF MNIST "
                    "tutorial CNN (run as: /usr/bin/python3 %(prog)s)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--world_size", type=int, default=2,
                   help="number of worker processes")
    p.add_argument("--batch_size", type=int, default=100,
                   help="examples per process per step")
    p.add_argument("--steps", type=int, default=200, help="timed training steps")
    p.add_argument("--warmup", type=int, default=20,
                   help="untimed warm-up steps")
    p.add_argument("--threads_per_process", type=int, default=1,
                   help="torch.set_num_threads and set_num_interop_threads "
                        "in each worker")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.world_size <= 0 or args.batch_size <= 0 or args.steps <= 0 \
            or args.warmup < 0 or args.threads_per_process <= 0:
        p.error("sizes and counts must be positive")

    port = free_port()
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    mp.spawn(worker, args=(args, port, results), nprocs=args.world_size,
             join=True)

    per_rank = {}
    info = None
    while not results.empty():
        rank, elapsed, rinfo, tunables, obt = results.get()
        per_rank[rank] = (elapsed, tunables, obt)
        if rinfo is not None:
            info = rinfo
    if len(per_rank) != args.world_size:
        sys.exit("error: got results from %d of %d ranks" % (
            len(per_rank), args.world_size))

    bs, steps = args.batch_size, args.steps
    if info:
        print("rank 0: " + info)
    tunables = {per_rank[r][1] for r in per_rank}
    print("workers' GLIBC_TUNABLES: %s" % (
        ", ".join(sorted(t if t is not None else "unset" for t in tunables))))
    slowest = max(e for e, _, _ in per_rank.values())
    ranks = "; ".join("rank %d %.3f s %.1f ex/s" % (r, per_rank[r][0],
                                                     steps * bs / per_rank[r][0])
                      for r in sorted(per_rank))
    print("ddp: gloo 127.0.0.1:%d, world_size=%d x threads=%d, batch %d/process, "
          "%d steps after %d warm-up; %s" % (
              port, args.world_size, args.threads_per_process, bs, steps,
              args.warmup, ranks))
    print("train examples/sec: %.1f" % (args.world_size * steps * bs / slowest))


if __name__ == "__main__":
    main()
