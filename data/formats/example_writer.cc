#include "data/formats/example_writer.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/record_writer.h"
#include "common/status_macros.h"
#include "data/formats/criteo_format.h"
#include "proto/example.pb.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<ShardedExampleWriter>> ShardedExampleWriter::Create(
    Env* env, const std::string& prefix, int shards) {
  if (shards < 1 || shards > 99999) {
    return absl::InvalidArgumentError(
        absl::StrCat("shards = ", shards, ": write 1 to 99999 files"));
  }
  std::vector<std::string> paths;
  std::vector<Shard> files;  // on an error, destroyed uncommitted: no file is left
  for (int s = 0; s < shards; ++s) {
    paths.push_back(absl::StrFormat("%s-%05d-of-%05d.tfrecord.gz", prefix, s, shards));
    Shard shard;
    PSTRAIN_ASSIGN_OR_RETURN(shard.file, env->NewAtomicWritableFile(paths.back()));
    shard.zipped = std::make_unique<GzipWriter>(shard.file.get(), paths.back());
    files.push_back(std::move(shard));
  }
  return std::unique_ptr<ShardedExampleWriter>(
      new ShardedExampleWriter(std::move(paths), std::move(files)));
}

absl::Status ShardedExampleWriter::Add(std::string_view example) {
  Shard& shard = shards_[static_cast<size_t>(examples_ % static_cast<int64_t>(shards_.size()))];
  PSTRAIN_RETURN_IF_ERROR(shard.zipped->Append(RecordWriter::Frame(example)));
  ++examples_;
  return absl::OkStatus();
}

absl::Status ShardedExampleWriter::Close() {
  std::vector<AtomicWritableFile*> files;
  for (Shard& shard : shards_) {
    PSTRAIN_RETURN_IF_ERROR(shard.zipped->Close());  // the gzip trailer; closes the file
    files.push_back(shard.file.get());
  }
  return CommitFiles(files);
}

absl::StatusOr<std::string> EncodeTabularExample(const Dataset& data, int64_t i, bool float_label,
                                                 const std::vector<std::string>& label_names) {
  tf::Example example;
  auto& f = *example.mutable_features()->mutable_feature();
  if (label_names.size() != static_cast<size_t>(data.label_width)) {
    return absl::InvalidArgumentError(absl::StrCat("examples of ", data.label_width,
                                                   " labels, but ", label_names.size(),
                                                   " label names to write them as"));
  }
  for (int l = 0; l < data.label_width; ++l) {
    const float label = data.labels[i * data.label_width + l];
    const std::string& name = label_names[l];
    if (float_label) {
      f[name].mutable_float_list()->add_value(label);
    } else if (label >= 0 && label == std::floor(label) && label < 9.2e18f) {
      f[name].mutable_int64_list()->add_value(static_cast<int64_t>(label));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "label ", label, data.label_width > 1 ? absl::StrCat(" (", name, ")") : "",
          " of example ", i,
          " is not a class id (a whole number >= 0) to write as an int64; write labels as "
          "floats (pstrain-data convert --label_type=float)"));
    }
  }
  if (data.num_dense > 0) {
    auto* dense = f["dense"].mutable_float_list();
    for (int64_t k = 0; k < data.num_dense; ++k)
      dense->add_value(data.dense[i * data.num_dense + k]);
  }
  for (const SparseFeatureColumn& c : data.sparse) {
    if (c.kind != SparseValueKind::kIds) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feature ", c.name, " holds hashed strings, which a tf.train.Example cannot carry"));
    }
    if (c.offsets[i] == c.offsets[i + 1]) continue;
    auto* ids = f[c.name].mutable_int64_list();
    for (int64_t v = c.offsets[i]; v < c.offsets[i + 1]; ++v) {
      ids->add_value(static_cast<int64_t>(c.values[v]));
    }
  }
  return example.SerializeAsString();
}

std::string EncodeCriteoExample(const CriteoBatch& batch, int64_t row) {
  tf::Example example;
  auto& f = *example.mutable_features()->mutable_feature();
  f["label"].mutable_int64_list()->add_value(static_cast<int64_t>(batch.labels[row]));
  auto* dense = f["dense"].mutable_float_list();
  for (int j = 0; j < kCriteoNumDense; ++j) {
    const int64_t k = row * kCriteoNumDense + j;
    dense->add_value(CriteoLog1p(batch.dense[k], batch.dense_present[k] != 0));
  }
  char hex[16];
  for (int c = 0; c < kCriteoNumCategorical; ++c) {
    const uint32_t id = batch.categorical[row * kCriteoNumCategorical + c];
    if (id == kCriteoMissingId) continue;
    std::snprintf(hex, sizeof(hex), "%08x", id);
    f[absl::StrCat("C", c + 1)].mutable_bytes_list()->add_value(hex, kCriteoHexDigits);
  }
  return example.SerializeAsString();
}

}  // namespace pstrain
