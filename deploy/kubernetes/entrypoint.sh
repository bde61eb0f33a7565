#!/usr/bin/env bash
# pstrain's container entrypoint on Kubernetes: runs this pod's task.
#
#   entrypoint.sh ROLE [FLAGS...]        ROLE: chief, ps or worker
#
# Training flags come from the job YAML's training section (the ConfigMap,
# mounted at /etc/pstrain/job/job.yaml), then FLAGS (the container's args),
# which override it. The cluster and this task's place in it come from
# TF_CONFIG:
#   - under Kubeflow's training operator (a TFJob), TF_CONFIG is set: the
#     operator gives it to the container named "tensorflow";
#   - without the operator (StatefulSets), it is built here from the pod's
#     name, <job>-<role>-<ordinal>, and PSTRAIN_JOB, PSTRAIN_WORKERS,
#     PSTRAIN_PS, PSTRAIN_PORT (2222) and POD_NAMESPACE: task i of a role is
#     <job>-<role>-<i>.<job>-<role>.<namespace>.svc:<port>, the name its
#     StatefulSet's headless Service gives the pod.
#
# Exit status (what Kubernetes or the operator does with it; see
# docs/kubernetes.md):
#   0    the job is done. Under the operator the pod succeeds (the chief's
#        success ends the TFJob); in a StatefulSet, whose pods are always
#        restarted, the script stays up idle instead until the pod is deleted.
#   138  the task asks to be started again (a task it needs was gone too
#        long): the operator's ExitCode policy recreates the pod.
#   137  the task was SIGKILLed (e.g. the OOM killer): recreated too.
#   143  the pod was told to stop (SIGTERM: eviction, preemption, a node
#        drain) before the job was done; the task checkpointed and exited 0,
#        and this script says 143 so the operator recreates the pod instead of
#        taking a stopped chief for a finished job.
#   1, 2 a failure a restart does not cure (bad input, bad config): the
#        operator fails the TFJob.
#
# Settings for tests and unusual images: PSTRAIN_BIN_DIR (/usr/bin),
# PSTRAIN_JOB_CONFIG (/etc/pstrain/job/job.yaml), PSTRAIN_POD_NAME (the host
# name), PSTRAIN_DRY_RUN=1 (print TF_CONFIG and the command, run nothing).
set -euo pipefail

log() { echo "$(date -u +%FT%T.%3NZ) pstrain-entrypoint: $*" >&2; }
die() {
  log "error: $*"
  exit 2
}

[[ $# -ge 1 ]] || die "usage: entrypoint.sh chief|ps|worker [FLAGS...]"
role="$1"
shift
case "$role" in chief | ps | worker) ;; *) die "role '$role': use chief, ps or worker" ;; esac
bin_dir="${PSTRAIN_BIN_DIR:-/usr/bin}"
job_config="${PSTRAIN_JOB_CONFIG:-/etc/pstrain/job/job.yaml}"

