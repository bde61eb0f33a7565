#!/usr/bin/env bash
# pstrain-serve beside stalled uploads (issue 25): each round runs
# pstrain-serve-bench's REST runs (default 1x8: batch 1, 8 keep-alive
# clients) without, then with, N connections that sent a :predict request's
# headers and a few bytes of its body and then nothing. Prints every round,
# then the medians of req/s, p50 and p99 without and with them and their
# ratios (with / without).
#
#   tests/bench/serve_slow_clients.sh [rounds=3] [seconds=5] [stalled=256] [runs=1x8]
# Needs a Release build in build/ (cmake --build build --target pstrain-serve-bench).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds="${1:-3}"
seconds="${2:-5}"
stalled="${3:-256}"
runs_flag="${4:-1x8}"
bench="$root/build/bin/pstrain-serve-bench"
[[ -x "$bench" ]] || { echo "build first: $bench is missing" >&2; exit 2; }

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# field LINE WORD: the number before " req/s", or after "p50 " / "p99 ".
field() {
  case "$2" in
    req/s) sed -E 's|.*: ([0-9.]+) req/s.*|\1|' <<<"$1" ;;
    *) sed -E "s|.* $2 ([0-9.]+) ms.*|\\1|" <<<"$1" ;;
  esac
}

declare -A v
for ((i = 1; i <= rounds; i++)); do
  out="$("$bench" --seconds="$seconds" --runs="$runs_flag" --stalled="$stalled")"
  echo "round $i:"
  grep -E '^rest(-stalled)? ' <<<"$out" | sed 's/^/  /'
  for key in ${runs_flag//,/ }; do
    b="${key%x*}" c="${key#*x}"
    without="$(grep "^rest batch=$b clients=$c:" <<<"$out")"
    with="$(grep "^rest-stalled batch=$b clients=$c stalled=" <<<"$out")"
    for f in req/s p50 p99; do
      v[$key,0,$f]+="$(field "$without" "$f") "
      v[$key,1,$f]+="$(field "$with" "$f") "
    done
  done
done
m() { tr ' ' '\n' <<<"${v[$1]}" | grep . | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}'; }
echo "medians of $rounds rounds:"
for key in ${runs_flag//,/ }; do
  b="${key%x*}" c="${key#*x}"
  for f in req/s p50 p99; do
    unit="ms"
    [[ "$f" == req/s ]] && unit="req/s"
    a="$(m "$key,0,$f")" s="$(m "$key,1,$f")"
    echo "  rest batch=$b clients=$c $f: $a $unit without, $s $unit with $stalled stalled; ratio $(ratio "$s" "$a")"
  done
done
