#!/usr/bin/env python3
"""PyTorch reference for examples/models/wide_and_deep.yaml (side-by-side benchmark).

The same network as pstrain's Wide & Deep spec, in one process:
  13 dense features: log(1 + v) of Criteo's integer fields (0 when missing or
    negative, as pstrain's CriteoLog1p);
  26 categorical fields C1..C26: their hexadecimal ids are parsed and each
    field's ids get indices from a vocabulary built on the training set
    (hash-free; index 0 is reserved for ids unseen in training and for a
    missing value: it is never trained and stays at its initial value, as a
    pstrain dynamic table answers a lookup of an id it holds no row for);
  deep: nn.EmbeddingBag(mode='sum', sparse=True) of dim 8 per field
    (uniform(-0.05, 0.05), the spec's default), concatenated with the dense
    features (13 + 26 x 8 = 221), then Linear 64 + ReLU, Linear 32 + ReLU,
    Linear 1 (Glorot-uniform kernels, zero biases);
  wide: nn.EmbeddingBag(dim 1, mode='sum', sparse=True) per field starting
    at zero, summed, plus a bias; its logit added to the deep one;
  loss: BCEWithLogits.
Optimizers as pstrain's: Adagrad on the embedding tables (TF 1.x's initial
accumulator 0.1, sparse gradients), Adam on every dense variable.

Reads train.tsv and test.tsv from --data_dir (Criteo TSV: label, 13
integers, 26 hexadecimal ids). Parsing is not timed; --cache FILE keeps the
parsed arrays (.npz) for the next run (--prepare: only that). Trains --steps steps of --batch_size
(reshuffled every epoch with --seed), then evaluates the test set. The
throughput counts the steps after the first --log_every (warm-up) and
includes building each batch. The last two lines printed are exactly:
  train examples/sec: X
  test auc: Y

  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tests/bench/ctr_torch.py --data_dir=DIR --steps=2000
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

NUM_DENSE = 13
NUM_CAT = 26


def parse_tsv(path):
    """(labels [N] float32, dense log1p [N, 13] float32, ids [N, 26] int64, -1 = missing)."""
    labels, dense, cats = [], [], []
    with open(path, "r") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 1 + NUM_DENSE + NUM_CAT:
                sys.exit(f"{path}: a line with {len(parts)} fields, not 40")
            labels.append(parts[0])
            dense.append(parts[1:1 + NUM_DENSE])
            cats.append(parts[1 + NUM_DENSE:])
    y = np.array(labels, dtype=np.float32)
    d = np.array([[int(v) if v else 0 for v in row] for row in dense], dtype=np.float64)
    d = np.log1p(np.maximum(d, 0.0)).astype(np.float32)
    c = np.array([[int(v, 16) if v else -1 for v in row] for row in cats], dtype=np.int64)
    return y, d, c


def load(data_dir, cache):
    if cache and os.path.exists(cache):
        z = np.load(cache)
        return [z[k] for k in ("ytr", "dtr", "ctr", "yte", "dte", "cte")]
    ytr, dtr, ctr = parse_tsv(os.path.join(data_dir, "train.tsv"))
    yte, dte, cte = parse_tsv(os.path.join(data_dir, "test.tsv"))
    if cache:
        np.savez(cache, ytr=ytr, dtr=dtr, ctr=ctr, yte=yte, dte=dte, cte=cte)
    return ytr, dtr, ctr, yte, dte, cte


def vocabularies(ctr, cte):
    """Per field: train and test indices (1.. for ids seen in training, 0 otherwise), sizes."""
    itr = np.zeros_like(ctr)
    ite = np.zeros_like(cte)
    sizes = []
    for f in range(NUM_CAT):
        col = ctr[:, f]
        known = np.unique(col[col >= 0])  # the field's vocabulary, sorted
        pos = np.searchsorted(known, col)
        hit = (col >= 0) & (pos < len(known)) & (known[np.minimum(pos, len(known) - 1)] == col)
        itr[:, f] = np.where(hit, pos + 1, 0)
        col = cte[:, f]
        pos = np.searchsorted(known, col)
        hit = (col >= 0) & (pos < len(known)) & (known[np.minimum(pos, len(known) - 1)] == col)
        ite[:, f] = np.where(hit, pos + 1, 0)
        sizes.append(len(known) + 1)
    return itr, ite, sizes


class WideAndDeep(nn.Module):
    def __init__(self, sizes, dim=8):
        super().__init__()
        self.deep_emb = nn.ModuleList(
            [nn.EmbeddingBag(n, dim, mode="sum", sparse=True) for n in sizes])
        self.wide_emb = nn.ModuleList(
            [nn.EmbeddingBag(n, 1, mode="sum", sparse=True) for n in sizes])
        for e in self.deep_emb:
            nn.init.uniform_(e.weight, -0.05, 0.05)
        for e in self.wide_emb:
            nn.init.zeros_(e.weight)
        self.wide_bias = nn.Parameter(torch.zeros(1))
        self.mlp = nn.Sequential(nn.Linear(NUM_DENSE + NUM_CAT * dim, 64), nn.ReLU(),
                                 nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
        for m in self.mlp:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, dense, ids):
        # ids [B, 26]: one value per field and example, each row one bag.
        cols = [ids[:, f:f + 1] for f in range(NUM_CAT)]
        deep = torch.cat([dense] + [e(c) for e, c in zip(self.deep_emb, cols)], dim=1)
        wide = self.wide_bias + sum(e(c) for e, c in zip(self.wide_emb, cols))
        return (self.mlp(deep) + wide).squeeze(1)

    def embedding_parameters(self):
        return [e.weight for e in self.deep_emb] + [e.weight for e in self.wide_emb]

    def dense_parameters(self):
        return [self.wide_bias] + list(self.mlp.parameters())


def auc(labels, scores):
    """Area under the ROC curve by the rank-sum formula, ties given their average rank."""
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    ranks = np.empty(len(s), dtype=np.float64)
    # Average ranks (1-based) over runs of equal scores.
    starts = np.r_[0, np.flatnonzero(np.diff(s)) + 1]
    ends = np.r_[starts[1:], len(s)]
    avg = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(avg, ends - starts)
    pos = labels > 0.5
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data_dir", required=True)
    p.add_argument("--cache", default="")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch_size", type=int, default=512)
    p.add_argument("--learning_rate", type=float, default=1e-3)  # Adam, dense variables
    p.add_argument("--embedding_learning_rate", type=float, default=0.05)  # Adagrad, tables
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--log_every", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--prepare", action="store_true", help="only parse the data into --cache")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    ytr, dtr, ctr, yte, dte, cte = load(a.data_dir, a.cache)
    if a.prepare:
        return
    itr, ite, sizes = vocabularies(ctr, cte)
    print(f"{len(ytr)} training and {len(yte)} test examples; vocabulary "
          f"{sum(sizes) - NUM_CAT} ids over {NUM_CAT} fields "
          f"(test ids unseen in training: {int((ite == 0).sum())})", flush=True)
    ytr_t, dtr_t, itr_t = torch.from_numpy(ytr), torch.from_numpy(dtr), torch.from_numpy(itr)

    model = WideAndDeep(sizes)
    sparse_opt = torch.optim.Adagrad(model.embedding_parameters(), lr=a.embedding_learning_rate,
                                     initial_accumulator_value=0.1)
    dense_opt = torch.optim.Adam(model.dense_parameters(), lr=a.learning_rate)
    loss_fn = nn.BCEWithLogitsLoss()

    gen = torch.Generator().manual_seed(a.seed)
    n = len(ytr)
    perm, at = torch.randperm(n, generator=gen), 0
    timed_from, t0 = None, time.perf_counter()
    window_start, window_loss = t0, 0.0
    for step in range(1, a.steps + 1):
        if at + a.batch_size > n:
            perm, at = torch.randperm(n, generator=gen), 0
        idx = perm[at:at + a.batch_size]
        at += a.batch_size
        logits = model(dtr_t[idx], itr_t[idx])
        loss = loss_fn(logits, ytr_t[idx])
        sparse_opt.zero_grad(set_to_none=True)
        dense_opt.zero_grad(set_to_none=True)
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        window_loss += loss.item()
        if step % a.log_every == 0:
            now = time.perf_counter()
            print(f"step = {step}, loss = {window_loss / a.log_every:.4f}, examples/sec = "
                  f"{a.log_every * a.batch_size / (now - window_start):.1f}", flush=True)
            window_start, window_loss = now, 0.0
            if timed_from is None:
                timed_from, t0 = step, now
    elapsed = time.perf_counter() - t0
    timed_steps = a.steps - (timed_from or 0)

    model.eval()
    scores = []
    with torch.no_grad():
        dte_t, ite_t = torch.from_numpy(dte), torch.from_numpy(ite)
        for b in range(0, len(yte), 5000):
            scores.append(model(dte_t[b:b + 5000], ite_t[b:b + 5000]))
    logit = torch.cat(scores)
    log_loss = loss_fn(logit, torch.from_numpy(yte)).item()
    print(f"test log loss: {log_loss:.4f}")
    print(f"train examples/sec: {timed_steps * a.batch_size / elapsed:.1f}")
    print(f"test auc: {auc(yte, logit.numpy().astype(np.float64)):.4f}")


if __name__ == "__main__":
    main()
