// pstrain-data synthetic-ctr: a synthetic click dataset in Criteo TSV
// (data/synthetic/synthetic_ctr.h) and its planted model's quality, the best
// attainable; or, with --stream, a click log that grows by a file every few
// seconds, for online training.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "data/formats/criteo.h"
#include "data/formats/gzip.h"
#include "data/synthetic/synthetic_ctr.h"
#include "data/tool/commands.h"
#include "data/tool/flag_parser.h"

namespace pstrain::data_tool {
namespace {

// The next `n` examples of `examples` as Criteo TSV in `path` (gzip'd if
// `gzip`), an AtomicWritableFile: whole or not there. Its temp file is
// hidden, so a follower's pattern never matches half a file.
absl::Status WriteTsvFile(Env* env, SyntheticCtr::Stream& examples, int64_t n,
                          const std::string& path, bool gzip) {
  CriteoBatch batch;
  std::string text;
  absl::StatusOr<std::unique_ptr<AtomicWritableFile>> file = env->NewAtomicWritableFile(path);
  if (!file.ok()) return file.status();
  std::unique_ptr<GzipWriter> zipped;
  if (gzip) zipped = std::make_unique<GzipWriter>(file->get(), path);
  for (int64_t done = 0; done < n;) {
    const int64_t take = std::min<int64_t>(1 << 14, n - done);
    examples.Next(take, &batch);
    text.clear();
    for (int64_t row = 0; row < batch.size(); ++row) AppendCriteoLine(batch, row, &text);
    absl::Status st = gzip ? zipped->Append(text) : (*file)->Append(text);
    if (!st.ok()) return st;
    done += take;
  }
  if (gzip) {
    if (absl::Status st = zipped->Close(); !st.ok()) return st;
  }
  return (*file)->Commit();
}

// The first `n` training examples of `generator` in `shards` files
// <prefix>-00000-of-0000N.tsv[.gz], in order (shard i holds examples
// [i n / shards, (i + 1) n / shards)); each file whole or not there.
absl::Status WriteShards(Env* env, const SyntheticCtr& generator, const std::string& prefix,
                         int64_t n, int shards, bool gzip) {
  SyntheticCtr::Stream examples = generator.NewStream(kSyntheticTrainStream);
  for (int s = 0; s < shards; ++s) {
    const std::string path =
        absl::StrFormat("%s-%05d-of-%05d.tsv%s", prefix, s, shards, gzip ? ".gz" : "");
    const int64_t begin = n * s / shards, end = n * (s + 1) / shards;
    if (absl::Status st = WriteTsvFile(env, examples, end - begin, path, gzip); !st.ok()) {
      return st;
    }
    std::fprintf(stderr, "wrote %s: %lld examples\n", path.c_str(),
                 static_cast<long long>(end - begin));
  }
  return absl::OkStatus();
}

// --days: the first `n` training examples in `days` files
// <prefix>-day-00000.tsv[.gz], ... (day d: examples [d n / days, (d + 1) n /
// days)), each day's from its own model (SyntheticCtr::SetDay) and stream.
absl::Status WriteDays(Env* env, SyntheticCtr generator, const std::string& prefix, int64_t n,
                       int64_t days, double shift, bool gzip) {
  for (int64_t d = 0; d < days; ++d) {
    generator.SetDay(shift, d);
    const std::string path = absl::StrFormat("%s-day-%05d.tsv%s", prefix, d, gzip ? ".gz" : "");
    const int64_t begin = n * d / days, end = n * (d + 1) / days;
    const uint64_t stream = 2000 + static_cast<uint64_t>(d);
    SyntheticCtr::Stream examples = generator.NewStream(stream);
    if (absl::Status st = WriteTsvFile(env, examples, end - begin, path, gzip); !st.ok()) {
      return st;
    }
    absl::StatusOr<PlantedModelQuality> own =
        generator.Evaluate(generator.Generate(std::min<int64_t>(end - begin, 20000), stream));
    std::fprintf(stderr, "wrote %s: %lld examples; that day's planted AUC %s\n", path.c_str(),
                 static_cast<long long>(end - begin),
                 own.ok() ? absl::StrFormat("%.4f", own->auc).c_str() : "(too few examples)");
  }
  return absl::OkStatus();
}

// --stream: file k of a drifting click log every `every` seconds.
int WriteSyntheticStream(Env* env, SyntheticCtr generator, const std::string& dir, int64_t examples,
                         double every, double drift, int64_t count, bool gzip) {
  if (absl::Status s = env->CreateDirs(dir); !s.ok()) return Fail(s);
  SyntheticCtr first = generator;
  first.SetDrift(drift, 0);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t k = 0; count == 0 || k < count; ++k) {
    generator.SetDrift(drift, k);
    const uint64_t stream = 1000 + static_cast<uint64_t>(k);
    const std::string name = absl::StrFormat("part-%05d.tsv%s", k, gzip ? ".gz" : "");
    const std::string path = JoinPath(dir, name);
    // Written under a hidden temp name no pattern matches, then committed:
    // a follower never sees half a file.
    SyntheticCtr::Stream source = generator.NewStream(stream);
    if (absl::Status s = WriteTsvFile(env, source, examples, path, gzip); !s.ok()) {
      return Fail(s);
    }
    const CriteoBatch batch = generator.Generate(examples, stream);
    absl::StatusOr<PlantedModelQuality> now = generator.Evaluate(batch);
    absl::StatusOr<PlantedModelQuality> then = first.Evaluate(batch);
    if (!now.ok()) return Fail(now.status());
    if (!then.ok()) return Fail(then.status());
    std::printf(
        "shard %lld: %lld examples to %s; planted AUC %.4f (the first shard's model: %.4f)\n",
        static_cast<long long>(k), static_cast<long long>(examples), path.c_str(), now->auc,
        then->auc);
    std::fflush(stdout);
    if (count != 0 && k + 1 == count) break;
    std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::duration<double>(every * (k + 1))));
  }
  return 0;
}

}  // namespace

