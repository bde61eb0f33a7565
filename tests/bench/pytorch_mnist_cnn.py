#!/usr/bin/env python3
"""PyTorch reference for the TensorFlow MNIST tutorial CNN (side-by-side benchmark).

Model (TF "Build a Convolutional Neural Network using Estimators" tutorial):
  input 28x28x1 float
  conv 5x5, 32 filters, 'same' padding (2) + ReLU -> maxpool 2x2 stride 2
  conv 5x5, 64 filters, 'same' padding (2) + ReLU -> maxpool 2x2 stride 2
  flatten (7*7*64) -> dense 1024 + ReLU -> dropout 0.4 -> dense 10 (logits)
  loss: softmax cross-entropy; optimizer: Adam, lr 1e-3

Intended invocation (Debian's python3-torch lives under /usr/bin/python3, not
the pyenv python3 on PATH):

  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tests/bench/pytorch_mnist_cnn.py --threads=2

PyTorch uses oneDNN (MKL-DNN) for the convolutions and the system BLAS
(libblas.so.3 -> OpenBLAS pthread via update-alternatives) for the dense
GEMMs. OPENBLAS_NUM_THREADS=1 stops OpenBLAS's own pthread pool from competing
with torch's OpenMP threads; this script deliberately does not set it itself.
If train throughput is ~7x lower than expected, check
`update-alternatives --display libblas.so.3-x86_64-linux-gnu`: the reference
(netlib) BLAS is probably selected. The info line printed by --mode=bench shows
which libblas file was actually mapped into the process.

Modes:
  --mode=bench (default)  synthetic random data; times --steps training steps
                          (zero_grad, forward, loss, backward, Adam step) after
                          --warmup untimed steps, then an eval pass (model.eval(),
                          torch.no_grad(), forward only) over --eval_batches
                          batches (default: same as --steps). The last two lines
                          printed are exactly:
                            train examples/sec: X
                            eval examples/sec: Y
  --mode=train            trains on real Fashion-MNIST read from the idx .gz
                          files in --data_dir (no downloads), reshuffling every
                          epoch with --seed; every --eval_steps steps evaluates
                          on the 10000-image test set and prints
                            step N: test accuracy = A, loss = L, elapsed training time = T s
                          (T counts training steps only, not evaluation).

Examples:
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tests/bench/pytorch_mnist_cnn.py --mode=bench --threads=2 --steps=200
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tests/bench/pytorch_mnist_cnn.py --mode=train --threads=2 --train_steps=3000 --eval_steps=300
"""

import argparse
import gzip
import os
import re
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class MnistCnn(nn.Module):
    def __init__(self, dropout=0.4):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, kernel_size=5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=5, padding=2)
        self.dense = nn.Linear(7 * 7 * 64, 1024)
        self.dropout = nn.Dropout(p=dropout)
        self.logits = nn.Linear(1024, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), kernel_size=2, stride=2)
        x = F.max_pool2d(F.relu(self.conv2(x)), kernel_size=2, stride=2)
        x = torch.flatten(x, 1)
        x = F.relu(self.dense(x))
        x = self.dropout(x)
        return self.logits(x)


def set_threads(n):
    # set_num_interop_threads must run before any inter-op parallel work starts.
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError as e:  # already initialised
        print("warning: set_num_interop_threads(%d) failed: %s" % (n, e),
              file=sys.stderr)
    torch.set_num_threads(n)


def mapped_blas_libs():
    """Real paths of BLAS/LAPACK libraries mapped into this process (Linux)."""
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6:
                    path = parts[5]
                    base = os.path.basename(path)
                    if re.search(r"blas|lapack|mkl_rt", base) and path not in libs:
                        libs.append(path)
    except OSError:
        pass
    return libs


def config_info():
    cfg = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=([^,\s]+)", cfg)
    dnnl = re.search(r"MKL-DNN (v[\d.]+)", cfg) or re.search(r"oneDNN (v[\d.]+)", cfg)
    libs = [p for p in mapped_blas_libs() if "libblas" in os.path.basename(p)
            or "openblas" in os.path.basename(p)]
    return ("torch %s, threads=%d, interop_threads=%d, BLAS_INFO=%s, "
            "mkldnn_available=%s (oneDNN %s), mkl_available=%s, openmp=%s, "
            "OPENBLAS_NUM_THREADS=%s, blas_libs=%s" % (
                torch.__version__, torch.get_num_threads(),
                torch.get_num_interop_threads(),
                blas.group(1) if blas else "?",
                torch.backends.mkldnn.is_available(),
                dnnl.group(1) if dnnl else "?",
                torch.backends.mkl.is_available(),
                torch.backends.openmp.is_available(),
                os.environ.get("OPENBLAS_NUM_THREADS", "unset"),
                ",".join(libs) if libs else "?"))


