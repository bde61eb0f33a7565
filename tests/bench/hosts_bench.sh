#!/usr/bin/env bash
# Throughput of one distributed job on simulated hosts against the same job
# on loopback: 1 ps + the chief + 2 workers (mnist_cnn on Fashion-MNIST,
# sync, batch 100 per replica, 3 replicas), once with every task on
# 127.0.0.1, once on 4 network-namespace "VMs" joined by a bridge
# (tests/hosts/vmnet.sh, task addresses are host names), and once more on
# those hosts with the links limited to each rate of `rates` (tc netem with
# 0.5 ms where the kernel has netem, else tc tbf without the delay).
# Alternates the runs; prints every run, the medians and the ratios to
# loopback and to the unlimited hosts. tests/bench/scaling_model.py
# --check_workers=3 predicts them.
#
# `variants` runs the whole set once per variant, side by side in each
# round: "NAME:key=value,key=value" adds those `training:` settings to the
# job (e.g. "before:overlap_pull=false after:wire_format=bf16"); NAME alone
# runs the job as configured by default. With trace_steps=A:B in a variant,
# each run also prints worker 0's overlap (tests/bench/trace_overlap.py).
#
#   tests/bench/hosts_bench.sh [rounds=3] [steps=120] [rates="1gbit"] [variants="default"]
# Needs root (network namespaces), a Release build in build/ and
# /usr/share/datasets/fashion-mnist (deploy/install-deps.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds="${1:-3}"
steps="${2:-120}"
read -r -a rates <<<"${3:-1gbit}"
read -r -a variants <<<"${4:-default}"
bin="$root/build/bin"
vmnet="$root/tests/hosts/vmnet.sh"
data=/usr/share/datasets/fashion-mnist
[[ -x "$bin/pstrain-chief" ]] || { echo "build first: $bin/pstrain-chief is missing" >&2; exit 2; }
[[ -d "$data" ]] || { echo "$data is missing: deploy/install-deps.sh installs it" >&2; exit 2; }
bash "$vmnet" check || { echo "network namespaces are impossible here: no simulated hosts" >&2; exit 2; }

work="$(mktemp -d)"
net="hb$((RANDOM % 1000))"
cleanup() {
  bash "$vmnet" destroy "$net" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
hosts=(job-ps-0 job-chief-0 job-worker-0 job-worker-1)
bash "$vmnet" create "$net" $((100 + RANDOM % 100)) "${hosts[@]}"

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# config FILE EXTRAS PS CHIEF WORKER0 WORKER1 (EXTRAS: key=value,key=value)
config() {
  local file="$1" extras="$2"
  shift 2
  cat >"$file" <<YAML
cluster:
  ps: ["$1"]
  chief: ["$2"]
  worker: ["$3", "$4"]
training:
  model: mnist_cnn
  update: sync
  batch_size: 100
  eval_steps: 0
  checkpoint_steps: 100000
  log_every_n_steps: 10
  data_dir: $data
  insecure: true  # the same wire for the loopback and the hosts runs
YAML
  local kv
  IFS=, read -r -a kv <<<"$extras"
  for e in "${kv[@]}"; do
    [[ "$e" == *=* ]] || { echo "variant setting '$e' is not key=value" >&2; exit 2; }
    echo "  ${e%%=*}: ${e#*=}" >>"$file"
  done
}

# run MODE EXTRAS: one job; prints its examples/sec (the chief's median
# global_step/sec after the first window, times 100 x 3 replicas).
run() {
  local mode="$1" extras="$2" job="$work/job-$RANDOM" cfg="$work/$1.yaml" pids=()
  if [[ "$mode" == loopback ]]; then
    config "$cfg" "$extras" 127.0.0.1:22220 127.0.0.1:22221 127.0.0.1:22222 127.0.0.1:22223
  else
    config "$cfg" "$extras" job-ps-0:2222 job-chief-0:2222 job-worker-0:2222 job-worker-1:2222
  fi
  local tasks=("ps 0 job-ps-0" "worker 0 job-worker-0" "worker 1 job-worker-1" "chief 0 job-chief-0")
  for t in "${tasks[@]}"; do
    read -r role index host <<<"$t"
    local prefix=()
    [[ "$mode" == loopback ]] || prefix=(bash "$vmnet" exec "$net" "$host")
    "${prefix[@]}" "$bin/pstrain-$role" --config="$cfg" --job_name="$role" --task_index="$index" \
      --job_dir="$job" --train_steps="$steps" >"$work/$role$index.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "a task failed in the $mode run:" >&2; tail -n 5 "$work"/*.log >&2; exit 1; }; done
  # With trace_steps in the variant: how much of worker 0's communication
  # its computation hid (tests/bench/trace_overlap.py), on stderr.
  local trace
  trace="$(find "$job/plugins/profile" -name 'worker-0.trace.json' 2>/dev/null | head -n 1)"
  if [[ -n "$trace" ]]; then
    echo "  $mode $extras: $(python3 "$root/tests/bench/trace_overlap.py" "$trace" | tail -n 2 | tr '\n' ' ')" >&2
  fi
  grep -o 'global_step/sec = [0-9.]*' "$work/chief0.log" | awk '{print $3}' | tail -n +2 | median |
    awk '{printf "%.1f", $1 * 300}'
}

declare -A runs
modes=(loopback hosts)
for r in "${rates[@]}"; do modes+=("hosts-$r"); done
for ((i = 1; i <= rounds; i++)); do
  for v in "${variants[@]}"; do
    name="${v%%:*}"
    extras=""
    [[ "$v" == *:* ]] && extras="${v#*:}"
    line="round $i $name:"
    for m in "${modes[@]}"; do
      if [[ "$m" == hosts-* ]]; then bash "$vmnet" shape "$net" "${m#hosts-}" 0.5ms; fi
      r="$(run "$m" "$extras")"
      if [[ "$m" == hosts-* ]]; then
        bash "$vmnet" destroy "$net"
        bash "$vmnet" create "$net" $((100 + RANDOM % 100)) "${hosts[@]}"
      fi
      runs[$name/$m]+="$r "
      line+=" $m $r |"
    done
    echo "$line (examples/sec)"
  done
done
for v in "${variants[@]}"; do
  name="${v%%:*}"
  base=$(tr ' ' '\n' <<<"${runs[$name/loopback]}" | grep . | median)
  open=$(tr ' ' '\n' <<<"${runs[$name/hosts]}" | grep . | median)
  for m in "${modes[@]}"; do
    x=$(tr ' ' '\n' <<<"${runs[$name/$m]}" | grep . | median)
    echo "median $name $m: $x examples/sec, ratio to loopback $(awk -v a="$x" -v b="$base" \
      'BEGIN {printf "%.2f", a / b}'), to unlimited hosts $(awk -v a="$x" -v b="$open" \
      'BEGIN {printf "%.2f", a / b}')"
  done
done
