#!/usr/bin/env bash
# A click log partitioned by day, as logs are kept, whose model moves from day
# to day (pstrain-data synthetic-ctr --days: each id, with probability
# day_shift, has a weight of that day's own; the test set is from the model
# all days share): does streaming the daily files train as well as the same
# rows shuffled into one file? Wide & Deep (examples/models/wide_and_deep.yaml),
# 1 ps and 2 workers on loopback (pstrain-launch), async, Adam, batch 256, one
# epoch, shuffle_buffer 10000; the runs, alternating each round:
#   in order       the daily files in name order (shuffle_files: false), 4 at a
#                  time;
#   files shuffled each epoch's file order drawn from the seed and dealt from
#                  it (shuffle_files: true, the default), at each cycle_length
#                  given;
#   one file       the same rows shuffled (shuf) into one file, read as 2
#                  replicas' shares of its records.
# Prints every run (test AUC and log loss from the chief's final evaluation,
# the workers' summed examples/sec: median over their log windows after the
# first), then the medians per run kind and each one's AUC minus one file's.
#
#   tests/bench/drift_bench.sh [rounds=2] [days=60] [examples=1200000]
#       [day_shift=0.3] [cycle_lengths="4 16 64"]
# Use an odd number of rounds: the medians are the middle runs'. Needs a
# Release build in build/. About a minute a run on 2 cores.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds="${1:-2}"
days="${2:-60}"
examples="${3:-1200000}"
day_shift="${4:-0.3}"
read -r -a cycles <<<"${5:-4 16 64}"
batch=256
log_every=200
build_bin="$root/build/bin"
tools=(pstrain-launch pstrain-chief pstrain-ps pstrain-worker pstrain-data)
for b in "${tools[@]}"; do
  [[ -x "$build_bin/$b" ]] || { echo "build first: $build_bin/$b is missing" >&2; exit 2; }
done

work="$(mktemp -d /tmp/drift-bench.XXXXXX)"
# Every process this script starts names $work in its command line: on exit,
# whatever is still running is stopped by pid.
ours() {
  local p args
  for p in /proc/[0-9]*; do
    mapfile -d '' -t args 2>/dev/null <"$p/cmdline" || continue
    [[ "${args[*]:-}" == *"$work"* ]] && echo "${p#/proc/}"
  done
  return 0
}
cleanup() {
  local pids
  pids="$(ours)"
  if [[ -n "$pids" ]]; then
    kill -TERM $pids 2>/dev/null || true
    sleep 2
    pids="$(ours)"
    [[ -n "$pids" ]] && kill -KILL $pids 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bin="$work/bin"
mkdir -p "$bin"
for b in "${tools[@]}"; do cp "$build_bin/$b" "$bin/"; done
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}'; }

# --- data --------------------------------------------------------------------
data="$work/data"
mkdir -p "$data/days" "$data/one"
"$bin/pstrain-data" synthetic-ctr --out "$data/days/log.tsv" --examples "$examples" \
  --days "$days" --day_shift "$day_shift" --test_out "$data/test.tsv" \
  --test_examples 100000 >"$work/data.log" 2>&1 || { cat "$work/data.log" >&2; exit 1; }
planted="$(grep -o 'AUC [0-9.]*' "$work/data.log" | tail -1 | awk '{print $2}')"
day_auc="$(grep -o "that day's planted AUC [0-9.]*" "$work/data.log" | awk '{print $5}' | median)"
# The same rows in one file, shuffled by a random source of fixed bytes.
cat "$data"/days/log-day-*.tsv |
  shuf --random-source=<(yes pstrain-drift-bench) >"$data/one/all.tsv"
echo "data: $examples examples in $days daily files (day_shift $day_shift; each day's own" \
  "model's planted AUC on it, median: $day_auc), and shuffled into one file; the test" \
  "set's planted AUC (the model all days share) $planted"

# --- runs --------------------------------------------------------------------
free_base() {
  local base used
  used="$(ss -Htan 2>/dev/null | awk '{n = split($4, a, ":"); print a[n]}')"
  while true; do
    base=$((20000 + RANDOM % 30000))
    local ok=1
    for ((p = base; p < base + 4; p++)); do grep -qx "$p" <<<"$used" && ok=0; done
    ((ok)) && { echo "$base"; return; }
  done
}

