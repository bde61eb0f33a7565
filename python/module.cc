// pstrain._pstrain: the C++ under the Python module (python/pstrain/), a thin
// adapter. Each function converts NumPy arrays and Python values to and from
// pstrain's types and calls the library: data/formats/example_columns.h,
// models/model_summary.h, export/export.h (checkpoints), serving/predictor.h,
// io/event_inspect.h. A failed absl::Status becomes a Python exception with
// its message: NotFound FileNotFoundError, InvalidArgument and
// FailedPrecondition ValueError, DataLoss and the Env's errors (Internal,
// PermissionDenied, Unavailable) OSError, others RuntimeError. The public API, with its docstrings,
// is pstrain/*.py.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cloud/gcs_env.h"
#include "common/version.h"
#include "config/model_spec.h"
#include "data/formats/example_columns.h"
#include "data/formats/tfrecord_dataset.h"
#include "export/export.h"
#include "io/checkpoint_inspect.h"
#include "io/event_inspect.h"
#include "models/model_summary.h"
#include "serving/click_request.h"
#include "serving/predictor.h"

namespace py = pybind11;

namespace pstrain {
namespace {

// Raises `s` as the Python exception its code maps to.
[[noreturn]] void Raise(const absl::Status& s) {
  const std::string message(s.message());
  PyObject* type = PyExc_RuntimeError;
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      type = PyExc_FileNotFoundError;
      break;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kResourceExhausted:
      type = PyExc_ValueError;
      break;
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kInternal:  // the Env's errors other than ENOENT and EACCES
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
      type = PyExc_OSError;
      break;
    default:
      break;
  }
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

template <typename T>
T Value(absl::StatusOr<T> v) {
  if (!v.ok()) Raise(v.status());
  return *std::move(v);
}

template <typename T>
py::array_t<T> ToArray(const std::vector<T>& v, std::vector<py::ssize_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<py::ssize_t>(v.size())};
  py::array_t<T> a(shape);
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(T));
  return a;
}

template <typename T>
py::array_t<T> ToArray(const T* data, std::vector<py::ssize_t> shape) {
  py::array_t<T> a(shape);
  if (a.size() > 0) std::memcpy(a.mutable_data(), data, a.size() * sizeof(T));
  return a;
}

py::tuple ShapeTuple(const Shape& shape) {
  py::tuple t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t[i] = shape[i];
  return t;
}

// --- Data ---

// (name, kind, offsets, values) -> ExampleColumn: offsets an int64 array of
// n + 1, values an int64 or float32 array, or a list of bytes.
ExampleColumn ColumnOf(const py::tuple& t) {
  if (t.size() != 4) throw py::value_error("a column is (name, kind, offsets, values)");
  ExampleColumn c;
  c.name = t[0].cast<std::string>();
  const std::string kind = t[1].cast<std::string>();
  const auto offsets = t[2].cast<py::array_t<int64_t, py::array::c_style | py::array::forcecast>>();
  c.offsets.assign(offsets.data(), offsets.data() + offsets.size());
  if (kind == "int64") {
    const auto v = t[3].cast<py::array_t<int64_t, py::array::c_style | py::array::forcecast>>();
    c.ints.assign(v.data(), v.data() + v.size());
  } else if (kind == "float") {
    c.kind = ExampleColumn::Kind::kFloat;
    const auto v = t[3].cast<py::array_t<float, py::array::c_style | py::array::forcecast>>();
    c.floats.assign(v.data(), v.data() + v.size());
  } else if (kind == "bytes") {
    c.kind = ExampleColumn::Kind::kBytes;
    for (const py::handle item : t[3].cast<py::list>()) c.bytes.push_back(item.cast<std::string>());
  } else {
    throw py::value_error("column " + c.name + ": kind " + kind +
                          " is none of int64, float, bytes");
  }
  return c;
}

py::tuple ColumnTuple(const ExampleColumn& c) {
  py::object values;
  switch (c.kind) {
    case ExampleColumn::Kind::kInt64:
      values = ToArray(c.ints);
      break;
    case ExampleColumn::Kind::kFloat:
      values = ToArray(c.floats);
      break;
    case ExampleColumn::Kind::kBytes: {
      py::list bytes;
      for (const std::string& b : c.bytes) bytes.append(py::bytes(b));
      values = bytes;
      break;
    }
  }
  return py::make_tuple(c.name, ExampleKindName(c.kind), ToArray(c.offsets), values);
}

