#include "serving/predictor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/augment.h"
#include "glog/logging.h"
#include "io/png.h"
#include "models/tensor.h"

namespace pstrain {
namespace {

absl::Status Bad(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(where.empty() ? what : absl::StrCat(where, ": ", what));
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&s, i ? ", " : "", shape[i]);
  return s + "]";
}

// Numbers nested as `dims`, row-major into out[0..]; `where` is the index path.
absl::Status Flatten(const nlohmann::json& v, const std::vector<int64_t>& dims, size_t depth,
                     const std::string& where, float** out) {
  if (depth == dims.size()) {
    if (!v.is_number()) return Bad(where, absl::StrCat("expected a number, got ", v.type_name()));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < 0.0 || x > 1.0) {
      return Bad(where, absl::StrCat(v.dump(), " is outside [0, 1]: send pixel / 255"));
    }
    *(*out)++ = static_cast<float>(x);
    return absl::OkStatus();
  }
  if (!v.is_array()) return Bad(where, absl::StrCat("expected a list, got ", v.type_name()));
  if (static_cast<int64_t>(v.size()) != dims[depth]) {
    return Bad(where, absl::StrCat("a list of ", v.size(), " where ", dims[depth], " belong"));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(Flatten(v[i], dims, depth + 1, absl::StrCat(where, "[", i, "]"), out));
  }
  return absl::OkStatus();
}

// Nesting depth of the first elements: [[1, 2]] is 2.
size_t Depth(const nlohmann::json& v) {
  size_t d = 0;
  for (const nlohmann::json* p = &v; p->is_array() && !p->empty(); p = &(*p)[0]) ++d;
  return d;
}

absl::Status ParsePng(const nlohmann::json& b64, const std::vector<int64_t>& shape, float* out) {
  if (!b64.is_string()) return Bad("b64", "expected a base64 string");
  std::string png;
  if (!absl::Base64Unescape(b64.get<std::string>(), &png)) return Bad("b64", "is not base64");
  absl::StatusOr<PngImage> image = DecodePng(png);
  if (!image.ok())
    return Bad("b64", absl::StrCat("not a PNG pstrain reads: ", image.status().message()));
  const int64_t h = shape[0], w = shape[1], c = shape[2];
  const bool alpha = image->channels == c + 1 && (c == 1 || c == 3);
  if (image->height != h || image->width != w || (image->channels != c && !alpha)) {
    return Bad("b64", absl::StrCat("a PNG of ", image->height, "x", image->width, " with ",
                                   image->channels, " channels; the model takes ", h, "x", w,
                                   " with ", c));
  }
  for (int64_t p = 0; p < h * w; ++p) {
    for (int64_t k = 0; k < c; ++k) {
      const auto byte = static_cast<uint8_t>(image->pixels[p * image->channels + k]);
      out[p * c + k] = static_cast<float>(byte) / 255.0f;
    }
  }
  return absl::OkStatus();
}

// PrepareSparse's message about "example K of the batch" of a slice that
// starts at instance `begin`, as "instance begin + K (0-based)".
std::string InstanceMessage(absl::string_view m, int64_t begin) {
  constexpr absl::string_view kExample = "example ", kOfBatch = " of the batch";
  const size_t at = m.find(kExample);
  const size_t of = m.find(kOfBatch);
  int64_t k = 0;
  if (at == absl::string_view::npos || of == absl::string_view::npos || of < at ||
      !absl::SimpleAtoi(m.substr(at + kExample.size(), of - at - kExample.size()), &k)) {
    return std::string(m);
  }
  return absl::StrCat(m.substr(0, at), "instance ", begin + k, " (0-based)",
                      m.substr(of + kOfBatch.size()));
}

}  // namespace

