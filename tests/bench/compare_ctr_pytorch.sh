#!/usr/bin/env bash
# Wide & Deep click model (examples/models/wide_and_deep.yaml: 26 dynamic
# embedding tables of dim 8, a linear "wide" part over the same 26 fields, MLP
# 64-32-1) on synthetic Criteo-like data with a planted logistic model
# (pstrain-data synthetic-ctr, its default config: 26 fields of 10,000 Zipf
# ids, 13 dense features), trained three ways for the same number of steps:
#   - pstrain, sync, 2 workers x batch 256 (the chief evaluating, not
#     training), with 1 ps and with 2 ps, every task a process on loopback
#     started by pstrain-launch (mutual TLS, as it sets up);
#   - PyTorch in one process (tests/bench/ctr_torch.py: the same network with
#     nn.EmbeddingBag(mode='sum', sparse=True) per field, a vocabulary built on
#     the training set, batch 512 = 2 x 256), with 2 threads and again with 1.
#     The 2-thread run sets OMP_WAIT_POLICY=PASSIVE (threads sleep at a
#     barrier instead of spinning): this network is many small ops (52
#     tables), and with OpenMP's default spinning 2 threads fell to 1,500 -
#     5,500 examples/s here whenever another process used a core (against
#     ~19,000 passive); 1 thread did not do worse than 2 here;
# both with Adagrad on the embedding tables (TF 1.x's initial accumulator
# 0.1) and Adam on the dense variables, the same initializers.
# The runs alternate (pstrain 1 ps, 2 ps, PyTorch 2 threads, 1 thread, then
# again); prints every run, then a table of medians:
#   examples/s        pstrain: the sum of the 2 workers' examples/sec at each
#                     log window, median over the windows after the first;
#                     PyTorch: the same over its own windows;
#   rows pulled/s, rows pushed/s per ps
#                     each ps's final "embedding rows: ... pulled, ... pushed"
#                     counts over the training wall time (the chief's
#                     "initialized" line to the last worker's "done" line),
#                     mean over the ps; the pulls of the chief's final
#                     evaluation are taken out (measured per ps by a 1-step
#                     job of the same shape, whose training pulls equal its
#                     pushes);
#   bytes/step per worker
#                     the workers' "embedding rows per step ... bytes per
#                     step: S sent, R received" (rows only; dense variables
#                     are printed below the table);
#   ps bytes per row  resident memory the ps gained for its rows: VmRSS of
#                     each pstrain-ps process (found by the job dir in its
#                     command line) sampled every 0.25 s, the last sample
#                     before the workers finished training, minus the
#                     baseline (VmHWM of the ps of a 1-step job of the same
#                     shape: process, gRPC, dense variables and its few
#                     rows), summed over the ps, over the rows they gained
#                     ("N held in T tables"); and its ratio to the row + slot
#                     bytes of those rows (Adagrad: weights + accumulator,
#                     2 x dim floats: 64 bytes for dim 8, 8 for the wide
#                     part's dim 1; the mix read off pstrain-ckpt);
#   AUC               on the test set, pstrain's final eval line, against
#                     the planted model's (printed by pstrain-data).
# The machine's load average is printed at the start and the end: the
# throughputs are only comparable on an otherwise idle machine.
#
#   tests/bench/compare_ctr_pytorch.sh [rounds=2] [steps=2000] [train_examples=500000]
#       [test_examples=50000] [embedding_learning_rate=0.5]
# embedding_learning_rate 0.5: at 2000 steps, 0.05, 0.2, 0.5 and 1.0 reached
# test AUC 0.736, 0.747, 0.751 and 0.753 with 1 ps (planted 0.797).
# Needs a Release build in build/ and Debian's python3-torch
# (deploy/install-deps.sh --bench). About 10 to 15 minutes with the defaults on 2 cores.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds="${1:-2}"
steps="${2:-2000}"
train_examples="${3:-500000}"
test_examples="${4:-50000}"
embedding_lr="${5:-0.5}"
dense_lr=0.001
batch=256  # per worker; PyTorch takes 2 x batch
log_every=200
build_bin="$root/build/bin"
tools=(pstrain-launch pstrain-chief pstrain-ps pstrain-worker pstrain-data pstrain-ckpt)
for b in "${tools[@]}"; do
  [[ -x "$build_bin/$b" ]] || { echo "build first: $build_bin/$b is missing" >&2; exit 2; }