std::vector<std::string> WriteExamples(const std::string& path, const py::list& columns, int shards,
                                       bool gzip) {
  std::vector<ExampleColumn> cs;
  for (const py::handle c : columns) cs.push_back(ColumnOf(c.cast<py::tuple>()));
  absl::StatusOr<std::vector<std::string>> written;
  {
    py::gil_scoped_release release;
    written = WriteExampleColumns(ProcessEnv(), path, cs, shards, gzip);
  }
  return Value(std::move(written));
}

class ExampleReader {
 public:
  explicit ExampleReader(const std::string& patterns)
      : reader_(Value(ExampleColumnReader::Open(ProcessEnv(), patterns))) {}
  // (examples, columns): 0 examples at the end.
  py::tuple Next(int64_t n) {
    if (n < 1) throw py::value_error("read at least 1 example at a time");
    absl::StatusOr<ExamplePiece> read;
    {
      py::gil_scoped_release release;
      read = reader_->Next(n);
    }
    const ExamplePiece piece = Value(std::move(read));
    py::list columns;
    for (const ExampleColumn& c : piece.columns) columns.append(ColumnTuple(c));
    return py::make_tuple(piece.examples, columns);
  }
  std::vector<std::string> files() const { return reader_->files(); }

 private:
  std::unique_ptr<ExampleColumnReader> reader_;
};

// --- Model specs ---

ModelSpec ParseSpec(const std::string& text, const std::string& source) {
  return Value(ParseModelSpec(text, source));
}

py::dict SummaryDict(const ModelSummary& s) {
  py::list layers;
  for (const LayerSummary& l : s.layers) {
    py::list tables;
    for (const TableSummary& t : l.tables) {
      py::dict d;
      d["name"] = t.name;
      d["feature"] = t.feature;
      d["buckets"] = t.buckets;
      d["dim"] = t.dim;
      d["shared"] = t.shared;
      tables.append(d);
    }
    py::dict d;
    d["name"] = l.name;
    d["type"] = l.type;
    d["line"] = l.line;
    d["inputs"] = l.inputs;
    d["output_shape"] = ShapeTuple(l.output_shape);
    d["params"] = l.trainable + l.non_trainable;
    d["trainable_params"] = l.trainable;
    d["tables"] = tables;
    layers.append(d);
  }
  py::dict d;
  d["name"] = s.name;
  d["input_shape"] = ShapeTuple(s.input_shape);
  d["classes"] = s.num_classes;
  d["head"] = s.binary ? "binary" : (s.regression_loss.empty() ? "softmax" : "regression");
  if (!s.regression_loss.empty()) d["loss"] = s.regression_loss;
  d["sparse_features"] = s.sparse_features;
  d["layers"] = layers;
  d["trainable_params"] = s.trainable;
  d["non_trainable_params"] = s.non_trainable;
  d["table_values"] = s.table_values;
  d["dynamic_tables"] = s.dynamic_tables;
  d["text"] = FormatModelSummary(s);
  return d;
}

// The spec `text` (from `source`) summarized; with `input` its input shape
// replaced first.
py::dict SummarizeSpec(const std::string& text, const std::string& source,
                       const std::optional<std::vector<int64_t>>& input) {
  ModelSpec spec = ParseSpec(text, source);
  if (input.has_value()) {
    // The spec parser's rule for `input:` (its kMaxSize).
    constexpr int64_t kMaxSize = 1 << 20;
    const int64_t min = input->size() == 1 ? 0 : 1;
    bool fits = input->size() == 1 || input->size() == 3;
    for (int64_t d : *input) fits = fits && d >= min && d <= kMaxSize;
    if (!fits) {
      throw py::value_error(absl::StrCat("input_shape: [height, width, channels] of sizes in [1, ",
                                         kMaxSize, "], or [features] in [0, ", kMaxSize, "]"));
    }
    spec.input = *input;
  }
  return SummaryDict(Value(SummarizeModelSpec(spec, source)));
}

// --- Checkpoints ---

class Checkpoint {
 public:
  explicit Checkpoint(const std::string& path) {
    const std::vector<std::string> indexes =
        Value(CheckpointIndexPaths(ProcessEnv(), path, /*all=*/false));
    index_ = indexes.front();
    absl::StatusOr<CheckpointValues> values;
    {
      py::gil_scoped_release release;
      values = ReadCheckpointValues(ProcessEnv(), index_);
    }
    values_ = Value(std::move(values));
  }
  int64_t step() const { return values_.global_step; }
  const std::string& index() const { return index_; }
  std::string model_name() const { return values_.model->name(); }
  std::string spec_yaml() const { return values_.model->spec_yaml(); }
  const std::string& job_config() const { return values_.hparams_yaml; }

