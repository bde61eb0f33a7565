#!/usr/bin/env bash
# A test removes what it made, pass or fail: runs test binaries with a fresh
# TEST_TMPDIR and fails if anything is left in it afterwards.
#   temp_dirs_removed_test.sh BIN_DIR BINARY[:GTEST_FILTER] ...
set -uo pipefail
bin="$1"
shift
status=0
for spec in "$@"; do
  binary="${spec%%:*}"
  filter="*"
  [[ "$spec" == *:* ]] && filter="${spec#*:}"
  tmp="$(mktemp -d)"
  TEST_TMPDIR="$tmp" TMPDIR="$tmp" "$bin/$binary" --gtest_filter="$filter" >"$tmp.log" 2>&1
  rc=$?
  left="$(ls -A "$tmp")"
  if [[ $rc -ne 0 ]]; then
    echo "FAILED: $binary --gtest_filter=$filter exited $rc:"
    tail -n 20 "$tmp.log"
    status=1
  elif [[ -n "$left" ]]; then
    echo "FAILED: $binary --gtest_filter=$filter left in its temp dir: $left"
    status=1
  else
    echo "ok: $binary --gtest_filter=$filter left nothing behind"
  fi
  rm -rf "$tmp" "$tmp.log"
done
exit $status
