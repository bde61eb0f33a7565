#!/usr/bin/env python3
"""Checks deploy/kubernetes/ without a cluster.

- tfjob.yaml's TFJob validates against the TFJob CRD's OpenAPI v3 schema
  (tests/kubernetes/kubeflow.org_tfjobs.yaml, from kubeflow/training-operator;
  see SOURCE.md), made strict as `kubectl apply` is (an unknown field is an
  error), and has what the operator and pstrain rely on: replica specs Chief,
  PS and Worker with restartPolicy ExitCode, the container named
  "tensorflow" (the only one given TF_CONFIG) with port tfjob-port,
  cleanPodPolicy Running, the entrypoint with the pod's role.
- statefulsets.yaml's Services and StatefulSets agree with each other and
  with what entrypoint.sh derives TF_CONFIG from (names, ordinals, counts,
  port, namespace); the entrypoint's TF_CONFIG for every pod is checked.
- In both, the ConfigMap's job.yaml turns into flags the binaries know, and
  the Secret that `pstrain-certs --kubernetes` writes is mounted where the
  job's tls_dir and token_file say, with every file a task reads.

Exit 0: passed; 1: failed; 77: cannot run here (said loudly; ctest Skipped).
"""

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77


def skip(why):
    print(f"\n*** SKIPPED: {why} ***\n", file=sys.stderr)
    sys.exit(SKIP)


try:
    import yaml
except ImportError:
    skip("python3-yaml is not installed (deploy/install-deps.sh installs it)")
try:
    import jsonschema
except ImportError:
    skip("python3-jsonschema is not installed (deploy/install-deps.sh installs it)")

ROLES = {"Chief": "chief", "PS": "ps", "Worker": "worker"}
ENTRYPOINT = "/usr/bin/pstrain-k8s-entrypoint"
JOB_CONFIG_DIR = "/etc/pstrain/job"  # entrypoint.sh's default PSTRAIN_JOB_CONFIG's dir

failures = []


