#!/usr/bin/env bash
# Installs what is missing, builds pstrain (Release), runs every test with
# ctest, then builds the AddressSanitizer + UBSan configuration and runs the
# unit tests in it. Exits non-zero on the first failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${PSTRAIN_JOBS:-$(nproc)}"

"$root/deploy/install-deps.sh"

echo "=== Release build ==="
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$root/build" -j"$jobs"
echo "=== Tests (Release) ==="
(cd "$root/build" && ctest --output-on-failure -j"$jobs" --timeout 600)

echo "=== AddressSanitizer + UBSan build ==="
# -O1 keeps the sanitized tests quick; assertions stay on.
cmake -S "$root" -B "$root/build-asan" -DPSTRAIN_SANITIZE=ON -DPSTRAIN_INTEGRATION_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-g -O1"
cmake --build "$root/build-asan" -j"$jobs"
echo "=== Unit tests (ASan + UBSan) ==="
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd "$root/build-asan" && ctest --output-on-failure -j"$jobs" -L unit --timeout 900)
