#!/usr/bin/env bash
# pstrain's Compute Engine shutdown script (instance metadata
# "shutdown-script"): runs when the VM stops or is preempted (GCE gives about
# 30 s). Sends the task SIGTERM, its preemption notice: the chief saves a
# checkpoint and ends the job, a ps keeps serving until then, a worker leaves;
# each exits within shutdown_grace_secs (25 s). Then waits for it.
set -uo pipefail

log() { echo "pstrain-shutdown: $*" >&2; logger -t pstrain-shutdown -- "$*" 2>/dev/null || true; }
metadata_base="http://${GCE_METADATA_HOST:-metadata.google.internal}/computeMetadata/v1"
md() {
  curl -sS --fail --max-time 5 -H 'Metadata-Flavor: Google' "$metadata_base/instance/attributes/$1" 2>/dev/null || true
}

role="$(md pstrain-role)"
root="$(md pstrain-install-root)"
case "$role" in ps | chief | worker) ;; *) log "no pstrain task on this VM"; exit 0 ;; esac
# Tells the startup script the task ends because the VM stops, not because
# the job is complete.
mkdir -p "$root/var/log" && touch "$root/var/log/pstrain-$role.stopping"

if systemctl is-active --quiet pstrain@"$role" 2>/dev/null; then
  log "stopping pstrain@$role (SIGTERM)"
  systemctl kill --signal=SIGTERM pstrain@"$role"
  for _ in $(seq 1 28); do
    systemctl is-active --quiet pstrain@"$role" || break
    sleep 1
  done
  systemctl stop pstrain@"$role" 2>/dev/null || true
  exit 0
fi
pidfile="$root/var/log/pstrain-$role.pid"
if [[ -f "$pidfile" ]]; then
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping pstrain-$role (pid $pid, SIGTERM)"
    kill -TERM "$pid"
    for _ in $(seq 1 56); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
  fi
fi
exit 0