done
/usr/bin/python3 -c 'import torch' 2>/dev/null ||
  { echo "/usr/bin/python3 has no torch: deploy/install-deps.sh --bench installs python3-torch" >&2; exit 2; }
((steps > log_every)) || { echo "steps must exceed $log_every (the first log window is skipped)" >&2; exit 2; }

work="$(mktemp -d /tmp/ctr-pytorch.XXXXXX)"
# The example without its C1 x C2 cross (crosses:): the PyTorch network has
# none, and the two must be the same network.
spec="$work/wide_and_deep.yaml"
grep -v '^ *crosses:' "$root/examples/models/wide_and_deep.yaml" >"$spec"
# Every process this script starts names $work in its command line (the
# launcher and its tasks by the job dir, PyTorch by the data dir): on exit,
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
    for _ in 1 2 3 4 5 6; do
      sleep 0.5
      pids="$(ours)"
      [[ -z "$pids" ]] && break
    done
    [[ -n "$pids" ]] && kill -KILL $pids 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A copy of the binaries: a rebuild while this runs cannot mix versions
# (pstrain-launch starts the tasks from its own directory).
bin="$work/bin"
mkdir -p "$bin"
for b in "${tools[@]}"; do cp "$build_bin/$b" "$bin/"; done

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}'; }
# Seconds of the day of a glog line ("I20261126 04:15:29.855337 ...").
logtime() { awk '{split($2, t, ":"); printf "%.6f\n", t[1] * 3600 + t[2] * 60 + t[3]}'; }
start_secs=$SECONDS
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"

# --- data --------------------------------------------------------------------
data="$work/data"
mkdir -p "$data"
"$bin/pstrain-data" synthetic-ctr --out "$data/train.tsv" --examples "$train_examples" \
  --test_out "$data/test.tsv" --test_examples "$test_examples" >"$work/data.log" 2>&1 ||
  { cat "$work/data.log" >&2; exit 1; }
planted="$(grep -o 'AUC [0-9.]*' "$work/data.log" | awk '{print $2}')"
planted_loss="$(grep -o 'log loss [0-9.]*' "$work/data.log" | head -1 | awk '{print $3}')"
[[ -n "$planted" ]] || { cat "$work/data.log" >&2; exit 1; }
echo "data: $train_examples training, $test_examples test examples (26 fields, 10,000 Zipf ids" \
  "each, 13 dense); planted model's test AUC $planted, log loss $planted_loss"

# --- pstrain -----------------------------------------------------------------
# A base port with the 5 after it free on loopback.
free_base() {
  local base used
  used="$(ss -Htan 2>/dev/null | awk '{n = split($4, a, ":"); print a[n]}')"
  while true; do
    base=$((20000 + RANDOM % 30000))
    local ok=1
    for ((p = base; p < base + 5; p++)); do grep -qx "$p" <<<"$used" && ok=0; done
    ((ok)) && { echo "$base"; return; }
  done
}

# cluster FILE NPS: chief, 2 workers and NPS ps on loopback.
cluster() {
  local b
  b="$(free_base)"
  local ps="\"127.0.0.1:$((b + 3))\""
  (($2 == 2)) && ps+=", \"127.0.0.1:$((b + 4))\""
  cat >"$1" <<YAML
cluster:
  chief: ["127.0.0.1:$b"]
  worker: ["127.0.0.1:$((b + 1))", "127.0.0.1:$((b + 2))"]
  ps: [$ps]
training:
  update: sync
  chief_trains: false
YAML
}

