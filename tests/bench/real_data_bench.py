#!/usr/bin/python3
"""Real data, side by side with scikit-learn (issue 53).

Two tables no one here generated, as Debian's python3-sklearn ships them
(sklearn/datasets/data/): the Wisconsin breast cancer biopsies (569 rows,
30 measurements, malignant or benign: a binary head, by test AUC) and the
diabetes progression study (442 patients, 10 baseline values, a disease
progression score one year on: a regression head, by test RMSE).

Each becomes what a user would have: a CSV file with a header, the columns
under their published names, split 80/20 by a fixed permutation, and a
csv_schema standardizing each column by the training rows' mean and standard
deviation. pstrain trains a linear model on it as the README shows
(pstrain-launch, 1 ps and 2 sync workers on loopback, --csv_schema,
--train_files, --eval_files) and its chief's final evaluation gives the
figure. The peer is scikit-learn on the same rows and the same standardized
features: LogisticRegression and LinearRegression (least squares, solved
exactly). Goal: pstrain's AUC at least 99% of the peer's, its RMSE at most
101% of the peer's.

    tests/bench/real_data_bench.py [--rounds N] [--bin build/bin] [--check]

Prints each run and the medians (rounds alternate the datasets; each round
draws a new split, the same for both sides). --check exits 1 when a median is
outside the goal (ctest RealDataTest runs one round with it). Exits 77 when
python3-sklearn is missing (deploy/install-deps.sh --tests installs it).
"""

import argparse
import gzip
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import sklearn.datasets
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.metrics import mean_squared_error, roc_auc_score
except ImportError as e:
    print(f"SKIP: scikit-learn is not installed ({e}); deploy/install-deps.sh --tests installs "
          "python3-sklearn", file=sys.stderr)
    sys.exit(77)

DATA = os.path.join(os.path.dirname(sklearn.datasets.__file__), "data")

# The columns' published names (sklearn's DESCR files; the CSV files
# themselves carry none).
_CANCER_MEASURES = ["radius", "texture", "perimeter", "area", "smoothness", "compactness",
                    "concavity", "concave points", "symmetry", "fractal dimension"]
CANCER_COLUMNS = ([f"mean {m}" for m in _CANCER_MEASURES] +
                  [f"{m} error" for m in _CANCER_MEASURES] +
                  [f"worst {m}" for m in _CANCER_MEASURES])
DIABETES_COLUMNS = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]


def load_cancer():
    """breast_cancer.csv: a line "569,30,malignant,benign", then 30 values
    and the target (0 malignant, 1 benign) per row."""
    path = os.path.join(DATA, "breast_cancer.csv")
    rows = np.loadtxt(path, delimiter=",", skiprows=1)
    if rows.shape != (569, 31):
        sys.exit(f"{path}: expected 569 rows of 31 values, found {rows.shape}")
    return rows[:, :30], rows[:, 30], path


def load_diabetes():
    """diabetes_data_raw.csv.gz: 10 space-separated values per patient;
    diabetes_target.csv.gz: the progression score, one per line."""
    x_path = os.path.join(DATA, "diabetes_data_raw.csv.gz")
    y_path = os.path.join(DATA, "diabetes_target.csv.gz")
    with gzip.open(x_path, "rt") as f:
        x = np.loadtxt(f)
    with gzip.open(y_path, "rt") as f:
        y = np.loadtxt(f)
    if x.shape != (442, 10) or y.shape != (442,):
        sys.exit(f"{x_path}, {y_path}: expected 442 rows of 10 values and 442 targets, "
                 f"found {x.shape} and {y.shape}")
    return x, y, x_path


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def write_csv(path, label, columns, x, y, integer_label):
    with open(path, "w") as f:
        f.write(",".join([label] + columns) + "\n")
        for features, target in zip(x, y):
            target_text = str(int(target)) if integer_label else repr(float(target))
            f.write(",".join([target_text] + [repr(float(v)) for v in features]) + "\n")


def write_schema(path, label, columns, mean, std):
    with open(path, "w") as f:
        f.write(f"csv:\n  label: {label}\n  numeric:\n")
        for name, m, s in zip(columns, mean, std):
            f.write(f"    - {{name: {name}, transform: standardize, mean: {m!r}, std: {s!r}}}\n")


# One case: the dataset, how pstrain trains it and how the peer does.
CASES = {
    "breast_cancer": {
        "load": load_cancer,
        "columns": CANCER_COLUMNS,
        "label": "malignant_or_benign",
        "head": "head: binary",
        "metric": "auc",
        "flags": ["--batch_size=32", "--learning_rate=0.05", "--num_epochs=60",
                  "--learning_rate_schedule=300:0.1"],
    },
    "diabetes": {
        "load": load_diabetes,
        "columns": DIABETES_COLUMNS,
        "label": "progression",
        "head": "head: regression\nloss: mse",
        "metric": "rmse",
        "flags": ["--batch_size=32", "--learning_rate=2", "--num_epochs=300",
                  "--learning_rate_schedule=1000:0.1,1600:0.01"],
    },
}


