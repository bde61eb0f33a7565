"""The Python module end to end, with Debian's /usr/bin/python3 (ctest Python.*).

Writes a small click dataset from NumPy, checks a spec, launches a 1 ps x 2
workers job and follows its progress, reads its checkpoint and events, and
predicts in process with the export: the predictions equal pstrain-predict's.
Then the errors (Python exceptions with pstrain's messages) and a bounded
fuzz of the module's inputs: no input crashes the interpreter.

Needs PYTHONPATH=<build>/python and PSTRAIN_BIN_DIR=<build>/bin (ctest sets
both).
"""

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import pstrain

BIN = os.environ.get("PSTRAIN_BIN_DIR", "")
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SPEC = """\
name: clicks
input: [4]
head: binary
layers:
  - embedding: {feature: user, dim: 4, buckets: 50, name: user_emb}
  - embedding: {feature: tags, dim: 4, buckets: 50, combiner: mean, name: tags_emb}
  - concat: {input: input, inputs: [user_emb, tags_emb]}
  - dense: {units: 16, activation: relu}
  - dense: {units: 1, name: deep}
  - linear: {features: [user, tags], buckets: 50, name: wide}
  - add: {input: deep, inputs: [wide]}
"""


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def click_columns(n, seed):
    """Clicks planted on the dense features, the user and the tags."""
    rng = np.random.default_rng(seed)
    dense = rng.normal(size=(n, 4)).astype(np.float32)
    user = rng.integers(0, 50, size=n)
    tags = [rng.integers(0, 20, size=rng.integers(0, 4)).tolist() for _ in range(n)]
    user_effect = np.linspace(-1.5, 1.5, 50)
    tag_effect = np.linspace(1.0, -1.0, 20)
    logit = dense[:, 0] - 0.5 * dense[:, 1] + user_effect[user]
    logit += np.array([tag_effect[t].mean() if t else 0.0 for t in tags])
    label = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return {"label": label, "dense": dense, "user": user.reshape(n, 1), "tags": tags}


