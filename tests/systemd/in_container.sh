#!/usr/bin/env bash
# Inside the container systemd_test.sh boots (a real systemd as PID 1), run
# by pstrain-systemd-test.service. One VM of a job, under systemd:
#   - the .deb (bound read-only at /pkg) installed with dpkg -i;
#   - the worker's task started by the installed startup script
#     (/usr/share/pstrain/gce/startup.sh, run mode detected: systemd) from the
#     fake metadata server on the host, which writes /etc/pstrain/pstrain.env
#     and cluster.yaml and runs `systemctl restart pstrain@worker`;
#   - the ps and the chief as pstrain@ps and pstrain@chief on the same
#     machine: one VM runs one role, so their flags are written here as the
#     startup script writes them, to /etc/pstrain/<role>.env, named by a
#     per-instance drop-in (EnvironmentFile= reset) instead of pstrain.env;
#   - the worker's main process SIGKILLed: systemd starts it again
#     (Restart=on-failure) and it trains again;
#   - `systemctl stop pstrain@worker`: SIGTERM, the worker leaves and exits 0;
#   - the job completes (the chief trains too) and the startup script ends.
# It records what it saw as key=value lines in /out/facts; the host checks
# them. The journal and the units' properties are copied to /out at the end.
set -uo pipefail

out=/out
exec >>"$out/in_container.log" 2>&1

fact() { echo "$1=$2" >>"$out/facts"; }
note() { echo "$(date -u +%T.%3N) $*"; }
fail() {
  note "FAILED: $*"
  fact failed "$*"
  exit 1
}
prop() { systemctl show -p "$2" --value "pstrain@$1"; }
# wait_for SECONDS COMMAND...: polls COMMAND every 0.2 s.
wait_for() {
  local until=$((SECONDS + $1))
  shift
  while ! "$@"; do
    ((SECONDS < until)) || return 1
    sleep 0.2
  done
}
# The global step in the last "step = N," line a task logged, or 0.
last_step() {
  journalctl -q -u "pstrain@$1" -o cat --no-pager | sed -n 's/.*step = \([0-9]*\),.*/\1/p' |
    tail -n 1 | grep . || echo 0
}
logged_by_pid() { journalctl -q "_PID=$1" -o cat --no-pager | grep -q -- "$2"; }

collect() {
  note "collecting the journal and the units' properties"
  journalctl -b --no-pager -o short-precise >"$out/journal.txt" 2>&1
  for role in ps chief worker; do systemctl show "pstrain@$role" >"$out/show-$role.txt" 2>&1; done
  cp -r /etc/pstrain "$out/etc-pstrain" 2>/dev/null || true
  fact collected 1
}
trap collect EXIT

fact booted 1
fact systemd "$(systemctl --version | head -n 1)"
fact virtualization "$(systemd-detect-virt)"
note "booted: $(systemctl is-system-running)"

# The package, as a VM image would have it (startup.sh installs it from the
# bucket with apt-get when pstrain-package is set; here it is already there).
dpkg -i /pkg/pstrain.deb >"$out/dpkg.log" 2>&1 || fail "dpkg -i /pkg/pstrain.deb failed: $(tail -n 5 "$out/dpkg.log")"
fact installed "$(pstrain-worker --version 2>&1 | head -n 1)"
[[ -f /lib/systemd/system/pstrain@.service ]] || fail "the package has no /lib/systemd/system/pstrain@.service"

# 1. The worker, by the startup script in systemd mode.
note "running the startup script"
bash /usr/share/pstrain/gce/startup.sh >"$out/startup.log" 2>&1 &
startup=$!
wait_for 30 systemctl is-active --quiet pstrain@worker ||
  fail "the startup script did not start pstrain@worker within 30 s: $(tail -n 5 "$out/startup.log")"
fact worker_env "$(grep -c '^PSTRAIN_FLAGS=' /etc/pstrain/pstrain.env)"
fact worker_pid_1 "$(prop worker MainPID)"

# The ps and the chief, each a pstrain@ unit too.
for role in ps chief; do
  flags="--config=/etc/pstrain/cluster.yaml --job_name=$role --task_index=0 --job_dir=gs://bkt/job --train_steps=$TRAIN_STEPS --data_dir=/in/data"
  printf 'PSTRAIN_FLAGS="%s"\nSTORAGE_EMULATOR_HOST=%s\n' "$flags" "$STORAGE_EMULATOR_HOST" \
    >"/etc/pstrain/$role.env"
  mkdir -p "/etc/systemd/system/pstrain@$role.service.d"
  printf '[Service]\nEnvironmentFile=\nEnvironmentFile=/etc/pstrain/%s.env\n' "$role" \
    >"/etc/systemd/system/pstrain@$role.service.d/env.conf"
