// pstrain-data convert: MNIST idx or CIFAR-10 binary files in a directory ->
// TFRecord files of tf.train.Example (data/formats/convert.h); Criteo TSV or CSV
// files -> sharded gzip'd TFRecords.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/formats/convert.h"
#include "data/formats/criteo.h"
#include "data/formats/csv_format.h"
#include "data/formats/example_format.h"
#include "data/formats/example_writer.h"
#include "data/formats/record_stream.h"
#include "data/stream/example_stream.h"
#include "data/stream/file_pattern.h"
#include "data/tool/commands.h"
#include "data/tool/flag_parser.h"

namespace pstrain::data_tool {
namespace {

// Criteo TSV or CSV files -> sharded gzip'd TFRecords of tf.train.Example.
int ConvertExamples(Env* env, std::span<const std::string> args) {
  const std::string& pattern = args[0];
  std::string out, schema_path, label_type = "int64";
  int64_t shards = 1;
  FlagParser flags;
  flags.String("--out", &out);
  flags.String("--csv_schema", &schema_path);
  flags.String("--label_type", &label_type);
  flags.Int("--shards", &shards, 1, 99999);
  if (!flags.Parse(args.subspan(1)) || out.empty()) return Usage();
  if (label_type != "int64" && label_type != "float") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--label_type ", label_type,
                     ": int64 (a class id, the default) or float (a regression head's value)")));
  }
  // One type for every example, as tf.io.FixedLenFeature takes one.
  const bool float_labels = label_type == "float";
  absl::StatusOr<std::vector<std::string>> files =
      ExpandFilePatterns(env, pattern, "pstrain-data convert");
  if (!files.ok()) return Fail(files.status());
  absl::StatusOr<ExampleFormat> format = ExampleFormatOfFiles(*files, "pstrain-data convert");
  if (!format.ok()) return Fail(format.status());
  const bool criteo = *format == ExampleFormat::kCriteoTsv;
  const bool csv = *format == ExampleFormat::kCsv;
  if (!criteo && !csv) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat(pattern,
                     ": convert reads Criteo TSV (.tsv, .tsv.gz) or CSV (.csv, .csv.gz) "
                     "files, all of one kind")));
  }
  if (criteo && float_labels) {
    return Fail(absl::InvalidArgumentError(
        "--label_type float is for CSV files; a Criteo TSV label is a click, 0 or 1"));
  }
  if (csv && schema_path.empty()) {
    return Fail(absl::InvalidArgumentError(
        "CSV files are read by a schema: give --csv_schema FILE (docs/data-formats.md)"));
  }
  // The prefix's directory is made, as the job dir is.
  if (const std::string dir = DirName(out); !dir.empty() && dir != ".") {
    if (absl::Status s = env->CreateDirs(dir); !s.ok()) return Fail(s);
  }
  absl::StatusOr<std::unique_ptr<ShardedExampleWriter>> writer =
      ShardedExampleWriter::Create(env, out, static_cast<int>(shards));
  if (!writer.ok()) return Fail(writer.status());
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  const auto progress = [&](size_t file) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(2)) return;
    last = now;
    std::fprintf(stderr, "convert: file %zu of %zu, %lld examples, %.0f examples/s\n", file + 1,
                 files->size(), static_cast<long long>((*writer)->examples()),
                 (*writer)->examples() / std::chrono::duration<double>(now - start).count());
  };
  if (criteo) {
    CriteoBatch batch;
    const auto flush = [&]() -> absl::Status {
      for (int64_t row = 0; row < batch.size(); ++row) {
        if (absl::Status s = (*writer)->Add(EncodeCriteoExample(batch, row)); !s.ok()) {
          return s;
        }
      }
      batch.Clear();
      return absl::OkStatus();
    };
    for (size_t f = 0; f < files->size(); ++f) {
      const std::string& path = (*files)[f];
      absl::StatusOr<std::unique_ptr<RecordStream>> lines =
          RecordStream::Open(env, path, Compression::kAuto, RecordFraming::kLines);
      if (!lines.ok()) return Fail(lines.status());
      (*lines)->AcceptUnterminatedLastLine();
      while (true) {
        const int64_t line = (*lines)->record() + 1;
        absl::StatusOr<std::string_view> text = (*lines)->Next();
        if (absl::IsOutOfRange(text.status())) break;
        if (!text.ok()) return Fail(text.status());
        if (absl::Status s = ParseCriteoLine(*text, &batch); !s.ok()) {
          return Fail(absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", s.message())));
        }
        if (batch.size() >= 4096) {
          if (absl::Status s = flush(); !s.ok()) return Fail(s);
          progress(f);
        }
      }
      if (absl::Status s = flush(); !s.ok()) return Fail(s);
    }
  } else {
    absl::StatusOr<CsvSchema> schema = LoadCsvSchema(env, schema_path);
    if (!schema.ok()) return Fail(schema.status());
    ExampleStreamOptions o;
    o.files = *files;
    o.format = ExampleFormat::kCsv;
    o.csv = *schema;
    // Float labels are read as any number (a regression head's); int64
    // ones as class ids.
    // One label: "label", as a single-head model reads it; more: each under
    // its column's name, as a multi-task model's heads name them.
    const std::vector<std::string> label_names =
        schema->labels.size() == 1 ? std::vector<std::string>{"label"} : schema->labels;
    o.features.labels.clear();
    for (const std::string& label : schema->labels) {
      o.features.labels.push_back({label, float_labels ? 0 : 2});
    }
    o.batch_size = 4096;
    o.shuffle_files = false;
    o.cycle_length = 1;  // file after file, in order
    o.num_epochs = 1;
    absl::StatusOr<std::unique_ptr<ExampleStream>> stream = ExampleStream::Create(env, o);
    if (!stream.ok()) return Fail(stream.status());
    Dataset batch;
    while (true) {
      absl::Status s = (*stream)->Next(&batch);
      if (absl::IsOutOfRange(s)) break;
      if (!s.ok() && schema->labels.size() > 1 && !float_labels) {
        // A multi-task table's labels: a regression head's are numbers.
        return Fail(
            absl::Status(s.code(), absl::StrCat(s.message(),
                                                " (labels are written as int64 class ids; for a "
                                                "regression head's, --label_type=float)")));
      }
      if (!s.ok()) return Fail(s);
      for (int64_t i = 0; i < batch.size(); ++i) {
        absl::StatusOr<std::string> example =
            EncodeTabularExample(batch, i, float_labels, label_names);
        if (!example.ok()) return Fail(example.status());
        if (absl::Status a = (*writer)->Add(*example); !a.ok()) return Fail(a);
      }
      progress(static_cast<size_t>((*stream)->progress().files_done));
    }
  }
  if (absl::Status s = (*writer)->Close(); !s.ok()) return Fail(s);
  uint64_t bytes = 0;
  for (const std::string& path : (*writer)->paths()) {
    absl::StatusOr<uint64_t> size = env->FileSize(path);
    if (size.ok()) bytes += *size;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %lld examples from %zu files to %s (%lld files, %.1f MB) in %.1f s\n",
              static_cast<long long>((*writer)->examples()), files->size(),
              absl::StrFormat("%s-*-of-%05d.tfrecord.gz", out, shards).c_str(),
              static_cast<long long>(shards), bytes / 1e6, secs);
  return 0;
}

}  // namespace

int RunConvert(Env* env, std::span<const std::string> args) {
  if (args.size() >= 2 && absl::StartsWith(args[1], "--")) return ConvertExamples(env, args);
  if (args.size() != 2) return Usage();
  absl::StatusOr<std::vector<ConvertedFile>> files = ConvertToTfRecords(
      env, args[0], args[1],
      [](const std::string& line) { std::printf("%s\n", line.c_str()), std::fflush(stdout); });
  if (!files.ok()) return Fail(files.status());
  return 0;
}

}  // namespace pstrain::data_tool
