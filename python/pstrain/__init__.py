"""pstrain from Python: data, model specs, jobs, checkpoints and prediction.

The same C++ as the pstrain programs, with NumPy arrays in and out:

- pstrain.data.write_examples / read_examples / describe: training data as
  TFRecord files of tf.train.Example.
- pstrain.ModelSpec: a model spec read, checked (every layer's output shape
  and parameters, or the error a job would give) and summarized.
- pstrain.launch(config, **flags) -> Job: a job started with pstrain-launch,
  its progress followed, waited for or stopped.
- pstrain.read_events(job_dir): the scalars of its TensorBoard event files.
- pstrain.Checkpoint(job_dir or path): a checkpoint's variables and
  embedding tables, every checksum verified.
- pstrain.Predictor(export_dir).predict(batch): an export's predictions in
  this process, as pstrain-predict and pstrain-serve give them.

Errors are Python exceptions carrying pstrain's message: FileNotFoundError
(a missing file), ValueError (bad input: what, where, what to do), OSError
(a damaged or unreadable file).
"""

import json

import numpy as np

from . import _pstrain
from . import data
from .job import Job, find_binary, launch, parse_progress

__version__ = _pstrain.__version__

__all__ = ["ModelSpec", "Checkpoint", "Predictor", "Job", "launch", "read_events", "data",
           "find_binary", "parse_progress"]


class ModelSpec:
    """A model spec: the `model:` YAML a job trains (layers, input, head).

        spec = pstrain.ModelSpec.from_yaml("examples/models/din.yaml")
        spec.summary()            # Keras-like: layer, output shape, params
        spec.check()              # [{"name", "type", "output_shape", ...}, ...]

    The text is parsed when the spec is made: a spec a job would refuse
    raises ValueError with the job's message (the source and line).
    """

    def __init__(self, text, source="<string>"):
        """Parses the YAML `text`; `source` (a file name) begins its errors."""
        self._text = str(text)
        self._source = str(source)
        self._yaml = _pstrain.spec_to_yaml(self._text, self._source)

    @classmethod
    def from_yaml(cls, text_or_path):
        """A spec from YAML text, or from the file it names (a path ending .yaml/.yml)."""
        value = str(text_or_path)
        if "\n" not in value and (value.endswith(".yaml") or value.endswith(".yml")):
            with open(value, encoding="utf-8") as f:
                return cls(f.read(), value)
        return cls(value)

    @classmethod
    def from_dict(cls, spec):
        """A spec from a dict of the YAML's structure:

            pstrain.ModelSpec.from_dict({"input": [784], "classes": 10, "layers": [
                {"dense": {"units": 128, "activation": "relu"}}, {"dense": {"units": 10}}]})

        Its errors name the layer ("layers[1]").
        """
        if not isinstance(spec, dict):
            raise ValueError(f"from_dict takes a dict, not {type(spec).__name__}")
        return cls(json.dumps(spec, indent=1), "<dict>")  # JSON is YAML

    def to_yaml(self):
        """The spec as YAML, every key written out (what a job's checkpoint records)."""
        return self._yaml

    def check(self, input_shape=None):
        """Builds the spec and returns its layers, as a job would build them.

        Args:
          input_shape: the input of one example ([28, 28, 1], [13]) in place
            of the spec's `input:`.

        Returns:
          A list with a dict per layer: name, type, line, inputs,
          output_shape (one example's, a tuple), params, trainable_params
          and tables (each {name, feature, buckets, dim, shared}).

        Raises:
          ValueError: shapes that do not fit, with the layer and its line.
        """
        shape = None if input_shape is None else [int(d) for d in input_shape]
        return _pstrain.summarize_spec(self._text, self._source, shape)["layers"]

    def summary(self, print_fn=print):
        """Prints a table of layer (type), output shape, parameters and inputs.

        As Keras' model.summary(), with the batch dimension as None and the
        embedding tables (on the parameter servers) under their layers.
        `print_fn` receives the text (print by default).
        """
        print_fn(self.summary_text().rstrip("\n"))

    def summary_text(self):
        """The table summary() prints, as a string."""
        return _pstrain.summarize_spec(self._text, self._source, None)["text"]

    @property
    def name(self):
        """The model's name."""
        return _pstrain.summarize_spec(self._text, self._source, None)["name"]

    def __repr__(self):
        return f"<pstrain.ModelSpec from {self._source}>"


