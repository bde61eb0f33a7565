#!/usr/bin/env python3
"""A throughput model of a pstrain sync job from three measured quantities.

Measured here (pstrain-bench, this machine, one thread per process):
  C  compute per step of one worker (forward + backward, the per-layer
     profile's sum), for the model and batch;
  n  parameters, and the bytes per step they make on the wire (float32 4,
     bf16 2, top-k r: 8 r for the push, as offset and value; pulls stay
     dense);
  A  the ps's optimizer apply rate and S its per-push sum rate (values/sec,
     `pstrain-bench --ps_rates`).

Model of one sync step with W workers, P ps and links of L bytes/sec each way
per host (every chunk is pushed and pulled once per worker per step; the
ps's NICs carry W/P of every worker's bytes):
  T_net   = max(n b_push, n b_pull) / L * max(1, W / P)
  T_comm  = k T_net   the time a step has chunks on the wire (k >= 1: the
            pulls of the last chunks follow their pushes)
  T_ps    = (W n / P) / S + (n / P) / A
  T_step  = C_eff + max(0, T_comm - h C_eff) + T_ps + rtt
  throughput = W batch / T_step; efficiency = C / T_step
C_eff = C max(1, W / cores) when the W workers share `cores` cores (the
simulated hosts of the check all run on this machine's cores). h, the hidden
share, is the part of a step's computation the wire can run under (the
backward pass after the first chunk's gradients, the next forward pass
before the last chunk's parameters are needed), and k the wire time over
T_net: both measured from a trace of a job whose link is the bottleneck
(tests/bench/trace_overlap.py: h is its "hidden share", k its median comm
over T_net). --hidden_share=0 --comm_factor=1 is the model without overlap.

  tests/bench/scaling_model.py                     # table for 8-64 workers on 10 GbE
  tests/bench/scaling_model.py --check_workers=3 --check_ps=1 --check_cores=2 \\
      --check_rates=loopback,1000,200               # predictions for hosts_bench.sh's job
"""

import argparse
import os
import re
import subprocess


def measure(bench, model, batch, steps):
    out = subprocess.run([bench, "--model=" + model, "--batch_size=%d" % batch, "--threads=1",
                          "--profile", "--steps=%d" % steps, "--warmup=5", "--optimizer=adam"],
                         check=True, capture_output=True, text=True).stdout
    n = int(re.search(r"model \S+: (\d+) parameters", out).group(1))
    compute_ms = 0.0
    in_table = False
    for line in out.splitlines():
        if line.startswith("layer"):
            in_table = True
            continue
        if in_table:
            if line.startswith("optimizer update"):
                break
            parts = line.split()
            compute_ms += float(parts[-2]) + float(parts[-1])
    rates = subprocess.run([bench, "--model=" + model, "--ps_rates=4", "--steps=10", "--threads=1"],
                           check=True, capture_output=True, text=True).stdout
    apply_rate = float(re.search(r"ps apply rate: ([0-9.]+)", rates).group(1))
    sum_rate = float(re.search(r"ps push sum rate: ([0-9.]+)", rates).group(1))
    return n, compute_ms / 1e3, apply_rate, sum_rate