absl::Status ParseInstance(const nlohmann::json& instance, const std::vector<int64_t>& shape,
                           float* out) {
  if (shape.size() != 3) return absl::InternalError("the model's input is not HWC");
  if (instance.is_object()) {
    if (instance.contains("b64") && instance.size() == 1)
      return ParsePng(instance["b64"], shape, out);
    if (instance.contains("image") && instance.size() == 1) {
      const nlohmann::json& image = instance["image"];
      if (image.is_object() && image.contains("b64")) return ParsePng(image["b64"], shape, out);
      return ParseInstance(image, shape, out);
    }
    std::string keys;
    for (const auto& [key, value] : instance.items())
      absl::StrAppend(&keys, keys.empty() ? "" : ", ", "\"", key, "\"");
    return Bad("", absl::StrCat("an instance object has the key \"image\" (numbers or {\"b64\": "
                                "PNG}) or \"b64\"; this one has ",
                                keys.empty() ? "none" : keys));
  }
  if (!instance.is_array()) {
    return Bad("", absl::StrCat("an instance is a list of numbers or an object, not a ",
                                instance.type_name()));
  }
  const size_t depth = Depth(instance);
  std::vector<int64_t> dims;
  if (depth == 1) {
    dims = {shape[0] * shape[1] * shape[2]};
  } else if (depth == 2 && shape[2] == 1) {
    dims = {shape[0], shape[1]};
  } else if (depth == 3) {
    dims = shape;
  } else {
    return Bad("", absl::StrCat("numbers nested ", depth, " deep; the model takes an image of ",
                                ShapeText(shape), " (HWC), ",
                                shape[2] == 1 ? "as [H][W], [H][W][C] or " : "as [H][W][C] or ",
                                "a flat list of ", shape[0] * shape[1] * shape[2]));
  }
  return Flatten(instance, dims, 0, "", &out);
}

nlohmann::json PredictionJson(const Prediction& p) {
  if (!p.heads.empty()) {
    nlohmann::json j = nlohmann::json::object();
    for (const Prediction& h : p.heads) {
      j[h.name] = h.binary ? nlohmann::json(h.logistic) : PredictionJson(h);
    }
    return j;
  }
  // A regression head's prediction is its number, as TF Serving answers a
  // model of one output.
  if (p.regression) return p.value;
  nlohmann::json j = {{"classes", p.classes}, {"probabilities", p.probabilities}};
  if (p.binary) j["logistic"] = {p.logistic};
  return j;
}

nlohmann::json PredictionColumns(const std::vector<Prediction>& predictions) {
  if (!predictions.empty() && !predictions.front().heads.empty()) {
    nlohmann::json outputs = nlohmann::json::object();
    for (size_t h = 0; h < predictions.front().heads.size(); ++h) {
      nlohmann::json values = nlohmann::json::array();
      for (const Prediction& p : predictions) {
        const Prediction& head = p.heads[h];
        values.push_back(head.binary ? nlohmann::json(head.logistic) : PredictionJson(head));
      }
      outputs[predictions.front().heads[h].name] = std::move(values);
    }
    return outputs;
  }
  if (!predictions.empty() && predictions.front().regression) {
    nlohmann::json values = nlohmann::json::array();
    for (const Prediction& p : predictions) values.push_back(p.value);
    return {{"predictions", values}};
  }
  nlohmann::json classes = nlohmann::json::array(), probabilities = nlohmann::json::array(),
                 logistic = nlohmann::json::array();
  for (const Prediction& p : predictions) {
    classes.push_back(p.classes);
    probabilities.push_back(p.probabilities);
    logistic.push_back({p.logistic});
  }
  nlohmann::json outputs = {{"classes", classes}, {"probabilities", probabilities}};
  if (!predictions.empty() && predictions.front().binary) outputs["logistic"] = logistic;
  return outputs;
}

