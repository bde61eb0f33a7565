#!/usr/bin/env bash
# Side-by-side aggregate training throughput of mnist_cnn, batch 100 per
# worker, 2 workers on this machine: pstrain (1 ps + 2 worker processes on
# loopback, chief not training; sync and async, float32 and bf16 on the wire)
# against PyTorch DistributedDataParallel (gloo on loopback, 2 processes x 1
# thread, OpenBLAS with OPENBLAS_NUM_THREADS=1, glibc malloc told to keep
# freed memory, its best setting here). Alternates the runs so all see the
# same machine; prints every run, then the medians and the ratios.
#
#   tests/bench/compare_ddp.sh [rounds=5] [steps=150]
# Needs `deploy/install-deps.sh --bench` and a Release build in build/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds="${1:-5}"
steps="${2:-150}"
bench="$root/build/bin/pstrain-bench"
[[ -x "$bench" ]] || { echo "build first: $bench is missing" >&2; exit 2; }

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
rate() { awk -F': ' '/^train examples\/sec/ {print $2}'; }

declare -A runs
configs=("sync float32" "async float32" "sync bf16" "async bf16")
for ((i = 1; i <= rounds; i++)); do
  line="round $i:"
  for c in "${configs[@]}"; do
    read -r mode wire <<<"$c"
    r=$("$bench" --distributed --ps=1 --workers=2 --batch_size=100 --steps="$steps" --warmup=10 \
        --update="$mode" --wire_dtype="$wire" 2>&1 | rate)
    runs["$c"]+="$r "
    line+=" pstrain $mode/$wire $r |"
  done
  r=$(OPENBLAS_NUM_THREADS=1 \
      GLIBC_TUNABLES="glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296" \
      /usr/bin/python3 "$root/tests/bench/pytorch_ddp_mnist_cnn.py" --world_size=2 \
      --batch_size=100 --steps="$steps" 2>&1 | rate)
  runs[ddp]+="$r "
  echo "$line ddp $r (examples/sec)"
done
ddp=$(tr ' ' '\n' <<<"${runs[ddp]}" | grep . | median)
echo "median pytorch ddp: $ddp examples/sec"
for c in "${configs[@]}"; do
  m=$(tr ' ' '\n' <<<"${runs[$c]}" | grep . | median)
  echo "median pstrain ${c/ //}: $m examples/sec, ratio to ddp $(awk -v a="$m" -v b="$ddp" 'BEGIN {printf "%.2f", a / b}')"
done
