#!/usr/bin/env bash
# Installs what is missing, builds pstrain (Release), runs every test with
# ctest, then builds the AddressSanitizer + UBSan configuration (clang, with
# libFuzzer coverage) and runs the unit tests and the fuzzers in it. Exits
# non-zero on the first failure. Each phase prints how long it took.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
start=$SECONDS
phase() { echo "=== $1 (at $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s) ==="; }
jobs="${PSTRAIN_JOBS:-$(nproc)}"

# Building's packages and the tests' tools (GoogleTest, clang and libFuzzer,
# PyTorch, the ONNX checker and ONNX Runtime, systemd-container, ...).
"$root/deploy/install-deps.sh" --tests
# install-deps.sh put PyTorch, the ONNX checker and ONNX Runtime here: the
# tests that use them fail, rather than skip, without them.
export PSTRAIN_REQUIRE_ONNX_TOOLS=1

phase "The newcomer's path: the quickstart's build (the product alone) and a short job"
# deploy/local/quickstart.sh as a new user runs it, but for 300 steps: it
# configures a build dir of its own (no tests; CMake told not to look for
# GoogleTest, which is installed here), builds its targets, trains, exports
# and predicts. On a fresh clone (CI's) that dir is build/, whose objects the
# Release build below reuses; where build/ exists already, build-quickstart/.
quick_build="$root/build"
[[ ! -f "$root/build/CMakeCache.txt" ]] || quick_build="$root/build-quickstart"
quick_job="$quick_build/quickstart-job"
mkdir -p "$quick_build"
rm -rf "$quick_job"
set +e  # the quickstart's own status, not the filter's
PSTRAIN_BUILD_DIR="$quick_build" PSTRAIN_JOB_DIR="$quick_job" PSTRAIN_JOBS="$jobs" \
  "$root/deploy/local/quickstart.sh" --train_steps=300 2>&1 | tee "$quick_build/quickstart-ci.log" |
  grep --line-buffered -E '^quickstart:|Saving dict|step = [0-9]*00,|^CLASSES|^[0-9]+ +\[|Built target pstrain-'
quick_status=${PIPESTATUS[0]}
set -e
quick_accuracy="$(sed -n 's/^quickstart: test accuracy \([0-9.]*\) at global step 300 .*/\1/p' \
  "$quick_build/quickstart-ci.log")"
if ((quick_status != 0)) || [[ -z "$quick_accuracy" ]] ||
  ! grep -q '^CLASSES  *PROBABILITIES' "$quick_build/quickstart-ci.log" ||
  awk -v a="$quick_accuracy" 'BEGIN { exit !(a < 0.70) }'; then
  tail -n 60 "$quick_build/quickstart-ci.log"
  echo "FAIL: the quickstart (exit $quick_status) did not train to 300 steps with an accuracy" \
    "of at least 0.70 (got '${quick_accuracy}') and predictions; its log: $quick_build/quickstart-ci.log" >&2
  exit 1
fi
rm -rf "$quick_job"

phase "Release build"
# The tests on, and GoogleTest looked for again: a build dir the quickstart
# made has them off.
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DPSTRAIN_BUILD_TESTS=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_GTest=OFF
cmake --build "$root/build" -j"$jobs"
phase "Tests (Release)"
(cd "$root/build" && ctest --output-on-failure -j"$jobs" --timeout 600)

phase "AddressSanitizer + UBSan build (clang, libFuzzer coverage)"
# -O0 builds in a half to a fifth of -O1's time under the sanitizers; the
# numeric libraries keep -O1 so the tests that train stay quick. Assertions stay on.
sanitizer_flags=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-gline-tables-only -O0"
  -DPSTRAIN_NUMERIC_OPTIONS=-O1 -DPSTRAIN_INTEGRATION_TESTS=OFF)
cmake -S "$root" -B "$root/build-asan" -DCMAKE_CXX_COMPILER=clang++-14 -DPSTRAIN_SANITIZE=ON \
  -DPSTRAIN_FUZZ=ON "${sanitizer_flags[@]}"
cmake --build "$root/build-asan" -j"$jobs" --target unit-tests
phase "Unit tests (ASan + UBSan)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd "$root/build-asan" && ctest --output-on-failure -j"$jobs" -L unit --timeout 900)
phase "Fuzzers (ASan + UBSan, each from its seeds for a bounded time)"
# libFuzzer writes a failing input to the test's directory as
# <fuzzer>-crash-<sha1> (or -leak-, -timeout-, -oom-) and prints it only when
# it is small: the log shows each one in base64 (up to 1 MiB), so a CI
# failure can be replayed (base64 -d > in; build-asan/bin/<fuzzer>_fuzzer in).
artifacts=("$root"/build-asan/fuzz/*-{crash,leak,timeout,oom}-*)
rm -f "${artifacts[@]}"
if ! (cd "$root/build-asan" && ctest --output-on-failure -j"$jobs" -L fuzz --timeout 300); then
  for input in "$root"/build-asan/fuzz/*-{crash,leak,timeout,oom}-*; do
    [[ -f "$input" ]] || continue
    size=$(stat -c %s "$input")
    echo "=== failing fuzz input $(basename "$input"): ${size} bytes$( ((size > 1048576)) &&
      echo ", the first 1048576 shown"), base64:"
    head -c 1048576 "$input" | base64 -w 0
    echo
  done
  exit 1
fi
phase "ThreadSanitizer build (clang): the ps, client, chief, trainer and launcher tests"
cmake -S "$root" -B "$root/build-tsan" -DCMAKE_CXX_COMPILER=clang++-14 -DPSTRAIN_TSAN=ON \
  "${sanitizer_flags[@]}"
cmake --build "$root/build-tsan" -j"$jobs" --target tsan-tests
phase "Tests (TSan: any report fails the test)"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$root/tests/tsan/suppressions.txt"
(cd "$root/build-tsan" && ctest --output-on-failure -j"$jobs" -L tsan --timeout 900)
phase "done"
