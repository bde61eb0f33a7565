"""Jobs started from Python: pstrain-launch as a child process, followed."""

import collections
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref

__all__ = ["launch", "Job", "find_binary"]

# "[worker:0] I1128 14:03:28.123 12 trainer.cc:234] step = 100, loss = 0.5123, ..."
_STEP = re.compile(r"step = (\d+), loss = ([-+0-9.eE]+|nan|inf), examples/sec = ([0-9.eE+]+)"
                   r"(?:, global_step/sec = ([0-9.eE+]+))?")
_EVAL = re.compile(r"Saving dict for global step (\d+): (.*)$")
_TASK = re.compile(r"^\[([a-z_]+(?::\d+)?)\] ")


def find_binary(name):
    """The path of the pstrain program `name` ("pstrain-launch").

    Looked for in $PSTRAIN_BIN_DIR, then beside this module in a build tree
    (build/bin for build/python/pstrain), then on PATH.
    """
    candidates = []
    if os.environ.get("PSTRAIN_BIN_DIR"):
        candidates.append(os.path.join(os.environ["PSTRAIN_BIN_DIR"], name))
    here = os.path.dirname(os.path.abspath(__file__))
    candidates.append(os.path.join(here, "..", "..", "bin", name))
    for path in candidates:
        if os.access(path, os.X_OK):
            return os.path.normpath(path)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is neither in $PSTRAIN_BIN_DIR, nor in a build tree "
                                "beside this module, nor on PATH; install pstrain's .deb or "
                                "set PSTRAIN_BIN_DIR to the build's bin directory")
    return found


def _number(text):
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_progress(line):
    """The progress a log line reports, as a dict, or None.

    {"kind": "step", "task": "worker:0", "step": 100, "loss": 0.51,
     "examples_per_sec": 2000.0, "global_steps_per_sec": 10.2} for a
    training line; {"kind": "eval", "task": ..., "global_step": 600,
    "accuracy": 0.87, "loss": 0.36, ...} for an evaluation's "Saving dict
    for global step N: ..." (every metric it names).
    """
    task = _TASK.match(line)
    task = task.group(1) if task else None
    m = _EVAL.search(line)
    if m:
        out = {"kind": "eval", "task": task, "global_step": int(m.group(1))}
        for part in m.group(2).split(","):
            key, _, value = part.partition("=")
            key, value = key.strip(), value.strip()
            if key:
                # "loss = 0.54402 (0.4 s of training)": the number.
                try:
                    out[key] = _number(value.split()[0]) if value else value
                except ValueError:
                    out[key] = value
        return out
    m = _STEP.search(line)
    if m:
        out = {"kind": "step", "task": task, "step": int(m.group(1)),
               "loss": float(m.group(2)), "examples_per_sec": float(m.group(3))}
        if m.group(4):
            out["global_steps_per_sec"] = float(m.group(4))
        return out
    return None


def _flag(key, value):
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return f"--{key}={value}"


_MAX_LINES = 100000  # of output a Job keeps (the newest)


def _read_output(stream, lines, condition, state):
    """The reader thread: appends each line to `lines` (bounded) and counts it.

    It owns the stream and closes it at its end, also when no one waits for
    the job (its Job collected).
    """
    with stream:
        for line in stream:
            with condition:
                lines.append(line.rstrip("\n"))
                state["count"] += 1
                condition.notify_all()
    with condition:
        state["ended"] = True
        condition.notify_all()


def _terminate(process, cleanup):
    """Stops a job no one stopped (its Job collected, or the interpreter exiting)."""
    try:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()
    finally:
        if cleanup is not None:
            cleanup()


