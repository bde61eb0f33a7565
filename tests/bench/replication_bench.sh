#!/usr/bin/env bash
# Replicated parameter servers (issue 55, docs/reliability.md): what the
# backups cost, on two jobs, 2 ps x 2 workers (1 compute thread each), every
# task a process on loopback (pstrain-bench --distributed, float32 on the
# wire):
#   - mnist_cnn, sync, batch 100 (Fashion-MNIST);
#   - examples/models/wide_and_deep.yaml, async, batch 256, on 200,000
#     synthetic click examples (pstrain-data synthetic-ctr): 26 embedding
#     tables and the wide part's on the ps.
# Each with ps_replication 1 and 2, alternating round by round; prints every
# run (with each process's CPU seconds in the timed steps: where the cycles
# go), then per job the median examples/sec of each, their ratio (replicated
# / unreplicated) and the ps' peak resident memory.
#
#   tests/bench/replication_bench.sh [rounds=3] [steps=200]
# Needs a Release build in build/ and Debian's dataset-fashion-mnist.
set -euo pipefail

rounds=${1:-3}
steps=${2:-200}
root=$(cd "$(dirname "$0")/../.." && pwd)
bench="$root/build/bin/pstrain-bench"
[ -x "$bench" ] || { echo "no $bench: build the Release tree first" >&2; exit 1; }
isa=$(grep -o -m1 -w 'avx512f' /proc/cpuinfo || true)
echo "host: $(nproc) cores, ${isa:-avx2 (no avx512f)}; load $(cut -d' ' -f1-3 /proc/loadavg)"

data=$(mktemp -d /tmp/pstrain_replication_bench.XXXXXX)
trap 'rm -rf "$data"' EXIT
"$root/build/bin/pstrain-data" synthetic-ctr --out "$data/train.tsv" --examples 200000 \
  --test_out "$data/test.tsv" --test_examples 1000 >/dev/null

median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# run JOB ARGS...: every round, ps_replication 1 then 2; then the medians.
run() {
  local job=$1
  shift
  local -A rates mem
  for ((r = 1; r <= rounds; r++)); do
    for copies in 1 2; do
      out=$("$bench" --distributed --ps=2 --workers=2 --steps="$steps" --warmup=20 \
        --wire_dtype=float32 --ps_replication="$copies" "$@" 2>&1) || { echo "$out" >&2; exit 1; }
      rate=$(sed -n 's/^train examples\/sec: //p' <<<"$out")
      peak=$(sed -n 's/^ps_replication [0-9]*; ps peak resident memory: //p' <<<"$out")
      cpu=$(sed -n 's/^CPU seconds in the timed steps //p' <<<"$out")
      echo "$job, round $r, ps_replication $copies: $rate examples/sec; ps peak memory: $peak"
      echo "  CPU seconds $cpu"
      rates[$copies]+="$rate "
      mem[$copies]="$peak"
    done
  done
  local m1 m2
  m1=$(median "${rates[1]}")
  m2=$(median "${rates[2]}")
  summary+="$job: median examples/sec over $rounds rounds: ps_replication 1: $m1, 2: $m2; "
  summary+=$(awk -v a="$m2" -v b="$m1" 'BEGIN {printf "replicated / unreplicated: %.3f", a / b}')
  summary+=$'\n'"  ps peak resident memory: ps_replication 1: ${mem[1]}; 2: ${mem[2]}"$'\n'
}

summary=""
run "mnist_cnn sync" --model=mnist_cnn --update=sync --batch_size=100
# (its steps are short: 5 times as many, the later --steps wins)
run "wide_and_deep async" --model="$root/examples/models/wide_and_deep.yaml" --data_dir="$data" \
  --update=async --batch_size=256 --steps=$((steps * 5))
echo
printf '%s' "$summary"
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