# training_flags FILE: one --key=value line per key of FILE's top-level
# "training:" section. Every training key is a flag of the same name; the
# section holds scalars only (a model spec goes in its own file, named by
# training.model), and the cluster comes from TF_CONFIG, not from this file.
training_flags() {
  awk -v file="$1" '
    function fail(msg) { print "error: " file ", line " NR ": " msg > "/dev/stderr"; failed = 1; exit 1 }
    /^[ \t]*(#.*)?$/ { next }
    /^training:[ \t]*(#.*)?$/ { section = 1; indent = ""; next }
    /^[^ \t]/ {
      if ($0 ~ /^cluster:/) fail("a cluster section: on Kubernetes the cluster comes from TF_CONFIG; remove it")
      section = 0; next
    }
    section {
      line = $0
      lead = line; sub(/[^ \t].*$/, "", lead)
      if (indent == "") indent = lead
      if (lead != indent) fail("training keys are flat (\"  key: value\"); nested YAML belongs in a file training.model names")
      sub(/^[ \t]+/, "", line)
      colon = index(line, ":")
      if (colon == 0) fail("not a \"key: value\" line: " line)
      key = substr(line, 1, colon - 1)
      if (key !~ /^[a-z][a-z0-9_]*$/) fail("\"" key "\" is not a training key")
      value = substr(line, colon + 1); sub(/^[ \t]+/, "", value)
      q = substr(value, 1, 1)
      if (q == "\"" || q == "\047") {
        rest = substr(value, 2); end = index(rest, q)
        if (end == 0) fail("unterminated quote in " key)
        value = substr(rest, 1, end - 1)
      } else {
        sub(/[ \t]+#.*$/, "", value); sub(/[ \t]+$/, "", value)
        if (value == "" || value == "|" || value == ">") fail("training." key " has no value on its line: training keys are flat scalars; nested YAML belongs in a file training.model names")
      }
      print "--" key "=" value
    }
    END { if (failed) exit 1 }
  ' "$1"
}

flags=()
if [[ -f "$job_config" ]]; then
  lines="$(training_flags "$job_config")" || die "cannot read the training section of $job_config"
  while IFS= read -r f; do [[ -n "$f" ]] && flags+=("$f"); done <<<"$lines"
else
  log "no job YAML at $job_config: training settings come from the command line only"
fi

statefulset=0
if [[ -z "${TF_CONFIG:-}" ]]; then
  statefulset=1
  : "${PSTRAIN_JOB:?PSTRAIN_JOB (the job name, the StatefulSets prefix) is not set and neither is TF_CONFIG}"
  [[ "${PSTRAIN_WORKERS:-}" =~ ^[0-9]+$ ]] || die "PSTRAIN_WORKERS='${PSTRAIN_WORKERS:-}': set it to the worker StatefulSet's replicas"
  [[ "${PSTRAIN_PS:-}" =~ ^[1-9][0-9]*$ ]] || die "PSTRAIN_PS='${PSTRAIN_PS:-}': set it to the ps StatefulSet's replicas (1 or more)"
  port="${PSTRAIN_PORT:-2222}"
  namespace="${POD_NAMESPACE:-default}"
  pod="${PSTRAIN_POD_NAME:-$(hostname)}"
  index="${pod##*-}"
  [[ "$index" =~ ^[0-9]+$ && "$pod" == "$PSTRAIN_JOB-$role-$index" ]] ||
    die "pod name '$pod' is not $PSTRAIN_JOB-$role-<ordinal>: run $role tasks in the StatefulSet $PSTRAIN_JOB-$role"
  # addresses ROLE COUNT: the JSON list of that role's task addresses.
  addresses() {
    local list="" i
    for ((i = 0; i < $2; i++)); do
      list+="${list:+,}\"$PSTRAIN_JOB-$1-$i.$PSTRAIN_JOB-$1.$namespace.svc:$port\""
    done
    printf '[%s]' "$list"
  }
  # shellcheck disable=SC2089,SC2090  # JSON: the quotes are part of the value
  TF_CONFIG="{\"cluster\":{\"chief\":$(addresses chief 1),\"ps\":$(addresses ps "$PSTRAIN_PS"),\"worker\":$(addresses worker "$PSTRAIN_WORKERS")},\"task\":{\"type\":\"$role\",\"index\":$index},\"environment\":\"cloud\"}"
  # shellcheck disable=SC2090
  export TF_CONFIG
fi

cmd=("$bin_dir/pstrain-$role" "${flags[@]}" "$@")
if [[ "${PSTRAIN_DRY_RUN:-}" == 1 ]]; then
  printf 'TF_CONFIG=%s\n' "$TF_CONFIG"
  printf '%s\n' "${cmd[@]}"
  exit 0
fi
[[ -x "${cmd[0]}" ]] || die "${cmd[0]} is missing (PSTRAIN_BIN_DIR=$bin_dir)"
log "TF_CONFIG=$TF_CONFIG"
log "starting: ${cmd[*]}"

# The task runs as a child so that a SIGTERM is forwarded (it checkpoints and
# exits) and remembered.
terminated=0
child=0
# shellcheck disable=SC2317  # called by the trap
on_term() {
  terminated=1
  if ((child > 0)); then kill -TERM "$child" 2>/dev/null || true; fi
}
trap on_term TERM INT
"${cmd[@]}" &
child=$!
status=0
while true; do
  status=0
  wait "$child" || status=$?
  # A trapped signal interrupts wait (status > 128) while the task runs on.
  kill -0 "$child" 2>/dev/null || break
done
log "pstrain-$role exited with status $status"

if ((terminated)); then
  if ((status == 0)); then
    log "stopped by SIGTERM before the job was done: exiting 143 so that the pod is started again"
    exit 143
  fi
  exit "$status"
fi
if ((status == 0 && statefulset)); then
  # A StatefulSet restarts a container whatever its status: staying up keeps
  # a finished task from running again.
  log "the job is done; this pod idles until it is deleted (kubectl delete -f the manifest)"
  trap 'exit 0' TERM INT
  sleep infinity &
  wait $! || true
  exit 0
fi
case "$status" in
  138) log "exit 138: the task asks to be started again (it resumes the job)" ;;
  137) log "exit 137: the task was killed (SIGKILL; the OOM killer?)" ;;
esac
exit "$status"