def peer(name, x_train, y_train, x_test, y_test):
    if CASES[name]["metric"] == "auc":
        model = LogisticRegression(max_iter=10000).fit(x_train, y_train)
        return roc_auc_score(y_test, model.predict_proba(x_test)[:, 1])
    model = LinearRegression().fit(x_train, y_train)
    return mean_squared_error(y_test, model.predict(x_test)) ** 0.5


def run_pstrain(name, work, bin_dir, x_train, y_train, x_test, y_test, mean, std):
    case = CASES[name]
    data = os.path.join(work, name)
    os.makedirs(data, exist_ok=True)
    integer = case["metric"] == "auc"
    write_csv(os.path.join(data, "train.csv"), case["label"], case["columns"], x_train, y_train,
              integer)
    write_csv(os.path.join(data, "test.csv"), case["label"], case["columns"], x_test, y_test,
              integer)
    write_schema(os.path.join(data, "schema.yaml"), case["label"], case["columns"], mean, std)
    with open(os.path.join(data, "model.yaml"), "w") as f:
        f.write(f"name: {name}\ninput: [{len(case['columns'])}]\n{case['head']}\n"
                "layers:\n  - dense: {units: 1}\n")
    ports = free_ports(4)
    with open(os.path.join(data, "cluster.yaml"), "w") as f:
        f.write(f'cluster:\n  chief: ["127.0.0.1:{ports[0]}"]\n'
                f'  worker: ["127.0.0.1:{ports[1]}", "127.0.0.1:{ports[2]}"]\n'
                f'  ps: ["127.0.0.1:{ports[3]}"]\n'
                "training:\n  update: sync\n  chief_trains: false\n  optimizer: adam\n  seed: 1\n")
    job = os.path.join(data, "job")
    shutil.rmtree(job, ignore_errors=True)
    command = [os.path.join(bin_dir, "pstrain-launch"), f"--config={data}/cluster.yaml",
               f"--model={data}/model.yaml", f"--csv_schema={data}/schema.yaml",
               f"--train_files={data}/train.csv", f"--eval_files={data}/test.csv",
               "--train_steps=0", "--eval_steps=0", "--checkpoint_steps=0",
               "--log_every_n_steps=1000", f"--job_dir={job}"] + case["flags"]
    start = time.monotonic()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=600)
    seconds = time.monotonic() - start
    log = result.stdout
    if result.returncode != 0:
        sys.exit(f"the {name} job failed ({result.returncode}):\n" + "\n".join(
            log.splitlines()[-30:]))
    evals = re.findall(r"Saving dict for global step (\d+): (.*)", log)
    if not evals:
        sys.exit(f"the {name} job printed no evaluation:\n" + "\n".join(log.splitlines()[-30:]))
    step, fields = evals[-1]
    value = re.search(rf"\b{case['metric']} = ([0-9.eE+-]+)", fields)
    if value is None:
        sys.exit(f"the {name} job's evaluation has no {case['metric']}: {fields}")
    return float(value.group(1)), int(step), seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if not os.access(os.path.join(args.bin, "pstrain-launch"), os.X_OK):
        sys.exit(f"build first: {args.bin}/pstrain-launch is missing")
    work = tempfile.mkdtemp(prefix="real-data-bench.")
    results = {name: [] for name in CASES}
    try:
        for round_index in range(args.rounds):
            for name in CASES:
                x, y, path = CASES[name]["load"]()
                if round_index == 0:
                    print(f"{name}: {x.shape[0]} rows of {x.shape[1]} columns from {path}")
                order = np.random.default_rng(round_index).permutation(len(y))
                test = order[: len(y) // 5]
                train = order[len(y) // 5:]
                mean = x[train].mean(axis=0)
                std = x[train].std(axis=0)
                standardized = (x - mean) / std
                peer_value = peer(name, standardized[train], y[train], standardized[test],
                                  y[test])
                value, step, seconds = run_pstrain(name, work, args.bin, x[train], y[train],
                                                   x[test], y[test], mean, std)
                metric = CASES[name]["metric"]
                print(f"round {round_index + 1} {name:14s} {metric} pstrain {value:.4f} "
                      f"(step {step}, {seconds:.0f} s)  scikit-learn {peer_value:.4f}  "
                      f"ratio {value / peer_value:.4f}", flush=True)
                results[name].append((value, peer_value))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nmedians over {args.rounds} round(s):")
    print(f"{'dataset':14s} {'metric':6s} {'pstrain':>8s} {'sklearn':>8s} {'ratio':>7s}  goal")
    failed = False
    for name, runs in results.items():
        metric = CASES[name]["metric"]
        ours = statistics.median(v for v, _ in runs)
        theirs = statistics.median(p for _, p in runs)
        ratio = statistics.median(v / p for v, p in runs)
        ok = ratio >= 0.99 if metric == "auc" else ratio <= 1.01
        failed |= not ok
        goal = ">= 0.99" if metric == "auc" else "<= 1.01"
        print(f"{name:14s} {metric:6s} {ours:8.4f} {theirs:8.4f} {ratio:7.4f}  {goal}"
              f"{'' if ok else '  MISSED'}")
    if args.check and failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
