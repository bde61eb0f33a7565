#!/usr/bin/env bash
# Online training for a long while (issue 41): Wide & Deep (examples/models/
# wide_and_deep.yaml) follows a drifting synthetic click log that gets a new
# gzip'd file every `every` seconds (pstrain-data synthetic-ctr --stream), on
# 1 ps x 2 workers (the chief does not train), async; it checkpoints and
# exports every 5 s (a full version every 5 exports, deltas between) and
# pstrain-serve follows the exports (polling every second).
#
# lag: for each file, from its landing (its mtime: it is renamed into place)
#   to the first version pstrain-serve serves that was exported after the
#   replica dealt the file had read it whole (a version is named by the Unix
#   second it was written: 1 s resolution); prints the median and the worst,
#   and how many files it covers.
# memory: each role's resident memory (VmRSS) every 30 s; prints it at
#   warm-up (`warmup` minutes) and at the end, and the largest growth after
#   warm-up, per role.
#
# ttl: the tables' embedding_ttl_steps (a job makes about 35000 steps an hour
#   here, so 5000 evicts from about 9 minutes in).
#
#   tests/bench/online_bench.sh [minutes=60] [every=20] [examples=50000] [warmup=15] [ttl=5000]
# Needs a Release build in build/. Disk: about 60 bytes per example written
# (gzip'd TSV), plus 3 checkpoints and 6 exports.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
minutes="${1:-60}"
every="${2:-20}"
examples="${3:-50000}"
warmup="${4:-15}"
ttl="${5:-5000}"
bin="$root/build/bin"
spec="$root/examples/models/wide_and_deep.yaml"
[[ -x "$bin/pstrain-launch" ]] || { echo "build first: $bin/pstrain-launch is missing" >&2; exit 2; }

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 5
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  [[ -n "${KEEP:-}" ]] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

cat >"$work/cluster.yaml" <<YAML
cluster:
  ps: ["127.0.0.1:$(port)"]
  chief: ["127.0.0.1:$(port)"]
  worker: ["127.0.0.1:$(port)", "127.0.0.1:$(port)"]
training:
  update: async
  chief_trains: false
  follow: true
  poll_secs: 1
  batch_size: 256
  learning_rate: 0.003
  embedding_learning_rate: 0.1
  embedding_ttl_steps: $ttl
  eval_steps: 0
  checkpoint_steps: 1000
  checkpoint_secs: 5
  keep_checkpoint_max: 3
  export_secs: 5
  full_export_every: 5
  exports_to_keep: 6
  log_every_n_steps: 1000
  insecure: true
YAML

count=$((minutes * 60 / every + 1))
mkdir -p "$work/logs" "$work/data"
"$bin/pstrain-data" synthetic-ctr --out "$work/data/train.tsv" --examples 1000 \
  --test_out "$work/data/test.tsv" --test_examples 1000 >/dev/null
"$bin/pstrain-data" synthetic-ctr --stream "$work/logs" --examples "$examples" --every "$every" \
  --drift 0.05 --count "$count" --gzip >"$work/stream.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do compgen -G "$work/logs/part-*.tsv.gz" >/dev/null && break; sleep 0.2; done
"$bin/pstrain-launch" --config="$work/cluster.yaml" --model="$spec" --data_dir="$work/data" \
  --train_files="$work/logs/part-*.tsv.gz" --job_dir="$work/job" >"$work/launch.log" 2>&1 &
launch=$!
pids+=($launch)
for _ in $(seq 600); do compgen -G "$work/job/export/*/model.json" >/dev/null && break; sleep 0.5; done
serve_port="$(port)"
"$bin/pstrain-serve" --model_base_path="$work/job/export" --model_name=ctr --host=127.0.0.1 \
  --port="$serve_port" --file_system_poll_wait_seconds=1 >"$work/serve.log" 2>&1 &
pids+=($!)
echo "online: a file of $examples examples every $every s for $minutes min; Wide & Deep, 1 ps x 2 workers"

