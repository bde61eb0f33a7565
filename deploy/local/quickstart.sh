#!/usr/bin/env bash
# Installs what is missing, builds pstrain, and trains the MNIST CNN on
# Fashion-MNIST, printing progress and ending with the test-set accuracy line
# ("Saving dict for global step N: accuracy = ...").
#
# For now this is a single-process run (parameters and optimizer inside
# pstrain-worker, as an Estimator without TF_CONFIG); the local cluster of ps,
# chief and workers replaces it when distributed training lands.
#
# Extra flags go to pstrain-worker and override the defaults below, e.g.
#   deploy/local/quickstart.sh --train_steps=500
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
jobs="${PSTRAIN_JOBS:-$(nproc)}"

"$root/deploy/install-deps.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j"$jobs" --target pstrain-worker

job_dir="${PSTRAIN_JOB_DIR:-$root/jobs/quickstart-$(date +%Y%m%d-%H%M%S)}"
echo "quickstart: training mnist_cnn on Fashion-MNIST; job dir $job_dir"
exec "$root/build/worker/pstrain-worker" \
  --model=mnist_cnn \
  --data_dir=/usr/share/datasets/fashion-mnist \
  --job_dir="$job_dir" \
  --train_steps=3000 \
  --batch_size=100 \
  --optimizer=adam \
  --learning_rate=0.001 \
  "$@"
