#!/usr/bin/env bash
# Replicated parameter servers (issue 55, docs/reliability.md): what the
# backups cost. mnist_cnn, sync, 2 ps x 2 workers (1 compute thread each),
# float32 on the wire, every task a process on loopback
# (pstrain-bench --distributed), with ps_replication 1 and 2, alternating
# round by round; prints every run, then the median examples/sec of each,
# their ratio (replicated / unreplicated) and the ps' peak resident memory.
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

declare -A rates mem
for ((r = 1; r <= rounds; r++)); do
  for copies in 1 2; do
    out=$("$bench" --distributed --model=mnist_cnn --update=sync --ps=2 --workers=2 \
      --batch_size=100 --steps="$steps" --warmup=20 --wire_dtype=float32 \
      --ps_replication="$copies" 2>&1) || { echo "$out" >&2; exit 1; }
    rate=$(sed -n 's/^train examples\/sec: //p' <<<"$out")
    peak=$(sed -n 's/^ps_replication [0-9]*; ps peak resident memory: //p' <<<"$out")
    echo "round $r, ps_replication $copies: $rate examples/sec; ps peak memory: $peak"
    rates[$copies]+="$rate "
    mem[$copies]="$peak"
  done
done

median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
m1=$(median "${rates[1]}")
m2=$(median "${rates[2]}")
echo
echo "median examples/sec over $rounds rounds: ps_replication 1: $m1, ps_replication 2: $m2"
awk -v a="$m2" -v b="$m1" 'BEGIN {printf "replicated / unreplicated: %.3f\n", a / b}'
echo "ps peak resident memory: ps_replication 1: ${mem[1]}; ps_replication 2: ${mem[2]}"
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
