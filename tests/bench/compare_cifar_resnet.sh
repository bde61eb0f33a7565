#!/usr/bin/env bash
# Side-by-side training throughput of the CIFAR-10 ResNet (batch 128):
# pstrain-bench against PyTorch (Debian python3-torch, oneDNN convolutions,
# OpenBLAS with OPENBLAS_NUM_THREADS=1, channels_last, which is PyTorch's
# faster layout here), the same architecture and thread count, alternating
# runs so both see the same machine. Both run with glibc's malloc told to keep
# freed memory (PyTorch's best; see compare_pytorch.sh). Prints each run, the
# medians, the ratio and the share of the GEMM peak for each depth.
#
#   tests/bench/compare_cifar_resnet.sh [rounds=5] [threads=2] [steps=30] [depths="20 44"]
# Needs `deploy/install-deps.sh --bench` and a Release build in build/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds="${1:-5}"
threads="${2:-2}"
steps="${3:-30}"
depths="${4:-20 44}"
bench="$root/build/bin/pstrain-bench"
[[ -x "$bench" ]] || { echo "build first: pstrain-bench is missing" >&2; exit 2; }

export GLIBC_TUNABLES="glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296"

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

for depth in $depths; do
  ours=() theirs=() shares=()
  for ((i = 1; i <= rounds; i++)); do
    out="$("$bench" --model=cifar10_resnet --num_layers="$depth" --batch_size=128 \
           --optimizer=momentum --steps="$steps" --warmup=3 --threads="$threads")"
    o=$(awk -F': ' '/^train examples\/sec/ {print $2}' <<<"$out")
    shares+=("$(awk -F': ' '/^share of the GEMM peak/ {print $2 + 0}' <<<"$out")")
    out="$(OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$root/tests/bench/pytorch_cifar_resnet.py" \
           --num_layers="$depth" --batch_size=128 --steps="$steps" --warmup=3 \
           --threads="$threads" --channels_last)"
    t=$(awk -F': ' '/^train examples\/sec/ {print $2}' <<<"$out")
    echo "ResNet-$depth round $i: pstrain $o | pytorch $t (train examples/sec)"
    ours+=("$o") theirs+=("$t")
  done
  mo=$(printf '%s\n' "${ours[@]}" | median)
  mt=$(printf '%s\n' "${theirs[@]}" | median)
  echo "ResNet-$depth median train examples/sec: pstrain $mo, pytorch $mt, ratio" \
       "$(awk -v a="$mo" -v b="$mt" 'BEGIN {printf "%.2f", a / b}')"
  echo "ResNet-$depth: pstrain's training step at a median" \
       "$(printf '%s\n' "${shares[@]}" | median)% of $threads threads x the GEMM peak"
done
