#!/usr/bin/env bash
# pstrain@.service and the GCE startup script's systemd mode under a real
# systemd: this machine's own OS booted in a container (systemd-nspawn
# --volatile=overlay over a bind mount of /: nothing to download, writes go to
# a tmpfs, the host is untouched; the container shares the host's network).
# Inside, tests/systemd/in_container.sh installs the real .deb, runs a small
# job (ps, chief and worker, each a pstrain@ unit, the worker started by
# startup.sh against our fake metadata server here), SIGKILLs the worker
# (Restart=on-failure must start it again) and stops it (SIGTERM: it must
# exit 0 at once), and the job must complete. This side serves metadata and
# Cloud Storage (pstrain-fake-cloud), boots the container with a bound time,
# then checks what the container wrote to /out and the job dir.
#
#   systemd_test.sh --deb build/package/pstrain_<v>_amd64.deb \
#     --fake_cloud build/bin/pstrain-fake-cloud --source .
#
# PSTRAIN_SYSTEMD_TEST_KEEP=1 keeps its temp dir (the container's /out,
# with the journal) after a pass too; a failure always keeps it.
#
# Exits 77 (ctest: Skipped), saying why, where it cannot run: not root, no
# systemd-nspawn (Debian: systemd-container), no systemd, or a container that
# does not boot. Everything it starts runs in a private mount namespace of
# its own (the bind mount of / goes with it) and is stopped by pid.
set -uo pipefail

deb="" fake_cloud="" source_dir=""
while (($#)); do
  case "$1" in
    --deb) deb="$2"; shift 2 ;;
    --fake_cloud) fake_cloud="$2"; shift 2 ;;
    --source) source_dir="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -f "$deb" && -x "$fake_cloud" && -d "$source_dir" ]] || {
  echo "usage: $0 --deb FILE.deb --fake_cloud pstrain-fake-cloud --source SOURCE_DIR" >&2
  exit 2
}
deb="$(realpath "$deb")" fake_cloud="$(realpath "$fake_cloud")" source_dir="$(realpath "$source_dir")"

dir="" remove_dir=""
skip() {
  echo "*** SKIPPED: the systemd test cannot run on this machine: $* ***" >&2
  remove_dir=1
  exit 77
}

# Whatever fails below, the container and the mount go: the boot runs under
# `timeout`, and the whole test in a mount namespace of its own.
if [[ -z "${PSTRAIN_SYSTEMD_TEST_UNSHARED:-}" ]]; then
  [[ "$(id -u)" == 0 ]] || skip "it needs root (systemd-nspawn), and runs as $(id -un)"
  command -v systemd-nspawn >/dev/null || skip "no systemd-nspawn (apt-get install systemd-container)"
  [[ -x /lib/systemd/systemd ]] || skip "no /lib/systemd/systemd to boot"
  command -v unshare >/dev/null || skip "no unshare (util-linux)"
  unshare --mount --propagation private true 2>/dev/null ||
    skip "cannot make a mount namespace (unshare --mount): $(unshare --mount true 2>&1)"
  PSTRAIN_SYSTEMD_TEST_UNSHARED=1 exec unshare --mount --propagation private -- \
    /bin/bash "$0" --deb "$deb" --fake_cloud "$fake_cloud" --source "$source_dir"
fi