def make_model_and_opt(lr):
    model = MnistCnn()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    return model, opt


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def run_bench(args):
    torch.manual_seed(args.seed)
    model, opt = make_model_and_opt(args.lr)
    bs = args.batch_size
    x = torch.rand(bs, 1, 28, 28)
    y = torch.randint(0, 10, (bs,))

    print(config_info())
    sys.stdout.flush()

    model.train()
    for _ in range(args.warmup):
        train_step(model, opt, x, y)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        train_step(model, opt, x, y)
    train_time = time.perf_counter() - t0

    eval_batches = args.eval_batches if args.eval_batches > 0 else args.steps
    model.eval()
    with torch.no_grad():
        for _ in range(args.warmup):
            model(x)
        t0 = time.perf_counter()
        for _ in range(eval_batches):
            model(x)
        eval_time = time.perf_counter() - t0

    print("train: %d steps x %d in %.3f s; eval: %d batches x %d in %.3f s" % (
        args.steps, bs, train_time, eval_batches, bs, eval_time))
    print("train examples/sec: %.1f" % (args.steps * bs / train_time))
    print("eval examples/sec: %.1f" % (eval_batches * bs / eval_time))


def read_idx_images(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n, rows, cols = struct.unpack(">IIII", data[:16])
    if magic != 2051:
        raise ValueError("%s: bad idx3 magic %d" % (path, magic))
    arr = np.frombuffer(data, dtype=np.uint8, count=n * rows * cols, offset=16)
    return (arr.astype(np.float32) / 255.0).reshape(n, 1, rows, cols)


def read_idx_labels(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic != 2049:
        raise ValueError("%s: bad idx1 magic %d" % (path, magic))
    return np.frombuffer(data, dtype=np.uint8, count=n, offset=8).astype(np.int64)


def load_split(data_dir, prefix):
    x = read_idx_images(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz"))
    y = read_idx_labels(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz"))
    if len(x) != len(y):
        raise ValueError("%s: %d images but %d labels" % (prefix, len(x), len(y)))
    return torch.from_numpy(x), torch.from_numpy(y)


def evaluate(model, x, y, batch):
    model.eval()
    correct = 0
    loss_sum = 0.0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            logits = model(x[i:i + batch])
            yb = y[i:i + batch]
            loss_sum += F.cross_entropy(logits, yb, reduction="sum").item()
            correct += (logits.argmax(1) == yb).sum().item()
    model.train()
    return correct / len(x), loss_sum / len(x)


def run_train(args):
    torch.manual_seed(args.seed)
    rng = np.random.RandomState(args.seed)
    train_x, train_y = load_split(args.data_dir, "train")
    test_x, test_y = load_split(args.data_dir, "t10k")
    print(config_info())
    print("train: %d images, test: %d images, batch %d, %d steps, eval every %d" % (
        len(train_x), len(test_x), args.batch_size, args.train_steps,
        args.eval_steps))
    sys.stdout.flush()

    model, opt = make_model_and_opt(args.lr)
    model.train()
    bs = args.batch_size
    n = len(train_x)
    perm = torch.from_numpy(rng.permutation(n))
    pos = 0
    train_time = 0.0
    for step in range(1, args.train_steps + 1):
        if pos + bs > n:  # new epoch: drop the remainder, reshuffle
            perm = torch.from_numpy(rng.permutation(n))
            pos = 0
        idx = perm[pos:pos + bs]
        pos += bs
        xb, yb = train_x[idx], train_y[idx]
        t0 = time.perf_counter()
        train_step(model, opt, xb, yb)
        train_time += time.perf_counter() - t0
        if step % args.eval_steps == 0 or step == args.train_steps:
            acc, loss = evaluate(model, test_x, test_y, args.eval_batch_size)
            print("step %d: test accuracy = %.4f, loss = %.4f, "
                  "elapsed training time = %.1f s" % (step, acc, loss, train_time))
            sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(
        description="PyTorch reference for the TF MNIST tutorial CNN "
                    "(run as: OPENBLAS_NUM_THREADS=1 /usr/bin/python3 %(prog)s --threads=2)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--mode", choices=["bench", "train"], default="bench")
    p.add_argument("--batch_size", type=int, default=100)
    p.add_argument("--threads", type=int, default=2,
                   help="torch.set_num_threads and set_num_interop_threads")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    p.add_argument("--seed", type=int, default=1)
    # bench mode
    p.add_argument("--steps", type=int, default=200,
                   help="bench: timed training steps")
    p.add_argument("--warmup", type=int, default=20,
                   help="bench: untimed warm-up steps (train and eval)")
    p.add_argument("--eval_batches", type=int, default=0,
                   help="bench: timed eval batches (0 = same as --steps)")
    # train mode
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist",
                   help="train: dir with {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz")
    p.add_argument("--train_steps", type=int, default=3000)
    p.add_argument("--eval_steps", type=int, default=300,
                   help="train: evaluate on the test set every N steps")
    p.add_argument("--eval_batch_size", type=int, default=1000,
                   help="train: batch size used for test-set evaluation")
    args = p.parse_args()
    if args.batch_size <= 0 or args.threads <= 0 or args.steps <= 0 \
            or args.warmup < 0 or args.train_steps <= 0 or args.eval_steps <= 0 \
            or args.eval_batch_size <= 0:
        p.error("sizes and counts must be positive")

    set_threads(args.threads)
    if args.mode == "bench":
        run_bench(args)
    else:
        run_train(args)


if __name__ == "__main__":
    main()
