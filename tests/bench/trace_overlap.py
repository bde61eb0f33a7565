#!/usr/bin/env python3
"""How much of a replica's communication its computation hides, from a trace.

Reads one task's Chrome trace (<job_dir>/plugins/profile/steps_A_B/
<job>-<index>.trace.json, written with --trace_steps=A:B) and, per training
step (from one "train step" event to the next), measures:
  compute  the forward and backward passes (events of category forward or
           backward on the training loop);
  comm     the time at least one chunk's PushPull was on the wire (the union
           of the chunk tracks' PushPull events);
  hidden   the part of comm during which the loop was computing;
  waited   the loop's waits for answers ("wait for push answers", and
           "wait for parameters" inside the next forward pass).
Prints each step and the medians, and two fractions the scaling model takes
(tests/bench/scaling_model.py --hidden_share):
  overlap       hidden / comm: the share of the round trips that was hidden;
  hidden share  hidden / compute: the share of a step's computation that
                communication ran under, which, when the link is slow enough
                that communication outlasts it, is the window a step offers
                for hiding the wire.

  tests/bench/trace_overlap.py TRACE.json [--skip=1]
"""

import argparse
import json
import statistics


def union(intervals):
    out = []
    for b, e in sorted(intervals):
        if out and b <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([b, e])
    return out


def length(intervals):
    return sum(e - b for b, e in intervals)


def intersect(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append([lo, hi])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def clip(intervals, lo, hi):
    return [[max(b, lo), min(e, hi)] for b, e in intervals if e > lo and b < hi]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--skip", type=int, default=1, help="steps left out at the start (warm-up)")
    args = p.parse_args()
    with open(args.trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    span = lambda e: [float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))]
    steps = sorted(span(e)[0] for e in events if e["name"] == "train step")
    if len(steps) < args.skip + 2:
        raise SystemExit("%s: %d train steps, too few (trace more steps)" % (args.trace, len(steps)))
    compute = union([span(e) for e in events if e.get("cat") in ("forward", "backward")])
    comm = union([span(e) for e in events if e["name"] == "PushPull"])
    waits = [span(e) for e in events if e["name"] in ("wait for push answers", "wait for parameters")]
    rows = []
    print("%6s %9s %11s %9s %10s %10s" % ("step", "step ms", "compute ms", "comm ms", "hidden ms",
                                            "waited ms"))
    for k in range(args.skip, len(steps) - 1):
        lo, hi = steps[k], steps[k + 1]
        c = clip(compute, lo, hi)
        m = clip(comm, lo, hi)
        row = [(hi - lo) / 1e3, length(c) / 1e3, length(m) / 1e3, length(intersect(c, m)) / 1e3,
               length(clip(waits, lo, hi)) / 1e3]
        rows.append(row)
        print("%6d %9.1f %11.1f %9.1f %10.1f %10.1f" % (k, *row))
    med = [statistics.median(r[i] for r in rows) for i in range(5)]
    print("median %9.1f %11.1f %9.1f %10.1f %10.1f" % tuple(med))
    overlap = statistics.median(r[3] / r[2] for r in rows if r[2] > 0) if any(r[2] for r in rows) else 0
    share = statistics.median(r[3] / r[1] for r in rows if r[1] > 0)
    print("overlap %.2f (hidden / comm), hidden share %.2f (hidden / compute) over %d steps" %
          (overlap, share, len(rows)))


if __name__ == "__main__":
    main()