start=$SECONDS
dir="$(mktemp -d /tmp/pstrain-systemd.XXXXXX)"
machine="pstrain-sd-$$"
root="$dir/root"
cloud_pid="" nspawn_pid=""
# A process and all its descendants, children first.
descendants() {
  local child
  for child in $(pgrep -P "$1"); do descendants "$child"; done
  echo "$1"
}
cleanup() {
  if [[ -n "$nspawn_pid" ]] && kill -0 "$nspawn_pid" 2>/dev/null; then
    # timeout passes SIGTERM on to systemd-nspawn, which SIGKILLs the
    # container's init (--kill-signal): everything in the container goes.
    kill -TERM "$nspawn_pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$nspawn_pid" 2>/dev/null; then
      echo "systemd-nspawn still runs: SIGKILL to it and the container" >&2
      # shellcheck disable=SC2046  # pids
      kill -KILL $(descendants "$nspawn_pid") 2>/dev/null
    fi
  fi
  if [[ -n "$cloud_pid" ]]; then kill -TERM "$cloud_pid" 2>/dev/null; wait "$cloud_pid" 2>/dev/null; fi
  if mountpoint -q "$root"; then umount "$root" || umount -l "$root"; fi
  # The temp dir goes after a pass or a skip, never while anything (the bind
  # mount of / above all) is mounted under it.
  if [[ -n "$remove_dir" ]]; then
    if grep -q " $dir/" /proc/self/mounts; then
      echo "not removing $dir: something is still mounted in it" >&2
    else
      rm -rf --one-file-system "$dir"
    fi
  fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

train_steps=1000 kill_at_step=15
mkdir -p "$dir/in/data" "$dir/out" "$root"

# The job's data: quadrant images (800 training, 200 test examples), as
# tests/test_cluster_util.cc writes them.
python3 - "$dir/in/data" <<'EOF' || { echo "cannot write the data" >&2; exit 1; }
import gzip, struct, sys
def write(dirname, prefix, n, seed):
    pixels, labels = bytearray(n * 784), bytearray(n)
    x, mask = seed, (1 << 64) - 1
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & mask
        q = (x >> 33) % 4
        labels[i] = q
        for r in range(14):
            for c in range(14):
                pixels[i * 784 + (r + (q // 2) * 14) * 28 + c + (q % 2) * 14] = \
                    128 + ((x >> ((r + c) % 32)) & 127)
    with open(f"{dirname}/{prefix}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + pixels)
    with gzip.open(f"{dirname}/{prefix}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + labels)
write(sys.argv[1], "train", 800, 1)
write(sys.argv[1], "t10k", 200, 2)
EOF

# Three free loopback ports for the tasks (the container shares this network).
read -r ps_port chief_port worker_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
cluster="cluster:\n  chief: [\"127.0.0.1:$chief_port\"]\n  worker: [\"127.0.0.1:$worker_port\"]\n"
cluster+="  ps: [\"127.0.0.1:$ps_port\"]\ntraining:\n  model: mnist_cnn\n  update: sync\n"
cluster+="  batch_size: 20\n  eval_steps: 0\n  checkpoint_steps: 0\n  exports_to_keep: 0\n  log_every_n_steps: 5\n"
cluster+="  sync_timeout: 30\n  threads: 1\n  insecure: true\n"

# The worker VM's metadata, then the fake metadata and Cloud Storage servers.
a=instance/attributes
cat >"$dir/metadata.txt" <<EOF
$a/pstrain-role=worker
$a/pstrain-task-index=0
$a/pstrain-cluster-config=$cluster
$a/pstrain-job-dir=gs://bkt/job
$a/pstrain-data-dir=/in/data
$a/pstrain-train-steps=$train_steps
$a/pstrain-storage-endpoint=@GCS@
instance/zone=projects/p/zones/us-central1-a
instance/name=$machine
EOF
"$fake_cloud" --host=127.0.0.1 --gcs_port=0 --buckets=bkt --metadata_port=0 \
  --metadata_file="$dir/metadata.txt.live" --port_file="$dir/ports" >"$dir/fake-cloud.log" 2>&1 &
cloud_pid=$!
for _ in $(seq 1 100); do [[ -s "$dir/ports" ]] && break; sleep 0.1; done
gcs_port="$(sed -n 's/^gcs //p' "$dir/ports")"
metadata_port="$(sed -n 's/^metadata //p' "$dir/ports")"
[[ -n "$gcs_port" && -n "$metadata_port" ]] || {
  echo "pstrain-fake-cloud did not start: $(cat "$dir/fake-cloud.log")" >&2
  exit 1
}
sed "s|@GCS@|http://127.0.0.1:$gcs_port|" "$dir/metadata.txt" >"$dir/metadata.txt.live"
cat >"$dir/in/params.env" <<EOF
GCE_METADATA_HOST=127.0.0.1:$metadata_port
STORAGE_EMULATOR_HOST=http://127.0.0.1:$gcs_port
TRAIN_STEPS=$train_steps
KILL_AT_STEP=$kill_at_step
EOF
# The server reads its file again when it changes: wait until it answers.
for _ in $(seq 1 50); do
  [[ "$(curl -s -H 'Metadata-Flavor: Google' \
    "http://127.0.0.1:$metadata_port/computeMetadata/v1/$a/pstrain-role")" == worker ]] && break
  sleep 0.1
done

# The boot: this machine's OS, its writes on a tmpfs, powered off by the test
# unit when in_container.sh ends (or by the unit's own timeout).
mount --bind / "$root" || skip "cannot bind-mount / at $root"
echo "booting $machine (systemd-nspawn, the log in $dir/nspawn.log)" >&2
timeout --kill-after=10 150 systemd-nspawn --quiet --register=no --keep-unit \
  --kill-signal=SIGKILL --volatile=overlay -D "$root" --machine="$machine" \
  --bind="$dir/out:/out" --bind-ro="$dir/in:/in" --bind-ro="$source_dir/tests/systemd:/test" \
  --bind-ro="$deb:/pkg/pstrain.deb" \
  --bind-ro="$source_dir/tests/systemd/pstrain-systemd-test.service:/etc/systemd/system/pstrain-systemd-test.service" \
  -b systemd.unit=multi-user.target systemd.wants=pstrain-systemd-test.service \
  >"$dir/nspawn.log" 2>&1 </dev/null &
nspawn_pid=$!
wait "$nspawn_pid"
nspawn_status=$?
nspawn_pid=""
umount "$root" || umount -l "$root"
echo "the container ran for $((SECONDS - start)) s (systemd-nspawn exit status $nspawn_status)" >&2

facts="$dir/out/facts"
if [[ ! -s "$facts" ]] || ! grep -q '^booted=1$' "$facts"; then
  skip "the container did not boot (systemd-nspawn exit status $nspawn_status), the test unit never ran: $(tail -n 15 "$dir/nspawn.log")"
fi

# The checks, on what the container recorded.
failures=0
get() { sed -n "s/^$1=//p" "$facts" | tail -n 1; }
check() {  # check DESCRIPTION CONDITION...
  local what="$1"
  shift
  if "$@"; then
    echo "ok: $what" >&2
  else
    echo "FAILED: $what" >&2
    failures=$((failures + 1))
  fi
}
is() { [[ "$(get "$1")" == "$2" ]]; }
at_least() { [[ "$(get "$1")" =~ ^[0-9]+$ && "$(get "$1")" -ge "$2" ]]; }
at_most() { [[ "$(get "$1")" =~ ^[0-9]+$ && "$(get "$1")" -le "$2" ]]; }
startup_log="$dir/out/startup.log"

echo "in the container: $(get systemd); $(get virtualization); $(get installed)" >&2
check "the test ran to its end in the container ($(get failed))" [ -z "$(get failed)" ]
check "the .deb installed with dpkg -i" [ -n "$(get installed)" ]
check "1. startup.sh (systemd mode) wrote pstrain.env and started pstrain@worker" \
  grep -q "starting worker 0: pstrain-worker --config=/etc/pstrain/cluster.yaml" "$startup_log"
check "1. pstrain.env has the worker's flags" is worker_env 1
check "1. pstrain@ps and pstrain@chief started" is ps_started active
check "2. after SIGKILL systemd started the worker again (NRestarts $(get nrestarts), pid $(get worker_pid_1) -> $(get worker_pid_2), in $(get restart_secs) s)" \
  at_least nrestarts 1
check "2. the restarted worker trained" is restarted_worker_trained 1
check "2. the startup script saw the worker's restart as systemd's, not as the task's end" \
  is startup_saw_an_end 0
check "3. systemctl stop took $(get stop_ms) ms (within the 25 s grace)" at_most stop_ms 24000
check "3. the worker exited 0 on SIGTERM (ExecMainCode $(get stop_exec_main_code) = exited, status $(get stop_exec_main_status), Result $(get stop_result))" \
  bash -c "[[ '$(get stop_exec_main_code)' == 1 && '$(get stop_exec_main_status)' == 0 && '$(get stop_result)' == success ]]"
check "3. the worker logged its termination: '$(get stop_message)'" \
  bash -c "[[ '$(get stop_message)' == *'got signal 15)' ]]"
check "4. the chief exited 0 at global step $(get chief_final_step)" is chief_exec_main_status 0
check "4. the ps exited 0" is ps_exec_main_status 0
check "4. the startup script ended with 0" is startup_exit 0
check "4. the startup script saw the job COMPLETED" \
  grep -q "the job is COMPLETED at global step $train_steps" "$startup_log"
completed="$(curl -s "http://127.0.0.1:$gcs_port/storage/v1/b/bkt/o/job%2FCOMPLETED?alt=media")"
check "4. gs://bkt/job/COMPLETED records global step $train_steps" \
  grep -q "^global_step: *$train_steps" <<<"$completed"
check "the journal was copied out" [ -s "$dir/out/journal.txt" ]

echo "--- in the container (in_container.log):" >&2
cat "$dir/out/in_container.log" >&2
echo "the test took $((SECONDS - start)) s" >&2
if ((failures > 0)); then
  echo "$failures check(s) failed. The container's files: $dir/out (journal.txt, facts," \
    "startup.log, in_container.log, show-*.txt); the boot: $dir/nspawn.log" >&2
  for f in facts startup.log; do
    echo "--- $f" >&2
    cat "$dir/out/$f" >&2
  done
  echo "--- journal.txt (pstrain units, the last 80 lines)" >&2
  grep -E 'pstrain|systemd\[1\]: pstrain' "$dir/out/journal.txt" | tail -n 80 >&2
  exit 1
fi
if [[ -n "${PSTRAIN_SYSTEMD_TEST_KEEP:-}" ]]; then
  echo "kept: $dir" >&2
else
  remove_dir=1
fi
exit 0
