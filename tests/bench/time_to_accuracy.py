#!/usr/bin/env python3
"""Time to a test accuracy for a pstrain cluster on this machine.

Runs a real job with pstrain-launch (1 ps, N workers, the chief evaluating
on the Fashion-MNIST test set every --eval_steps and not training), and
reports the chief's "s of training" at the first evaluation that reaches
--target (then stops the job with SIGTERM). Options to compare the update
modes and the wire:

  --update sync|async|ssp [--staleness S]
  --straggler F   the last worker is a straggler: SIGSTOPped for F of every
                  --straggler_period seconds (0.75: it runs at 1/4 speed)
  --compression_ratio R   top-k gradient compression with error feedback

Prints one line per evaluation and, last, exactly one of
  time to accuracy T: X s (global step N)
  time to accuracy T: not reached (best A at global step N, X s)

  tests/bench/time_to_accuracy.py --update=ssp --staleness=2 --straggler=0.75 --target=0.85
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

EVAL = re.compile(r"Saving dict for global step (\d+): accuracy = ([0-9.]+).*\(([0-9.]+) s of training\)")


def free_ports(n):
    import socket
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def write_config(args, directory):
    ports = free_ports(2 + args.workers)
    addr = lambda ps: "[" + ", ".join('"127.0.0.1:%d"' % p for p in ps) + "]"
    training = {
        "model": "mnist_cnn", "data_dir": args.data_dir, "job_dir": os.path.join(directory, "job"),
        "update": args.update, "staleness": args.staleness, "chief_trains": "false",
        "batch_size": args.batch_size, "train_steps": args.train_steps,
        "eval_steps": args.eval_steps, "log_every_n_steps": 100, "seed": args.seed,
        "threads": args.threads, "checkpoint_steps": 0, "histogram_steps": 0,
        "insecure": "true", "sync_timeout": 30, "learning_rate": args.learning_rate,
    }
    if args.trace_steps:
        training["trace_steps"] = '"%s"' % args.trace_steps
    if args.compression_ratio > 0:
        training["compression"] = "topk"
        training["compression_ratio"] = args.compression_ratio
    lines = ["cluster:", "  chief: " + addr(ports[:1]), "  worker: " + addr(ports[1:-1]),
             "  ps: " + addr(ports[-1:]), "training:"]
    lines += ["  %s: %s" % (k, v) for k, v in training.items()]
    path = os.path.join(directory, "cluster.yaml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def find_worker(config, index):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if (any(a.endswith(b"pstrain-worker") for a in argv[:1]) and
                ("--config=" + config).encode() in argv and
                ("--task_index=%d" % index).encode() in argv):
            return int(pid)
    return None


def straggle(config, index, fraction, period, done):
    """Stops and continues worker `index` so it runs 1 - fraction of the time."""
    pid = None
    while pid is None and not done.is_set():
        pid = find_worker(config, index)
        time.sleep(0.05)
    while not done.is_set():
        try:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(fraction * period)
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return
        time.sleep((1 - fraction) * period)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "../../build/bin"))
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--update", default="sync", choices=["sync", "async", "ssp"])
    p.add_argument("--staleness", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch_size", type=int, default=100)
    p.add_argument("--threads", type=int, default=1, help="compute threads per process")
    p.add_argument("--train_steps", type=int, default=3000)
    p.add_argument("--eval_steps", type=int, default=100)
    p.add_argument("--target", type=float, default=0.916)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--learning_rate", type=float, default=0.001)
    p.add_argument("--straggler", type=float, default=0.0)
    p.add_argument("--straggler_period", type=float, default=0.2)
    p.add_argument("--compression_ratio", type=float, default=0.0)
    p.add_argument("--trace_steps", default="", help="A:B: trace these steps; the job dir is kept")
    args = p.parse_args()

    directory = tempfile.mkdtemp(prefix="pstrain-tta-")
    config = write_config(args, directory)
    launch = subprocess.Popen([os.path.join(args.bin, "pstrain-launch"), "--config=" + config],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done = threading.Event()
    if args.straggler > 0:
        threading.Thread(target=straggle, daemon=True,
                         args=(config, args.workers - 1, args.straggler, args.straggler_period,
                               done)).start()
    reached, best = None, (0.0, 0, 0.0)
    for line in launch.stdout:
        m = EVAL.search(line)
        if not m:
            if "failed" in line or "Error" in line:
                sys.stdout.write(line)
            continue
        step, accuracy, secs = int(m.group(1)), float(m.group(2)), float(m.group(3))
        print("global step %d: accuracy %.4f at %.1f s" % (step, accuracy, secs), flush=True)
        if accuracy > best[0]:
            best = (accuracy, step, secs)
        if accuracy >= args.target:
            reached = (secs, step)
            done.set()
            launch.send_signal(signal.SIGTERM)
            break
    done.set()
    for line in launch.stdout:
        pass
    launch.wait()
    if args.trace_steps:
        print("traces in %s/job/plugins/profile" % directory)
    else:
        subprocess.run(["rm", "-rf", directory])
    if reached:
        print("time to accuracy %.3f: %.1f s (global step %d)" % (args.target, reached[0], reached[1]))
    else:
        print("time to accuracy %.3f: not reached (best %.4f at global step %d, %.1f s)" %
              (args.target, best[0], best[1], best[2]))


if __name__ == "__main__":
    main()
