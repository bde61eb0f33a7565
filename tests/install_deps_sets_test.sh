#!/usr/bin/env bash
# The quickstart installs only what building and training need; tests/run.sh
# asks deploy/install-deps.sh for the tests' tools too (--tests). Reads the
# scripts and install-deps.sh --list; installs nothing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="$root/deploy/install-deps.sh"
failed=0
fail() {
  echo "FAIL: $*" >&2
  failed=1
}

# What only the tests use: none of it on a machine that just trains.
test_only=(libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev clang-14 libfuzzer-14-dev python3-torch
  python3-onnx nodejs npm systemd-container python3-grpcio python3-jsonschema python3-sklearn
  npm:onnxruntime-node)

# Without --list, running install-deps.sh would install: refuse to run it.
grep -q -- '--list' "$deps" || {
  echo "FAIL: $deps has no --list to print its package sets" >&2
  exit 1
}

# The quickstart's call, as it runs it (its arguments), and its list.
quick_calls="$(grep -E '^[^#]*install-deps\.sh' "$root/deploy/local/quickstart.sh" || true)"
[[ -n "$quick_calls" ]] || fail "deploy/local/quickstart.sh does not run install-deps.sh"
if grep -q -- '--tests' <<<"$quick_calls"; then fail "the quickstart asks for the test set"; fi
quick_list="$("$deps" --list)"
for p in "${test_only[@]}"; do
  if grep -Eq "^${p}(@.*)?\$" <<<"$quick_list"; then fail "the quickstart installs $p"; fi
done
# The build makes `import pstrain` (python/): pybind11, NumPy, Python's headers.
for p in dataset-fashion-mnist cmake libgrpc++-dev libonnx-dev pybind11-dev python3-dev \
  python3-numpy; do
  grep -qx -- "$p" <<<"$quick_list" || fail "the quickstart's set lacks $p"
done

# tests/run.sh asks for the test set, which holds every test-only package.
run_calls="$(grep -E '^[^#]*install-deps\.sh' "$root/tests/run.sh" || true)"
grep -q -- '--tests' <<<"$run_calls" || fail "tests/run.sh does not run install-deps.sh --tests"
test_list="$("$deps" --tests --list)"
for p in "${test_only[@]}"; do
  grep -Eq "^${p}(@.*)?\$" <<<"$test_list" || fail "install-deps.sh --tests lacks $p"
done
# --bench is still there, with the benchmarks' own packages.
bench_list="$("$deps" --bench --list)"
for p in hyperfine wrk python3-torch; do
  grep -qx -- "$p" <<<"$bench_list" || fail "install-deps.sh --bench lacks $p"
done

if ((failed)); then exit 1; fi
echo "install-deps sets: the quickstart's $(wc -l <<<"$quick_list") packages hold no test-only one;" \
  "tests/run.sh asks for the $(wc -l <<<"$test_list") of --tests"
