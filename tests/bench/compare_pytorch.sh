#!/usr/bin/env bash
# Side-by-side training throughput of mnist_cnn (batch 100): pstrain-bench
# against PyTorch (Debian python3-torch with oneDNN convolutions and OpenBLAS,
# OPENBLAS_NUM_THREADS=1), the same thread count, alternating runs so both see
# the same machine. Prints each run, the medians, the ratio and the median
# share of the GEMM peak pstrain's training step reaches.
#
# Both run with glibc's malloc told to keep freed memory (mmap and trim
# thresholds raised): PyTorch allocates and frees its activations every step
# and, with the defaults, spends much of its time in page faults (~1,400
# examples/sec here instead of ~1,950). This is PyTorch's best; pstrain reuses
# its buffers and is unaffected.
#
#   tests/bench/compare_pytorch.sh [rounds=5] [threads=2] [steps=200]
# Needs `deploy/install-deps.sh --bench` and a Release build in build/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds="${1:-5}"
threads="${2:-2}"
steps="${3:-200}"
bench="$root/build/bin/pstrain-bench"
[[ -x "$bench" ]] || { echo "build first: $bench is missing" >&2; exit 2; }

export GLIBC_TUNABLES="glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296"

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

ours=() theirs=() ours_eval=() theirs_eval=() shares=()
for ((i = 1; i <= rounds; i++)); do
  out="$("$bench" --model=mnist_cnn --batch_size=100 --steps="$steps" --threads="$threads")"
  o=$(awk -F': ' '/^train examples\/sec/ {print $2}' <<<"$out")
  oe=$(awk -F': ' '/^eval examples\/sec/ {print $2}' <<<"$out")
  shares+=("$(awk -F': ' '/^share of the GEMM peak/ {print $2 + 0}' <<<"$out")")
  out="$(OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$root/tests/bench/pytorch_mnist_cnn.py" \
         --mode=bench --batch_size=100 --steps="$steps" --threads="$threads")"
  t=$(awk -F': ' '/^train examples\/sec/ {print $2}' <<<"$out")
  te=$(awk -F': ' '/^eval examples\/sec/ {print $2}' <<<"$out")
  echo "round $i: pstrain train $o eval $oe | pytorch train $t eval $te (examples/sec)"
  ours+=("$o") theirs+=("$t") ours_eval+=("$oe") theirs_eval+=("$te")
done
mo=$(printf '%s\n' "${ours[@]}" | median)
mt=$(printf '%s\n' "${theirs[@]}" | median)
moe=$(printf '%s\n' "${ours_eval[@]}" | median)
mte=$(printf '%s\n' "${theirs_eval[@]}" | median)
echo "median train examples/sec: pstrain $mo, pytorch $mt, ratio $(awk -v a="$mo" -v b="$mt" 'BEGIN {printf "%.2f", a / b}')"
echo "pstrain's training step at a median $(printf '%s\n' "${shares[@]}" | median)% of" \
     "$threads threads x the GEMM peak (pstrain-bench: 6 x forward multiply-adds per example)"
echo "median eval examples/sec: pstrain $moe, pytorch $mte, ratio $(awk -v a="$moe" -v b="$mte" 'BEGIN {printf "%.2f", a / b}')"