  py::dict Variables() const {
    py::dict out;
    for (const VariableInfo& v : values_.model->variables()) {
      const std::vector<float>& from = v.trainable ? values_.params : values_.state;
      std::vector<py::ssize_t> shape(v.shape.begin(), v.shape.end());
      out[py::str(v.name)] = ToArray(from.data() + v.offset, shape);
    }
    return out;
  }

  py::dict Tables() const {
    py::dict out;
    for (size_t t = 0; t < values_.tables.size(); ++t) {
      const SparseTableInfo& info = values_.model->sparse_tables()[t];
      const TrainedTableRows& rows = values_.tables[t];
      const auto n = static_cast<py::ssize_t>(rows.ids.size());
      out[py::str(info.name)] =
          py::make_tuple(ToArray(rows.ids), ToArray(rows.weights.data(), {n, info.dim}));
    }
    return out;
  }

 private:
  std::string index_;
  CheckpointValues values_;
};

// --- Prediction ---

py::dict PredictionArrays(const std::vector<Prediction>& predictions, int classes) {
  const auto n = static_cast<py::ssize_t>(predictions.size());
  if (n > 0 && !predictions.front().heads.empty()) {
    // A multi-task model: an array per head, by its name: a binary head's
    // probabilities, a regression head's values, a softmax head's
    // probabilities [n, classes].
    py::dict out;
    for (size_t h = 0; h < predictions.front().heads.size(); ++h) {
      const Prediction& first = predictions.front().heads[h];
      if (first.binary || first.regression) {
        py::array_t<float> values(n);
        for (py::ssize_t i = 0; i < n; ++i) {
          const Prediction& p = predictions[i].heads[h];
          values.mutable_at(i) = p.binary ? p.logistic : p.value;
        }
        out[py::str(first.name)] = values;
        continue;
      }
      const auto k = static_cast<py::ssize_t>(first.probabilities.size());
      py::array_t<float> probabilities({n, k});
      for (py::ssize_t i = 0; i < n; ++i) {
        for (py::ssize_t j = 0; j < k; ++j) {
          probabilities.mutable_at(i, j) = predictions[i].heads[h].probabilities[j];
        }
      }
      out[py::str(first.name)] = probabilities;
    }
    return out;
  }
  if (n > 0 && predictions.front().regression) {
    // A regression head: its values, as TF Serving's "predictions" of a
    // model of one output.
    py::array_t<float> values(n);
    for (py::ssize_t i = 0; i < n; ++i) values.mutable_at(i) = predictions[i].value;
    py::dict out;
    out["predictions"] = values;
    return out;
  }
  py::array_t<int64_t> labels(n);
  py::array_t<float> probabilities({n, static_cast<py::ssize_t>(classes)});
  py::array_t<float> logistic(n);
  bool binary = false;
  for (py::ssize_t i = 0; i < n; ++i) {
    const Prediction& p = predictions[i];
    labels.mutable_at(i) = p.classes;
    for (int k = 0; k < classes; ++k) {
      probabilities.mutable_at(i, k) =
          k < static_cast<int>(p.probabilities.size()) ? p.probabilities[k] : 0.0f;
    }
    logistic.mutable_at(i) = p.logistic;
    binary = p.binary;
  }
  py::dict out;
  out["classes"] = labels;
  out["probabilities"] = probabilities;
  if (binary) out["logistic"] = logistic;
  return out;
}

class PyPredictor {
 public:
  explicit PyPredictor(const std::string& path)
      : predictor_(Value(Predictor::Load(ProcessEnv(), path))) {}

  bool is_click_model() const { return predictor_->is_click_model(); }
  py::tuple input_shape() const { return ShapeTuple(predictor_->exported().input_shape); }
  int num_classes() const { return predictor_->exported().num_classes; }
  std::vector<std::string> features() const { return predictor_->click_inputs().features; }
  int64_t num_dense() const { return predictor_->click_inputs().num_dense; }
  int64_t version() const { return predictor_->version(); }
  int64_t global_step() const { return predictor_->global_step(); }
  std::string model_name() const { return predictor_->exported().model; }

  // `images`: n x example_size() floats in [0, 1], C order.
  py::dict PredictImages(py::array_t<float, py::array::c_style | py::array::forcecast> images) {
    if (predictor_->is_click_model()) {
      throw py::value_error("this is a click model: give a dict of its features");
    }
    const int64_t size = predictor_->example_size();
    if (images.ndim() < 1 || images.shape(0) * size != images.size()) {
      std::string shape;
      for (py::ssize_t d = 0; d < images.ndim(); ++d) {
        absl::StrAppend(&shape, d > 0 ? ", " : "", images.shape(d));
      }
      throw py::value_error(absl::StrCat("images of ", size,
                                         " values each (the export's input shape) expected; got "
                                         "an array of shape (",
                                         shape, ")"));
    }
    const int64_t n = images.shape(0);
    std::vector<Prediction> predictions;
    {
      py::gil_scoped_release release;
      predictions = predictor_->Predict(images.data(), n);
    }
    return PredictionArrays(predictions, predictor_->exported().num_classes);
  }

