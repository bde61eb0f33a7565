#!/usr/bin/env python3
"""Fault-injection runner: a pstrain job under pstrain-launch, disturbed.

Each trial launches the same small job (mnist_cnn on Fashion-MNIST, or with
--job wide_deep examples/models/wide_and_deep.yaml on synthetic click data; 2
ps, the chief training as replica 0 and one worker, sync updates or --update
async, a checkpoint every 20 steps) and, at a random moment of a phase, does one thing to one random
task:

  kill  SIGKILL (the launcher restarts the task; a restarted ps makes the chief
        roll the job back to its last checkpoint, unless --ps_replication is 2:
        then the other ps, which holds a copy of its chunks, serves them within
        failover_secs and nothing is rolled back)
  stop  SIGSTOP, then SIGCONT 1-8 s later (every step waits for it: within
        the job's sync_timeout of 10 s; a stopped ps holds everyone until it
        continues)

Phases: training (a random moment after step 20), save (while a checkpoint's
files are being written: the runner learns of a checkpoint's temp file through
inotify the moment it is created, the task's pid already in hand) and shutdown
(0-2 s after the last step: the replicas finishing, the chief's final
evaluation and checkpoint, COMPLETED, the ps told to stop, processes exiting;
a task that has already exited by then is replaced by one that has not).

A trial recovered when: the launcher exits 0; no process of the trial is left;
the job dir is marked COMPLETED at train_steps; every rollback went back to the
newest committed checkpoint (never behind it); the final accuracy is within
--max_accuracy_drop points of the undisturbed run's. With --ps_replication 2,
a ps that fails is failed over and rejoins (it copies what it holds from the
copies that serve it): a trial that disturbs a ps must have no rollback at
all, and its sync losses must equal the undisturbed run's at every logged
step. It prints a table per mode and phase: trials, recovered, steps lost
(rolled back), seconds lost (against the undisturbed run) and the replicas'
idle time (per trial, the longest a replica stood idle: its slowest step less
its median one). Exit status 0 iff every trial recovered.

  fault_runner.py --bin build/bin --trials 50                  # 50 per mode
  fault_runner.py --bin build/bin --plan kill:ps:1:training,stop:worker:0:save
  fault_runner.py --bin build/bin --ps_replication 2 \
      --plan kill:ps:1:training+kill:ps:0:rejoined,stop=5:ps:0:save+kill:ps:1:rejoined

A plan's trial may disturb several tasks in turn (joined by +): a fault of
phase "rejoined" comes once the chief logs that every chunk has its copies
again after the fault before it (a replicated job's failed ps rejoined).
"stop=S" stops the task for S seconds.
"""

import argparse
import ctypes
import os
import random
import re
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TASKS = ["ps:0", "ps:1", "chief:0", "worker:0"]
PHASES = ["training", "save", "shutdown"]

CONFIG = """cluster:
  chief: ["127.0.0.1:{p0}"]
  worker: ["127.0.0.1:{p1}"]
  ps: ["127.0.0.1:{p2}", "127.0.0.1:{p3}"]
training:
  model: {model}
  data_dir: {data_dir}
  job_dir: {job_dir}
  update: {update}
  chief_trains: true
  batch_size: {batch}
  train_steps: {steps}
  eval_steps: 0
  checkpoint_steps: 20
  log_every_n_steps: 20
  sync_timeout: 10
  watchdog_secs: 30
  startup_timeout: 60
  shutdown_grace_secs: 10
  exports_to_keep: 0
  histogram_steps: 0
  save_summary_steps: 20
  insecure: true
{replication}"""


