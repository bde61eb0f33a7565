#!/usr/bin/env bash
# Serving mnist_cnn side by side with PyTorch's eval of the same model in
# the same run: pstrain's forward pass in process (batch 1 and 32) and
# through pstrain-serve over loopback HTTP (TensorFlow Serving's REST API,
# batch 1 and 32, 1 and 8 concurrent clients), against PyTorch 1.13 eval
# (model.eval(), torch.no_grad(), 2 threads) at batch 1 and 32. Alternates
# the runs; prints every run, then medians and ratios.
#
#   tests/bench/compare_serving.sh [rounds=3] [seconds=5]
# Needs `deploy/install-deps.sh --bench` and a Release build in build/
# (cmake --build build --target pstrain-serve-bench).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds="${1:-3}"
seconds="${2:-5}"
bench="$root/build/bin/pstrain-serve-bench"
[[ -x "$bench" ]] || { echo "build first: $bench is missing" >&2; exit 2; }

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
torch_eval() {  # batch -> eval examples/sec
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$root/tests/bench/pytorch_mnist_cnn.py" --mode=bench \
    --threads=2 --batch_size="$1" --steps=2 --warmup=20 --eval_batches=$((3000 / $1 + 50)) 2>&1 |
    awk -F': ' '/^eval examples\/sec/ {print $2}'
}

declare -A runs
for ((i = 1; i <= rounds; i++)); do
  out="$("$bench" --seconds="$seconds")"
  echo "round $i:"
  sed 's/^/  pstrain /' <<<"$out"
  runs[c1]+="$(awk '/^compute batch=1:/ {print $(NF-1)}' <<<"$out") "
  runs[c32]+="$(awk '/^compute batch=32:/ {print $(NF-1)}' <<<"$out") "
  runs[c1ms]+="$(awk '/^compute batch=1:/ {print $4}' <<<"$out") "
  for key in 1x1 1x8 32x1 32x8; do
    b="${key%x*}" c="${key#*x}"
    line="$(grep "^rest batch=$b clients=$c:" <<<"$out")"
    runs[r$key]+="$(awk '{print $6}' <<<"$line") "
    runs[p50_$key]+="$(awk '{print $9}' <<<"$line") "
    runs[p99_$key]+="$(awk '{print $12}' <<<"$line") "
  done
  t1="$(torch_eval 1)" t32="$(torch_eval 32)"
  runs[t1]+="$t1 " runs[t32]+="$t32 "
  echo "  pytorch eval batch=1: $t1 instances/s, batch=32: $t32 instances/s"
done
m() { tr ' ' '\n' <<<"${runs[$1]}" | grep . | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "medians of $rounds rounds:"
echo "  compute batch=1: $(m c1ms) ms per call, $(m c1) instances/s; pytorch eval batch=1: $(m t1) instances/s; ratio $(ratio "$(m c1)" "$(m t1)")"
echo "  compute batch=32: $(m c32) instances/s; pytorch eval batch=32: $(m t32) instances/s; ratio $(ratio "$(m c32)" "$(m t32)")"
for key in 1x1 1x8 32x1 32x8; do
  b="${key%x*}"
  t="$(m "t$b")"
  echo "  rest batch=$b clients=${key#*x}: $(m "r$key") instances/s (p50 $(m "p50_$key") ms, p99 $(m "p99_$key") ms); ratio to pytorch eval batch=$b $(ratio "$(m "r$key")" "$t")"
done