absl::StatusOr<std::unique_ptr<Predictor>> Predictor::Load(Env* env, const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string dir, ResolveExportDir(env, path));
  PSTRAIN_ASSIGN_OR_RETURN(ExportedModel exported, ReadExport(env, dir));
  // The export's own spec; an export from before specs names a built-in.
  absl::StatusOr<std::unique_ptr<Model>> model =
      exported.model_spec.empty()
          ? BuildModel(exported.model, exported.options)
          : BuildModelFromSpecText(exported.model_spec, JoinPath(dir, "model.json"));
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": cannot build its model: ", model.status().message()));
  }
  const Model& m = **model;
  if (m.num_params() != static_cast<int64_t>(exported.params.size()) ||
      m.num_state() != static_cast<int64_t>(exported.state.size()) ||
      m.input_shape() != exported.input_shape || m.num_classes() != exported.num_classes) {
    return absl::DataLossError(absl::StrCat(dir, ": the export does not fit ", exported.model,
                                            " as this pstrain builds it (", m.num_params(),
                                            " parameters, input ", ShapeText(m.input_shape()), ", ",
                                            m.num_classes(), " classes)"));
  }
  auto predictor = std::unique_ptr<Predictor>(new Predictor());
  const std::vector<SparseTableInfo>& infos = m.sparse_tables();
  if (exported.tables.size() != infos.size()) {
    return absl::DataLossError(absl::StrCat(dir, ": the export holds the rows of ",
                                            exported.tables.size(), " embedding tables; ",
                                            exported.model, " has ", infos.size()));
  }
  for (size_t t = 0; t < infos.size(); ++t) {
    TrainedTableRows& rows = exported.tables[t];
    if (exported.table_names[t] != infos[t].name || exported.table_dims[t] != infos[t].dim ||
        rows.weights.size() != rows.ids.size() * infos[t].dim) {
      return absl::DataLossError(absl::StrCat(dir, ": the export's table ", t, " is ",
                                              exported.table_names[t], " of dim ",
                                              exported.table_dims[t], "; ", exported.model, " has ",
                                              infos[t].name, " of dim ", infos[t].dim, " there"));
    }
    Table table;
    table.dim = infos[t].dim;
    table.row_of.reserve(rows.ids.size());
    for (size_t r = 0; r < rows.ids.size(); ++r) {
      const int64_t id = rows.ids[r];
      if ((infos[t].buckets > 0 && id >= infos[t].buckets) ||
          !table.row_of.try_emplace(id, static_cast<int64_t>(r)).second) {
        return absl::DataLossError(
            absl::StrCat(dir, ": table ", infos[t].name, " has row ", id,
                         infos[t].buckets > 0 && id >= infos[t].buckets
                             ? absl::StrCat(" past its ", infos[t].buckets, " buckets")
                             : " twice"));
      }
    }
    table.weights = std::move(rows.weights);
    rows = {};
    predictor->tables_.push_back(std::move(table));
    predictor->table_buckets_.push_back(infos[t].buckets);
  }
  predictor->binary_ = m.head() == Head::kBinary;
  predictor->regression_ = m.head() == Head::kRegression;
  if (m.multi_head()) {
    predictor->heads_ = m.heads();
    for (size_t h = 0; h < m.heads().size(); ++h) {
      predictor->head_offsets_.push_back(m.head_offset(h));
    }
  }
  predictor->click_inputs_.features = m.sparse_features();
  predictor->tabular_ = m.input_shape().size() == 1;
  if (predictor->tabular_) predictor->click_inputs_.num_dense = NumElements(m.input_shape());
  if (!exported.csv_schema.empty()) {
    // Trained from CSV rows: it takes them raw too, read as training read them.
    const std::string where = absl::StrCat(exported.dir, " (its CSV schema)");
    absl::StatusOr<CsvSchema> schema = ParseCsvSchemaText(exported.csv_schema, where);
    absl::Status fits = !predictor->tabular_
                            ? absl::InvalidArgumentError("the model is not tabular")
                        : schema.ok() ? AcceptRawRows(*schema, &predictor->click_inputs_)
                                      : schema.status();
    if (!fits.ok()) {
      // (A newer pstrain's schema may hold what this one cannot read.)
      LOG(WARNING) << where << ": " << fits.message()
                   << "; the version takes its features' id form only, not raw rows";
      predictor->click_inputs_.schema = nullptr;
      predictor->click_inputs_.raw_columns.clear();
    }
  }
  predictor->example_size_ = NumElements(m.input_shape());
  predictor->version_ = exported.version;
  predictor->global_step_ = exported.global_step;
  predictor->exported_ = std::move(exported);
  absl::MutexLock lock(&predictor->mu_);
  predictor->model_ = std::move(*model);
  return predictor;
}

std::vector<Prediction> Predictor::Predict(const float* images, int64_t n) {
  CHECK(!is_click_model()) << "a click model takes PredictClicks";
  if (n == 0) return {};
  absl::MutexLock lock(&mu_);
  const float* input = images;
  if (exported_.per_image_standardization) {
    scratch_.assign(images, images + n * example_size_);
    for (int64_t i = 0; i < n; ++i)
      StandardizeImage(scratch_.data() + i * example_size_, example_size_);
    input = scratch_.data();
  }
  return ToPredictions(model_->Infer(exported_.params.data(), exported_.state.data(), input, n), n);
}