def free_ports(n):
    """n loopback ports nobody listens on now."""
    ports, socks = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def processes_of(marker):
    """(pid, cmdline) of every process whose command line mentions `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open("/proc/%s/stat" % entry) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            found.append((int(entry), cmd))
    return found


def task_pid(trial_dir, task):
    job, index = task.split(":")
    for pid, cmd in processes_of(trial_dir):
        if "pstrain-" + job in cmd and "--job_name=%s " % job in cmd + " " and \
                "--task_index=%s " % index in cmd + " ":
            return pid
    return None


class Trial:
    def __init__(self, args, work, name, ports):
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir)
        self.job_dir = os.path.join(self.dir, "job")
        self.config = os.path.join(self.dir, "cluster.yaml")
        self.log_path = os.path.join(self.dir, "launch.log")
        with open(self.config, "w") as f:
            f.write(CONFIG.format(p0=ports[0], p1=ports[1], p2=ports[2], p3=ports[3],
                                  model=args.model, update=args.update, batch=args.batch_size,
                                  data_dir=args.data_dir, job_dir=self.job_dir,
                                  steps=args.train_steps,
                                  replication="" if args.ps_replication <= 1 else
                                  "  ps_replication: %d\n  failover_secs: %g\n" % (
                                      args.ps_replication, args.failover_secs)))
        self.args = args

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def start(self):
        self.log_file = open(self.log_path, "w")
        self.start_time = time.monotonic()
        self.launcher = subprocess.Popen(
            [os.path.join(self.args.bin, "pstrain-launch"), "--config=" + self.config],
            stdout=self.log_file, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_for(self, predicate, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            if self.launcher.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def finish(self, timeout):
        try:
            code = self.launcher.wait(timeout=timeout)
            hung = False
        except subprocess.TimeoutExpired:
            os.killpg(self.launcher.pid, signal.SIGKILL)
            code = self.launcher.wait()
            hung = True
        self.seconds = time.monotonic() - self.start_time
        self.log_file.close()
        return code, hung


CHECKPOINT_TEMP = re.compile(r"^\.?model\.ckpt-(\d+)\..*\.tmp\.")  # common/env.h AtomicTempPath


class CreatedFiles:
    """Names of files created in a directory, as they are created (inotify).

    A checkpoint's temp files live a few milliseconds on a fast disk: polling
    the directory misses most of them, inotify does not."""

    IN_CREATE = 0x100
    EVENT = 16  # struct inotify_event without its name: wd, mask, cookie, len

    def __init__(self, path):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if libc.inotify_add_watch(self.fd, os.fsencode(path), self.IN_CREATE) < 0:
            errno = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(errno, "inotify_add_watch " + path)
        self.pending = []

    def next(self, timeout):
        """The next name created, or None after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            data = os.read(self.fd, 65536)
            at = 0
            while at + self.EVENT <= len(data):
                length = int.from_bytes(data[at + 12:at + 16], "little")
                name = data[at + self.EVENT:at + self.EVENT + length].rstrip(b"\0")
                self.pending.append(os.fsdecode(name))
                at += self.EVENT + length
        return self.pending.pop(0)

    def close(self):
        os.close(self.fd)


def wait_for_save(trial, skip):
    """Waits until the (skip+1)-th checkpoint starts being written: True then,
    False if it did not come."""
    if not trial.wait_for(lambda: os.path.isdir(trial.job_dir), 60):
        return False
    created = CreatedFiles(trial.job_dir)
    try:
        steps_seen = set()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and trial.launcher.poll() is None:
            name = created.next(0.5)
            match = CHECKPOINT_TEMP.match(name or "")
            if match:
                steps_seen.add(match.group(1))
                if len(steps_seen) > skip:
                    return True
        return False
    finally:
        created.close()


