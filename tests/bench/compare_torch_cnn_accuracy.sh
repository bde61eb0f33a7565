#!/usr/bin/env bash
# Accuracy of a network defined in PyTorch (tests/onnx/torch_cnn.py) trained
# two ways from the same starting weights: by a pstrain cluster that imports
# it from torch.onnx.export's file (the quickstart's: 1 ps, 2 workers x 100
# images, sync, Adam 1e-3), and by PyTorch itself (one process, batch 200,
# Adam 1e-3), for the same number of steps; each seed is one round. Prints
# each round's test accuracy (10,000 Fashion-MNIST test images), then the
# medians and the difference.
#
#   tests/bench/compare_torch_cnn_accuracy.sh [steps=1000] [seeds="1 2 3"]
# Needs a Release build in build/ (deploy/install-deps.sh --bench installs PyTorch).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
steps="${1:-1000}"
seeds="${2:-1 2 3}"
bin="$root/build/bin"
[[ -x "$bin/pstrain-launch" ]] || { echo "build first: pstrain-launch is missing" >&2; exit 2; }
work="$(mktemp -d /tmp/torch-cnn-accuracy.XXXXXX)"
trap 'rm -rf "$work"' EXIT

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ours=() theirs=()
for seed in $seeds; do
  /usr/bin/python3 "$root/tests/onnx/torch_cnn.py" --export "$work/net-$seed.onnx" --seed "$seed" \
    2>/dev/null
  out="$("$bin/pstrain-launch" --config "$root/deploy/local/cluster.yaml" \
    --model="$work/net-$seed.onnx" --job_dir="$work/job-$seed" --train_steps="$steps" \
    --eval_steps=0 --log_every_n_steps="$steps" --seed="$seed" 2>&1)"
  a="$(grep -o "Saving dict for global step $steps: accuracy = [0-9.]*" <<<"$out" | tail -1 |
    awk '{print $NF}')"
  [[ -n "$a" ]] || { echo "$out" | tail -20 >&2; exit 1; }
  b="$(/usr/bin/python3 "$root/tests/onnx/torch_reference.py" train "$steps" --seed "$seed" \
    --batch 200 --threads 2 | awk '{print $NF}')"
  echo "seed $seed: pstrain $a, PyTorch $b"
  ours+=("$a") theirs+=("$b")
done
m1="$(printf '%s\n' "${ours[@]}" | median)"
m2="$(printf '%s\n' "${theirs[@]}" | median)"
awk -v a="$m1" -v b="$m2" -v s="$steps" 'BEGIN {
  printf "median test accuracy after %d steps: pstrain %.4f, PyTorch %.4f (difference %+.2f points)\n",
    s, a, b, 100 * (a - b) }'