def step_time(m, workers, ps, link_bytes, cores, push_bytes, pull_bytes, rtt, hidden_share,
              comm_factor):
    n, compute, apply_rate, sum_rate = m
    c_eff = compute * max(1.0, workers / cores) if cores else compute
    net = 0.0 if link_bytes is None else max(push_bytes, pull_bytes) * n / link_bytes * max(1.0, workers / ps)
    exposed = max(0.0, comm_factor * net - hidden_share * c_eff) if net > 0 else 0.0
    ps_cpu = workers * n / ps / sum_rate + n / ps / apply_rate
    return c_eff + exposed + ps_cpu + rtt, c_eff, exposed, ps_cpu


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", default=os.path.join(os.path.dirname(__file__), "../../build/bin/pstrain-bench"))
    p.add_argument("--model", default="mnist_cnn")
    p.add_argument("--batch_size", type=int, default=100)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--wire", default="float32", help="float32, bf16 or topk:R")
    p.add_argument("--link_gbit", type=float, default=10.0)
    p.add_argument("--rtt_ms", type=float, default=0.1)
    p.add_argument("--check_workers", type=int, default=0)
    p.add_argument("--check_ps", type=int, default=1)
    p.add_argument("--check_cores", type=int, default=2)
    p.add_argument("--check_rates", default="loopback,1000,200", help="Mbit/s, or loopback")
    p.add_argument("--hidden_share", type=float, default=0.80,
                   help="h: trace_overlap.py's hidden share (0.80: mnist_cnn, hosts at 1 Gbit/s)")
    p.add_argument("--comm_factor", type=float, default=1.58,
                   help="k: a step's wire time over T_net (1.58: the same trace, 497 ms / 314)")
    p.add_argument("--compute_ms", type=float, default=0,
                   help="C_eff measured (e.g. the unlimited hosts' step) instead of the bench's")
    args = p.parse_args()

    m = measure(args.bench, args.model, args.batch_size, args.steps)
    n, compute, apply_rate, sum_rate = m
    if args.wire.startswith("topk:"):
        push, pull = 8 * float(args.wire[5:]), 4.0
    else:
        push = pull = 2.0 if args.wire == "bf16" else 4.0
    print("measured: %s, %d parameters, compute %.1f ms per step of batch %d (1 thread); "
          "ps apply %.0f M values/s, push sum %.0f M values/s" %
          (args.model, n, compute * 1e3, args.batch_size, apply_rate / 1e6, sum_rate / 1e6))
    print("wire %s: %.1f MB pushed and %.1f MB pulled per worker per step" %
          (args.wire, push * n / 1e6, pull * n / 1e6))
    if args.check_workers:
        print("predicted for %d training replicas, %d ps on %d shared cores:" %
              (args.check_workers, args.check_ps, args.check_cores))
        for rate in args.check_rates.split(","):
            link = None if rate == "loopback" else float(rate) * 1e6 / 8
            mm = m if not args.compute_ms else (n, args.compute_ms / 1e3, apply_rate, sum_rate)
            cores = args.check_cores if not args.compute_ms else 0
            t, c, net, ps = step_time(mm, args.check_workers, args.check_ps, link, cores,
                                      push, pull, 0 if link is None else 2 * args.rtt_ms / 1e3,
                                      args.hidden_share, args.comm_factor)
            print("  %-9s step %.0f ms (compute %.0f, exposed network %.0f, ps %.0f): %.0f examples/sec" %
                  (rate if link is None else rate + "mbit", t * 1e3, c * 1e3, net * 1e3, ps * 1e3,
                   args.check_workers * args.batch_size / t))
        return
    link = args.link_gbit * 1e9 / 8
    print("predicted sync scaling on %.0f GbE (one worker per host, %.1f ms rtt):" %
          (args.link_gbit, args.rtt_ms))
    print("hidden share %.2f, comm factor %.2f" % (args.hidden_share, args.comm_factor))
    print("  %7s %4s %9s %8s %7s %11s %14s" %
          ("workers", "ps", "step ms", "exposed", "ps ms", "efficiency", "examples/sec"))
    for workers in (8, 16, 32, 64):
        for ps in sorted({1, max(1, workers // 8), max(1, workers // 4)}):
            t, c, net, ps_t = step_time(m, workers, ps, link, 0, push, pull, args.rtt_ms / 1e3,
                                        args.hidden_share, args.comm_factor)
            print("  %7d %4d %9.1f %8.1f %7.1f %10.0f%% %14.0f" %
                  (workers, ps, t * 1e3, net * 1e3, ps_t * 1e3, 100 * compute / t,
                   workers * args.batch_size / t))


if __name__ == "__main__":
    main()