absl::Status Predictor::ApplyDelta(const ExportedModel& delta) {
  if (!is_click_model()) {
    return absl::InvalidArgumentError(
        absl::StrCat(delta.dir, ": a delta, but the model served has no embedding tables"));
  }
  // Checked whole before anything changes.
  if (delta.delta_of == 0 || delta.model != exported_.model ||
      delta.model_spec != exported_.model_spec || delta.table_names != exported_.table_names ||
      delta.table_dims != exported_.table_dims || delta.tables.size() != tables_.size() ||
      delta.params.size() != exported_.params.size() ||
      delta.state.size() != exported_.state.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(delta.dir, " is not a delta of the model served (", exported_.model, ")"));
  }
  if (delta.csv_schema != exported_.csv_schema) {
    // Its raw rows would be read by another schema than the one served.
    return absl::InvalidArgumentError(absl::StrCat(
        delta.dir, " keeps another CSV schema than the version served; load it whole"));
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    const TrainedTableRows& rows = delta.tables[t];
    if (rows.weights.size() != rows.ids.size() * tables_[t].dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          delta.dir, ": table ", exported_.table_names[t], " has rows of another dim"));
    }
    for (int64_t id : rows.ids) {
      if (table_buckets_[t] > 0 && id >= table_buckets_[t]) {
        return absl::InvalidArgumentError(
            absl::StrCat(delta.dir, ": table ", exported_.table_names[t], " has row ", id,
                         " past its ", table_buckets_[t], " buckets"));
      }
    }
  }
  absl::MutexLock lock(&mu_);
  if (delta.delta_of != version_) {
    return absl::InvalidArgumentError(absl::StrCat(delta.dir, " is a delta of version ",
                                                   delta.delta_of, "; version ", version_.load(),
                                                   " is served"));
  }
  std::copy(delta.params.begin(), delta.params.end(), exported_.params.begin());
  std::copy(delta.state.begin(), delta.state.end(), exported_.state.begin());
  for (size_t t = 0; t < tables_.size(); ++t) {
    Table& table = tables_[t];
    const TrainedTableRows& rows = delta.tables[t];
    for (size_t k = 0; k < rows.ids.size(); ++k) {
      const float* w = rows.weights.data() + k * table.dim;
      const bool removed = std::all_of(w, w + table.dim, [](float x) { return x == 0.0f; });
      const auto it = table.row_of.find(rows.ids[k]);
      if (removed) {
        // A removed row reads as zeros, as one never trained.
        if (it != table.row_of.end()) {
          table.free_rows.push_back(it->second);
          table.row_of.erase(it);
        }
        continue;
      }
      int64_t row = 0;
      if (it != table.row_of.end()) {
        row = it->second;
      } else if (!table.free_rows.empty()) {
        row = table.free_rows.back();
        table.free_rows.pop_back();
        table.row_of.emplace(rows.ids[k], row);
      } else {
        row = static_cast<int64_t>(table.weights.size() / table.dim);
        table.weights.resize(table.weights.size() + table.dim);
        table.row_of.emplace(rows.ids[k], row);
      }
      std::copy(w, w + table.dim, table.weights.begin() + row * table.dim);
    }
  }
  version_ = delta.version;
  global_step_ = delta.global_step;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Prediction>> Predictor::PredictClicks(const ClickRequest& request,
                                                                 int64_t* version) {
  CHECK(is_click_model()) << "only a click model takes PredictClicks";
  // In slices of kClickSlice instances: a step's rows, and a cross's
  // combinations (up to 65536 per instance), grow with the instances.
  constexpr int64_t kClickSlice = 64;
  std::vector<Prediction> predictions;
  predictions.reserve(request.n);
  absl::MutexLock lock(&mu_);
  if (version != nullptr) *version = version_;
  SparseBatch slice;
  for (int64_t begin = 0; begin < request.n; begin += kClickSlice) {
    const int64_t n = std::min(kClickSlice, request.n - begin);
    slice.features.resize(request.sparse.features.size());
    for (size_t f = 0; f < slice.features.size(); ++f) {
      const SparseFeatureColumn& all = request.sparse.features[f];
      SparseFeatureColumn& column = slice.features[f];
      column.name = all.name;
      column.kind = all.kind;
      column.Clear();
      for (int64_t i = begin; i < begin + n; ++i) column.AppendExample(all, i);
    }
    SparseStep step;
    if (absl::Status s = model_->PrepareSparse(slice, n, &step); !s.ok()) {
      return absl::InvalidArgumentError(InstanceMessage(s.message(), begin));
    }
    for (size_t t = 0; t < tables_.size(); ++t) {
      const Table& table = tables_[t];
      TableStep& rows = step.tables[t];
      rows.rows.assign(rows.ids.size() * table.dim, 0.0f);
      for (size_t k = 0; k < rows.ids.size(); ++k) {
        const auto it = table.row_of.find(rows.ids[k]);
        if (it == table.row_of.end()) continue;  // never trained: zeros
        std::copy_n(table.weights.begin() + it->second * table.dim, table.dim,
                    rows.rows.begin() + k * table.dim);
      }
    }
    const float* dense =
        request.dense.empty() ? nullptr : request.dense.data() + begin * click_inputs_.num_dense;
    std::vector<Prediction> some = ToPredictions(
        model_->Infer(exported_.params.data(), exported_.state.data(), dense, n, &step), n);
    predictions.insert(predictions.end(), some.begin(), some.end());
  }
  return predictions;
}

