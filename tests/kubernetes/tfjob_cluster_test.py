#!/usr/bin/env python3
"""deploy/kubernetes/tfjob.yaml's job as the training operator would run it,
on simulated pods.

Each pod of the TFJob (1 chief, 1 ps, 2 workers, as the manifest says) is a
network namespace on one bridge (tests/hosts/vmnet.sh) named by the
operator's Service name, <job>-<type>-<i>.<namespace>.svc, which every pod's
hosts file resolves, as the cluster's DNS does for the operator's headless
Services. A pod runs the manifest's command and args (entrypoint.sh and its
role) with exactly the TF_CONFIG the operator injects (genTFConfigJSONStr:
Go's compact JSON of cluster, task, environment "cloud"), the ConfigMap's
job.yaml where the entrypoint reads it, and the Secret pstrain-certs
--kubernetes wrote, decoded into files as the kubelet mounts it. Flags after
the manifest's args keep the job small (a tiny model on 800 synthetic
images, local dirs instead of the bucket and /etc/pstrain/tls). gRPC resolves
names with the system's resolver (GRPC_DNS_RESOLVER=native: the hosts file),
as its c-ares resolver spends 5 s on each dotted name that the namespaces'
refusing DNS server cannot answer, where a cluster's DNS answers at once.

Mid-training, worker 1's process is SIGKILLed: its pod must exit 137 (the
operator's ExitCode policy recreates such a pod), and it is started again with
the same TF_CONFIG; the job must still complete with every pod exiting 0 (the
chief's 0 ends the TFJob), and a chief pod recreated after that must not train
again.

Exit 0: passed; 1: failed; 77: cannot run here (said loudly; ctest Skipped).
"""

import argparse
import base64
import gzip
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

SKIP = 77
TRAIN_STEPS = 600
DEADLINE = 25  # seconds for the whole job, restart included

try:
    import yaml
except ImportError:
    print("\n*** SKIPPED: python3-yaml is not installed (deploy/install-deps.sh installs it) ***\n",
          file=sys.stderr)
    sys.exit(SKIP)

TINY_MODEL = """name: tiny
input: [28, 28, 1]
classes: 10
layers:
  - flatten
  - dense: {units: 16, activation: relu}
  - dense: {units: 10}
"""


