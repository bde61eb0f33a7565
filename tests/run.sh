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

phase "Release build"
# PSTRAIN_BUILD_TESTS=ON: a build dir the quickstart made has the tests off.
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DPSTRAIN_BUILD_TESTS=ON
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
