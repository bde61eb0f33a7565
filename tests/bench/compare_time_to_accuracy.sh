#!/usr/bin/env bash
# Time to accuracy on Fashion-MNIST (mnist_cnn, batch 100 per replica, this
# machine), one run each:
#  1. pstrain, 1 ps + 2 sync workers (chief evaluating, not training) against
#     single-process PyTorch (2 threads), both to 91.6% test accuracy;
#     pstrain's time is the chief's wall time since the job started
#     (evaluations included), PyTorch's counts its training steps only.
#  2. one straggler (worker 1 stopped 75% of the time): sync, async and ssp
#     (staleness 2) to 85%.
#  3. top-k compression (1% of each chunk, error feedback) against dense
#     float32, sync, 600 steps: the accuracy reached, and the time to 85%.
#
#   tests/bench/compare_time_to_accuracy.sh
# Needs `deploy/install-deps.sh --bench` and a Release build in build/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tta="$root/tests/bench/time_to_accuracy.py"
[[ -x "$root/build/bin/pstrain-launch" ]] || { echo "build first" >&2; exit 2; }
last() { tail -1; }

echo "== 1. to 91.6%: pstrain sync (1 ps + 2 workers) against single-process PyTorch"
OPENBLAS_NUM_THREADS=1 /usr/bin/python3 -u "$root/tests/bench/pytorch_mnist_cnn.py" --mode=train \
  --threads=2 --train_steps=8000 --eval_steps=250 2>&1 |
  awk '/test accuracy/ {print} /test accuracy = / { split($0, a, "test accuracy = "); split(a[2], b, ",");
       if (b[1] + 0 >= 0.916 && !done) { done = 1; print "pytorch time to accuracy 0.916: " $(NF-1) " s"; exit } }' |
  sed 's/^/  /' || true
python3 "$tta" --update=sync --target=0.916 --eval_steps=250 --train_steps=4000 | last |
  sed 's/^/  pstrain sync: /'

echo "== 2. one straggler (worker 1 runs 25% of the time), to 85%"
for mode in sync async ssp; do
  python3 "$tta" --update=$mode --staleness=2 --straggler=0.75 --target=0.85 --eval_steps=50 \
    --train_steps=3000 | last | sed "s/^/  $mode: /"
done

echo "== 3. top-k compression (1%) against dense float32, sync, 600 steps"
for ratio in 0 0.01; do
  python3 "$tta" --update=sync --compression_ratio=$ratio --target=1.0 --eval_steps=150 \
    --train_steps=600 | last | sed "s/^/  compression_ratio $ratio: /"
  python3 "$tta" --update=sync --compression_ratio=$ratio --target=0.85 --eval_steps=50 \
    --train_steps=1500 | last | sed "s/^/  compression_ratio $ratio: /"
done