done
systemctl daemon-reload
systemctl start pstrain@ps pstrain@chief || fail "systemctl start pstrain@ps pstrain@chief failed"
fact ps_started "$(prop ps ActiveState)"
fact chief_started "$(prop chief ActiveState)"

# 2. Restart=on-failure: the worker's main process SIGKILLed mid-training,
# 7 s into one of the startup script's 10 s sleeps between looks at the
# unit, so its next look falls in systemd's RestartSec (5 s): it must see the
# task as still running, not as ended (and start it a second time).
worker_stepped() { [[ "$(last_step worker)" -ge "$KILL_AT_STEP" ]]; }
wait_for 60 worker_stepped || fail "the worker did not reach global step $KILL_AT_STEP within 60 s"
script_sleep() { pgrep -P "$startup" -x sleep; }
wait_for 15 eval 'script_sleep >/dev/null' || fail "the startup script does not sleep between looks at pstrain@worker"
slept_from="$(ps -o etimes= -p "$(script_sleep)" | tr -d ' ')"
((slept_from < 7)) && sleep $((7 - slept_from))
pid1="$(prop worker MainPID)"
restarts0="$(prop worker NRestarts)"
fact kill_at_step "$(last_step worker)"
note "SIGKILL to the worker's main process $pid1 at step $(last_step worker)"
killed_at=$SECONDS
systemctl kill --signal=SIGKILL --kill-who=main pstrain@worker
restarted() {
  local pid
  pid="$(prop worker MainPID)"
  [[ "$(prop worker NRestarts)" -gt "$restarts0" && "$(prop worker ActiveState)" == active &&
    "$pid" != 0 && "$pid" != "$pid1" ]]
}
wait_for 30 restarted ||
  fail "systemd did not start pstrain@worker again within 30 s of the SIGKILL (NRestarts $(prop worker NRestarts), MainPID $(prop worker MainPID), $(prop worker ActiveState)); the startup script: $(tail -n 2 "$out/startup.log")"
pid2="$(prop worker MainPID)"
fact restart_secs "$((SECONDS - killed_at))"
note "systemd started the worker again"
fact nrestarts "$(prop worker NRestarts)"
fact worker_pid_2 "$pid2"
# The new worker trains: it logs a step of its own.
wait_for 60 logged_by_pid "$pid2" "step = " ||
  fail "the restarted worker (pid $pid2) did not train within 60 s"
fact restarted_worker_trained 1
note "the restarted worker (pid $pid2) trains"

# 3. SIGTERM on stop: the worker leaves the job and exits 0 at once.
note "systemctl stop pstrain@worker"
stop_started="$(date +%s%3N)"
systemctl stop pstrain@worker
fact stop_ms "$(($(date +%s%3N) - stop_started))"
fact stop_exec_main_code "$(prop worker ExecMainCode)"
fact stop_exec_main_status "$(prop worker ExecMainStatus)"
fact stop_result "$(prop worker Result)"
fact startup_saw_an_end "$(grep -c 'exited with status' "$out/startup.log")"
fact stop_message "$(journalctl -q "_PID=$pid2" -o cat --no-pager | grep -o 'worker 0 stopping at global step [0-9]* (worker 0 got signal [0-9]*)' | tail -n 1)"

# 4. The job completes; the startup script sees COMPLETED and ends.
note "waiting for the chief to finish the job"
chief_done() { [[ "$(prop chief ActiveState)" != active && "$(prop chief ActiveState)" != activating ]]; }
wait_for 90 chief_done || fail "pstrain@chief still runs 90 s after the worker stopped"
fact chief_exec_main_status "$(prop chief ExecMainStatus)"
fact chief_final_step "$(last_step chief)"
ps_done() { [[ "$(prop ps ActiveState)" != active ]]; }
wait_for 30 ps_done || fail "pstrain@ps still runs 30 s after the chief ended"
fact ps_exec_main_status "$(prop ps ExecMainStatus)"
note "the chief and the ps ended; waiting for the startup script"
startup_ended() { ! kill -0 "$startup" 2>/dev/null; }
wait_for 40 startup_ended || fail "the startup script still runs 40 s after the chief ended"
wait "$startup"
fact startup_exit "$?"
fact worker_final_state "$(prop worker ActiveState)"
note "done"