int RunSyntheticCtr(Env* env, std::span<const std::string> args) {
  std::string out, test_out, stream_dir;
  int64_t examples = -1, test_examples = 100000;
  int64_t shards = 0, count = 0, days = 0;
  double every = -1, drift = 0, day_shift = 0.2;
  bool gzip = false;
  SyntheticCtrConfig config;
  FlagParser flags;
  flags.String("--out", &out);
  flags.String("--test_out", &test_out);
  flags.Int("--examples", &examples, 0);
  flags.Int("--test_examples", &test_examples, 2);
  flags.Int("--seed", &config.seed);
  flags.Int("--shards", &shards, 1, 99999);
  flags.Int("--days", &days, 1, 99999);
  flags.Double("--day_shift", &day_shift, 0, 1);
  flags.String("--stream", &stream_dir);
  flags.Double("--every", &every, 0, std::numeric_limits<double>::infinity());
  flags.Double("--drift", &drift, 0, 1);
  flags.Int("--count", &count, 0, 99999);
  flags.Switch("--gzip", &gzip);
  if (!flags.Parse(args)) return Usage();
  if (!stream_dir.empty()) {
    if (examples < 2 || every < 0 || !out.empty() || shards > 0) return Usage();
    absl::StatusOr<SyntheticCtr> generator = SyntheticCtr::Create(config);
    if (!generator.ok()) return Fail(generator.status());
    return WriteSyntheticStream(env, *std::move(generator), stream_dir, examples, every, drift,
                                count, gzip);
  }
  if (out.empty() || examples < 0 || (days > 0 && shards > 0)) return Usage();
  absl::StatusOr<SyntheticCtr> generator = SyntheticCtr::Create(config);
  absl::Status status = generator.status();
  std::string where = out;
  if (status.ok() && days > 0) {
    std::string prefix = out;
    if (absl::EndsWith(prefix, ".tsv")) prefix.resize(prefix.size() - 4);
    where = absl::StrFormat("%s-day-*.tsv%s (%lld days, day_shift %g)", prefix, gzip ? ".gz" : "",
                            static_cast<long long>(days), day_shift);
    status = WriteDays(env, *generator, prefix, examples, days, day_shift, gzip);
  } else if (status.ok() && (shards > 0 || gzip)) {
    std::string prefix = out;
    if (absl::EndsWith(prefix, ".tsv")) prefix.resize(prefix.size() - 4);
    where = absl::StrFormat("%s-*-of-%05d.tsv%s", prefix, std::max<int64_t>(shards, 1),
                            gzip ? ".gz" : "");
    status = WriteShards(env, *generator, prefix, examples,
                         static_cast<int>(std::max<int64_t>(shards, 1)), gzip);
  } else if (status.ok()) {
    status = generator->WriteTsv(env, out, examples, kSyntheticTrainStream);
  }
  if (status.ok() && !test_out.empty()) {
    status = generator->WriteTsv(env, test_out, test_examples, kSyntheticTestStream);
  }
  absl::StatusOr<PlantedModelQuality> quality =
      status.ok() ? generator->Evaluate(generator->Generate(test_examples, kSyntheticTestStream))
                  : status;
  if (!quality.ok()) return Fail(quality.status());
  std::printf(
      "wrote %lld examples to %s (seed %llu)\n"
      "planted model on %lld test examples: AUC %.4f, log loss %.4f; base rate %.4f, its log "
      "loss %.4f\n",
      static_cast<long long>(examples), where.c_str(), static_cast<unsigned long long>(config.seed),
      static_cast<long long>(quality->examples), quality->auc, quality->log_loss,
      quality->base_rate, quality->base_rate_log_loss);
  return 0;
}

}  // namespace pstrain::data_tool