namespace {

// One head's prediction from its logits `z` (`classes` of a softmax head).
Prediction HeadPrediction(Head kind, const float* z, int classes) {
  Prediction out;
  if (kind == Head::kRegression) {
    out.regression = true;
    out.value = z[0];
  } else if (kind == Head::kBinary) {
    const float p =
        z[0] >= 0 ? 1.0f / (1.0f + std::exp(-z[0])) : std::exp(z[0]) / (1.0f + std::exp(z[0]));
    out.binary = true;
    out.logistic = p;
    out.probabilities = {1.0f - p, p};
    out.classes = p > 0.5f ? 1 : 0;
  } else {
    const float top = *std::max_element(z, z + classes);
    out.probabilities.resize(classes);
    double sum = 0.0;
    for (int j = 0; j < classes; ++j) sum += out.probabilities[j] = std::exp(z[j] - top);
    for (float& q : out.probabilities) q = static_cast<float>(q / sum);
    out.classes = std::max_element(z, z + classes) - z;
  }
  return out;
}

}  // namespace

std::vector<Prediction> Predictor::ToPredictions(const Tensor& logits, int64_t n) const {
  std::vector<Prediction> predictions(n);
  if (!heads_.empty()) {
    const int64_t width = logits.size() / std::max<int64_t>(n, 1);
    for (int64_t i = 0; i < n; ++i) {
      for (size_t h = 0; h < heads_.size(); ++h) {
        Prediction head = HeadPrediction(
            heads_[h].kind, logits.data() + i * width + head_offsets_[h], heads_[h].num_classes);
        head.name = heads_[h].name;
        predictions[i].heads.push_back(std::move(head));
      }
    }
    return predictions;
  }
  if (regression_) {
    for (int64_t i = 0; i < n; ++i) {
      predictions[i].regression = true;
      predictions[i].value = logits.data()[i];
    }
    return predictions;
  }
  if (binary_) {
    for (int64_t i = 0; i < n; ++i) {
      const float z = logits.data()[i];
      const float p = z >= 0 ? 1.0f / (1.0f + std::exp(-z)) : std::exp(z) / (1.0f + std::exp(z));
      Prediction& out = predictions[i];
      out.binary = true;
      out.logistic = p;
      out.probabilities = {1.0f - p, p};
      out.classes = p > 0.5f ? 1 : 0;
    }
    return predictions;
  }
  const int k = exported_.num_classes;
  for (int64_t i = 0; i < n; ++i) {
    const float* z = logits.data() + i * k;
    const float top = *std::max_element(z, z + k);
    Prediction& p = predictions[i];
    p.probabilities.resize(k);
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += p.probabilities[j] = std::exp(z[j] - top);
    for (float& q : p.probabilities) q = static_cast<float>(q / sum);
    p.classes = std::max_element(z, z + k) - z;
  }
  return predictions;
}

}  // namespace pstrain
