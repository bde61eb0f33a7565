#!/usr/bin/env bash
# pstrain's Compute Engine startup script (instance metadata "startup-script",
# run as root at every boot, also after a preempted VM is recreated).
#
# Reads this instance's settings from the metadata server, installs the
# pstrain package from the bucket, and runs this VM's task: pstrain@<role>
# under systemd, or as a plain background process where systemd does not run
# (pstrain-run: direct). A task that ends before the job is complete (the job
# was stopped for another VM's preemption, or the task failed) is started
# again, so the job resumes from its last checkpoint when the VM that was
# preempted is recreated. A job whose COMPLETED marker in the job dir already
# records train_steps is not trained again: the script stops this VM's
# managed instance group (resize to 0) instead, so a finished job's group does
# not keep recreating VMs.
#
# Instance attributes (pstrain-gce sets them):
#   pstrain-role            ps, chief or worker                       (required)
#   pstrain-task-index      this task's index in its role's list       (required)
#   pstrain-cluster-config  the cluster YAML (addresses are instance names)  (required)
#   pstrain-job-dir         gs://bucket/job                            (required)
#   pstrain-train-steps     the job's global target                    (required)
#   pstrain-data-dir        gs://bucket/data (else the config's)
#   pstrain-flags           more training flags, e.g. "--update=sync --batch_size=100"
#   pstrain-package         gs://bucket/pstrain_<version>_amd64.deb (else: already installed)
#   pstrain-credentials     gs://bucket/job/credentials: where pstrain-gce put the job's
#                           mutual TLS credentials; this VM fetches ca.crt, job.token and
#                           its own task's <role>-<index>.crt/.key, nothing else (else:
#                           the job is plaintext, or tls_dir is on the image)
#   pstrain-group           the managed instance group (else read from "created-by")
#   pstrain-storage-endpoint  a Cloud Storage emulator (tests); else storage.googleapis.com
#   pstrain-storage-retries   times a Cloud Storage request that gets no answer is
#                           tried again, 1 s apart and doubling (default 5: about
#                           30 s before the script says the bucket is unreachable)
#   pstrain-install-root    unpack the package here instead of installing it (tests)
#   pstrain-run             systemd (default where systemd runs) or direct
#   pstrain-max-restarts    failures in a row after which the task is not
#                           started again (default 10)
# The metadata server is http://metadata.google.internal, or GCE_METADATA_HOST
# (host:port) as for Google's client libraries.
set -euo pipefail

log() { echo "$(date -u +%FT%T.%3NZ) pstrain-startup: $*" >&2; logger -t pstrain-startup -- "$*" 2>/dev/null || true; }
die() { log "error: $*"; exit 1; }

metadata_base="http://${GCE_METADATA_HOST:-metadata.google.internal}/computeMetadata/v1"