class Job:
    """A running pstrain job: pstrain-launch and the processes it started.

    Iterate over it for its progress as it trains (dicts from parse_progress,
    as the lines arrive; the iteration ends when the job does):

        job = pstrain.launch("cluster.yaml", job_dir="/tmp/run", train_steps=500)
        for p in job:
            if p["kind"] == "eval":
                print(p["global_step"], p["accuracy"])
        job.wait()

    `stop()` ends it as SIGTERM does (the chief saves a checkpoint); leaving
    a `with` block, the Job being collected, or the interpreter exiting stops
    a job still running: no process is left behind.
    """

    def __init__(self, args, job_dir=None, cleanup=None):
        """Starts `args` (pstrain-launch and its flags); launch() makes Jobs."""
        self.args = list(args)
        self.job_dir = job_dir
        # The newest lines of output (at most _MAX_LINES).
        self.lines = collections.deque(maxlen=_MAX_LINES)
        self._condition = threading.Condition()
        self._state = {"count": 0, "ended": False}
        try:
            self._process = subprocess.Popen(
                self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                errors="replace", bufsize=1, start_new_session=True)
        except BaseException:
            if cleanup is not None:
                cleanup()
            raise
        # Holds no reference to the Job, so a Job no one keeps is collected,
        # and its finalizer stops the job (also at interpreter exit).
        self._reader = threading.Thread(
            target=_read_output, args=(self._process.stdout, self.lines, self._condition,
                                       self._state), daemon=True)
        self._reader.start()
        self._finalizer = weakref.finalize(self, _terminate, self._process, cleanup)

    def __iter__(self):
        return self.progress()

    def progress(self, timeout=None):
        """Yields the job's progress dicts until it ends (or `timeout` seconds pass).

        Each iteration starts from the first line still kept.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        seen = 0  # lines counted so far
        while True:
            with self._condition:
                while self._state["count"] == seen and not self._state["ended"]:
                    wait = None if deadline is None else deadline - time.monotonic()
                    if wait is not None and wait <= 0:
                        return
                    self._condition.wait(wait)
                count = self._state["count"]
                kept = len(self.lines)
                fresh = list(itertools.islice(self.lines, kept - min(count - seen, kept), kept))
                ended = self._state["ended"]
            seen = count
            for line in fresh:
                p = parse_progress(line)
                if p is not None:
                    yield p
            if ended and seen == self._state["count"]:
                return

    @property
    def running(self):
        """True while pstrain-launch has not exited."""
        return self._process.poll() is None

    @property
    def returncode(self):
        """pstrain-launch's exit code (None while it runs): 0 when the job finished."""
        return self._process.poll()

    @property
    def output(self):
        """The output kept (the newest lines), as one string."""
        with self._condition:
            return "\n".join(self.lines)

    def wait(self, timeout=None):
        """Waits for the job to end; returns pstrain-launch's exit code.

        Raises subprocess.TimeoutExpired after `timeout` seconds (the job
        goes on: stop() it).
        """
        code = self._process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        self._finalizer()  # nothing left to stop; the temporary config goes
        return code

    def stop(self, timeout=60):
        """Stops the job as SIGTERM does and waits; returns the exit code.

        The chief saves a checkpoint (a later launch resumes from it). After
        `timeout` seconds every process of the job is killed.
        """
        if self._process.poll() is None:
            try:
                self._process.send_signal(signal.SIGTERM)
                self._process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self._process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self._process.wait()
        return self.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        state = "running" if self.running else f"exited {self.returncode}"
        return f"<pstrain.Job {self.job_dir or ''} {state}>"


def launch(config, **overrides):
    """Starts a job with pstrain-launch and returns its Job.

    Args:
      config: a cluster config file (YAML, local or gs://), or a dict of the
        same (written to a temporary file for the launch).
      **overrides: flags of pstrain-launch, as on its command line:
        job_dir="/tmp/run", train_steps=500, model="net.yaml",
        data_dir="data", log_every_n_steps=50, ... (True/False become
        true/false; lists become comma-separated).

    Returns:
      The Job, running. Its progress, wait() and stop() follow it.

    Raises:
      FileNotFoundError: no pstrain-launch (see find_binary), or a config
      file that does not exist.
    """
    cleanup = None
    if isinstance(config, dict):
        handle, path = tempfile.mkstemp(prefix="pstrain-config-", suffix=".yaml")

        def cleanup():
            if os.path.exists(path):
                os.remove(path)

        try:
            with os.fdopen(handle, "w") as f:
                json.dump(config, f, indent=1)  # JSON is YAML
        except BaseException:
            cleanup()
            raise
        config = path
    elif "://" not in str(config) and not os.path.exists(str(config)):
        raise FileNotFoundError(f"no cluster config {config}")
    args = [find_binary("pstrain-launch"), f"--config={config}"]
    args += [_flag(key, value) for key, value in overrides.items()]
    return Job(args, job_dir=overrides.get("job_dir"), cleanup=cleanup)
