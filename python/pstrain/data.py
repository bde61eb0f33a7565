"""Training data as TFRecord files of tf.train.Example, from and to NumPy.

What a pstrain job reads (and TensorFlow's tf.data.TFRecordDataset with
tf.io.parse_example): each example a set of named features, each an
int64_list, float_list or bytes_list.

    import numpy as np, pstrain
    pstrain.data.write_examples("data/train.tfrecords", {
        "label": np.array([1, 0, 1]),                       # int64, one per example
        "dense": np.random.rand(3, 13).astype(np.float32),  # 13 floats each
        "user": [[17], [], [3, 5]],                          # ids, any number each
        "query": [["a", "b"], ["c"], []],                    # strings (bytes_list)
    })
    for example in pstrain.data.read_examples("data/train.tfrecords"):
        print(example["label"], example["user"])
"""

import numbers

import numpy as np

from . import _pstrain

__all__ = ["write_examples", "read_examples", "describe"]


def _is_text(value):
    return isinstance(value, (str, bytes, np.str_, np.bytes_))


def _as_bytes(value):
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value)
    return str(value).encode("utf-8")


def _column(name, values):
    """One column as (name, kind, offsets, values) for the C++ writer."""
    if isinstance(values, np.ndarray):
        if values.ndim == 0:
            raise ValueError(f"column {name}: give one entry per example, not a scalar")
        n = values.shape[0]
        if values.dtype == np.uint8 and values.ndim >= 2:
            # Images: each example's pixels as one bytes value (MNIST's
            # "image_raw" layout; the shape goes in height/width/depth).
            flat = values.reshape(n, -1)
            return (name, "bytes", np.arange(n + 1, dtype=np.int64), [r.tobytes() for r in flat])
        per = int(np.prod(values.shape[1:])) if values.ndim > 1 else 1
        offsets = np.arange(n + 1, dtype=np.int64) * per
        if values.dtype.kind in "biu":
            return (name, "int64", offsets, values.reshape(-1).astype(np.int64))
        if values.dtype.kind == "f":
            return (name, "float", offsets, values.reshape(-1).astype(np.float32))
        if values.dtype.kind in "SU":
            return (name, "bytes", offsets, [_as_bytes(v) for v in values.reshape(-1)])
        raise ValueError(f"column {name}: arrays of {values.dtype} have no Example form "
                         "(give integers, floats, strings or uint8 images)")
    if not isinstance(values, (list, tuple)):
        raise ValueError(f"column {name}: give a NumPy array or a list with one entry per "
                         f"example, not {type(values).__name__}")
    offsets = [0]
    flat = []
    for i, entry in enumerate(values):
        if entry is None:
            entry = []
        elif _is_text(entry) or isinstance(entry, (numbers.Number, np.generic)):
            entry = [entry]
        elif isinstance(entry, np.ndarray):
            entry = entry.reshape(-1).tolist()
        elif not isinstance(entry, (list, tuple)):
            raise ValueError(f"column {name}, example {i}: {type(entry).__name__} is not a "
                             "value or a list of values")
        flat.extend(entry)
        offsets.append(len(flat))
    offsets = np.asarray(offsets, dtype=np.int64)
    if not flat:
        return (name, "int64", offsets, np.zeros(0, dtype=np.int64))
    if all(_is_text(v) for v in flat):
        return (name, "bytes", offsets, [_as_bytes(v) for v in flat])
    if all(isinstance(v, (numbers.Integral, np.integer, np.bool_)) for v in flat):
        return (name, "int64", offsets, np.asarray(flat, dtype=np.int64))
    if all(isinstance(v, (numbers.Real, np.floating)) for v in flat):
        return (name, "float", offsets, np.asarray(flat, dtype=np.float32))
    raise ValueError(f"column {name}: its values mix strings and numbers, or are neither; "
                     "one feature holds one kind")


def write_examples(path, columns, shards=1, gzip=None):
    """Writes examples from columns as TFRecord files of tf.train.Example.

    Args:
      path: the file (shards=1), or with more shards the prefix of
        "<path>-00000-of-0000N.tfrecord[.gz]"; local or gs://. A job reads
        "<data_dir>/train.tfrecords" and "test.tfrecords", or the files its
        train_files pattern names.
      columns: a dict of feature name -> one entry per example (examples in
        order, features written in the dict's order):
        - a NumPy array [N]: one int64 or float value each (bool and int
          arrays are int64; float arrays float32); [N, k]: k values each
          (dense features); strings: bytes values;
        - a uint8 array [N, H, W(, C)] or [N, k]: an image each, its pixels
          (HWC) as one bytes value. An image job reads MNIST's layout: name
          the column "image_raw" and add int64 columns "height", "width"
          and "depth" (a 28x28x1 image may leave them out), with "label";
          a column named "image" is read as CIFAR-10's CHW pixels;
        - a list of N entries, each a value, a list or array of values, or
          None / [] for none (a sparse or sequence feature, in order):
          integers (int64), floats (float32) or strings (bytes).
      shards: how many files; example i goes to shard i % shards.
      gzip: gzip the files (tf.data's compression_type="GZIP"); by default
        when `path` ends with ".gz" (shards=1) or never (sharded). Readers
        go by the name: a single gzip'd file must end ".gz" (ValueError
        otherwise); shards get ".tfrecord.gz".

    Returns:
      The files written, in shard order.

    Raises:
      ValueError: columns of different lengths, or values with no Example
        form; OSError: a file that cannot be written (none is left half
        written).
    """
    if not isinstance(columns, dict) or not columns:
        raise ValueError("columns: give a dict of feature name -> values, one entry per example")
    if gzip is None:
        gzip = shards == 1 and str(path).endswith(".gz")
    encoded = [_column(str(name), values) for name, values in columns.items()]
    return _pstrain.write_examples(str(path), encoded, int(shards), bool(gzip))


def _example(columns, i):
    out = {}
    for name, kind, offsets, values in columns:
        begin, end = int(offsets[i]), int(offsets[i + 1])
        if begin == end:
            continue
        out[name] = values[begin:end] if kind != "bytes" else list(values[begin:end])
    return out


def read_examples(pattern, batch_size=1024):
    """Iterates over the examples of TFRecord files, in order.

    Args:
      pattern: files: comma-separated paths or globs ("data/part-*"), local
        or gs://; a name ending .gz is read as gzip.
      batch_size: how many examples are read from the files at a time.

    Yields:
      One dict per example: feature name -> an int64 or float32 NumPy array
      of its values, or a list of bytes; a feature without values is absent.

    Raises:
      FileNotFoundError: a pattern that matches no file; OSError: a damaged
      or cut-short record (the file and its offset named); ValueError: a
      feature that changes kind between examples.
    """
    reader = _pstrain.ExampleReader(str(pattern))
    while True:
        n, columns = reader.next(int(batch_size))
        if n == 0:
            return
        for i in range(n):
            yield _example(columns, i)


def describe(path):
    """A summary of a TFRecord file of tf.train.Example, as `pstrain-data describe`.

    The record count and every feature's name, type and value counts. Every
    record's checksums are verified (OSError naming the offset of a damaged
    one).
    """
    return _pstrain.describe_examples(str(path))
