#include "data/formats/criteo_dataset.h"

#include <memory>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "data/feature_hash.h"

namespace pstrain {
namespace {

// Fingerprint64 of `id` as 8 lowercase hex digits, AppendCriteoLine's "%08x".
uint64_t HexFingerprint(uint32_t id) {
  constexpr char kDigits[] = "0123456789abcdef";
  char text[kCriteoHexDigits];
  for (int i = kCriteoHexDigits - 1; i >= 0; --i, id >>= 4) text[i] = kDigits[id & 0xf];
  return Fingerprint64(std::string_view(text, kCriteoHexDigits));
}

void InitCriteoDataset(Dataset* dataset) {
  dataset->tabular = true;
  dataset->num_dense = kCriteoNumDense;
  dataset->sparse.resize(kCriteoNumCategorical);
  for (int c = 0; c < kCriteoNumCategorical; ++c) {
    dataset->sparse[c].name = absl::StrCat("C", c + 1);
    dataset->sparse[c].kind = SparseValueKind::kTokens;
  }
}

}  // namespace

void AppendCriteoBatch(const CriteoBatch& batch, Dataset* dataset) {
  if (!dataset->tabular) InitCriteoDataset(dataset);
  for (float label : batch.labels) dataset->labels.push_back(label != 0.0f ? 1 : 0);
  const std::vector<float> dense = CriteoDenseLog1p(batch);
  dataset->dense.insert(dataset->dense.end(), dense.begin(), dense.end());
  for (int c = 0; c < kCriteoNumCategorical; ++c) {
    SparseFeatureColumn& column = dataset->sparse[c];
    for (int64_t row = 0; row < batch.size(); ++row) {
      const uint32_t id = batch.categorical[row * kCriteoNumCategorical + c];
      if (id != kCriteoMissingId) column.values.push_back(HexFingerprint(id));
      column.offsets.push_back(static_cast<int64_t>(column.values.size()));
    }
  }
}

Dataset CriteoToDataset(const CriteoBatch& batch) {
  Dataset dataset;
  InitCriteoDataset(&dataset);
  AppendCriteoBatch(batch, &dataset);
  return dataset;
}

std::vector<std::string> CriteoFileNames(Split split) {
  return split == Split::kTrain ? std::vector<std::string>{"train.tsv"}
                                : std::vector<std::string>{"test.tsv", "eval.tsv"};
}

std::string FindCriteoFile(Env* env, const std::string& dir, Split split) {
  for (const std::string& name : CriteoFileNames(split)) {
    std::string path = JoinPath(dir, name);
    if (env->FileExists(path)) return path;
  }
  return "";
}

absl::StatusOr<Dataset> ReadCriteoDataset(Env* env, const std::string& path) {
  absl::StatusOr<std::unique_ptr<CriteoReader>> reader = CriteoReader::Open(env, path);
  if (!reader.ok()) return reader.status();
  Dataset dataset;
  InitCriteoDataset(&dataset);
  CriteoBatch chunk;
  constexpr int64_t kChunkRows = 1 << 16;
  for (;;) {
    const absl::Status s = (*reader)->ReadBatch(kChunkRows, &chunk);
    if (absl::IsOutOfRange(s)) return dataset;
    if (!s.ok()) return s;
    AppendCriteoBatch(chunk, &dataset);
  }
}

}  // namespace pstrain
