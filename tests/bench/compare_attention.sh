#!/usr/bin/env bash
# Side by side (issue 42): multi_head_attention's forward and backward
# (pstrain-attention-bench) against torch.nn.MultiheadAttention (Debian's
# python3-torch 1.13), self-attention at L = 50 and 200, d = 64, 4 heads,
# batch 256, on the same thread count, alternating runs so both see the same
# machine. Prints each run, the medians and pstrain's speed over PyTorch's
# (> 1: pstrain is faster).
#
#   tests/bench/compare_attention.sh [rounds=5] [threads=2]
# Needs a Release build in build/ and `deploy/install-deps.sh --bench`: Debian's
# python3-torch calls the system BLAS (libblas.so.3) for its matrix products,
# and only with OpenBLAS there (libopenblas0-pthread) is that PyTorch's best:
# the reference BLAS makes it 6x slower here.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds="${1:-5}"
threads="${2:-2}"
bench="$root/build/bin/pstrain-attention-bench"
[[ -x "$bench" ]] || { echo "build first: $bench is missing" >&2; exit 2; }
export GLIBC_TUNABLES="glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296"

if ! readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 | grep -q openblas; then
  echo "warning: libblas.so.3 is not OpenBLAS: PyTorch's products run on the reference BLAS" \
       "(deploy/install-deps.sh --bench installs libopenblas0-pthread)" >&2
fi

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
field() { awk -F': ' -v k="$1" '$1 == k {print $2}'; }

for length in 50 200; do
  args=(--length="$length" --dim=64 --heads=4 --batch=256 --threads="$threads")
  of=() ob=() tf=() tb=()
  for ((i = 1; i <= rounds; i++)); do
    out="$("$bench" "${args[@]}")"
    of+=("$(field "forward ms" <<<"$out")") ob+=("$(field "forward+backward ms" <<<"$out")")
    out="$(OPENBLAS_NUM_THREADS="$threads" /usr/bin/python3 "$root/tests/bench/attention_torch.py" \
           --length "$length" --dim 64 --heads 4 --batch 256 --threads "$threads")"
    tf+=("$(field "forward ms" <<<"$out")") tb+=("$(field "forward+backward ms" <<<"$out")")
    echo "L=$length round $i: pstrain forward ${of[-1]} ms, forward+backward ${ob[-1]} ms |" \
         "pytorch forward ${tf[-1]} ms, forward+backward ${tb[-1]} ms"
  done
  mof=$(printf '%s\n' "${of[@]}" | median) mob=$(printf '%s\n' "${ob[@]}" | median)
  mtf=$(printf '%s\n' "${tf[@]}" | median) mtb=$(printf '%s\n' "${tb[@]}" | median)
  echo "L=$length medians: forward pstrain $mof ms, pytorch $mtf ms (speed ratio" \
       "$(awk -v a="$mtf" -v b="$mof" 'BEGIN {printf "%.2f", a / b}'));" \
       "forward+backward pstrain $mob ms, pytorch $mtb ms (speed ratio" \
       "$(awk -v a="$mtb" -v b="$mob" 'BEGIN {printf "%.2f", a / b}'))"
done