def check(ok, message):
    if not ok:
        failures.append(message)
        print(f"FAIL: {message}", file=sys.stderr)
    return ok


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def strict(schema):
    """The schema with additionalProperties: false wherever properties are
    listed and unknown fields are not preserved: the API server prunes
    unknown fields, and kubectl's strict field validation refuses them."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if (node.get("type") == "object" and "properties" in node
                    and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def tfjob_validator(crd_path):
    crd = load_all(crd_path)[0]
    versions = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    check(crd["spec"]["group"] == "kubeflow.org" and crd["spec"]["names"]["kind"] == "TFJob",
          f"{crd_path} is not the TFJob CRD")
    schema = strict(versions[0]["schema"]["openAPIV3Schema"])
    return jsonschema.Draft4Validator(schema)


def errors_of(validator, doc):
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(doc)]


def training_section(configmap):
    check("job.yaml" in configmap.get("data", {}), "the ConfigMap has no job.yaml key")
    job = yaml.safe_load(configmap["data"]["job.yaml"])
    check(set(job) == {"training"}, f"job.yaml has {sorted(job)}; only a training section "
          "(the cluster comes from TF_CONFIG)")
    for key, value in job["training"].items():
        check(not isinstance(value, (dict, list)), f"training.{key} is not a scalar: the "
              "entrypoint turns each key into a flag")
    return job["training"]


def check_pod_spec(where, pod_spec, role, training, configmap_name, secret_name):
    containers = pod_spec["containers"]
    named = [c for c in containers if c["name"] == "tensorflow"]
    if not check(len(named) == 1, f"{where}: no container named tensorflow (the operator gives "
                 "TF_CONFIG to that one only)"):
        return
    c = named[0]
    check(c.get("command") == [ENTRYPOINT], f"{where}: command is {c.get('command')}, not "
          f"[{ENTRYPOINT}]")
    check(c.get("args", [None])[0] == role, f"{where}: args {c.get('args')} do not start with "
          f"the role {role}")
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    check(ports.get("tfjob-port") == 2222, f"{where}: no port tfjob-port 2222: {ports}")
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    # The job YAML where the entrypoint reads it.
    cm = volumes.get(mounts.get(JOB_CONFIG_DIR), {}).get("configMap", {})
    check(cm.get("name") == configmap_name, f"{where}: the ConfigMap {configmap_name} is not "
          f"mounted at {JOB_CONFIG_DIR}")
    # The Secret at tls_dir, the token in it.
    tls_dir = training.get("tls_dir")
    secret = volumes.get(mounts.get(tls_dir), {}).get("secret", {})
    check(secret.get("secretName") == secret_name, f"{where}: the Secret {secret_name} is not "
          f"mounted at training.tls_dir {tls_dir}")
    check(training.get("token_file") == f"{tls_dir}/job.token",
          f"{where}: token_file {training.get('token_file')} is not job.token in the Secret")
    check(not secret.get("items"), f"{where}: the Secret's items are restricted; every task "
          "reads ca.crt, its own pair and job.token")
    grace = pod_spec.get("terminationGracePeriodSeconds", 30)
    check(grace > float(training.get("shutdown_grace_secs", 25)),
          f"{where}: terminationGracePeriodSeconds {grace} leaves no time for the checkpoint "
          "on SIGTERM (shutdown_grace_secs)")


def check_tfjob(args, validator):
    docs = load_all(os.path.join(args.source, "deploy/kubernetes/tfjob.yaml"))
    by_kind = {d["kind"]: d for d in docs}
    check(sorted(by_kind) == ["ConfigMap", "TFJob"], f"tfjob.yaml holds {sorted(by_kind)}")
    tfjob, configmap = by_kind["TFJob"], by_kind["ConfigMap"]
    errors = errors_of(validator, tfjob)
    check(not errors, "the TFJob does not validate against the CRD's schema:\n  " +
          "\n  ".join(errors))
    check(tfjob["apiVersion"] == "kubeflow.org/v1", f"apiVersion {tfjob['apiVersion']}")
    spec = tfjob["spec"]
    check(spec["runPolicy"].get("cleanPodPolicy") == "Running",
          "runPolicy.cleanPodPolicy is not Running (a ps would outlive the job)")
    check(not spec.get("enableDynamicWorker"), "enableDynamicWorker gives a task part of the "
          "cluster only")
    replicas = spec["tfReplicaSpecs"]
    check(sorted(replicas) == sorted(ROLES), f"replica specs {sorted(replicas)}, not Chief, PS, "
          "Worker")
    check(replicas.get("Chief", {}).get("replicas") == 1, "not exactly one chief")
    training = training_section(configmap)
    secret_names = set()
    for rtype, role in ROLES.items():
        r = replicas.get(rtype)
        if not r:
            continue
        check(r.get("restartPolicy") == "ExitCode", f"{rtype}: restartPolicy "
              f"{r.get('restartPolicy')}, not ExitCode")
        pod_spec = r["template"]["spec"]
        for v in pod_spec.get("volumes", []):
            if "secret" in v:
                secret_names.add(v["secret"]["secretName"])
        check_pod_spec(f"TFJob {rtype}", pod_spec, role, training,
                       configmap["metadata"]["name"], f"{tfjob['metadata']['name']}-credentials")

    # The validator is not vacuous: it refuses what the API server would.
    bad = copy.deepcopy(tfjob)
    bad["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = "two"
    bad["spec"]["runPolicy"]["cleanPodPolcy"] = "Running"
    del bad["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["name"]
    errors = " ".join(errors_of(validator, bad))
    for part in ["'two' is not of type 'integer'", "'cleanPodPolcy' was unexpected",
                 "'name' is a required property"]:
        check(part in errors, f"the schema check misses a broken TFJob ({part}): {errors}")
    return training, configmap, secret_names


def dry_run(args, env, role, job_yaml):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "job.yaml")
        with open(path, "w") as f:
            f.write(job_yaml)
        full = {"PATH": os.environ["PATH"], "PSTRAIN_DRY_RUN": "1", "PSTRAIN_JOB_CONFIG": path,
                "PSTRAIN_BIN_DIR": args.bin, **env}
        r = subprocess.run(["/bin/bash", os.path.join(args.source, "deploy/kubernetes/entrypoint.sh"),
                            role], env=full, capture_output=True, text=True, timeout=30)
    return r


def check_statefulsets(args, tfjob_configmap, secret_names):
    docs = load_all(os.path.join(args.source, "deploy/kubernetes/statefulsets.yaml"))
    configmaps = [d for d in docs if d["kind"] == "ConfigMap"]
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    sets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "StatefulSet"}
    check(len(configmaps) == 1 and len(services) == 3 and len(sets) == 3,
          f"statefulsets.yaml: {len(configmaps)} ConfigMaps, {len(services)} Services, "
          f"{len(sets)} StatefulSets (want 1, 3, 3)")
    configmap = configmaps[0]
    check(configmap["data"] == tfjob_configmap["data"],
          "the two manifests' job.yaml differ")
    training = training_section(configmap)
    counts = {}
    envs = {}
    for role in ["chief", "ps", "worker"]:
        matches = [s for s in sets.values() if s["spec"]["template"]["spec"]["containers"][0]
                   .get("args", [""])[0] == role]
        if not check(len(matches) == 1, f"no one StatefulSet runs {role} tasks"):
            continue
        sts = matches[0]
        name = sts["metadata"]["name"]
        pod_spec = sts["spec"]["template"]["spec"]
        c = pod_spec["containers"][0]
        env = {e["name"]: e for e in c.get("env", [])}
        job = env.get("PSTRAIN_JOB", {}).get("value")
        check(name == f"{job}-{role}", f"StatefulSet {name} is not PSTRAIN_JOB-{role} "
              f"({job}-{role}): the entrypoint takes the task index from the pod name "
              "<job>-<role>-<ordinal>")
        check(env.get("POD_NAMESPACE", {}).get("valueFrom", {}).get("fieldRef", {})
              .get("fieldPath") == "metadata.namespace", f"{name}: POD_NAMESPACE is not the "
              "pod's namespace (downward API)")
        check(sts["spec"].get("podManagementPolicy") == "Parallel",
              f"{name}: podManagementPolicy is not Parallel")
        svc = services.get(sts["spec"]["serviceName"])
        if check(svc is not None, f"{name}: no Service {sts['spec']['serviceName']}"):
            check(sts["spec"]["serviceName"] == name, f"{name}: its Service is not named like "
                  "it (the entrypoint's addresses are <pod>.<statefulset>.<ns>.svc)")
            check(svc["spec"].get("clusterIP") == "None", f"Service {svc['metadata']['name']} "
                  "is not headless")
            check(svc["spec"].get("publishNotReadyAddresses") is True,
                  f"Service {svc['metadata']['name']}: a starting task's name must resolve")
            labels = sts["spec"]["template"]["metadata"]["labels"]
            check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
                  f"Service {svc['metadata']['name']} does not select {name}'s pods")
            check(sts["spec"]["selector"]["matchLabels"].items() <= labels.items(),
                  f"{name}: selector does not match its template")
            port = [p["port"] for p in svc["spec"]["ports"] if p.get("name") == "tfjob-port"]
            check(port == [int(env.get("PSTRAIN_PORT", {}).get("value", 0))],
                  f"Service {svc['metadata']['name']}: port {port} is not PSTRAIN_PORT")
        counts[role] = sts["spec"]["replicas"]
        envs[role] = {k: v["value"] for k, v in env.items() if "value" in v}
        for v in pod_spec.get("volumes", []):
            if "secret" in v:
                secret_names.add(v["secret"]["secretName"])
        check_pod_spec(f"StatefulSet {name}", pod_spec, role, training,
                       configmap["metadata"]["name"], f"{job}-credentials")
    check(counts.get("chief") == 1, "not exactly one chief")
    for role, env in envs.items():
        check(env.get("PSTRAIN_WORKERS") == str(counts.get("worker")) and
              env.get("PSTRAIN_PS") == str(counts.get("ps")),
              f"{role}: PSTRAIN_WORKERS/PSTRAIN_PS {env.get('PSTRAIN_WORKERS')}/"
              f"{env.get('PSTRAIN_PS')} are not the StatefulSets' replicas "
              f"{counts.get('worker')}/{counts.get('ps')}")

    # The entrypoint's TF_CONFIG for every pod, in namespace team-a.
    if set(envs) != {"chief", "ps", "worker"}:
        return
    job, port = envs["chief"]["PSTRAIN_JOB"], envs["chief"]["PSTRAIN_PORT"]
    cluster = {role: [f"{job}-{role}-{i}.{job}-{role}.team-a.svc:{port}"
                      for i in range(counts[role])] for role in ["chief", "ps", "worker"]}
    for role in ["chief", "ps", "worker"]:
        for i in range(counts[role]):
            env = dict(envs[role], POD_NAMESPACE="team-a", PSTRAIN_POD_NAME=f"{job}-{role}-{i}")
            r = dry_run(args, env, role, configmap["data"]["job.yaml"])
            if not check(r.returncode == 0, f"entrypoint {role} {i}: {r.stderr}"):
                continue
            lines = r.stdout.splitlines()
            tf_config = json.loads(lines[0][len("TF_CONFIG="):])
            check(tf_config == {"cluster": cluster, "task": {"type": role, "index": i},
                                "environment": "cloud"},
                  f"entrypoint {role} {i}: TF_CONFIG {tf_config}")
            check(lines[1] == f"{args.bin}/pstrain-{role}", f"entrypoint runs {lines[1]}")
            for key, value in training.items():
                v = str(value).lower() if isinstance(value, bool) else str(value)
                check(f"--{key}={v}" in lines[2:], f"entrypoint {role}: --{key}={v} is not in "
                      f"{lines[2:]}")
    # A pod of another StatefulSet, or a pod name without an ordinal, is refused.
    r = dry_run(args, dict(envs["worker"], PSTRAIN_POD_NAME=f"{job}-ps-0"), "worker",
                configmap["data"]["job.yaml"])
    check(r.returncode == 2 and "is not" in r.stderr, f"entrypoint took a ps pod for a worker: "
          f"{r.returncode} {r.stderr}")


def check_job_yaml_and_entrypoint(args, training):
    # Every training key of the job YAML is a flag of the binaries.
    r = subprocess.run([os.path.join(args.bin, "pstrain-chief"), "--helpfull"],
                       capture_output=True, text=True, timeout=30)
    for key in training:
        check(f"-{key} (" in r.stdout + r.stderr, f"training.{key} is not a pstrain-chief flag")
    # The entrypoint refuses what it cannot turn into flags, naming the line.
    for text, part in [("cluster:\n  chief: [\"a:1\"]\ntraining:\n  model: x\n", "cluster comes "
                        "from TF_CONFIG"),
                       ("training:\n  model:\n    layers: []\n", "training keys are flat"),
                       ("training:\n  model: |\n    x\n", "has no value on its line")]:
        r = dry_run(args, {"TF_CONFIG": '{"cluster":{},"task":{"type":"ps"}}'}, "ps", text)
        check(r.returncode == 2 and part in r.stderr, f"entrypoint took {text!r}: "
              f"{r.returncode} {r.stderr}")
    # Comments, quotes and booleans.
    r = dry_run(args, {"TF_CONFIG": "{}"}, "ps",
                "# job\ntraining:\n  model: \"a b.yaml\"  # quoted\n  insecure: true # c\n"
                "  learning_rate: 0.5\n\nother: 1\n")
    check(r.stdout.splitlines()[2:] == ["--model=a b.yaml", "--insecure=true",
                                        "--learning_rate=0.5"], f"entrypoint flags: {r.stdout}")


def check_certs(args, secret_names):
    check(len(secret_names) == 1, f"the manifests mount different Secrets: {secret_names}")
    name = sorted(secret_names)[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "certs")
        r = subprocess.run([os.path.join(args.bin, "pstrain-certs"), "--kubernetes", "--workers",
                            "2", "--ps", "1", "--out", out, "--secret_name", name],
                           capture_output=True, text=True, timeout=60)
        if not check(r.returncode == 0, f"pstrain-certs --kubernetes: {r.stderr}"):
            return
        path = os.path.join(out, "kubernetes-secret.yaml")
        check(os.stat(path).st_mode & 0o777 == 0o600, f"{path} is not 0600")
        secret = load_all(path)[0]
    check(secret["kind"] == "Secret" and secret["metadata"]["name"] == name,
          f"pstrain-certs wrote {secret['kind']} {secret['metadata']['name']}")
    want = {"ca.crt", "job.token"} | {f"{t}.{e}" for t in ["chief-0", "worker-0", "worker-1",
                                                           "ps-0"] for e in ["crt", "key"]}
    check(set(secret["data"]) == want, f"the Secret holds {sorted(secret['data'])}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True, help="where pstrain-chief and pstrain-certs are")
    parser.add_argument("--source", required=True, help="the repository's root")
    args = parser.parse_args()
    for tool in ["pstrain-chief", "pstrain-certs"]:
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            print(f"FAIL: {args.bin}/{tool} is not built", file=sys.stderr)
            return 1
    validator = tfjob_validator(os.path.join(args.source, "tests/kubernetes/kubeflow.org_tfjobs.yaml"))
    training, configmap, secret_names = check_tfjob(args, validator)
    check_statefulsets(args, configmap, secret_names)
    check_job_yaml_and_entrypoint(args, training)
    check_certs(args, secret_names)
    dockerfile = open(os.path.join(args.source, "deploy/kubernetes/Dockerfile")).read()
    check(f"COPY deploy/kubernetes/entrypoint.sh {ENTRYPOINT}" in dockerfile,
          f"the image does not install entrypoint.sh as {ENTRYPOINT}")
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("manifests: the TFJob validates against the CRD; StatefulSets, Services, ConfigMap, "
          "Secret and entrypoint agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
