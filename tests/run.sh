#!/usr/bin/env bash
# Installs what is missing, runs the quickstart's build and a short job,
# builds pstrain (Release) and runs the integration tests (the real binaries,
# as separate processes) with ctest, then runs the unit tests and the fuzzers
# under AddressSanitizer + UBSan and the threaded code's tests under
# ThreadSanitizer (clang; both built beside the Release tests, at the lowest
# CPU priority). Every test runs; each unit test once. Exits non-zero on the
# first failure. Each phase prints when it began.
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
# deploy/local/quickstart.sh as a new user runs it, but for 200 steps: it
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
  "$root/deploy/local/quickstart.sh" --train_steps=200 2>&1 | tee "$quick_build/quickstart-ci.log" |
  grep --line-buffered -E '^quickstart:|Saving dict|step = [0-9]*00,|^CLASSES|^[0-9]+ +\[|Built target pstrain-'
quick_status=${PIPESTATUS[0]}
set -e
quick_accuracy="$(sed -n 's/^quickstart: test accuracy \([0-9.]*\) at global step 200 .*/\1/p' \
  "$quick_build/quickstart-ci.log")"
if ((quick_status != 0)) || [[ -z "$quick_accuracy" ]] ||
  ! grep -q '^CLASSES  *PROBABILITIES' "$quick_build/quickstart-ci.log" ||
  awk -v a="$quick_accuracy" 'BEGIN { exit !(a < 0.70) }'; then
  tail -n 60 "$quick_build/quickstart-ci.log"
  echo "FAIL: the quickstart (exit $quick_status) did not train to 200 steps with an accuracy" \
    "of at least 0.70 (got '${quick_accuracy}') and predictions; its log: $quick_build/quickstart-ci.log" >&2
  exit 1
fi
rm -rf "$quick_job"

phase "Release build"
# The integration tests on, and GoogleTest looked for again: a build dir the
# quickstart made has them off. The unit tests are built and run once, under
# ASan + UBSan below (-DPSTRAIN_UNIT_TESTS=OFF here; a developer's build dir
# has them by default): only the tests that start the real binaries need the
# optimized build.
# Every build here is a unity build, as the quickstart's is: each target's
# sources compiled in batches (CMake's default, 8 a batch), so the headers
# (Eigen, gRPC, protobuf, abseil, GoogleTest) are parsed once per batch, not
# once per file. It also keeps the tree free of file-local names two files
# of one target both define. lld links the ~70 binaries (a sanitizer-built
# test in a fifth of GNU ld's time).
build_flags=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld
  -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld)
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DPSTRAIN_BUILD_TESTS=ON \
  -DPSTRAIN_UNIT_TESTS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_GTest=OFF "${build_flags[@]}"
cmake --build "$root/build" -j"$jobs"
# The sanitizer configurations: ASan + UBSan (clang, with libFuzzer coverage)
# for the unit tests and the fuzzers, and ThreadSanitizer for the code with
# threads of its own. -O0 builds in a half to a fifth of -O1's time under the
# sanitizers; the numeric libraries keep -O1 so the tests that train stay
# quick. Assertions stay on.
sanitizer_flags=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-gline-tables-only -O0"
  -DPSTRAIN_NUMERIC_OPTIONS=-O1 -DPSTRAIN_INTEGRATION_TESTS=OFF "${build_flags[@]}")
cmake -S "$root" -B "$root/build-asan" -DCMAKE_CXX_COMPILER=clang++-14 -DPSTRAIN_SANITIZE=ON \
  -DPSTRAIN_FUZZ=ON "${sanitizer_flags[@]}"
cmake -S "$root" -B "$root/build-tsan" -DCMAKE_CXX_COMPILER=clang++-14 -DPSTRAIN_TSAN=ON \
  "${sanitizer_flags[@]}"

phase "Tests (Release), and the sanitizer builds beside them at the lowest CPU priority"
# The Release tests leave about 40% of the cores idle (their processes wait
# on each other: sync steps, restarts, timeouts, VMs booting). The sanitizer
# builds run meanwhile under nice 19, so they take only that idle time and
# yield to a test at once. Their output goes to build-sanitizers.log, shown
# if they fail.
sanitizer_log="$root/build-sanitizers.log"
# Its own session is its own scheduling group where the kernel groups by
# session (autogroup): nice 19 then only ranks the build's processes among
# themselves, and the group would take half the cores from the tests. The
# session's first process sets its group's nice (/proc/self/autogroup: the
# new session's group, not this script's) before the builds start.
setsid bash -c "if [[ -w /proc/self/autogroup ]]; then echo 19 >/proc/self/autogroup; fi
  nice -n 19 cmake --build '$root/build-asan' -j$jobs --target unit-tests &&
  nice -n 19 cmake --build '$root/build-tsan' -j$jobs --target tsan-tests" \
  >"$sanitizer_log" 2>&1 &
sanitizer_builds=$!
# However this script ends, no build is left behind.
trap 'kill -- -"$sanitizer_builds" 2>/dev/null || true' EXIT
(cd "$root/build" && ctest --output-on-failure -j"$jobs" --timeout 600)

phase "The sanitizer builds (what the Release tests' idle time did not cover)"
if ! wait "$sanitizer_builds"; then
  tail -n 80 "$sanitizer_log"
  echo "FAIL: the sanitizer builds (ASan + UBSan unit-tests, TSan tsan-tests); their log:" \
    "$sanitizer_log" >&2
  exit 1
fi
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
phase "Tests (TSan: any report fails the test)"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$root/tests/tsan/suppressions.txt"
(cd "$root/build-tsan" && ctest --output-on-failure -j"$jobs" -L tsan --timeout 900)
phase "done"
