#!/usr/bin/env bash
# Installs what is missing, builds pstrain, and runs the main job: a local
# cluster from deploy/local/cluster.yaml (1 parameter server, the chief and 2
# workers, each its own process on 127.0.0.1) training the MNIST CNN on
# Fashion-MNIST with synchronous updates. Prints every process's progress
# (prefixed with its task), the chief's evaluations, and a final accuracy line.
#
# Extra flags go to pstrain-launch and override the config, e.g.
#   deploy/local/quickstart.sh --train_steps=500 --update=async
# PSTRAIN_BUILD_DIR names the build dir (default build/), PSTRAIN_JOB_DIR the
# job dir, PSTRAIN_JOBS the build's parallelism.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
jobs="${PSTRAIN_JOBS:-$(nproc)}"
build="${PSTRAIN_BUILD_DIR:-$root/build}"

# What building and training need; the tests' tools (install-deps.sh --tests,
# which tests/run.sh asks for) are left out.
"$root/deploy/install-deps.sh"
# A build dir this script makes is the product's alone: no tests, and CMake
# does not even look for GoogleTest (tests/product_build_test.sh configures
# with these same flags, and tests/run.sh's first phase builds and runs this
# script with them). One configured before (tests/run.sh's) keeps its settings.
# A unity build (each library's sources compiled in batches, the headers
# parsed once per batch) gets to a trained model sooner.
quickstart_cmake_flags=(-DPSTRAIN_BUILD_TESTS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_UNITY_BUILD=ON)
quickstart_targets=(pstrain-launch pstrain-predict pstrain-data)
flags=()
[[ -f "$build/CMakeCache.txt" ]] || flags=("${quickstart_cmake_flags[@]}")
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >/dev/null
cmake --build "$build" -j"$jobs" --target "${quickstart_targets[@]}"

job_dir="${PSTRAIN_JOB_DIR:-$root/jobs/quickstart-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$job_dir"
log="$job_dir/quickstart.log"
echo "quickstart: local cluster from deploy/local/cluster.yaml; job dir $job_dir"
status=0
"$build/bin/pstrain-launch" --config="$root/deploy/local/cluster.yaml" \
  --job_dir="$job_dir" "$@" 2>&1 | tee "$log" || status=$?

# The chief's last evaluation: the accuracy the job reached at its last step.
final="$(grep -o 'Saving dict for global step [0-9]*: accuracy = [0-9.]*' "$log" | tail -n 1 || true)"
if [[ -n "$final" ]]; then
  accuracy="${final##*= }"
  step="${final#Saving dict for global step }"
  step="${step%%:*}"
  echo "quickstart: test accuracy $accuracy at global step $step" \
    "(the chief's last evaluation, on the test set)"
else
  echo "quickstart: the chief logged no evaluation (see $log)"
  [[ "$status" != 0 ]] || status=1
fi

# The chief exported the trained model to $job_dir/export/<version>/:
# predictions for the first test images, as gcloud ml-engine predict prints them.
if [[ "$status" == 0 && -d "$job_dir/export" ]]; then
  data_dir="$(sed -n 's/^ *data_dir: *//p' "$root/deploy/local/cluster.yaml" | head -n 1)"
  for arg in "$@"; do
    case "$arg" in --data_dir=* | --data-dir=*) data_dir="${arg#*=}" ;; esac
  done
  instances="$job_dir/instances.json"
  labels="$("$build/bin/pstrain-data" instances "$data_dir" 5 2>&1 >"$instances")"
  echo "quickstart: pstrain-predict --model_dir=$job_dir --json_instances=$instances ($labels)"
  "$build/bin/pstrain-predict" --model_dir="$job_dir" --json_instances="$instances" |
    awk '{ if (length($0) > 100) print substr($0, 1, 97) "..."; else print }' || status=$?
  # The same network as ONNX, for ONNX Runtime and other runtimes
  # (docs/onnx.md).
  onnx="$(ls -d "$job_dir"/export/*/model.onnx 2>/dev/null | tail -n 1)"
  [[ -n "$onnx" ]] && echo "quickstart: as ONNX (for ONNX Runtime, Triton, OpenVINO): $onnx"
fi
exit "$status"