# run NAME TRAIN_FILES SHUFFLE_FILES CYCLE_LENGTH: prints "auc loss examples/s secs".
run() {
  local name="$1" files="$2" shuffle="$3" cycle="$4" job="$work/$1" log="$work/$1.log" b
  b="$(free_base)"
  cat >"$work/$name.yaml" <<YAML
cluster:
  chief: ["127.0.0.1:$b"]
  worker: ["127.0.0.1:$((b + 1))", "127.0.0.1:$((b + 2))"]
  ps: ["127.0.0.1:$((b + 3))"]
training:
  update: async
  chief_trains: false
  shuffle_files: $shuffle
  cycle_length: $cycle
YAML
  local t0=$SECONDS
  "$bin/pstrain-launch" --config="$work/$name.yaml" --model="$root/examples/models/wide_and_deep.yaml" \
    --job_dir="$job" --train_files="$files" --eval_files="$data/test.tsv" --num_epochs=1 \
    --batch_size="$batch" --optimizer=adam --learning_rate=0.001 --embedding_optimizer=adam \
    --embedding_learning_rate=0.001 --log_every_n_steps="$log_every" --checkpoint_steps=0 \
    --eval_steps=0 >"$log" 2>&1 || { echo "the $name job failed:" >&2; tail -20 "$log" >&2; exit 1; }
  local secs=$((SECONDS - t0)) eps auc loss
  # Each worker's windows after its first, summed over the 2 workers by window.
  eps="$(grep -o '\[worker:[0-9]*\].*examples/sec = [0-9.]*' "$log" |
    awk '{w = $1; n[w]++; if (n[w] > 1) s[n[w]] += $NF} END {for (k in s) print s[k]}' | median)"
  auc="$(grep -o 'Saving dict for global step [0-9]*: .*' "$log" | tail -1 | grep -o 'auc = [0-9.]*' |
    awk '{print $3}')"
  loss="$(grep -o 'Saving dict for global step [0-9]*: .*' "$log" | tail -1 |
    grep -o ' loss = [0-9.]*' | awk '{print $3}')"
  [[ -n "$auc" ]] || { echo "no final evaluation in $log:" >&2; tail -20 "$log" >&2; exit 1; }
  echo "$auc $loss ${eps:-0} $secs"
}

kinds=("in_order")
for c in "${cycles[@]}"; do kinds+=("shuffled_c$c"); done
kinds+=("one_file")
declare -A results=()
for ((r = 1; r <= rounds; r++)); do
  for kind in "${kinds[@]}"; do
    case "$kind" in
      in_order) out="$(run "r${r}_$kind" "$data/days/log-day-*.tsv" false 4)" ;;
      shuffled_c*) out="$(run "r${r}_$kind" "$data/days/log-day-*.tsv" true "${kind#shuffled_c}")" ;;
      one_file) out="$(run "r${r}_$kind" "$data/one/all.tsv" true 4)" ;;
    esac
    read -r auc loss eps secs <<<"$out"
    printf 'round %d %-14s AUC %s  log loss %s  %8.0f examples/s  %4d s\n' "$r" "$kind" "$auc" \
      "$loss" "$eps" "$secs"
    results[$kind]+="$auc $loss $eps"$'\n'
  done
done

echo
echo "medians over $rounds rounds (planted AUC on the test set $planted):"
one_auc="$(awk 'NF {print $1}' <<<"${results[one_file]}" | median)"
printf '%-14s %8s %10s %12s %14s\n' run AUC "log loss" examples/s "AUC - one file"
for kind in "${kinds[@]}"; do
  auc="$(awk 'NF {print $1}' <<<"${results[$kind]}" | median)"
  loss="$(awk 'NF {print $2}' <<<"${results[$kind]}" | median)"
  eps="$(awk 'NF {print $3}' <<<"${results[$kind]}" | median)"
  printf '%-14s %8.4f %10.4f %12.0f %+14.4f\n' "$kind" "$auc" "$loss" "$eps" \
    "$(awk -v a="$auc" -v b="$one_auc" 'BEGIN {print a - b}')"
done
