#!/usr/bin/env bash
# Installs what is missing, builds pstrain, and runs the main job: a local
# cluster from deploy/local/cluster.yaml (1 parameter server, the chief and 2
# workers, each its own process on 127.0.0.1) training the MNIST CNN on
# Fashion-MNIST with synchronous updates. Prints every process's progress
# (prefixed with its task), the chief's evaluations, and a final accuracy line.
#
# Extra flags go to pstrain-launch and override the config, e.g.
#   deploy/local/quickstart.sh --train_steps=500 --update=async
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
jobs="${PSTRAIN_JOBS:-$(nproc)}"

# What building and training need; the tests' tools (install-deps.sh --tests,
# which tests/run.sh asks for) are left out.
"$root/deploy/install-deps.sh"
# A build dir this script makes builds no tests (their GoogleTest is not
# installed); one configured before (tests/run.sh's) keeps its setting.
tests_flag=()
[[ -f "$root/build/CMakeCache.txt" ]] || tests_flag=(-DPSTRAIN_BUILD_TESTS=OFF)
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release "${tests_flag[@]}" >/dev/null
cmake --build "$root/build" -j"$jobs" --target pstrain-launch pstrain-predict pstrain-data

job_dir="${PSTRAIN_JOB_DIR:-$root/jobs/quickstart-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$job_dir"
log="$job_dir/quickstart.log"
echo "quickstart: local cluster from deploy/local/cluster.yaml; job dir $job_dir"
status=0
"$root/build/bin/pstrain-launch" --config="$root/deploy/local/cluster.yaml" \
  --job_dir="$job_dir" "$@" 2>&1 | tee "$log" || status=$?

# The chief's last evaluation, against the TensorFlow tutorial CNN's figure.
final="$(grep -o 'Saving dict for global step [0-9]*: accuracy = [0-9.]*' "$log" | tail -n 1 || true)"
if [[ -n "$final" ]]; then
  accuracy="${final##*= }"
  verdict="$(awk -v a="$accuracy" 'BEGIN { print (a >= 0.916) ? "reached" : "not reached" }')"
  echo "quickstart: final test accuracy $accuracy (${final%%:*}); 0.916 target $verdict"
fi

# The chief exported the trained model to $job_dir/export/<version>/:
# predictions for the first test images, as gcloud ml-engine predict prints them.
if [[ "$status" == 0 && -d "$job_dir/export" ]]; then
  data_dir="$(sed -n 's/^ *data_dir: *//p' "$root/deploy/local/cluster.yaml" | head -n 1)"
  for arg in "$@"; do
    case "$arg" in --data_dir=* | --data-dir=*) data_dir="${arg#*=}" ;; esac
  done
  instances="$job_dir/instances.json"
  labels="$("$root/build/bin/pstrain-data" instances "$data_dir" 5 2>&1 >"$instances")"
  echo "quickstart: pstrain-predict --model_dir=$job_dir --json_instances=$instances ($labels)"
  "$root/build/bin/pstrain-predict" --model_dir="$job_dir" --json_instances="$instances" |
    awk '{ if (length($0) > 100) print substr($0, 1, 97) "..."; else print }' || status=$?
  # The same network as ONNX, for ONNX Runtime and other runtimes (README:
  # "Use the model elsewhere").
  onnx="$(ls -d "$job_dir"/export/*/model.onnx 2>/dev/null | tail -n 1)"
  [[ -n "$onnx" ]] && echo "quickstart: as ONNX (for ONNX Runtime, Triton, OpenVINO): $onnx"
fi
exit "$status"
