"""pstrain.Predictor in process: batch-1 latency and batch-B throughput.

Prints, as pstrain-serve-bench prints its in-process runs:
  module batch=B: p50 X ms per call, Y instances/s
for each --batches size: calls of predict() on fixed random images (float32
in [0, 1]) after a warm-up, 300 calls or --seconds, whichever ends first.

  PYTHONPATH=build/python /usr/bin/python3 tests/bench/predictor_bench.py \
      --model_dir EXPORT [--batches 1,256] [--seconds 5]
"""

import argparse
import time

import numpy as np

import pstrain


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model_dir", required=True)
    p.add_argument("--batches", default="1,256")
    p.add_argument("--seconds", type=float, default=5)
    args = p.parse_args()
    model = pstrain.Predictor(args.model_dir)
    rng = np.random.default_rng(1)
    for batch in (int(b) for b in args.batches.split(",")):
        images = rng.integers(0, 256, size=(batch,) + tuple(model.input_shape)).astype(
            np.float32) / 255.0
        for _ in range(min(20, max(2, 2560 // batch))):
            model.predict(images)
        ms = []
        begin = time.perf_counter()
        while len(ms) < 300 and (len(ms) < 5 or time.perf_counter() - begin < args.seconds):
            start = time.perf_counter()
            model.predict(images)
            ms.append((time.perf_counter() - start) * 1000)
        p50 = float(np.median(ms))
        print(f"module batch={batch}: p50 {p50:.3f} ms per call, {batch * 1000 / p50:.1f} "
              "instances/s", flush=True)


if __name__ == "__main__":
    main()
