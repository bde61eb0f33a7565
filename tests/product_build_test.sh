#!/usr/bin/env bash
# The product builds alone (issue 52): configures a fresh build dir as
# deploy/local/quickstart.sh does, with the tests' packages hidden from CMake,
# and fails when
#   - configuring or generating fails (a product target links GTest, a
#     benchmark's package is looked for, ...);
#   - CMake found a test-only package anyway (its cache names it);
#   - a test, fuzzer, benchmark or test helper is a target of that build;
#   - a target the quickstart builds is missing;
#   - a production source file includes a test package's header (it would
#     compile here, where GoogleTest is installed, and not on a bare machine).
# Builds nothing: tests/run.sh's first phase builds and runs the quickstart.
#   product_build_test.sh SOURCE_DIR
set -euo pipefail

src="$(cd "${1:?usage: product_build_test.sh SOURCE_DIR}" && pwd)"
dir="$(mktemp -d "${TMPDIR:-/tmp}/pstrain-product-build.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
failed=0
fail() {
  echo "FAIL: $*" >&2
  failed=1
}

# The quickstart's own flags (read from the script, so the two cannot drift),
# and every test-only package hidden.
flags="$(sed -n 's/^ *quickstart_cmake_flags=(\(.*\))$/\1/p' "$src/deploy/local/quickstart.sh")"
[[ -n "$flags" ]] || {
  echo "FAIL: deploy/local/quickstart.sh has no quickstart_cmake_flags=(...) line" >&2
  exit 1
}
read -r -a quick_flags <<<"$flags"
hidden=(GTest GMock benchmark)
hide=()
for p in "${hidden[@]}"; do hide+=("-DCMAKE_DISABLE_FIND_PACKAGE_$p=ON"); done
echo "configuring as the quickstart does: ${quick_flags[*]} (hidden: ${hidden[*]})"
if ! cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release "${quick_flags[@]}" "${hide[@]}" \
  >"$dir/configure.log" 2>&1; then
  cat "$dir/configure.log" >&2
  echo "FAIL: the product's build does not configure without the tests' packages" >&2
  exit 1
fi

# What CMake looked up and found: no test-only package.
for key in GTest_DIR GMock_DIR benchmark_DIR HTTPLIB_FOUND HTTPLIB_INCLUDEDIR; do
  if grep -Eq "^${key}(:[A-Z]+)?=[^-]" "$dir/CMakeCache.txt" &&
    ! grep -Eq "^${key}(:[A-Z]+)?=.*-NOTFOUND" "$dir/CMakeCache.txt"; then
    fail "the product's configure found $key ($(grep -E "^${key}[:=]" "$dir/CMakeCache.txt"))"
  fi
done

# The targets of that build: the product's only.
targets="$(cmake --build "$dir" --target help | sed -n 's/^\.\.\. \([^ ]*\).*/\1/p')"
bad="$(grep -E '(_test|_fuzzer|testutil|-bench|_bench|^make_seeds|^make_test_export|fake|_test_deps|^unit-tests|^tsan-tests)$|fake' <<<"$targets" || true)"
[[ -z "$bad" ]] || fail "the product's build has test targets: $(tr '\n' ' ' <<<"$bad")"
quick_targets="$(sed -n 's/^ *quickstart_targets=(\(.*\))$/\1/p' "$src/deploy/local/quickstart.sh")"
[[ -n "$quick_targets" ]] || fail "deploy/local/quickstart.sh has no quickstart_targets=(...) line"
for t in $quick_targets pstrain-ps pstrain-chief pstrain-worker pstrain-serve pstrain_python; do
  grep -qx -- "$t" <<<"$targets" || fail "the product's build lacks $t"
done

# Production sources include no test package's header.
cd "$src"
includes="$(git ls-files '*.cc' '*.h' | grep -Ev '(^|/)(tests|testing|fuzz)/|_test\.(cc|h)$|_test_util\.(cc|h)$' |
  xargs grep -lE '#include +["<](gtest/|gmock/|benchmark/benchmark\.h|httplib\.h)' || true)"
[[ -z "$includes" ]] || fail "production files include a test package: $(tr '\n' ' ' <<<"$includes")"

if ((failed)); then exit 1; fi
echo "product build: configures without ${hidden[*]}; $(wc -l <<<"$targets") targets, none a test's"