def inject(trial, mode, task, phase, rng, train_secs):
    """Waits for the phase, then disturbs `task`. Returns what was done, or None."""
    log = trial.log
    if phase == "training":
        if not trial.wait_for(lambda: "step = 20," in log(), 120):
            return None
        steps = trial.args.train_steps
        time.sleep(rng.uniform(0, 0.8 * train_secs * (steps - 20) / steps))
    elif phase == "save":
        # Saves every 20 steps, the last one before the end; skip a random
        # number of them. The pid is looked up first: scanning /proc takes
        # longer than a save.
        skip = rng.randrange(0, max(1, trial.args.train_steps // 20 - 1))
        if not trial.wait_for(lambda: task_pid(trial.dir, task) is not None, 60):
            return None
        pid = task_pid(trial.dir, task)
        if not wait_for_save(trial, skip):
            return None
        return disturb(mode, task, pid, rng)
    else:
        # The last step is done: the replicas finish, the chief evaluates,
        # saves the final checkpoint, writes COMPLETED and stops the ps.
        last = "step = %d," % trial.args.train_steps
        if not trial.wait_for(lambda: last in log(), 180):
            return None
        time.sleep(rng.uniform(0, 2.0))
    pid = task_pid(trial.dir, task)
    if pid is None and phase == "shutdown":
        # That one has already exited: another that has not.
        alive = [t for t in TASKS if task_pid(trial.dir, t) is not None]
        if alive:
            task = rng.choice(alive)
            pid = task_pid(trial.dir, task)
    if pid is None:
        return None
    return disturb(mode, task, pid, rng)


def disturb(mode, task, pid, rng):
    """SIGKILLs or SIGSTOPs (then SIGCONTs) `pid`; returns what was done.
    "stop=S" stops it for S seconds, "stop" for 1-8 s."""
    try:
        os.kill(pid, signal.SIGKILL if mode == "kill" else signal.SIGSTOP)
    except ProcessLookupError:
        return None  # it exited just now
    if mode == "kill":
        return "SIGKILL %s (pid %d)" % (task, pid)
    pause = float(mode.split("=")[1]) if "=" in mode else rng.uniform(1, 8)
    time.sleep(pause)
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    return "SIGSTOP %s (pid %d) for %.1f s" % (task, pid, pause)


def losses(text):
    """{(task, step): loss} of the chief's and workers' progress lines."""
    found = {}
    for m in re.finditer(r"^\[(\w+:\d+)\].*\bstep = (\d+), loss = ([0-9.]+),", text, re.M):
        found[(m.group(1), int(m.group(2)))] = m.group(3)
    return found


def idle_secs(text):
    """The longest a replica (the chief or a worker) stood idle, in seconds:
    its slowest step less its median one, as each logs at its end ("steps
    took: median 12.1 ms, slowest 2104.3 ms"); None if none logged it."""
    idle = [(float(slowest) - float(median)) / 1000 for median, slowest in re.findall(
        r"steps took: median ([0-9.]+) ms, slowest ([0-9.]+) ms", text)]
    return max(idle) if idle else None


def analyse(trial, code, hung, baseline, baseline_losses=None, no_rollback=False,
            expect_failover=False):
    """(recovered, problems, steps_lost, accuracy)."""
    text = trial.log()
    problems = []
    if no_rollback:
        # A replicated job fails over: nothing is trained again.
        rollbacks = re.findall(r"rolling the job back from global step \d+|"
                               r"Restoring parameters from \S+: global step \d+", text)
        if rollbacks:
            problems.append("rolled back with ps_replication %d: %s" %
                            (trial.args.ps_replication, "; ".join(rollbacks)))
        failovers = len(re.findall(r"\(a failover; no rollback\)", text))
        if expect_failover and failovers == 0 and not hung:
            problems.append("no failover logged")
        if baseline_losses:
            mine = losses(text)
            differ = [(k, mine[k], v) for k, v in sorted(baseline_losses.items())
                      if k in mine and mine[k] != v]
            if differ:
                problems.append("sync losses differ from the undisturbed run's at %d logged "
                                "steps, first (replica, step) %s: %s vs %s" %
                                (len(differ), differ[0][0], differ[0][1], differ[0][2]))
    if hung:
        problems.append("the launcher did not exit in time (killed)")
    elif code != 0:
        problems.append("the launcher exited %d" % code)
    time.sleep(0.2)
    left = processes_of(trial.dir)
    if left:
        problems.append("processes left: %s" % ", ".join(str(p) for p, _ in left))
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    marker = os.path.join(trial.job_dir, "COMPLETED")
    if not os.path.exists(marker):
        problems.append("no COMPLETED marker")
    # Every rollback restores the newest checkpoint committed before it.
    # (A restarted chief that finds a ps without parameters restores the
    # newest checkpoint itself: "Restoring parameters from ...".)
    steps_lost = 0
    committed = 0
    highest = 0
    for line in text.splitlines():
        m = re.search(r"\bstep = (\d+),", line)
        if m:
            highest = max(highest, int(m.group(1)))
        m = re.search(r"Saving checkpoints for (\d+) into", line)
        if m:
            committed = max(committed, int(m.group(1)))
        m = re.search(r"rolled back from global step (\d+) to (\d+)", line)
        restored = re.search(r"Restoring parameters from \S+: global step (\d+)", line)
        if m:
            high, to = int(m.group(1)), int(m.group(2))
        elif restored:
            high, to = highest, int(restored.group(1))
        else:
            continue
        steps_lost += max(0, high - to)
        if to < committed:
            problems.append("went back to step %d, behind checkpoint %d" % (to, committed))
        committed = to
        highest = to
    evals = re.findall(r"Saving dict for global step (\d+): accuracy = ([0-9.]+)", text)
    accuracy = None
    if not evals:
        problems.append("no final evaluation")
    else:
        step, accuracy = int(evals[-1][0]), float(evals[-1][1])
        if step != trial.args.train_steps:
            problems.append("final step %d, not %d" % (step, trial.args.train_steps))
        if baseline is not None and abs(accuracy - baseline) * 100 > trial.args.max_accuracy_drop:
            problems.append("accuracy %.4f vs %.4f undisturbed" % (accuracy, baseline))
    return not problems, problems, steps_lost, accuracy


REJOINED = "copies again"  # the chief: "every chunk and row has its 2 copies again"


def inject_all(trial, faults, rng, train_secs):
    """Injects `faults` in turn; a fault of phase "rejoined" waits until the
    chief logs that every chunk has its copies again after the fault before
    it. Returns what was done ("a, then b"), or None if a phase never came."""
    done = []
    for mode, task, phase in faults:
        if phase == "rejoined":
            before = trial.log().count(REJOINED)
            # The fault before it was failed over and rejoined.
            if not trial.wait_for(lambda: trial.log().count(REJOINED) > before or
                                  (before == 0 and REJOINED in trial.log()), 120):
                return None
            time.sleep(rng.uniform(0, 1.0))
            pid = task_pid(trial.dir, task)
            what = disturb(mode, task, pid, rng) if pid is not None else None
        else:
            what = inject(trial, mode, task, phase, rng, train_secs)
        if what is None:
            return None
        done.append(what)
    return ", then ".join(done)


def run_trial(args, work, name, ports, faults, rng, baseline, train_secs):
    # A trial whose fault was not injected (the runner missed a save's short
    # window, or the task had exited) tests nothing: it is run again, up to
    # three times, and fails after that.
    for attempt in range(3):
        trial = Trial(args, work, name if attempt == 0 else "%s-again%d" % (name, attempt), ports)
        trial.start()
        done = None
        if faults:
            done = inject_all(trial, faults, rng, train_secs)
        code, hung = trial.finish(args.trial_timeout)
        # A killed or stopped ps of a replicated job is failed over (a
        # stop shorter than failover_secs needs none, and a shutdown's
        # kill may come after the chief stopped watching).
        replicated_ps = (args.ps_replication > 1 and done is not None and
                         any(task.startswith("ps") and phase != "shutdown"
                             for _, task, phase in faults))
        paused = [float(p) for p in re.findall(r"for ([0-9.]+) s", done or "")]
        expect_failover = replicated_ps and (
            any(mode == "kill" and task.startswith("ps") for mode, task, _ in faults) or
            any(p > args.failover_secs + 1 for p in paused))
        ok, problems, lost, accuracy = analyse(
            trial, code, hung, baseline,
            baseline_losses=(args.baseline_losses
                             if replicated_ps and args.update == "sync" else None),
            no_rollback=replicated_ps, expect_failover=expect_failover)
        if not faults or done is not None:
            return trial, ok, problems, lost, accuracy, done
        print("%-34s nothing injected (the phase did not come); running it again" % name,
              flush=True)
        if ok and not args.keep:
            shutil.rmtree(trial.dir, ignore_errors=True)
    problems.append("the phase never came in 3 attempts (nothing injected)")
    return trial, False, problems, lost, accuracy, done


def parse_plan(text):
    """Trials, each a list of faults: mode:task:phase, several joined by +."""
    plan = []
    for item in text.split(","):
        faults = []
        for part in item.split("+"):
            try:
                mode, job, index, phase = part.split(":")
            except ValueError:
                sys.exit("bad --plan item %r: mode:task:phase, e.g. kill:ps:1:training" % part)
            if (not re.fullmatch(r"kill|stop(=[0-9.]+)?", mode) or
                    "%s:%s" % (job, index) not in TASKS or
                    phase not in PHASES + ["rejoined"] or (phase == "rejoined") != bool(faults)):
                sys.exit("bad --plan item %r: mode:task:phase, e.g. kill:ps:1:training "
                         "(after a +, phase rejoined: once the fault before was failed over "
                         "and its ps rejoined)" % part)
            faults.append((mode, "%s:%s" % (job, index), phase))
        plan.append(faults)
    return plan


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True, help="directory of the pstrain binaries")
    parser.add_argument("--trials", type=int, default=50, help="trials per mode")
    parser.add_argument("--modes", default="kill,stop")
    parser.add_argument("--tasks", default=",".join(TASKS),
                        help="the tasks a random trial picks from (e.g. ps:0,ps:1)")
    parser.add_argument("--plan", default="", help="explicit trials instead: mode:task:phase,...")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--train_steps", type=int, default=120)
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--max_accuracy_drop", type=float, default=1.0, help="points")
    parser.add_argument("--trial_timeout", type=float, default=300)
    parser.add_argument("--keep", action="store_true", help="keep every trial's dir")
    parser.add_argument("--job", choices=["mnist_cnn", "wide_deep"], default="mnist_cnn",
                        help="mnist_cnn on Fashion-MNIST, or examples/models/wide_and_deep.yaml "
                        "on synthetic click data pstrain-data makes (embedding tables on the ps)")
    parser.add_argument("--update", choices=["sync", "async"], default="sync")
    parser.add_argument("--ps_replication", type=int, default=1,
                        help="copies of every chunk (2: a ps that fails is failed over)")
    parser.add_argument("--failover_secs", type=float, default=2)
    args = parser.parse_args()
    args.bin = os.path.abspath(args.bin)
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="pstrain_faults_")
    args.model, args.batch_size = "mnist_cnn", 64
    if args.job == "wide_deep":
        here = os.path.dirname(os.path.abspath(__file__))
        args.model = os.path.join(here, "..", "..", "examples", "models", "wide_and_deep.yaml")
        args.batch_size = 128
        args.data_dir = os.path.join(work, "ctr")
        os.makedirs(args.data_dir)
        subprocess.run([os.path.join(args.bin, "pstrain-data"), "synthetic-ctr",
                        "--out", os.path.join(args.data_dir, "train.tsv"), "--examples", "40000",
                        "--test_out", os.path.join(args.data_dir, "test.tsv"),
                        "--test_examples", "5000"], check=True, stdout=subprocess.DEVNULL)
    ports = free_ports(4)
    print("work dir %s, ports %s, seed %d" % (work, ports, args.seed), flush=True)

    args.baseline_losses = None
    trial, ok, problems, _, baseline, _ = run_trial(args, work, "baseline", ports, [], rng,
                                                    None, 0)
    if not ok:
        print("the undisturbed run failed: %s\n%s" % ("; ".join(problems), trial.log()[-3000:]))
        return 1
    base_secs = trial.seconds
    args.baseline_losses = losses(trial.log())
    m = re.findall(r"\((\d+\.\d+) s of training\)", trial.log())
    train_secs = float(m[-1]) if m else base_secs / 2
    base_idle = idle_secs(trial.log())
    print("undisturbed: accuracy %.4f, %.1f s (%.1f s of training), longest idle %s" % (
        baseline, base_secs, train_secs, "%.1f s" % base_idle if base_idle is not None else "-"),
        flush=True)
    if not args.keep:
        shutil.rmtree(trial.dir, ignore_errors=True)

    tasks = args.tasks.split(",")
    if any(t not in TASKS for t in tasks):
        sys.exit("--tasks: each of %s" % ", ".join(TASKS))
    if args.plan:
        plan = parse_plan(args.plan)
    else:
        plan = []
        for mode in args.modes.split(","):
            for i in range(args.trials):
                plan.append([(mode, rng.choice(tasks), PHASES[i % len(PHASES)])])
    results = {}
    failures = 0
    for n, faults in enumerate(plan):
        mode, task, phase = faults[0]
        name = "%03d-%s-%s-%s" % (n, mode.replace("=", ""), task.replace(":", ""), phase)
        if len(faults) > 1:
            name += "".join("+%s-%s" % (m.replace("=", ""), t.replace(":", ""))
                            for m, t, _ in faults[1:])
        trial, ok, problems, lost, accuracy, done = run_trial(
            args, work, name, ports, faults, rng, baseline, train_secs)
        mode = mode.split("=")[0]
        row = results.setdefault((mode, phase), {"trials": 0, "ok": 0, "steps": 0, "secs": [],
                                                 "idle": []})
        row["trials"] += 1
        row["ok"] += ok
        row["steps"] += lost
        row["secs"].append(trial.seconds - base_secs)
        idle = idle_secs(trial.log())
        if idle is not None and done:
            row["idle"].append(idle)
        print("%-34s %-44s %s  %5.1f s  idle %s  acc %s  lost %d steps%s" % (
            name, done or "-", "recovered" if ok else "FAILED", trial.seconds,
            "%.1f s" % idle if idle is not None else "-",
            "%.4f" % accuracy if accuracy is not None else "-", lost,
            "" if ok else "\n    " + "\n    ".join(problems) + "\n    log: " + trial.log_path),
            flush=True)
        if ok and not args.keep:
            shutil.rmtree(trial.dir, ignore_errors=True)
        failures += not ok

    # idle: per trial, the longest a replica stood idle (its slowest step less
    # its median; the chief and the workers each log theirs).
    print("\n%-5s %-9s %7s %10s %11s %22s %18s" % ("mode", "phase", "trials", "recovered",
                                                   "steps lost", "seconds lost (med/max)",
                                                   "idle s (med/max)"))

    def idle_cell(values):
        if not values:
            return "%18s" % "-"
        return "%10.1f / %5.1f" % (statistics.median(values), max(values))
    for mode in sorted({m for m, _ in results}):
        total = {"trials": 0, "ok": 0, "steps": 0, "secs": [], "idle": []}
        for phase in PHASES:
            row = results.get((mode, phase))
            if not row:
                continue
            for k in ("trials", "ok", "steps"):
                total[k] += row[k]
            total["secs"] += row["secs"]
            total["idle"] += row["idle"]
            print("%-5s %-9s %7d %10d %11d %14.1f / %5.1f %s" % (
                mode, phase, row["trials"], row["ok"], row["steps"],
                statistics.median(row["secs"]), max(row["secs"]), idle_cell(row["idle"])))
        print("%-5s %-9s %7d %10d %11d %14.1f / %5.1f %s" % (
            mode, "all", total["trials"], total["ok"], total["steps"],
            statistics.median(total["secs"]), max(total["secs"]), idle_cell(total["idle"])))
    if failures == 0 and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print("\n%d of %d trials recovered" % (len(plan) - failures, len(plan)))
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