  // `body`: {"instances": [...]} as pstrain-serve reads it.
  py::dict PredictClicks(const std::string& body) {
    if (!predictor_->is_click_model()) {
      throw py::value_error("this is an image model: give an array of images");
    }
    absl::StatusOr<std::vector<Prediction>> predictions;
    {
      py::gil_scoped_release release;
      ClickRequest request = EmptyClickRequest(predictor_->click_inputs());
      absl::Status read =
          ReadClickRequest(body, predictor_->click_inputs(), int64_t{1} << 24, &request);
      predictions = read.ok() ? predictor_->PredictClicks(request)
                              : absl::StatusOr<std::vector<Prediction>>(read);
    }
    return PredictionArrays(Value(std::move(predictions)), predictor_->exported().num_classes);
  }

 private:
  std::unique_ptr<Predictor> predictor_;
};

// --- Events ---

py::dict ReadEvents(const std::string& dir) {
  absl::StatusOr<std::map<std::string, std::vector<ScalarPoint>>> read;
  {
    py::gil_scoped_release release;
    read = ReadEventScalars(ProcessEnv(), dir);
  }
  py::dict out;
  for (const auto& [tag, points] : Value(std::move(read))) {
    std::vector<int64_t> steps;
    std::vector<float> values;
    std::vector<double> times;
    for (const ScalarPoint& p : points) {
      steps.push_back(p.step);
      values.push_back(p.value);
      times.push_back(p.wall_time);
    }
    out[py::str(tag)] = py::make_tuple(ToArray(steps), ToArray(values), ToArray(times));
  }
  return out;
}

}  // namespace
}  // namespace pstrain

PYBIND11_MODULE(_pstrain, m) {
  using namespace pstrain;
  m.doc() = "pstrain's C++ core (use the pstrain package, not this module)";
  m.attr("__version__") = kVersion;
  m.def("write_examples", &WriteExamples, py::arg("path"), py::arg("columns"), py::arg("shards"),
        py::arg("gzip"));
  py::class_<ExampleReader>(m, "ExampleReader")
      .def(py::init<const std::string&>(), py::arg("patterns"))
      .def("next", &ExampleReader::Next, py::arg("n"))
      .def_property_readonly("files", &ExampleReader::files);
  m.def("describe_examples", [](const std::string& path) {
    absl::StatusOr<std::string> described;
    {
      py::gil_scoped_release release;
      described = DescribeExampleFile(ProcessEnv(), path);
    }
    return Value(std::move(described));
  });
  m.def("spec_to_yaml", [](const std::string& text, const std::string& source) {
    return ModelSpecToYaml(ParseSpec(text, source));
  });
  m.def("summarize_spec", &SummarizeSpec, py::arg("text"), py::arg("source"),
        py::arg("input") = std::nullopt);
  py::class_<Checkpoint>(m, "Checkpoint")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("step", &Checkpoint::step)
      .def_property_readonly("index", &Checkpoint::index)
      .def_property_readonly("model_name", &Checkpoint::model_name)
      .def_property_readonly("spec_yaml", &Checkpoint::spec_yaml)
      .def_property_readonly("job_config", &Checkpoint::job_config)
      .def("variables", &Checkpoint::Variables)
      .def("tables", &Checkpoint::Tables);
  py::class_<PyPredictor>(m, "Predictor")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("is_click_model", &PyPredictor::is_click_model)
      .def_property_readonly("input_shape", &PyPredictor::input_shape)
      .def_property_readonly("num_classes", &PyPredictor::num_classes)
      .def_property_readonly("features", &PyPredictor::features)
      .def_property_readonly("num_dense", &PyPredictor::num_dense)
      .def_property_readonly("version", &PyPredictor::version)
      .def_property_readonly("global_step", &PyPredictor::global_step)
      .def_property_readonly("model_name", &PyPredictor::model_name)
      .def("predict_images", &PyPredictor::PredictImages, py::arg("images"))
      .def("predict_clicks", &PyPredictor::PredictClicks, py::arg("body"));
  m.def("read_events", &ReadEvents, py::arg("dir"));
}