class Checkpoint:
    """A checkpoint's values, read as a job restores them.

        ckpt = pstrain.Checkpoint("/tmp/run")      # its newest checkpoint
        ckpt.step                                   # the global step
        ckpt.variables()["dense/kernel"]            # NumPy arrays
        ids, rows = ckpt.tables()["emb/embeddings"]

    Every shard and rows file is read and checked against the index's sizes
    and CRCs, as pstrain-ckpt checks them (OSError naming a damaged file).
    """

    def __init__(self, path):
        """Args: path: a job dir (its newest checkpoint), or "<dir>/model.ckpt-N"."""
        self._c = _pstrain.Checkpoint(str(path))

    @property
    def step(self):
        """The global step it was written at."""
        return self._c.step

    @property
    def path(self):
        """Its index file."""
        return self._c.index

    @property
    def model_name(self):
        """The name of the model it holds."""
        return self._c.model_name

    @property
    def spec(self):
        """The model's spec (a ModelSpec), or None for a built-in model without one."""
        text = self._c.spec_yaml
        return ModelSpec(text, self._c.index) if text else None

    @property
    def job_config(self):
        """The job config (YAML) it was written under."""
        return self._c.job_config

    def variables(self):
        """A dict of variable name -> float32 array of its shape (trainable and state)."""
        return self._c.variables()

    def tables(self):
        """A dict of embedding table name -> (ids int64 [n], rows float32 [n, dim])."""
        return self._c.tables()

    def __repr__(self):
        return f"<pstrain.Checkpoint {self.path} step {self.step}>"


def _json_default(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise TypeError(f"{type(value).__name__} is no feature value")


class Predictor:
    """An exported model answering predictions in this process.

        model = pstrain.Predictor("/tmp/run/export")   # its newest version
        out = model.predict(images)                     # float32 [N, H, W, C] in [0, 1]
        out["classes"], out["probabilities"]

    A click model takes a dict of features, columnar ({"dense": [N, n]
    array, "user": [ids of each example], ...}) or a list of instance dicts,
    exactly as pstrain-serve reads its requests; its outputs add "logistic".
    A regression head's output is "predictions", its values; a multi-task
    model's (heads:) an array per head, by its name. The outputs equal
    pstrain-predict's. The computation runs without the GIL.
    """

    def __init__(self, export_dir):
        """Args: export_dir: a version directory, an export base or a job dir."""
        self._p = _pstrain.Predictor(str(export_dir))

    @property
    def is_click_model(self):
        """True for a model with embedding tables (its instances are feature dicts)."""
        return self._p.is_click_model

    @property
    def input_shape(self):
        """One example's input shape ((28, 28, 1); a click model's (n,) dense features)."""
        return self._p.input_shape

    @property
    def features(self):
        """A click model's sparse features, by name."""
        return list(self._p.features)

    @property
    def version(self):
        """The export version it holds."""
        return self._p.version

    @property
    def global_step(self):
        """The global step the export was written at."""
        return self._p.global_step

    def predict(self, batch):
        """Predictions for a batch.

        Args:
          batch: an image model's images, an array [N, H, W, C] (or [N, H*W*C])
            of floats in [0, 1], or of uint8 pixels (divided by 255); a click
            model's features, a dict of columns or a list of instance dicts
            (a model trained from CSV also takes raw rows, the CSV's columns
            by name, computed as training did).

        Returns:
          A dict of arrays: "classes" int64 [N], "probabilities" float32
          [N, classes], and for a binary head "logistic" float32 [N]; for a
          regression head "predictions" float32 [N] alone; for a multi-task
          model one array per head, by its name (a binary head's
          probabilities [N], a regression head's values [N], a softmax
          head's probabilities [N, classes]).

        Raises:
          ValueError: a batch that does not fit the model (what and where).
        """
        if self._p.is_click_model:
            if isinstance(batch, dict):
                body = {"inputs": batch}
            elif isinstance(batch, (list, tuple)):
                body = {"instances": list(batch)}
            else:
                raise ValueError("a click model takes a dict of feature columns or a list of "
                                 f"instance dicts, not {type(batch).__name__}")
            return self._p.predict_clicks(json.dumps(body, default=_json_default))
        images = np.asarray(batch)
        if images.dtype == np.uint8:
            images = images.astype(np.float32) / 255.0
        elif images.dtype.kind != "f":
            # An int64 array of 0..255 is not scaled silently.
            raise ValueError(f"images of {images.dtype} cannot be predicted: give float pixels "
                             "in [0, 1] or uint8 ones in [0, 255]")
        return self._p.predict_images(np.ascontiguousarray(images, dtype=np.float32))

    def __repr__(self):
        return f"<pstrain.Predictor {self._p.model_name} version {self.version}>"


def read_events(job_dir):
    """The scalars of the TensorBoard event files under `job_dir`.

    Returns:
      A dict of tag -> (steps int64 [n], values float32 [n], wall_times
      float64 [n]), in the order written; a run's tags other than the job
      dir's own are "<run>/<tag>" ("eval/accuracy").

    Raises:
      FileNotFoundError: no event file under `job_dir`; OSError: a damaged
      record (the file and offset named).
    """
    return _pstrain.read_events(str(job_dir))
