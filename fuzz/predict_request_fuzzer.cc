// pstrain-serve's :predict body readers: any body is read or refused with a
// message; whatever the fast reader (simdjson) takes, the general reader
// (nlohmann-json and ParseInstance) takes too, with the same instances. A
// click model's reader (serving/click_request.h) reads or refuses it too, and
// what it reads has one dense row and one offset per instance in every column,
// and so does its reader of raw rows by a CSV schema (every error
// InvalidArgument or, past 8 instances, ResourceExhausted; finite features);
// a sequence model (tokens as a sequence of 4, attention, pooling) answers
// it with finite logits whatever the lists' lengths.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "models/registry.h"
#include "serving/click_request.h"
#include "serving/request_reader.h"

namespace {

// Raw rows' schema: columns a (log1p) and b (standardized, bucketized too),
// user (hashed) and tokens (hashed, '|'-separated); missing: default.
constexpr char kRawSchema[] =
    "csv:\n  label: y\n  numeric:\n    - {name: a, transform: log1p}\n"
    "    - {name: b, transform: standardize, mean: 1, std: 2, default: 3}\n"
    "  categorical:\n    - {name: user, hash_buckets: 1000}\n"
    "    - {name: tokens, hash_buckets: 16, separator: \"|\"}\n"
    "    - {name: b, bucketize: [-1, 0, 2.5]}\n  missing: default\n";

constexpr char kSequenceModel[] =
    "input: [2]\nhead: binary\nlayers:\n"
    "  - embedding: {feature: tokens, dim: 4, dynamic: true, sequence: {max_length: 4, "
    "positions: from_end}, name: tokens}\n"
    "  - multi_head_attention: {heads: 2, key_dim: 2}\n"
    "  - sequence_pool: {mode: max, name: pooled}\n"
    "  - embedding: {feature: user, dim: 4, dynamic: true, name: user}\n"
    "  - din_attention: {input: tokens, query: user, units: 3, name: din}\n"
    "  - concat: {input: input, inputs: [pooled, user, din]}\n"
    "  - dense: {units: 1}\n";

// The sequence model's forward pass on `body`'s instances (read for the
// model's own features, in its order); aborts on a logit that is not finite.
void RunSequenceModel(std::string_view body) {
  static pstrain::Model* model = [] {
    auto built = pstrain::BuildModelFromSpecText(kSequenceModel, "fuzz");
    if (!built.ok()) std::abort();
    return built->release();
  }();
  static std::vector<float> params = [] {
    std::vector<float> p(model->num_params());
    model->InitializeVariables(1, p.data(), nullptr);
    return p;
  }();
  pstrain::ClickInputs inputs;
  inputs.num_dense = 2;
  inputs.features = model->sparse_features();
  pstrain::ClickRequest clicks;
  if (!pstrain::ReadClickRequest(body, inputs, 8, &clicks).ok() || clicks.n == 0) return;
  pstrain::SparseStep step;
  if (absl::Status s = model->PrepareSparse(clicks.sparse, clicks.n, &step); !s.ok()) {
    if (s.message().empty()) std::abort();
    return;  // a negative id, refused with a message
  }
  for (size_t t = 0; t < step.tables.size(); ++t) {
    step.tables[t].rows.assign(step.tables[t].ids.size() * model->sparse_tables()[t].dim, 0.25f);
  }
  const pstrain::Tensor& logits =
      model->Infer(params.data(), nullptr, clicks.dense.data(), clicks.n, &step);
  for (int64_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{2, 3, 1}, std::vector<int64_t>{2, 2, 3}}) {
    pstrain::PlainRequest plain, general;
    const bool fast = pstrain::ReadPlainRequest(body, shape, 8, &plain);
    const absl::Status s = pstrain::ReadGeneralRequest(body, shape, 8, &general);
    if (fast && (!s.ok() || plain.row != general.row || plain.n != general.n ||
                 plain.images != general.images)) {
      std::abort();
    }
    if (!s.ok() && s.message().empty()) std::abort();
  }
  pstrain::ClickInputs inputs;
  inputs.num_dense = 2;
  inputs.features = {"user", "tokens"};
  // The same inputs taking raw rows too, by a CSV schema.
  static const pstrain::ClickInputs raw_inputs = [] {
    absl::StatusOr<pstrain::CsvSchema> schema = pstrain::ParseCsvSchemaText(kRawSchema, "fuzz");
    pstrain::ClickInputs with_schema;
    with_schema.num_dense = 2;
    with_schema.features = {"user", "tokens"};
    if (!schema.ok() || !pstrain::AcceptRawRows(*schema, &with_schema).ok()) std::abort();
    return with_schema;
  }();
  for (const pstrain::ClickInputs* in :
       {static_cast<const pstrain::ClickInputs*>(&inputs), &raw_inputs}) {
    pstrain::ClickRequest clicks;
    const absl::Status read = pstrain::ReadClickRequest(body, *in, 8, &clicks);
    if (!read.ok() && read.message().empty()) std::abort();
    if (!read.ok() && !absl::IsInvalidArgument(read) && !absl::IsResourceExhausted(read)) {
      std::abort();
    }
    if (!read.ok()) continue;
    if (clicks.n > 8 || clicks.dense.size() != static_cast<size_t>(clicks.n) * 2) std::abort();
    for (float v : clicks.dense) {
      if (!std::isfinite(v)) std::abort();
    }
    for (const pstrain::SparseFeatureColumn& column : clicks.sparse.features) {
      if (column.examples() != clicks.n ||
          column.offsets.back() != static_cast<int64_t>(column.values.size())) {
        std::abort();
      }
    }
  }
  RunSequenceModel(body);
  return 0;
}