# RSS samples: "seconds role MiB" lines.
rss_of() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || true; }
start=$(date +%s)
end=$((start + minutes * 60))
while (($(date +%s) < end)); do
  kill -0 "$launch" 2>/dev/null || { echo "the job ended early:" >&2; tail -30 "$work/launch.log" >&2; exit 1; }
  t=$(($(date +%s) - start))
  for role in pstrain-ps pstrain-chief pstrain-worker pstrain-serve; do
    i=0
    for p in $(pgrep -f "^$bin/$role .*$work" || true); do
      echo "$t ${role#pstrain-}:$i $(rss_of "$p")" >>"$work/rss.txt"
      i=$((i + 1))
    done
  done
  sleep 30
done

python3 - "$work" "$warmup" <<'PY'
import datetime, glob, os, re, statistics, sys
work, warmup = sys.argv[1], float(sys.argv[2])
year = datetime.date.today().year

def stamp(line):
    m = re.search(r"[IWE](\d{4})?(\d\d)(\d\d) (\d\d):(\d\d):(\d\d\.\d+)", line)
    if not m:
        return None
    y, mo, d, h, mi, s = m.groups()
    t = datetime.datetime(int(y) if y else year, int(mo), int(d), int(h), int(mi), 0,
                          tzinfo=datetime.timezone.utc)
    return t.timestamp() + float(s)

# When each file was read whole: "replica R of 2 has read its N files of the M listed".
read_done = {}
for line in open(os.path.join(work, "launch.log"), errors="replace"):
    m = re.search(r"replica (\d+) of (\d+) has read its (\d+) files of the (\d+) listed", line)
    if m and int(m.group(3)) > 0 and stamp(line) is not None:
        r, n, k = int(m.group(1)), int(m.group(2)), int(m.group(3))
        f = (k - 1) * n + r  # its k-th file: file r + (k - 1) * n
        read_done.setdefault(f, stamp(line))
served = []  # (time served, version)
for line in open(os.path.join(work, "serve.log"), errors="replace"):
    m = re.search(r"serving model \S+ version (\d+)", line)
    if m and stamp(line) is not None:
        served.append((stamp(line), int(m.group(1))))
files = sorted(glob.glob(os.path.join(work, "logs", "part-*.tsv.gz")))
lags = []
for i, path in enumerate(files):
    if i not in read_done:
        continue
    landed = os.path.getmtime(path)
    after = [t for t, v in served if v >= int(read_done[i])]
    if after:
        lags.append(min(after) - landed)
if lags:
    print("lag from a file landing to a served model trained on it: median %.1f s, worst %.1f s "
          "(%d of %d files)" % (statistics.median(lags), max(lags), len(lags), len(files)))
else:
    print("lag: no file was read whole and served (see %s)" % work)
deltas = sum(1 for line in open(os.path.join(work, "serve.log"), errors="replace")
             if "rows applied in place" in line)
print("pstrain-serve: %d versions served, %d of them deltas applied in place" % (len(served), deltas))

rss = {}
for line in open(os.path.join(work, "rss.txt")):
    t, role, mib = line.split()
    if mib:
        rss.setdefault(role, []).append((int(t), float(mib)))
print("resident memory (MiB) every 5 min:")
for role in sorted(rss):
    print("  %-10s %s" % (role, " ".join("%.0f" % m for t, m in rss[role] if t % 300 < 30)))
print("resident memory (MiB) at %g min (warm-up), at the end, and the largest after warm-up:" % warmup)
for role in sorted(rss):
    samples = rss[role]
    warm = [m for t, m in samples if t >= warmup * 60]
    if not warm:
        continue
    print("  %-10s %8.1f %8.1f %8.1f  (%+.1f%%)" % (role, warm[0], warm[-1], max(warm),
                                                     100.0 * (max(warm) - warm[0]) / warm[0]))
PY