# md KEY [default]: an instance attribute; without a default a missing key is
# an error naming it.
md() {
  local value status
  value="$(curl -sS --max-time 10 --retry 5 --retry-connrefused -w '\n%{http_code}' \
    -H 'Metadata-Flavor: Google' "$metadata_base/instance/attributes/$1" 2>&1)" ||
    die "the metadata server at $metadata_base does not answer: $value"
  status="${value##*$'\n'}"
  value="${value%$'\n'*}"
  if [[ "$status" == 200 ]]; then
    printf '%s' "$value"
  elif [[ "$status" == 404 && $# -ge 2 ]]; then
    printf '%s' "$2"
  elif [[ "$status" == 404 ]]; then
    die "instance metadata $1 is not set ($metadata_base/instance/attributes/$1); set it with: gcloud compute instances add-metadata $(hostname) --metadata $1=..."
  else
    die "metadata $1: HTTP $status from $metadata_base: $value"
  fi
}

urlencode() {
  local s="$1" out="" c h i
  for ((i = 0; i < ${#s}; i++)); do
    c="${s:i:1}"
    case "$c" in
      [a-zA-Z0-9._~-]) out+="$c" ;;
      *) printf -v h '%%%02X' "'$c"; out+="$h" ;;
    esac
  done
  printf '%s' "$out"
}

role="$(md pstrain-role)"
task_index="$(md pstrain-task-index)"
case "$role" in ps | chief | worker) ;; *) die "metadata pstrain-role = '$role': use ps, chief or worker" ;; esac
[[ "$task_index" =~ ^[0-9]+$ ]] || die "metadata pstrain-task-index = '$task_index' is not a task index (0, 1, ...)"
cluster_config="$(md pstrain-cluster-config)"
job_dir="$(md pstrain-job-dir)"
train_steps="$(md pstrain-train-steps)"
[[ "$train_steps" =~ ^[0-9]+$ && "$train_steps" -gt 0 ]] ||
  die "metadata pstrain-train-steps = '$train_steps' is not a positive number of steps"
[[ "$job_dir" == gs://?*/?* ]] || die "metadata pstrain-job-dir = '$job_dir' is not a gs://bucket/path job dir"
data_dir="$(md pstrain-data-dir "")"
extra_flags="$(md pstrain-flags "")"
package="$(md pstrain-package "")"
credentials="$(md pstrain-credentials "")"
[[ -z "$credentials" || "$credentials" == gs://?*/?* ]] ||
  die "metadata pstrain-credentials = '$credentials' is not a gs://bucket/path"
max_restarts="$(md pstrain-max-restarts 10)"
[[ "$max_restarts" =~ ^[0-9]+$ ]] ||
  die "metadata pstrain-max-restarts = '$max_restarts' is not a number of restarts"
endpoint="$(md pstrain-storage-endpoint "")"
storage_retries="$(md pstrain-storage-retries 5)"
[[ "$storage_retries" =~ ^[0-9]+$ ]] ||
  die "metadata pstrain-storage-retries = '$storage_retries' is not a number of retries"
root="$(md pstrain-install-root "")"
run_mode="$(md pstrain-run "")"
if [[ -z "$run_mode" ]]; then
  if [[ -d /run/systemd/system ]]; then run_mode=systemd; else run_mode=direct; fi
fi

# Cloud Storage: the emulator as it is, or the real service with the
# instance service account's token.
auth=()
if [[ -n "$endpoint" ]]; then
  storage="$endpoint"
else
  storage="https://storage.googleapis.com"
  token_json="$(curl -sS --fail --max-time 10 -H 'Metadata-Flavor: Google' \
    "$metadata_base/instance/service-accounts/default/token")" ||
    die "no access token from the metadata server (does the instance have a service account?)"
  token="$(sed -n 's/.*"access_token" *: *"\([^"]*\)".*/\1/p' <<<"$token_json")"
  [[ -n "$token" ]] || die "the metadata server's token answer has no access_token"
  auth=(-H "Authorization: Bearer $token")
fi

# gcs_get gs://bucket/object FILE: 0 if fetched, 1 if there is no such object.
gcs_get() {
  local path="${1#gs://}" status
  local bucket="${path%%/*}" object="${path#*/}"
  status="$(curl -sS --max-time 600 --retry "$storage_retries" --retry-connrefused "${auth[@]}" -o "$2" \
    -w '%{http_code}' "$storage/storage/v1/b/$(urlencode "$bucket")/o/$(urlencode "$object")?alt=media")" ||
    die "Cloud Storage at $storage is unreachable (fetching $1)"
  case "$status" in
    200) return 0 ;;
    404) rm -f "$2"; return 1 ;;
    401 | 403) die "$1: HTTP $status: the instance's service account cannot read it" ;;
    *) die "$1: HTTP $status from $storage: $(head -c 200 "$2" 2>/dev/null)" ;;
  esac
}

# The global step the job dir's COMPLETED marker records, or nothing.
completed_step() {
  local marker
  marker="$(mktemp)"
  if gcs_get "$job_dir/COMPLETED" "$marker"; then
    sed -n 's/^global_step: *\([0-9]*\).*/\1/p' "$marker"
  fi
  rm -f "$marker"
}

# Resizes this VM's managed instance group to 0, so a finished job's group
# stops recreating VMs.
stop_group() {
  local group zone created_by
  group="$(md pstrain-group "")"
  if [[ -z "$group" ]]; then
    created_by="$(md created-by "")"
    group="${created_by##*/}"
  fi
  zone="$(curl -sS --max-time 10 -H 'Metadata-Flavor: Google' "$metadata_base/instance/zone" 2>/dev/null || true)"
  zone="${zone##*/}"
  if [[ -z "$group" ]]; then
    log "this VM is in no managed instance group; nothing to stop"
    return 0
  fi
  log "stopping managed instance group $group${zone:+ in $zone} (resize to 0)"
  if ! gcloud compute instance-groups managed resize "$group" --size=0 ${zone:+--zone="$zone"} --quiet; then
    log "could not resize $group to 0; delete the job with: pstrain-gce down"
  fi
}

# The job already reached train_steps: stop this VM's group instead of training.
done_step="$(completed_step)"
if [[ -n "$done_step" && "$done_step" -ge "$train_steps" ]]; then
  log "the job in $job_dir is COMPLETED at global step $done_step (train_steps $train_steps); not training again"
  stop_group
  exit 0
fi

tls_flags=""
# This task's credentials: the CA certificate, the job token and its own key
# pair, fetched anew at every boot into a directory only root reads.
if [[ -n "$credentials" ]]; then
  tls_dir="$root/etc/pstrain/tls"
  name="$role-$task_index"
  mkdir -p "$root/etc/pstrain"
  old_umask="$(umask)"
  umask 077
  mkdir -p "$tls_dir"
  chmod 700 "$tls_dir"
  for file in ca.crt job.token "$name.crt" "$name.key"; do
    gcs_get "$credentials/$file" "$tls_dir/$file" ||
      die "$credentials/$file does not exist: the job's credentials are missing from the bucket (run pstrain-gce up again, or pstrain-gce down)"
  done
  umask "$old_umask"
  tls_flags=" --tls_dir=$tls_dir --token_file=$tls_dir/job.token"
  log "fetched $name's certificate and key, the CA certificate and the job token from $credentials"
fi

# The package.
bin_dir="$root/usr/bin"
if [[ -n "$package" ]]; then
  mkdir -p "$root/var/cache/pstrain"
  deb="$root/var/cache/pstrain/pstrain.deb"
  gcs_get "$package" "$deb" || die "metadata pstrain-package names $package, which does not exist"
  if [[ -n "$root" ]]; then
    dpkg-deb -x "$deb" "$root" || die "cannot unpack $package"
  else
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$deb" >/dev/null ||
      die "cannot install $package (apt-get install)"
  fi
  log "installed $("$bin_dir/pstrain-$role" --version) from $package"
fi
[[ -x "$bin_dir/pstrain-$role" ]] || die "$bin_dir/pstrain-$role is missing: set metadata pstrain-package"

# The task's settings, then the task.
mkdir -p "$root/etc/pstrain" "$root/var/log"
printf '%s\n' "$cluster_config" >"$root/etc/pstrain/cluster.yaml"
flags="--config=$root/etc/pstrain/cluster.yaml --job_name=$role --task_index=$task_index --job_dir=$job_dir --train_steps=$train_steps"
flags+="$tls_flags"
if [[ -n "$data_dir" ]]; then flags+=" --data_dir=$data_dir"; fi
if [[ -n "$extra_flags" ]]; then flags+=" $extra_flags"; fi
env_file="$root/etc/pstrain/pstrain.env"
echo "PSTRAIN_FLAGS=\"$flags\"" >"$env_file"
if [[ -n "$endpoint" ]]; then echo "STORAGE_EMULATOR_HOST=$endpoint" >>"$env_file"; fi
if [[ -n "${GCE_METADATA_HOST:-}" ]]; then echo "GCE_METADATA_HOST=$GCE_METADATA_HOST" >>"$env_file"; fi
log "starting $role $task_index: pstrain-$role $flags"
stopping="$root/var/log/pstrain-$role.stopping"
rm -f "$stopping"

# Runs the task until it exits; sets `result` to its exit status.
run_task() {
  if [[ "$run_mode" == systemd ]]; then
    systemctl daemon-reload
    systemctl enable pstrain@"$role" >/dev/null 2>&1 || true
    systemctl restart pstrain@"$role" ||
      die "systemctl restart pstrain@$role failed (the unit's start limit reached?): see systemctl status pstrain@$role"
    # Waits while the task runs, also while systemd starts it again itself
    # (Restart=on-failure: "activating" for RestartSec) or stops it: only a
    # task that has ended is this loop's to start again.
    while [[ "$(systemctl show -p ActiveState --value pstrain@"$role")" =~ ^(active|activating|deactivating|reloading)$ ]]; do
      sleep 10
    done
    result="$(systemctl show -p ExecMainStatus --value pstrain@"$role")"
  else
    # shellcheck disable=SC2086  # the flags are words
    (
      if [[ -n "$endpoint" ]]; then export STORAGE_EMULATOR_HOST="$endpoint"; fi
      exec "$bin_dir/pstrain-$role" $flags >>"$root/var/log/pstrain-$role.log" 2>&1
    ) &
    local pid=$!
    echo "$pid" >"$root/var/log/pstrain-$role.pid"
    result=0
    wait "$pid" || result=$?
  fi
}

# Until the job is COMPLETED: a task that ends before (the job was stopped
# because another VM was preempted, or the task failed) is started again and
# the job resumes from its last checkpoint once every task is back. The
# restart budget: max_restarts failures in a row (a task that exits 0 resets
# it), then the VM stops trying and says so.
failures=0
while true; do
  run_task
  log "pstrain-$role exited with status $result"
  if [[ -e "$stopping" ]]; then
    exit "$result"  # this VM is stopping
  fi
  # At the job's end a worker or ps exits (0) a moment before the chief has
  # written COMPLETED (its final evaluation and checkpoint): wait for it a
  # while. A task that failed is started again at once.
  wait_until=$((SECONDS + (result == 0 ? 15 : 0)))
  while true; do
    done_step="$(completed_step)"
    if [[ -n "$done_step" && "$done_step" -ge "$train_steps" ]]; then
      log "the job is COMPLETED at global step $done_step"
      stop_group
      exit 0
    fi
    ((SECONDS < wait_until)) || break
    sleep 0.5
  done
  if ((result != 0)); then failures=$((failures + 1)); else failures=0; fi
  if ((failures > max_restarts)); then
    log "pstrain-$role failed $failures times in a row (pstrain-max-restarts = $max_restarts); not starting it again: see $root/var/log/pstrain-$role.log"
    exit 1
  fi
  log "pstrain-$role ended before the job completed; starting it again in 2 s (the job resumes from its last checkpoint)"
  sleep 2
done
