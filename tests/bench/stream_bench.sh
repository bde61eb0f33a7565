#!/usr/bin/env bash
# Streamed input at scale (issue 40): Wide & Deep (examples/models/
# wide_and_deep.yaml) on synthetic Criteo-like click data, 2 ps x 2 workers
# (the chief does not train), async, batch 256 per replica.
#
# speed: the same `examples` examples trained on with in-memory input
#   (data_dir's train.tsv, read whole into each worker) and streamed from 16
#   gzip'd shards (train_files), `rounds` times each, alternating; prints
#   every run's examples/sec (the training logs' global figure), the medians
#   and streamed / in-memory.
# memory: streamed jobs of 1 epoch over `examples` and over 10x as many
#   examples (16 gzip'd shards each); prints each role's peak resident memory
#   (the roles log it as they exit) next to the data's size, and the workers'
#   peak at 10x / at 1x.
#
#   tests/bench/stream_bench.sh [examples=400000] [rounds=3] [steps=3000]
# Needs a Release build in build/. Disk: about 110 bytes per example (gzip'd
# TSV) for the 11x examples written, plus the in-memory copy.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
examples="${1:-400000}"
rounds="${2:-3}"
steps="${3:-3000}"
bin="$root/build/bin"
spec="$root/examples/models/wide_and_deep.yaml"
[[ -x "$bin/pstrain-launch" ]] || { echo "build first: $bin/pstrain-launch is missing" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

cat >"$work/cluster.yaml" <<YAML
cluster:
  ps: ["127.0.0.1:$(port)", "127.0.0.1:$(port)"]
  chief: ["127.0.0.1:$(port)"]
  worker: ["127.0.0.1:$(port)", "127.0.0.1:$(port)"]
training:
  update: async
  chief_trains: false
  batch_size: 256
  learning_rate: 0.003
  embedding_learning_rate: 0.1
  eval_steps: 0
  checkpoint_steps: 0
  log_every_n_steps: 200
  insecure: true
YAML

# The data: 1x as 16 gzip'd shards and as one plain train.tsv (in-memory
# input), 10x as 16 gzip'd shards; one test file.
gen() { "$bin/pstrain-data" synthetic-ctr "$@" >/dev/null; }
mkdir -p "$work/mem" "$work/x1" "$work/x10"
gen --out "$work/mem/train.tsv" --examples "$examples" --test_out "$work/mem/test.tsv" \
  --test_examples 20000
gen --out "$work/x1/day.tsv" --examples "$examples" --shards 16 --gzip
gen --out "$work/x10/day.tsv" --examples $((10 * examples)) --shards 16 --gzip
size_mb() { du -cm "$@" | tail -1 | cut -f1; }
raw_mb() { for f in "$@"; do gzip -dc "$f"; done | wc -c | awk '{printf "%.0f", $1 / 1e6}'; }

# run NAME ARGS...: a job in $work/NAME; its launcher's output in NAME.log.
run() {
  local name="$1"
  shift
  rm -rf "$work/$name"
  "$bin/pstrain-launch" --config="$work/cluster.yaml" --model="$spec" \
    --job_dir="$work/$name" "$@" >"$work/$name.log" 2>&1 ||
    { echo "the $name job failed:" >&2; tail -20 "$work/$name.log" >&2; exit 1; }
}
# The workers' mean examples/sec over their progress lines after the first.
rate() {
  sed -n 's/^\[worker:[0-9]\].*step = [0-9]*, loss = [0-9.]*, examples\/sec = \([0-9.]*\).*/\1/p' "$1" |
    awk '{n[NR]=$1} END {s=0; c=0; for (i=3; i<=NR; ++i) {s+=n[i]; c++} if (c) printf "%.0f", 2 * s / c; else print 0}'
}
# Each role's peak memory: "role MiB" lines.
peaks() {
  sed -n 's/^\[\([a-z]*:[0-9]*\)\].*peak memory (resident): \([0-9.]*\) MiB.*/\1 \2/p' "$1"
}

echo "speed: $examples examples, $steps steps of 2 x 256 per run, async"
declare -a mem_rates stream_rates
for ((r = 0; r < rounds; ++r)); do
  for mode in mem stream; do
    if [[ $mode == mem ]]; then
      run "speed_$mode" --data_dir="$work/mem" --train_steps="$steps"
    else
      run "speed_$mode" --data_dir="$work/mem" --train_files="$work/x1/day-*.tsv.gz" \
        --train_steps="$steps"
    fi
    v="$(rate "$work/speed_$mode.log")"
    echo "  round $r $mode: $v examples/sec"
    if [[ $mode == mem ]]; then mem_rates+=("$v"); else stream_rates+=("$v"); fi
  done
done
m="$(printf '%s\n' "${mem_rates[@]}" | median)"
s="$(printf '%s\n' "${stream_rates[@]}" | median)"
echo "median: in memory $m, streamed $s examples/sec; streamed / in memory = $(awk -v a="$s" -v b="$m" 'BEGIN {printf "%.3f", a / b}')"

echo "memory: one epoch, streamed"
for x in x1 x10; do
  run "mem_$x" --data_dir="$work/mem" --train_files="$work/$x/day-*.tsv.gz" --num_epochs=1
  echo "  $x: $(size_mb "$work/$x"/*.gz) MB gzip'd, $(raw_mb "$work/$x"/*.gz) MB of TSV; peak resident MiB:" \
    $(peaks "$work/mem_$x.log" | sort | tr '\n' ' ')
done
w1="$(peaks "$work/mem_x1.log" | awk '/^worker/ {if ($2 > m) m = $2} END {print m}')"
w10="$(peaks "$work/mem_x10.log" | awk '/^worker/ {if ($2 > m) m = $2} END {print m}')"
echo "worker peak: $w1 MiB at 1x, $w10 MiB at 10x; 10x / 1x = $(awk -v a="$w10" -v b="$w1" 'BEGIN {printf "%.3f", a / b}')"
in_memory="$(peaks "$work/speed_mem.log" | awk '/^worker/ {if ($2 > m) m = $2} END {print m}')"
echo "(a worker with the 1x data in memory: $in_memory MiB)"
