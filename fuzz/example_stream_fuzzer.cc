// Streamed input (data/stream/example_stream.h) over one file in memory: TFRecord
// Examples or Criteo TSV, plain or gzip'd. Byte 0: bit 0 picks Criteo, bit 1
// names the file .gz (read as gzip); byte 1 % 4: the dense features an
// Example holds. Every batch must be well formed, and a stream resumed at
// the position of its second batch must hand out what the first one did.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/env.h"
#include "data/stream/example_stream.h"

namespace {

void CheckBatch(const pstrain::Dataset& d) {
  const size_t n = d.labels.size();
  if (!d.tabular || d.dense.size() != n * d.num_dense) std::abort();
  for (const pstrain::SparseFeatureColumn& c : d.sparse) {
    if (c.offsets.size() != n + 1 || c.offsets[0] != 0 ||
        c.offsets.back() != static_cast<int64_t>(c.values.size())) {
      std::abort();
    }
  }
}

// Up to 64 batches' labels and dense values, then the status that ended it.
std::vector<std::vector<float>> Drain(pstrain::ExampleStream& s, absl::Status* end) {
  std::vector<std::vector<float>> out;
  pstrain::Dataset batch;
  for (int i = 0; i < 64; ++i) {
    *end = s.Next(&batch);
    if (!end->ok()) break;
    CheckBatch(batch);
    std::vector<float> v(batch.labels.begin(), batch.labels.end());
    v.insert(v.end(), batch.dense.begin(), batch.dense.end());
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  pstrain::MemEnv env;
  const bool criteo = (data[0] & 1) != 0;
  const std::string path = std::string("/d/part-0") + (criteo ? ".tsv" : ".tfrecord") +
                           ((data[0] & 2) != 0 ? ".gz" : "");
  (void)env.WriteFileAtomic(path, std::string(reinterpret_cast<const char*>(data) + 2, size - 2));
  pstrain::ExampleStreamOptions o;
  o.files = {path};
  o.format = criteo ? pstrain::ExampleFormat::kCriteoTsv : pstrain::ExampleFormat::kTfExamples;
  o.features.num_dense = data[1] % 4;
  o.features.sparse = {"user", "tokens"};
  o.batch_size = 2;
  o.shuffle_buffer = 3;
  o.num_epochs = 2;
  absl::StatusOr<std::unique_ptr<pstrain::ExampleStream>> stream =
      pstrain::ExampleStream::Create(&env, o);
  if (!stream.ok()) std::abort();  // the options are valid
  pstrain::Dataset first;
  absl::Status s = (*stream)->Next(&first);
  if (!s.ok()) {
    if (s.message().empty()) std::abort();
    return 0;
  }
  const pstrain::InputPosition at = (*stream)->position();
  absl::Status end;
  const std::vector<std::vector<float>> rest = Drain(**stream, &end);
  absl::StatusOr<pstrain::InputPosition> read = pstrain::InputPosition::FromString(at.ToString());
  if (!read.ok() || !(*read == at)) std::abort();
  absl::StatusOr<std::unique_ptr<pstrain::ExampleStream>> resumed =
      pstrain::ExampleStream::Create(&env, o, *read);
  if (!resumed.ok()) std::abort();
  absl::Status resumed_end;
  if (Drain(**resumed, &resumed_end) != rest || resumed_end.code() != end.code()) std::abort();
  return 0;
}