# run_pstrain NAME NPS STEPS: one job in $work/NAME (its launcher's output in
# NAME.log); while it runs, samples each ps's VmRSS and VmHWM. Writes
# NAME.ps: one line per ps task, "index rss_kb_in_training hwm_kb".
run_pstrain() {
  local name="$1" nps="$2" n="$3" job="$work/$1" log="$work/$1.log"
  cluster "$work/$name.yaml" "$nps"
  : >"$log"
  "$bin/pstrain-launch" --config="$work/$name.yaml" \
    --model="$spec" --data_dir="$data" --job_dir="$job" \
    --train_steps="$n" --batch_size="$batch" --learning_rate="$dense_lr" \
    --embedding_learning_rate="$embedding_lr" --embedding_optimizer=adagrad --eval_steps=0 \
    --log_every_n_steps="$log_every" --checkpoint_steps=0 >"$log" 2>&1 &
  local launcher=$! training=1 found=0 p args pid k v
  local -A task=() rss=() hwm=()
  while kill -0 "$launcher" 2>/dev/null; do
    if ((found < nps)); then
      for p in /proc/[0-9]*; do
        mapfile -d '' -t args 2>/dev/null <"$p/cmdline" || continue
        [[ "${args[0]:-}" == */pstrain-ps && "${args[*]}" == *"$job/"* ]] || continue
        [[ -n "${task[${p#/proc/}]:-}" ]] && continue
        for a in "${args[@]}"; do [[ "$a" == --task_index=* ]] && task[${p#/proc/}]="${a#*=}"; done
        found=$((found + 1))
      done
    fi
    if ((training)) && (($(grep -c 'embedding rows per step' "$log" || true) >= 2)); then
      training=0
    fi
    ((found)) && for pid in "${!task[@]}"; do
      while read -r k v _; do
        if [[ "$k" == VmRSS: ]] && ((training)); then rss[$pid]="$v"; fi
        [[ "$k" == VmHWM: ]] && hwm[$pid]="$v"
      done 2>/dev/null <"/proc/$pid/status" || true
    done
    sleep 0.25
  done
  wait "$launcher" || { echo "the $name job failed:" >&2; tail -20 "$log" >&2; exit 1; }
  : >"$work/$name.ps"
  ((found == nps)) || { echo "the $name job: found $found of its $nps ps processes" >&2; exit 1; }
  for pid in "${!task[@]}"; do
    echo "${task[$pid]} ${rss[$pid]:-0} ${hwm[$pid]:-0}" >>"$work/$name.ps"
  done
}

# ps_rows LOG: "index held pulled pushed" per ps from the final lines.
ps_rows() {
  sed -n 's/.*ps \([0-9]*\) embedding rows: \([0-9]*\) held in [0-9]* tables; \([0-9]*\) pulled, \([0-9]*\) pushed.*/\1 \2 \3 \4/p' "$1"
}

# The baseline of each shape: a 1-step job (its ps hold the rows of one step).
declare -A base_hwm base_rows eval_pulls
for nps in 1 2; do
  run_pstrain "base$nps" "$nps" 1
  base_hwm[$nps]="$(awk '{s += $3} END {print s * 1024}' "$work/base$nps.ps")"
  base_rows[$nps]="$(ps_rows "$work/base$nps.log" | awk '{s += $2} END {print s}')"
  while read -r i held pulled pushed; do
    eval_pulls[$nps,$i]=$((pulled - pushed))
  done < <(ps_rows "$work/base$nps.log")
  echo "baseline, $nps ps (1 step): ps VmHWM $(awk -v b="${base_hwm[$nps]}" 'BEGIN {printf "%.1f", b / 1048576}') MiB" \
    "in all, ${base_rows[$nps]} rows held; the final evaluation pulls" \
    "$(for ((i = 0; i < nps; i++)); do printf '%s ' "${eval_pulls[$nps,$i]}"; done)rows (per ps)"
done

# pstrain_result NAME NPS: prints "examples/s pulled/s pushed/s sent recv
# bytes_per_row ratio auc secs".
pstrain_result() {
  local name="$1" nps="$2" log="$work/$1.log"
  local eps t0 t1 secs auc
  eps="$(grep -o '\[worker:[0-9]*\].*step = [0-9]*, loss = [0-9.]*, examples/sec = [0-9.]*' "$log" |
    sed 's/.*step = \([0-9]*\),.*examples\/sec = \([0-9.]*\)/\1 \2/' |
    awk '{s[$1] += $2; c[$1]++} END {for (k in s) if (c[k] == 2) print k, s[k]}' | sort -n |
    tail -n +2 | awk '{print $2}' | median)"
  t0="$(grep 'initialized [0-9]* parameters on' "$log" | sed 's/^\[[^]]*\] //' | logtime | tail -1)"
  t1="$(grep '\[worker:[0-9]*\].*done at global step' "$log" | sed 's/^\[[^]]*\] //' | logtime |
    sort -g | tail -1)"
  secs="$(awk -v a="$t0" -v b="$t1" 'BEGIN {d = b - a; if (d < 0) d += 86400; print d}')"
  auc="$(grep -o "Saving dict for global step $steps: .*auc = [0-9.]*" "$log" | tail -1 |
    sed 's/.*auc = //')"
  local rates="" i held pulled pushed
  rates="$(ps_rows "$log" | while read -r i held pulled pushed; do
    echo "$((pulled - ${eval_pulls[$nps,$i]})) $pushed"
  done | awk -v s="$secs" '{a += $1; b += $2; n++} END {printf "%.0f %.0f", a / n / s, b / n / s}')"
  local traffic
  traffic="$(sed -n 's/.*embedding rows per step: .*bytes per step: \([0-9]*\) sent, \([0-9]*\) received.*/\1 \2/p' "$log" |
    awk '{a += $1; b += $2; n++} END {printf "%.0f %.0f", a / n, b / n}')"
  # Memory: the rows gained and the resident bytes gained over the baseline.
  local held_total rss_total row_bytes
  held_total="$(ps_rows "$log" | awk '{s += $2} END {print s}')"
  rss_total="$(awk '{s += $2} END {print s * 1024}' "$work/$name.ps")"
  row_bytes="$("$bin/pstrain-ckpt" "$work/$name" 2>/dev/null |
    sed -n 's/.* dim \([0-9]*\), dynamic: \([0-9]*\) rows.*/\1 \2/p' |
    awk '{b += $2 * $1 * 2 * 4; r += $2} END {if (r) printf "%.2f", b / r}')"
  local mem
  mem="$(awk -v rss="$rss_total" -v base="${base_hwm[$nps]}" -v rows="$held_total" \
    -v br="${base_rows[$nps]}" -v rb="$row_bytes" \
    'BEGIN {b = (rss - base) / (rows - br); printf "%.1f %.2f", b, b / rb}')"
  echo "$eps $rates $traffic $mem $auc $secs $row_bytes $held_total"
}

