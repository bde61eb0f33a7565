#include "models/model_summary.h"

#include <algorithm>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/embedding.h"
#include "models/model.h"
#include "models/spec_builder.h"

namespace pstrain {
namespace {

// "1,234,567", as Keras prints counts.
std::string Grouped(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

// "(None, 30, 8)": the batch first, as Keras.
std::string BatchShape(const Shape& shape) {
  std::vector<std::string> dims = {"None"};
  for (int64_t d : shape) dims.push_back(absl::StrCat(d));
  return absl::StrCat("(", absl::StrJoin(dims, ", "), ")");
}

std::string Padded(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

}  // namespace

absl::StatusOr<ModelSummary> SummarizeModelSpec(const ModelSpec& spec, const std::string& source) {
  SpecBuildOptions unfused;
  unfused.fuse_residual_blocks = false;
  absl::StatusOr<std::unique_ptr<Model>> built = BuildModelFromSpec(spec, source, unfused);
  if (!built.ok()) return built.status();
  const Model& model = **built;
  ModelSummary s;
  s.name = model.name();
  s.input_shape = model.input_shape();
  s.num_classes = model.num_classes();
  s.binary = model.head() == Head::kBinary;
  if (model.head() == Head::kRegression) s.regression_loss = spec.loss;
  for (const HeadSpec& h : spec.heads) {
    if (spec.heads.size() < 2) break;
    s.heads.push_back(absl::StrCat(h.name, ": ", h.kind,
                                   h.kind == "softmax" ? absl::StrCat(" of ", h.classes, " classes")
                                   : h.kind == "regression" ? absl::StrCat(", ", h.loss, " loss")
                                                            : "",
                                   " on ", h.input, " (label ", h.label, ", weight ", h.weight,
                                   ")"));
  }
  s.sparse_features = model.sparse_features();
  std::set<std::string> counted;  // shared tables counted once
  // The model's layers of each spec layer: in order, one or more (a layer
  // with an activation of its own is built as two), up to the next spec
  // layer's (a name may hold '/', so names are matched whole).
  std::vector<int> spec_layer_of(model.num_layers(), -1);
  for (size_t i = 0, j = 0; i < spec.layers.size(); ++i) {
    const std::string* next = i + 1 < spec.layers.size() ? &spec.layers[i + 1].name : nullptr;
    for (; j < model.num_layers(); ++j) {
      if (next != nullptr && model.layer_name(j) == *next) break;
      spec_layer_of[j] = static_cast<int>(i);
    }
  }
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    LayerSummary& row = s.layers.emplace_back();
    row.name = l.name;
    row.type = l.type;
    row.line = l.line;
    for (const std::string& in : LayerInputNames(l)) {
      row.inputs.push_back(!in.empty() ? in : i == 0 ? "input" : spec.layers[i - 1].name);
    }
    // The output: that of its last model layer.
    for (size_t j = 0; j < model.num_layers(); ++j) {
      if (spec_layer_of[j] == static_cast<int>(i)) row.output_shape = model.layer_output_shape(j);
    }
    // Frozen variables (`trainable: false`) count as non-trainable, as Keras counts them.
    for (const VariableInfo& v : model.variables()) {
      if (v.layer < 0 || spec_layer_of[v.layer] != static_cast<int>(i)) continue;
      (v.trainable && !v.spec.frozen ? row.trainable : row.non_trainable) += v.size;
    }
    // Its tables, by the names the model gives them.
    std::vector<std::string> names;
    if (l.type == "embedding") names.push_back(l.table.empty() ? l.name + "/embeddings" : l.table);
    if (l.type == "linear") {
      for (const std::string& f : l.features) names.push_back(l.name + "/" + f);
      for (const auto& cross : l.crosses) names.push_back(l.name + "/" + CrossTableName(cross));
    }
    for (const std::string& name : names) {
      auto t = std::find_if(model.sparse_tables().begin(), model.sparse_tables().end(),
                            [&](const SparseTableInfo& info) { return info.name == name; });
      if (t == model.sparse_tables().end()) continue;
      TableSummary& table = row.tables.emplace_back();
      table.name = t->name;
      if (t->cross.empty()) {
        // A shared table is read by this layer's feature; another by its own.
        table.feature = t->name == l.table ? l.feature : model.sparse_features()[t->feature];
      } else {
        std::vector<std::string> crossed;
        for (int f : t->cross) crossed.push_back(model.sparse_features()[f]);
        table.feature = CrossTableName(crossed);
      }
      table.buckets = t->buckets;
      table.dim = t->dim;
      table.shared = !l.table.empty() && t->name == l.table;
      if (!counted.insert(t->name).second) continue;
      if (t->buckets > 0) {
        s.table_values += t->buckets * t->dim;
      } else {
        ++s.dynamic_tables;
      }
    }
    s.trainable += row.trainable;
    s.non_trainable += row.non_trainable;
  }
  return s;
}

std::string FormatModelSummary(const ModelSummary& s) {
  constexpr size_t kLayer = 34, kShape = 22, kParams = 12;
  const std::string rule(kLayer + kShape + kParams + 24, '=');
  const std::string thin(rule.size(), '_');
  std::string out = absl::StrCat(
      "Model: \"", s.name, "\" (input ", BatchShape(s.input_shape), ", ",
      !s.heads.empty() ? absl::StrCat(s.heads.size(), " heads: ", absl::StrJoin(s.heads, "; "))
      : s.binary       ? "binary head: one logit, sigmoid"
      : !s.regression_loss.empty()
          ? absl::StrCat("regression head: one value, ", s.regression_loss, " loss")
          : absl::StrCat(s.num_classes, " classes, softmax"),
      s.sparse_features.empty()
          ? ""
          : absl::StrCat("; sparse features ", absl::StrJoin(s.sparse_features, ", ")),
      ")\n", thin, "\n");
  absl::StrAppend(&out, " ", Padded("Layer (type)", kLayer), Padded("Output Shape", kShape),
                  Padded("Param #", kParams), "Takes\n", rule, "\n");
  for (const LayerSummary& l : s.layers) {
    absl::StrAppend(&out, " ", Padded(absl::StrCat(l.name, " (", l.type, ")"), kLayer),
                    Padded(BatchShape(l.output_shape), kShape),
                    Padded(Grouped(l.trainable + l.non_trainable), kParams),
                    absl::StrJoin(l.inputs, ", "), "\n");
    for (const TableSummary& t : l.tables) {
      absl::StrAppend(&out, "   table ", t.name, t.shared ? " (shared)" : "", ": ",
                      t.buckets > 0 ? Grouped(t.buckets) : "dynamic", " rows x ", t.dim, " by ",
                      t.feature, "\n");
    }
  }
  absl::StrAppend(&out, rule, "\n", "Total params: ", Grouped(s.trainable + s.non_trainable), "\n",
                  "Trainable params: ", Grouped(s.trainable), "\n",
                  "Non-trainable params: ", Grouped(s.non_trainable), "\n");
  if (s.table_values > 0 || s.dynamic_tables > 0) {
    absl::StrAppend(&out, "Embedding rows (on the parameter servers): ", Grouped(s.table_values),
                    " values in bucketed tables",
                    s.dynamic_tables > 0
                        ? absl::StrCat(", and ", s.dynamic_tables,
                                       " dynamic table(s) that grow with the ids seen")
                        : "",
                    "\n");
  }
  absl::StrAppend(&out, thin, "\n");
  return out;
}

}  // namespace pstrain