def pstrain_predict(export_dir, instances, scratch):
    """pstrain-predict's predictions for instance dicts."""
    path = os.path.join(scratch, "instances.json")
    with open(path, "w") as f:
        for instance in instances:
            f.write(json.dumps(instance) + "\n")
    run = subprocess.run([os.path.join(BIN, "pstrain-predict"), f"--model_dir={export_dir}",
                          f"--json_instances={path}", "--format=json"],
                         capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        raise AssertionError(run.stderr[-3000:])
    return json.loads(run.stdout[run.stdout.rfind('{"predictions"'):])["predictions"]


class PstrainModuleTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="pstrain_python_test_")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_a_job_from_python(self):
        data = os.path.join(self.dir, "data")
        os.makedirs(data)
        train = click_columns(4000, 1)
        test = click_columns(1000, 2)
        written = pstrain.data.write_examples(os.path.join(data, "train.tfrecords"), train)
        self.assertEqual(written, [os.path.join(data, "train.tfrecords")])
        pstrain.data.write_examples(os.path.join(data, "test.tfrecords"), test)

        # The examples read back as written.
        back = list(pstrain.data.read_examples(os.path.join(data, "test.tfrecords"),
                                               batch_size=300))
        self.assertEqual(len(back), 1000)
        for i in (0, 1, 299, 300, 999):
            self.assertEqual(back[i]["label"].tolist(), [test["label"][i]])
            np.testing.assert_array_equal(back[i]["dense"], test["dense"][i])
            self.assertEqual(back[i]["user"].tolist(), test["user"][i].tolist())
            self.assertEqual(back[i].get("tags", np.zeros(0)).tolist(), test["tags"][i])
        self.assertIn("1000 tf.train.Example records", pstrain.data.describe(os.path.join(data, "test.tfrecords")))

        # The spec, checked as a job builds it.
        spec_path = os.path.join(self.dir, "clicks.yaml")
        with open(spec_path, "w") as f:
            f.write(SPEC)
        spec = pstrain.ModelSpec.from_yaml(spec_path)
        layers = {l["name"]: l for l in spec.check()}
        self.assertEqual(layers["user_emb"]["output_shape"], (4,))
        self.assertEqual(layers["concatenate"]["output_shape"], (12,))
        self.assertEqual(layers["dense"]["params"], 12 * 16 + 16)
        self.assertEqual(layers["user_emb"]["tables"][0]["buckets"], 50)
        self.assertIn("Total params", spec.summary_text())
        # The command line prints the same table.
        described = subprocess.run([os.path.join(BIN, "pstrain-model"), "describe", spec_path],
                                   capture_output=True, text=True, timeout=60)
        self.assertEqual(described.returncode, 0, described.stderr)
        self.assertEqual(described.stdout, spec.summary_text())
        self.assertIn("name: \"clicks\"", spec.to_yaml())

        # A 1 ps x 2 workers job, followed as it trains.
        chief, w0, w1, ps = free_ports(4)
        job_dir = os.path.join(self.dir, "job")
        config = {
            "cluster": {"chief": [f"127.0.0.1:{chief}"],
                        "worker": [f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"],
                        "ps": [f"127.0.0.1:{ps}"]},
            "training": {"model": spec_path, "data_dir": data, "update": "async",
                         "chief_trains": False, "optimizer": "adam", "learning_rate": 0.01,
                         "batch_size": 64, "seed": 1},
        }
        progress = []
        with pstrain.launch(config, job_dir=job_dir, train_steps=300, log_every_n_steps=20,
                            eval_steps=0) as job:
            for p in job.progress(timeout=600):
                progress.append(p)
            self.assertEqual(job.wait(timeout=60), 0, job.output[-5000:])
        steps = [p for p in progress if p["kind"] == "step"]
        evals = [p for p in progress if p["kind"] == "eval"]
        self.assertTrue(steps, job.output[-3000:])
        # Each worker logs its steps (how many each makes is up to async).
        self.assertGreaterEqual(len(steps), 3)
        self.assertLessEqual({p["task"] for p in steps}, {"worker:0", "worker:1"})
        self.assertTrue(all(np.isfinite(p["loss"]) for p in steps))
        self.assertTrue(evals, job.output[-3000:])
        final = evals[-1]
        self.assertEqual(final["global_step"], 300)
        self.assertGreater(final["auc"], 0.7)  # the planted AUC is about 0.8
        print(f"\njob: {len(steps)} progress lines, final evaluation {final}")

        # A job stopped while it trains: SIGTERM, a checkpoint, exit 0, no
        # process left.
        stopped_dir = os.path.join(self.dir, "stopped")
        chief, w0, w1, ps = free_ports(4)
        config["cluster"] = {"chief": [f"127.0.0.1:{chief}"],
                             "worker": [f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"],
                             "ps": [f"127.0.0.1:{ps}"]}
        long_job = pstrain.launch(config, job_dir=stopped_dir, train_steps=1000000,
                                  log_every_n_steps=20, eval_steps=0)
        first = next(iter(long_job.progress(timeout=300)), None)
        self.assertIsNotNone(first, long_job.output[-3000:])
        self.assertEqual(long_job.stop(timeout=120), 0, long_job.output[-3000:])
        self.assertFalse(long_job.running)
        self.assertGreater(pstrain.Checkpoint(stopped_dir).step, 0)
        leftover = subprocess.run(["pgrep", "-f", stopped_dir], capture_output=True, text=True)
        self.assertEqual(leftover.stdout.strip(), "", "processes of the stopped job live on")

        # Its checkpoint, every checksum verified.
        ckpt = pstrain.Checkpoint(job_dir)
        self.assertEqual(ckpt.step, 300)
        self.assertEqual(ckpt.model_name, "clicks")
        variables = ckpt.variables()
        self.assertEqual(variables["dense/kernel"].shape, (12, 16))
        self.assertEqual(sum(v.size for v in variables.values()),
                         sum(l["params"] for l in layers.values()))
        tables = ckpt.tables()
        ids, rows = tables["user_emb/embeddings"]
        self.assertGreater(len(ids), 40)
        self.assertEqual(rows.shape, (len(ids), 4))
        self.assertTrue(((ids >= 0) & (ids < 50)).all())
        self.assertIn("name: \"clicks\"", ckpt.spec.to_yaml())
        # A damaged shard is refused, naming it.
        damaged = os.path.join(self.dir, "damaged")
        shutil.copytree(job_dir, damaged)
        shard = "model.ckpt-300.shard-0-of-1"
        with open(os.path.join(damaged, shard), "r+b") as f:
            f.seek(40)
            byte = f.read(1)
            f.seek(40)
            f.write(bytes([byte[0] ^ 0xFF]))
        with self.assertRaises(OSError) as raised:
            pstrain.Checkpoint(damaged).variables()
        self.assertIn(shard, str(raised.exception))

        # Its events.
        events = pstrain.read_events(job_dir)
        self.assertTrue(any(tag.endswith("loss") for tag in events), list(events))
        tag = next(t for t in events if t.startswith("eval") and t.endswith("auc"))
        steps_logged, values, _ = events[tag]
        self.assertEqual(int(steps_logged[-1]), 300)
        self.assertAlmostEqual(float(values[-1]), final["auc"], places=3)

        # Predictions in process equal pstrain-predict's.
        model = pstrain.Predictor(os.path.join(job_dir, "export"))
        self.assertTrue(model.is_click_model)
        self.assertEqual(model.features, ["user", "tags"])
        instances = [{"dense": test["dense"][i].tolist(), "user": int(test["user"][i][0]),
                      "tags": test["tags"][i]} for i in range(200)]
        ours = model.predict(instances)
        columns = model.predict({"dense": test["dense"][:200], "user": test["user"][:200, 0],
                                 "tags": test["tags"][:200]})
        theirs = pstrain_predict(os.path.join(job_dir, "export"), instances, self.dir)
        self.assertEqual(ours["probabilities"].shape, (200, 2))
        self.assertEqual(ours["classes"].tolist(), [p["classes"] for p in theirs])
        np.testing.assert_allclose(ours["probabilities"],
                                   [p["probabilities"] for p in theirs], rtol=0, atol=1e-6)
        np.testing.assert_allclose(ours["logistic"], [p["logistic"][0] if isinstance(
            p["logistic"], list) else p["logistic"] for p in theirs], rtol=0, atol=1e-6)
        np.testing.assert_array_equal(columns["probabilities"], ours["probabilities"])
        print(f"Predictor vs pstrain-predict on 200 instances: max |difference| "
              f"{np.abs(ours['probabilities'] - np.array([p['probabilities'] for p in theirs])).max():.3g}")

        # Bad instances: pstrain-serve's messages, as ValueError.
        with self.assertRaises(ValueError) as raised:
            model.predict([{"dense": [0, 0, 0, 0], "usr": 3}])
        self.assertIn("usr", str(raised.exception))
        with self.assertRaises(ValueError):
            model.predict(np.zeros((2, 4), dtype=np.float32))
        # Fuzzed instances: answered or refused, never a crash.
        rng = random.Random(7)
        values = [None, 1, -1, 2**70, 1.5, float("nan"), "x", b"y", [], [1, "a"], [[1]], {},
                  {"dense": 1}, list(range(100)), [0.5] * 4, True]
        for _ in range(300):
            instance = {rng.choice(["dense", "user", "tags", "other"]): rng.choice(values)
                        for _ in range(rng.randint(0, 4))}
            try:
                model.predict([instance])
            except ValueError:
                pass

    def test_an_image_model_predicts_as_pstrain_predict(self):
        made = subprocess.run([os.path.join(BIN, "make_test_export"),
                               os.path.join(self.dir, "mnist_export"), "7", "mnist_cnn"],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(made.returncode, 0, made.stderr)
        version = made.stdout.strip()
        model = pstrain.Predictor(version)
        self.assertFalse(model.is_click_model)
        self.assertEqual(model.input_shape, (28, 28, 1))
        rng = np.random.default_rng(3)
        pixels = rng.integers(0, 256, size=(20, 28, 28, 1), dtype=np.uint8)
        ours = model.predict(pixels)
        theirs = pstrain_predict(version, [(pixels[i] / 255.0).tolist() for i in range(20)],
                                 self.dir)
        self.assertEqual(ours["classes"].tolist(), [p["classes"] for p in theirs])
        np.testing.assert_allclose(ours["probabilities"], [p["probabilities"] for p in theirs],
                                   rtol=0, atol=1e-6)
        self.assertNotIn("logistic", ours)
        # Flat images too; a wrong size is a ValueError saying what fits.
        flat = model.predict(pixels.reshape(20, -1).astype(np.float32) / 255.0)
        np.testing.assert_array_equal(flat["probabilities"], ours["probabilities"])
        with self.assertRaises(ValueError) as raised:
            model.predict(np.zeros((3, 27, 28, 1), dtype=np.float32))
        self.assertIn("784 values each", str(raised.exception))
        # Integers other than uint8 are not scaled silently.
        with self.assertRaises(ValueError):
            model.predict(pixels.astype(np.int64))

    def test_errors_are_python_exceptions(self):
        with self.assertRaises(ValueError) as raised:
            pstrain.ModelSpec("input: [3]\nclasses: 2\nlayers:\n  - dense: {unitz: 3}\n",
                              "net.yaml")
        self.assertIn("net.yaml", str(raised.exception))
        self.assertIn("did you mean units", str(raised.exception))
        with self.assertRaises(ValueError) as raised:
            pstrain.ModelSpec.from_dict({"input": [28, 28, 1], "classes": 10,
                                         "layers": [{"dense": {"units": 10}}]}).check()
        self.assertIn("add a Flatten layer", str(raised.exception))
        with self.assertRaises(FileNotFoundError):
            pstrain.Checkpoint(os.path.join(self.dir, "no_such_job"))
        with self.assertRaises(FileNotFoundError):
            pstrain.Predictor(os.path.join(self.dir, "no_such_export"))
        with self.assertRaises(FileNotFoundError):
            list(pstrain.data.read_examples(os.path.join(self.dir, "none-*")))
        with self.assertRaises(FileNotFoundError):
            pstrain.read_events(self.dir + "/no_events")
        with self.assertRaises(ValueError) as raised:
            pstrain.data.write_examples(os.path.join(self.dir, "x.tfrecords"),
                                        {"a": np.arange(3), "b": np.arange(4)})
        self.assertIn("column b has 4 examples, but column a has 3", str(raised.exception))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x.tfrecords")))
        with self.assertRaises(ValueError):
            pstrain.data.write_examples(os.path.join(self.dir, "y.tfrecords"), {"a": [[1, "x"]]})
        path = os.path.join(self.dir, "cut.tfrecords")
        pstrain.data.write_examples(path, {"a": np.arange(10)})
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 3)
        with self.assertRaises(OSError) as raised:
            list(pstrain.data.read_examples(path))
        self.assertIn("cut.tfrecords", str(raised.exception))

    def test_a_job_no_one_keeps_is_stopped(self):
        import gc
        import warnings
        job = pstrain.Job([sys.executable, "-c", "import time; time.sleep(120)"])
        pid = job._process.pid
        reader = job._reader
        self.assertTrue(job.running)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            del job
            gc.collect()
            self.assertFalse(os.path.exists(f"/proc/{pid}"), "the collected job's process lives")
            reader.join(timeout=10)
            self.assertFalse(reader.is_alive(), "the reader of the job's output did not end")
            del reader
            gc.collect()
        # Nothing left open either: the reader closed the job's output pipe.
        self.assertEqual([str(w.message) for w in caught if w.category is ResourceWarning], [])
        # A dict config is a temporary file, removed when the job ends.
        with self.assertRaises(FileNotFoundError):
            pstrain.launch(os.path.join(self.dir, "no_such_config.yaml"))

    def test_pieces_and_names(self):
        path = os.path.join(self.dir, "sparse.tfrecords")
        pstrain.data.write_examples(path, {"user": [[], [], [1], [np.int64(2)]],
                                           "flag": [True, np.bool_(False), None, [1]]})
        back = list(pstrain.data.read_examples(path, batch_size=2))
        self.assertEqual(len(back), 4)
        self.assertEqual(back[3]["user"].tolist(), [2])
        self.assertEqual(back[1]["flag"].tolist(), [0])
        with self.assertRaises(ValueError) as raised:
            pstrain.data.write_examples(os.path.join(self.dir, "plain.tfrecords"),
                                        {"a": np.arange(3)}, gzip=True)
        self.assertIn(".gz", str(raised.exception))
        spec = pstrain.ModelSpec.from_yaml(SPEC)
        for bad in ([-3], [2**62], [1, 2]):
            with self.assertRaises(ValueError):
                spec.check(bad)
        self.assertEqual(spec.check([6])[2]["output_shape"], (14,))

    def test_sharded_gzip_examples(self):
        prefix = os.path.join(self.dir, "shards", "part")
        os.makedirs(os.path.dirname(prefix))
        images = np.arange(5 * 4 * 4, dtype=np.uint8).reshape(5, 4, 4, 1)
        files = pstrain.data.write_examples(prefix, {"image_raw": images,
                                                     "label": np.arange(5),
                                                     "word": ["a", "b", None, ["c", "d"], []]},
                                            shards=2, gzip=True)
        self.assertEqual([os.path.basename(f) for f in files],
                         ["part-00000-of-00002.tfrecord.gz", "part-00001-of-00002.tfrecord.gz"])
        back = list(pstrain.data.read_examples(prefix + "-*"))
        self.assertEqual([int(e["label"][0]) for e in back], [0, 2, 4, 1, 3])
        self.assertEqual(back[0]["image_raw"], [images[0].tobytes()])
        self.assertEqual(back[4]["word"], [b"c", b"d"])
        self.assertNotIn("word", back[1])

    def test_every_public_function_has_a_docstring(self):
        import inspect
        missing = []
        for module in (pstrain, pstrain.data):
            for name in module.__all__:
                obj = getattr(module, name)
                if not inspect.getdoc(obj):
                    missing.append(f"{module.__name__}.{name}")
                if inspect.isclass(obj):
                    for member, value in vars(obj).items():
                        if member.startswith("_") and member != "__init__":
                            continue
                        # __doc__ itself: getdoc would find object.__init__'s.
                        doc = getattr(value, "__doc__", None)
                        if isinstance(value, classmethod):
                            doc = value.__func__.__doc__
                        if (inspect.isfunction(value) or isinstance(value, (property,
                                                                            classmethod))) \
                                and not (doc or "").strip():
                            missing.append(f"{module.__name__}.{name}.{member}")
        self.assertEqual(missing, [])
        self.assertIn("read_examples", pstrain.data.__doc__ + "".join(pstrain.data.__all__))

    def test_fuzzed_inputs_never_crash_the_interpreter(self):
        rng = random.Random(5)
        spec_text = SPEC
        model_dir = os.path.join(self.dir, "fuzz")
        os.makedirs(model_dir, exist_ok=True)
        refused = 0
        for i in range(400):
            # A spec with bytes changed.
            text = bytearray(spec_text.encode())
            for _ in range(rng.randint(1, 6)):
                text[rng.randrange(len(text))] = rng.randrange(256)
            try:
                pstrain.ModelSpec(text.decode("utf-8", errors="replace")).check()
            except ValueError:
                refused += 1
            # A file of random bytes as examples.
            path = os.path.join(model_dir, f"{i % 4}.tfrecords")
            with open(path, "wb") as f:
                f.write(bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))))
            try:
                for _ in pstrain.data.read_examples(path):
                    pass
            except (OSError, ValueError):
                pass
            # Columns of odd values.
            odd = rng.choice([np.zeros((0,)), np.zeros((2, 0)), [None, [1.5, 2]], [[True], [2]],
                              [b"\xff", "x"], np.array(["a", "b"]), [[1], [2, 3]]])
            try:
                pstrain.data.write_examples(os.path.join(model_dir, "odd.tfrecords"),
                                            {"odd": odd, "n": np.arange(len(odd))})
            except ValueError:
                pass
        self.assertGreater(refused, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