def write_quadrant_data(data_dir, prefix, n, seed):
    """MNIST-format idx files whose label (0..3) is the bright quadrant."""
    x = seed
    pixels = bytearray(n * 784)
    labels = bytearray(n)
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        q = (x >> 33) % 4
        labels[i] = q
        for r in range(14):
            for c in range(14):
                pixels[i * 784 + (r + (q // 2) * 14) * 28 + c + (q % 2) * 14] = \
                    128 + ((x >> ((r + c) % 32)) & 127)
    with open(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(pixels))
    with gzip.open(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(labels))


def operator_tf_config(job, namespace, port, replicas, rtype, index):
    """What the training operator sets as TF_CONFIG (genTFConfigJSONStr)."""
    cluster = {rt.lower(): [f"{job}-{rt.lower()}-{i}.{namespace}.svc:{port}"
                            for i in range(n)] for rt, n in replicas.items()}
    config = {"cluster": dict(sorted(cluster.items())),
              "task": {"type": rtype.lower(), "index": index}, "environment": "cloud"}
    return json.dumps(config, separators=(",", ":"))


class Pods:
    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        self.vmnet = os.path.join(args.source, "tests/hosts/vmnet.sh")
        self.net = f"k8s{os.getpid() % 1000}"
        self.subnet = 220 + os.getpid() % 30
        self.created = False
        self.procs = {}  # pod -> (Popen, log path)
        self.starts = {}

    def run(self, *cmd, timeout=60):
        return subprocess.run(["/bin/bash", self.vmnet, *cmd], capture_output=True, text=True,
                              timeout=timeout)

    def create(self, hosts):
        self.run("destroy", self.net)
        r = self.run("create", self.net, str(self.subnet), *hosts)
        if r.returncode != 0:
            raise RuntimeError(f"vmnet create: {r.stdout}{r.stderr}")
        self.created = True

    def start(self, pod, host, env, command):
        n = self.starts.get(pod, 0)
        self.starts[pod] = n + 1
        log = os.path.join(self.tmp, f"{pod}-{n}.log")
        env_args = [f"{k}={v}" for k, v in env.items()]
        f = open(log, "w")
        p = subprocess.Popen(["/bin/bash", self.vmnet, "exec", self.net, host, "env", "-i",
                              *env_args, *command], stdout=f, stderr=subprocess.STDOUT,
                             start_new_session=True)
        f.close()
        self.procs[pod] = (p, log)
        return p, log

    def destroy(self):
        for p, _ in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if self.created:
            self.run("destroy", self.net)


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def wait_for(predicate, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def last_step(log):
    steps = [int(s) for s in re.findall(r"step = (\d+),", read(log))]
    return max(steps) if steps else -1


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except FileNotFoundError:
        return []


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--source", required=True)
    args = parser.parse_args()
    vmnet = os.path.join(args.source, "tests/hosts/vmnet.sh")
    check = subprocess.run(["/bin/bash", vmnet, "check"], capture_output=True, text=True)
    if check.returncode != 0:
        print(f"\n*** SKIPPED: network namespaces are impossible on this machine, so the "
              f"simulated pods cannot run: {check.stdout}{check.stderr} ***\n", file=sys.stderr)
        return SKIP

    docs = list(yaml.safe_load_all(open(os.path.join(args.source, "deploy/kubernetes/tfjob.yaml"))))
    tfjob = next(d for d in docs if d and d["kind"] == "TFJob")
    configmap = next(d for d in docs if d and d["kind"] == "ConfigMap")
    job = tfjob["metadata"]["name"]
    namespace = tfjob["metadata"].get("namespace", "default")
    specs = tfjob["spec"]["tfReplicaSpecs"]
    replicas = {rt: s["replicas"] for rt, s in specs.items()}
    secret_name = next(v["secret"]["secretName"] for v in
                       specs["Chief"]["template"]["spec"]["volumes"] if "secret" in v)

    tmp = tempfile.mkdtemp(prefix="pstrain_tfjob_test_")
    pods = Pods(args, tmp)
    failures = []

    def fail(message):
        failures.append(message)
        print(f"FAIL: {message}", file=sys.stderr)

    try:
        data = os.path.join(tmp, "data")
        os.makedirs(data)
        write_quadrant_data(data, "train", 800, 1)
        write_quadrant_data(data, "t10k", 200, 2)
        with open(os.path.join(tmp, "tiny.yaml"), "w") as f:
            f.write(TINY_MODEL)
        job_dir = os.path.join(tmp, "job")  # a shared volume's stand-in for gs://

        # The Secret, as pstrain-certs --kubernetes writes it.
        certs = os.path.join(tmp, "certs")
        workers, ps = replicas.get("Worker", 0), replicas["PS"]
        r = subprocess.run([os.path.join(args.bin, "pstrain-certs"), "--kubernetes",
                            "--workers", str(workers), "--ps", str(ps), "--out", certs,
                            "--secret_name", secret_name], capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            fail(f"pstrain-certs --kubernetes: {r.stderr}")
            return 1
        secret = yaml.safe_load(open(os.path.join(certs, "kubernetes-secret.yaml")))

        # Every pod: its host name, TF_CONFIG, mounts and command line.
        pod_env, hosts = {}, []
        for rtype, n in replicas.items():
            spec = specs[rtype]["template"]["spec"]
            container = next(c for c in spec["containers"] if c["name"] == "tensorflow")
            port = next(p["containerPort"] for p in container["ports"]
                        if p["name"] == "tfjob-port")
            for i in range(n):
                pod = f"{job}-{rtype.lower()}-{i}"
                hosts.append(f"{pod}.{namespace}.svc")
                root = os.path.join(tmp, pod)
                # The kubelet's mounts: the Secret's data as files, the ConfigMap's key.
                tls = os.path.join(root, "tls")
                os.makedirs(tls)
                for key, value in secret["data"].items():
                    path = os.path.join(tls, key)
                    with open(path, "wb") as f:
                        f.write(base64.b64decode(value))
                    os.chmod(path, 0o400)
                os.makedirs(os.path.join(root, "job"))
                with open(os.path.join(root, "job", "job.yaml"), "w") as f:
                    f.write(configmap["data"]["job.yaml"])
                entrypoint = container["command"][0]
                if entrypoint != "/usr/bin/pstrain-k8s-entrypoint":
                    fail(f"{rtype}'s command is {container['command']}")
                command = ["/bin/bash", os.path.join(args.source, "deploy/kubernetes/entrypoint.sh"),
                           *container["args"],
                           # Small, local and quick:
                           f"--model={tmp}/tiny.yaml", f"--data_dir={data}", f"--job_dir={job_dir}",
                           f"--tls_dir={tls}", f"--token_file={tls}/job.token",
                           f"--train_steps={TRAIN_STEPS}", "--batch_size=20", "--threads=1",
                           "--eval_steps=0", "--checkpoint_steps=100", "--log_every_n_steps=20",
                           "--save_summary_steps=0", "--histogram_steps=0", "--sync_timeout=2",
                           "--startup_timeout=30", "--shutdown_grace_secs=5"]
                env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                       "TF_CONFIG": operator_tf_config(job, namespace, port, replicas, rtype, i),
                       "PSTRAIN_BIN_DIR": args.bin, "GRPC_DNS_RESOLVER": "native",
                       "PSTRAIN_JOB_CONFIG": os.path.join(root, "job", "job.yaml")}
                for e in container.get("env", []):
                    env[e["name"]] = e["value"]
                pod_env[pod] = (f"{pod}.{namespace}.svc", env, command)
        pods.create(hosts)
        start = time.time()
        for pod, (host, env, command) in pod_env.items():
            pods.start(pod, host, env, command)

        # Worker 1 is killed mid-training and its pod recreated.
        victim = f"{job}-worker-1"
        p, log = pods.procs[victim]
        if not wait_for(lambda: last_step(log) >= 60, 20):
            fail(f"{victim} never reached step 60:\n{read(log)[-3000:]}")
            return 1
        workers_pids = children(p.pid)
        if len(workers_pids) != 1:
            fail(f"{victim}'s entrypoint runs {workers_pids}, not one task")
            return 1
        killed_at = last_step(log)
        os.kill(workers_pids[0], signal.SIGKILL)
        code = p.wait(timeout=10)
        if code != 137:
            fail(f"{victim}'s pod exited {code} after its task's SIGKILL, not 137 (which the "
                 "operator's ExitCode policy retries)")
        host, env, command = pod_env[victim]
        p2, log2 = pods.start(victim, host, env, command)  # the same TF_CONFIG
        print(f"{victim}: SIGKILLed at step {killed_at}, pod exited {code}, started again")

        for pod in pod_env:
            p, log = pods.procs[pod]
            left = max(1, DEADLINE - (time.time() - start))
            try:
                code = p.wait(timeout=left)
            except subprocess.TimeoutExpired:
                fail(f"{pod} still runs {DEADLINE} s after the job started:\n{read(log)[-3000:]}")
                continue
            if code != 0:
                fail(f"{pod} exited {code}:\n{read(log)[-3000:]}")
        took = time.time() - start
        chief_log = pods.procs[f"{job}-chief-0"][1]
        if f"Saving dict for global step {TRAIN_STEPS}" not in read(chief_log):
            fail(f"the chief did not finish at step {TRAIN_STEPS}:\n{read(chief_log)[-3000:]}")
        if not os.path.exists(os.path.join(job_dir, "COMPLETED")):
            fail("no COMPLETED marker in the job dir")
        if last_step(log2) <= killed_at:
            fail(f"the recreated {victim} did not train:\n{read(log2)[-3000:]}")
        first_tf_config = re.search(r"TF_CONFIG=(\S+)", read(pods.procs[victim][1]))
        if not first_tf_config or first_tf_config.group(1) != pod_env[victim][1]["TF_CONFIG"]:
            fail(f"the recreated {victim} did not run with the operator's TF_CONFIG")
        print(f"the job finished in {took:.1f} s; recreated {victim} trained from step "
              f"{killed_at} to {last_step(log2)}")

        # A chief pod recreated after the job is done does not train again.
        host, env, command = pod_env[f"{job}-chief-0"]
        p, log = pods.start(f"{job}-chief-0", host, env, command)
        code = p.wait(timeout=20)
        if code != 0 or "step = " in read(log):
            fail(f"a chief recreated after the job exited {code}:\n{read(log)[-3000:]}")
    finally:
        pods.destroy()
        if not failures:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"logs kept in {tmp}", file=sys.stderr)
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("the TFJob's pods trained with the operator's TF_CONFIG, survived a SIGKILLed worker "
          "and completed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