# --- PyTorch -----------------------------------------------------------------
torch_run() {
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$root/tests/bench/ctr_torch.py" --data_dir="$data" \
    --cache="$work/torch-data.npz" --steps="$steps" --batch_size=$((2 * batch)) \
    --learning_rate="$dense_lr" --embedding_learning_rate="$embedding_lr" \
    --log_every="$log_every" "$@"
}
torch_run --prepare >"$work/torch-prepare.log" 2>&1 || { cat "$work/torch-prepare.log" >&2; exit 1; }

# --- rounds ------------------------------------------------------------------
declare -A col
setups=("pstrain, 1 ps" "pstrain, 2 ps" "PyTorch, 2 threads" "PyTorch, 1 thread")
for ((r = 1; r <= rounds; r++)); do
  line="round $r:"
  for nps in 1 2; do
    run_pstrain "r$r-ps$nps" "$nps" "$steps"
    read -r eps pulls pushes sent recv bpr ratio auc secs rb held <<<"$(pstrain_result "r$r-ps$nps" "$nps")"
    s="pstrain, $nps ps"
    col[$s,eps]+="$eps " col[$s,pull]+="$pulls " col[$s,push]+="$pushes "
    col[$s,sent]+="$sent " col[$s,recv]+="$recv " col[$s,bpr]+="$bpr " col[$s,ratio]+="$ratio "
    col[$s,auc]+="$auc " col[$s,rb]+="$rb " col[$s,held]+="$held "
    col[$s,dense]="$(sed -n 's/.*worker 0 PushPull.*bytes per step: \([0-9]*\) sent, \([0-9]*\) received.*/\1 \2/p' \
      "$work/r$r-ps$nps.log")"
    line+=" $nps ps $eps ex/s AUC $auc (${secs%.*} s) |"
  done
  for threads in 2 1; do
    out="$(OMP_WAIT_POLICY=PASSIVE torch_run --threads="$threads")" ||
      { echo "$out" | tail -20 >&2; exit 1; }
    eps="$(sed -n 's/^step = [0-9]*, .*examples\/sec = \([0-9.]*\)$/\1/p' <<<"$out" | tail -n +2 |
      median)"
    auc="$(sed -n 's/^test auc: //p' <<<"$out")"
    s="PyTorch, $threads thread"
    ((threads > 1)) && s+=s
    col[$s,eps]+="$eps " col[$s,auc]+="$auc "
    line+=" PyTorch $threads thr $eps ex/s AUC $auc |"
  done
  echo "${line% |}"
