#!/usr/bin/env bash
# pstrain.Predictor (the Python module, in process) beside pstrain-serve's
# own compute (its Predictor in C++, in process), pstrain-serve over
# loopback HTTP, and PyTorch 1.13 eval (model.eval(), torch.no_grad(), 2
# threads) on mnist_cnn: batch-1 latency and batch-256 throughput, in the
# same run, alternating; prints every run, then medians and ratios.
#
#   tests/bench/compare_python.sh [rounds=3] [seconds=5]
# Needs `deploy/install-deps.sh --bench` and a Release build in build/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds="${1:-3}"
seconds="${2:-5}"
bin="$root/build/bin"
for tool in pstrain-serve-bench make_test_export; do
  [[ -x "$bin/$tool" ]] || { echo "build first: $bin/$tool is missing" >&2; exit 2; }
done
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# mnist_cnn's export: initial values after three SGD steps.
"$bin/make_test_export" "$scratch/export" 7 mnist_cnn >/dev/null
version="$scratch/export"  # the export base: its one version

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
torch_eval() {  # batch -> eval examples/sec
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$root/tests/bench/pytorch_mnist_cnn.py" --mode=bench \
    --threads=2 --batch_size="$1" --steps=2 --warmup=20 --eval_batches=$((3000 / $1 + 20)) 2>&1 |
    awk -F': ' '/^eval examples\/sec/ {print $2}'
}

declare -A runs
for ((i = 1; i <= rounds; i++)); do
  echo "round $i:"
  module="$(PYTHONPATH="$root/build/python" /usr/bin/python3 "$root/tests/bench/predictor_bench.py" \
    --model_dir="$version" --batches=1,256 --seconds="$seconds")"
  sed 's/^/  /' <<<"$module"
  serve="$("$bin/pstrain-serve-bench" --model_dir="$version" --compute_batches=1,256 \
    --runs=1x1,256x1 --seconds="$seconds")"
  sed 's/^/  pstrain-serve /' <<<"$serve"
  t1="$(torch_eval 1)" t256="$(torch_eval 256)"
  echo "  pytorch eval batch=1: $t1 instances/s, batch=256: $t256 instances/s"
  runs[m1ms]+="$(awk '/^module batch=1:/ {print $4}' <<<"$module") "
  runs[m256]+="$(awk '/^module batch=256:/ {print $(NF-1)}' <<<"$module") "
  runs[c1ms]+="$(awk '/^compute batch=1:/ {print $4}' <<<"$serve") "
  runs[c256]+="$(awk '/^compute batch=256:/ {print $(NF-1)}' <<<"$serve") "
  runs[r1ms]+="$(awk '/^rest batch=1 clients=1:/ {print $9}' <<<"$serve") "
  runs[r256]+="$(awk '/^rest batch=256 clients=1:/ {print $6}' <<<"$serve") "
  runs[t1ms]+="$(awk -v t="$t1" 'BEGIN {printf "%.3f", 1000 / t}') "
  runs[t256]+="$t256 "
done
m() { tr ' ' '\n' <<<"${runs[$1]}" | grep . | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "medians of $rounds rounds (mnist_cnn):"
echo "  batch 1, ms per call: module $(m m1ms), pstrain-serve compute $(m c1ms), pstrain-serve REST p50 $(m r1ms), pytorch eval $(m t1ms)"
echo "    module / serve compute $(ratio "$(m m1ms)" "$(m c1ms)") (time), pytorch / module $(ratio "$(m t1ms)" "$(m m1ms)")"
echo "  batch 256, instances/s: module $(m m256), pstrain-serve compute $(m c256), pstrain-serve REST $(m r256), pytorch eval $(m t256)"
echo "    module / serve compute $(ratio "$(m m256)" "$(m c256)"), module / pytorch $(ratio "$(m m256)" "$(m t256)")"
