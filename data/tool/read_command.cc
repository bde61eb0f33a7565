// pstrain-data read: streams files once as a training replica does and prints
// the input pipeline's rate alone.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/formats/example_format.h"
#include "data/stream/example_stream.h"
#include "data/stream/file_pattern.h"
#include "data/tool/commands.h"
#include "data/tool/flag_parser.h"

namespace pstrain::data_tool {

// Streams PATTERN once through ExampleStream, printing progress every 2 s
// and the rate at the end.
int RunRead(Env* env, std::span<const std::string> args) {
  if (args.empty()) return Usage();
  ExampleStreamOptions o;
  absl::StatusOr<std::vector<std::string>> files =
      ExpandFilePatterns(env, args[0], "pstrain-data read");
  if (!files.ok()) return Fail(files.status());
  o.files = *files;
  absl::StatusOr<ExampleFormat> format = ExampleFormatOfFiles(o.files, "pstrain-data read");
  if (format.ok() && *format == ExampleFormat::kCsv) {
    format = absl::InvalidArgumentError(absl::StrCat(
        "pstrain-data read: ", o.files[0],
        " is CSV, read by a schema, which read does not take: convert the files "
        "(pstrain-data convert PATTERN --csv_schema FILE --out PREFIX) and read those"));
  }
  if (!format.ok()) return Fail(format.status());
  o.format = *format;
  o.batch_size = 256;
  o.shuffle_buffer = 10000;
  o.num_epochs = 1;
  // The flags after the files: a pattern that matches nothing is said first.
  int64_t batch_size = o.batch_size;  // parsed as an int64, then narrowed
  FlagParser flags;
  flags.List("--sparse", &o.features.sparse);
  flags.Int("--batch_size", &batch_size, 0);
  flags.Int("--shuffle_buffer", &o.shuffle_buffer, 0);
  flags.Int("--num_dense", &o.features.num_dense, 0);
  // A multi-task model's Examples: a label feature per head.
  std::vector<std::string> labels;
  flags.List("--labels", &labels);
  if (!flags.Parse(args.subspan(1))) return Usage();
  if (!labels.empty()) {
    o.features.labels.clear();
    for (const std::string& label : labels) o.features.labels.push_back({label, 0});
  }
  o.batch_size = static_cast<int>(batch_size);
  absl::StatusOr<std::unique_ptr<ExampleStream>> stream = ExampleStream::Create(env, o);
  if (!stream.ok()) return Fail(stream.status());
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  Dataset batch;
  while (true) {
    absl::Status s = (*stream)->Next(&batch);
    if (absl::IsOutOfRange(s)) break;
    if (!s.ok()) return Fail(s);
    const auto now = std::chrono::steady_clock::now();
    if (now - last > std::chrono::seconds(2)) {
      last = now;
      const InputProgress p = (*stream)->progress();
      const double secs = std::chrono::duration<double>(now - start).count();
      std::fprintf(stderr, "input: epoch %lld, file %lld of %lld, %.1f MB/s\n",
                   static_cast<long long>(p.epoch), static_cast<long long>(p.files_done + 1),
                   static_cast<long long>(p.files), p.file_bytes / 1e6 / secs);
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const InputProgress p = (*stream)->progress();
  std::printf(
      "%lld examples from %zu files in %.2f s: %.1f MB/s of files (%.1f MB), %.1f MB/s of "
      "records (%.1f MB decompressed), %.0f examples/s\n",
      static_cast<long long>(p.examples), o.files.size(), secs, p.file_bytes / 1e6 / secs,
      p.file_bytes / 1e6, p.bytes / 1e6 / secs, p.bytes / 1e6, p.examples / secs);
  return 0;
}

}  // namespace pstrain::data_tool