done

# --- table -------------------------------------------------------------------
m() { tr ' ' '\n' <<<"${col[$1,$2]:-}" | grep . | median; }
k() { awk -v v="$1" 'BEGIN {if (v >= 1e6) printf "%.2fM", v / 1e6; else if (v >= 1e4) printf "%.1fk", v / 1e3; else printf "%.0f", v}'; }
echo
echo "Wide & Deep, $steps steps of 2 x $batch (sync, 2 workers) or of $((2 * batch)) (PyTorch);" \
  "Adagrad $embedding_lr on the tables, Adam $dense_lr dense; medians of $rounds rounds"
fmt="%-20s | %10s | %15s | %15s | %22s | %22s | %8s\n"
printf "$fmt" "setup" "examples/s" "rows pulled/s" "rows pushed/s" "bytes/step per worker" "ps bytes per row" "AUC"
printf "$fmt" "" "" "per ps" "per ps" "(rows: sent / recv)" "(x row+slot bytes)" "($planted)"
printf "$fmt" "--------------------" "----------" "---------------" "---------------" \
  "----------------------" "----------------------" "--------"
for s in "${setups[@]}"; do
  if [[ "$s" == pstrain* ]]; then
    printf "$fmt" "$s" "$(m "$s" eps | xargs printf '%.0f')" "$(k "$(m "$s" pull)")" "$(k "$(m "$s" push)")" \
      "$(k "$(m "$s" sent)") / $(k "$(m "$s" recv)")" \
      "$(m "$s" bpr) ($(m "$s" ratio)x of $(m "$s" rb))" "$(m "$s" auc)"
  else
    printf "$fmt" "$s" "$(m "$s" eps | xargs printf '%.0f')" "-" "-" "-" "-" "$(m "$s" auc)"
  fi
done
echo
for nps in 1 2; do
  read -r ds dr <<<"${col[pstrain, $nps ps,dense]}"
  echo "pstrain, $nps ps: rows held at the end $(m "pstrain, $nps ps" held) in all; dense variables" \
    "(16,322 floats) move besides the rows: $ds bytes sent, $dr received per step per worker"
done
echo "ps bytes per row: (VmRSS in training - the 1-step job's VmHWM) / (rows held - its rows)," \
  "summed over the ps; row+slot bytes: 2 x dim floats per row (Adagrad), averaged over the" \
  "tables' rows (dim 8 embeddings: 64 B, dim 1 wide weights: 8 B)"
echo "rows/s per ps: each ps's pulls (minus the final evaluation's) and pushes over the training" \
  "wall time (the chief's initialization to the last worker's done line), mean over the ps"
echo "machine load average: $load_before at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end" \
  "($(nproc) cores); $((SECONDS - start_secs)) s in all"
