// Model specs from any text: parsed, built, and (when small enough to run
// quickly) one training step and one evaluation on a tiny batch, and the
// model written as ONNX. Nothing may crash; a spec that is refused says why;
// a built model's loss is a number.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "config/model_spec.h"
#include "models/spec_builder.h"
#include "onnx/onnx_export.h"

namespace {

// A broken promise: says which, for the log beside libFuzzer's "deadly
// signal", and aborts.
[[noreturn]] void Fail(const char* what, const absl::Status& status = absl::OkStatus()) {
  std::fprintf(stderr, "model_spec_fuzzer: %s%s%s\n", what, status.ok() ? "" : " ",
               status.ok() ? "" : status.ToString().c_str());
  std::abort();
}

// Specs whose passes would take long or much memory are parsed and built,
// not run.
bool SmallEnough(const pstrain::ModelSpec& spec) {
  int64_t input = 1;
  for (int64_t d : spec.input) input *= d;
  if (input > 4096 || spec.classes > 64 || spec.layers.size() > 64) return false;
  for (const pstrain::LayerSpec& l : spec.layers) {
    if (l.filters > 32 || l.units > 256) return false;
    // Sequences: the attention weights are batch x heads x L x L.
    if (l.max_length > 64 || l.dim > 256 || int64_t{l.heads} * l.key_dim > 256 ||
        int64_t{l.heads} * l.value_dim > 256) {
      return false;
    }
    // mmoe: experts x layers GEMMs, tasks gates.
    if (l.experts > 16 || l.tasks > 16 || l.expert_units.size() > 8) return false;
    for (int units : l.expert_units) {
      if (units > 256) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<pstrain::ModelSpec> spec = pstrain::ParseModelSpec(text, "fuzz.yaml");
  if (!spec.ok()) {
    if (spec.status().message().empty()) Fail("refused without a message");
    return 0;
  }
  // What a spec writes out, it reads back the same.
  absl::StatusOr<pstrain::ModelSpec> again =
      pstrain::ParseModelSpec(pstrain::ModelSpecToYaml(*spec), "again.yaml");
  if (!again.ok()) Fail("the spec it wrote is refused:", again.status());
  // The same but for the lines its layers and heads were read at.
  if (!pstrain::SameModelSpec(*spec, *again)) Fail("the spec it wrote reads back different");
  if (!SmallEnough(*spec)) return 0;
  absl::StatusOr<std::unique_ptr<pstrain::Model>> model =
      pstrain::BuildModelFromSpec(*spec, "fuzz.yaml");
  if (!model.ok()) {
    if (model.status().message().empty()) Fail("the model refused without a message");
    return 0;
  }
  pstrain::Model& m = **model;
  if (m.num_params() > (1 << 18)) return 0;
  std::vector<float> params(m.num_params()), state(m.num_state()), grads(m.num_params()),
      stats(m.num_state());
  m.InitializeVariables(1, params.data(), state.data());
  int64_t example = 1;
  for (int64_t d : m.input_shape()) example *= d;
  constexpr int kBatch = 2;
  std::vector<float> images(kBatch * example, 0.5f);
  // Labels 0 and 1 for each head (a class every head has, a value for a
  // regression head).
  std::vector<float> labels;
  for (float y : {0.0f, 1.0f}) labels.insert(labels.end(), m.num_labels(), y);
  // Sparse layers read rows: two examples, with no value (an empty
  // sequence) and with ids {1, 2, 2}.
  pstrain::SparseStep sparse;
  if (m.has_sparse()) {
    pstrain::SparseBatch batch;
    for (const std::string& name : m.sparse_features()) {
      pstrain::SparseFeatureColumn column;
      column.name = name;
      column.kind = pstrain::SparseValueKind::kTokens;  // valid for any buckets
      column.values = {1, 2, 2};
      column.offsets = {0, 0, 3};
      batch.features.push_back(std::move(column));
    }
    const absl::Status prepared = m.PrepareSparse(batch, kBatch, &sparse);
    if (!prepared.ok()) Fail("PrepareSparse refused a valid batch:", prepared);
    for (size_t t = 0; t < sparse.tables.size(); ++t) {
      sparse.tables[t].rows.assign(sparse.tables[t].ids.size() * m.sparse_tables()[t].dim, 0.1f);
    }
  }
  pstrain::SparseStep* rows = m.has_sparse() ? &sparse : nullptr;
  const pstrain::LossResult train =
      m.TrainStep(params.data(), state.data(), images.data(), labels.data(), kBatch, 1,
                  grads.data(), stats.data(), nullptr, rows);
  const pstrain::LossResult eval =
      m.Evaluate(params.data(), state.data(), images.data(), labels.data(), kBatch, rows);
  if (std::isnan(train.loss_sum) || std::isnan(eval.loss_sum)) Fail("the loss is NaN");
  // The ONNX export, when its tables are small: written, or refused saying why.
  int64_t table_floats = 0;
  for (const pstrain::SparseTableInfo& t : m.sparse_tables()) table_floats += t.buckets * t.dim;
  if (table_floats <= (1 << 20)) {
    const std::vector<pstrain::TrainedTableRows> no_rows(m.sparse_tables().size());
    absl::StatusOr<std::string> onnx = pstrain::ModelToOnnx(m, params, state, no_rows);
    if (!onnx.ok() && onnx.status().message().empty()) Fail("ONNX refused without a message");
    if (onnx.ok() && onnx->empty()) Fail("ONNX export is empty");
  }
  return 0;
}
