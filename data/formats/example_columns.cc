#include "data/formats/example_columns.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/record_writer.h"
#include "common/status_macros.h"
#include "data/formats/gzip.h"
#include "data/formats/input_stream.h"
#include "data/stream/file_pattern.h"
#include "proto/example.pb.h"

namespace pstrain {
namespace {

// One output file, committed with the others once all are whole.
struct OutputFile {
  std::unique_ptr<AtomicWritableFile> file;
  std::unique_ptr<GzipWriter> zipped;  // into `file` (so destroyed first); null: plain

  absl::Status Append(std::string_view data) {
    return zipped != nullptr ? zipped->Append(data) : file->Append(data);
  }
  absl::Status Close() { return zipped != nullptr ? zipped->Close() : file->Close(); }
};

// Example i of `columns`, serialized.
std::string EncodeExample(const std::vector<ExampleColumn>& columns, int64_t i,
                          tf::Example* example) {
  example->Clear();
  auto& features = *example->mutable_features()->mutable_feature();
  for (const ExampleColumn& c : columns) {
    const int64_t begin = c.offsets[i], end = c.offsets[i + 1];
    if (begin == end) continue;
    tf::Feature& f = features[c.name];
    switch (c.kind) {
      case ExampleColumn::Kind::kInt64:
        f.mutable_int64_list()->mutable_value()->Add(c.ints.begin() + begin, c.ints.begin() + end);
        break;
      case ExampleColumn::Kind::kFloat:
        f.mutable_float_list()->mutable_value()->Add(c.floats.begin() + begin,
                                                     c.floats.begin() + end);
        break;
      case ExampleColumn::Kind::kBytes:
        for (int64_t k = begin; k < end; ++k) f.mutable_bytes_list()->add_value(c.bytes[k]);
        break;
    }
  }
  return example->SerializeAsString();
}

size_t ValuesOf(const ExampleColumn& c) {
  switch (c.kind) {
    case ExampleColumn::Kind::kInt64:
      return c.ints.size();
    case ExampleColumn::Kind::kFloat:
      return c.floats.size();
    case ExampleColumn::Kind::kBytes:
      return c.bytes.size();
  }
  return 0;
}

}  // namespace

const char* ExampleKindName(ExampleColumn::Kind kind) {
  switch (kind) {
    case ExampleColumn::Kind::kInt64:
      return "int64";
    case ExampleColumn::Kind::kFloat:
      return "float";
    case ExampleColumn::Kind::kBytes:
      return "bytes";
  }
  return "?";
}

absl::Status CheckExampleColumns(const std::vector<ExampleColumn>& columns) {
  if (columns.empty()) return absl::InvalidArgumentError("no columns: give at least one feature");
  std::map<std::string, int> seen;
  for (const ExampleColumn& c : columns) {
    if (c.name.empty()) return absl::InvalidArgumentError("a column has an empty name");
    if (!seen.emplace(c.name, 0).second) {
      return absl::InvalidArgumentError(absl::StrCat("column ", c.name, " is given twice"));
    }
    bool rising = !c.offsets.empty() && c.offsets.front() == 0;
    for (size_t k = 1; rising && k < c.offsets.size(); ++k)
      rising = c.offsets[k - 1] <= c.offsets[k];
    if (!rising || static_cast<size_t>(c.offsets.back()) != ValuesOf(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "column ", c.name, ": its offsets do not run from 0 up to its ", ValuesOf(c), " values"));
    }
    if (c.examples() != columns.front().examples()) {
      return absl::InvalidArgumentError(absl::StrCat("column ", c.name, " has ", c.examples(),
                                                     " examples, but column ", columns.front().name,
                                                     " has ", columns.front().examples(),
                                                     "; give every column one "
                                                     "entry per example"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> WriteExampleColumns(
    Env* env, const std::string& path, const std::vector<ExampleColumn>& columns, int shards,
    bool gzip) {
  PSTRAIN_RETURN_IF_ERROR(CheckExampleColumns(columns));
  if (shards < 1 || shards > 99999) {
    return absl::InvalidArgumentError(
        absl::StrCat("shards = ", shards, ": write 1 to 99999 files"));
  }
  if (shards == 1 && gzip != absl::EndsWith(path, ".gz")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ",
                     gzip ? "a gzip'd file is read as gzip only when its name ends .gz: name it so"
                          : "a name ending .gz is read as gzip: gzip it, or name it otherwise"));
  }
  std::vector<std::string> paths;
  for (int s = 0; s < shards; ++s) {
    paths.push_back(shards == 1 ? path
                                : absl::StrFormat("%s-%05d-of-%05d.tfrecord%s", path, s, shards,
                                                  gzip ? ".gz" : ""));
  }
  // One file at a time: shard s holds examples s, s + N, s + 2N, ... On an
  // error the files are destroyed uncommitted: none is left.
  std::vector<OutputFile> outputs(paths.size());
  std::vector<AtomicWritableFile*> files;
  tf::Example example;
  const int64_t n = columns.front().examples();
  for (int s = 0; s < shards; ++s) {
    OutputFile& f = outputs[s];
    PSTRAIN_ASSIGN_OR_RETURN(f.file, env->NewAtomicWritableFile(paths[s]));
    if (gzip) f.zipped = std::make_unique<GzipWriter>(f.file.get(), paths[s]);
    for (int64_t i = s; i < n; i += shards) {
      PSTRAIN_RETURN_IF_ERROR(f.Append(RecordWriter::Frame(EncodeExample(columns, i, &example))));
    }
    PSTRAIN_RETURN_IF_ERROR(f.Close());  // whole and durable under its temp name
    f.zipped.reset();
    files.push_back(f.file.get());
  }
  PSTRAIN_RETURN_IF_ERROR(CommitFiles(files));
  return paths;
}

absl::StatusOr<std::unique_ptr<ExampleColumnReader>> ExampleColumnReader::Open(
    Env* env, const std::string& patterns) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files,
                           ExpandFilePatterns(env, patterns, "the examples' files"));
  return std::unique_ptr<ExampleColumnReader>(new ExampleColumnReader(env, std::move(files)));
}

absl::StatusOr<ExamplePiece> ExampleColumnReader::Next(int64_t n) {
  ExamplePiece piece;
  std::vector<ExampleColumn>& columns = piece.columns;
  std::map<std::string, size_t> index;
  int64_t& examples = piece.examples;
  tf::Example example;
  while (examples < n && file_ < files_.size()) {
    if (stream_ == nullptr) {
      PSTRAIN_ASSIGN_OR_RETURN(stream_, RecordStream::Open(env_, files_[file_], Compression::kAuto,
                                                           RecordFraming::kTfRecord));
    }
    const uint64_t offset = stream_->offset();
    absl::StatusOr<std::string_view> record = stream_->Next();
    if (absl::IsOutOfRange(record.status())) {
      stream_.reset();
      ++file_;
      continue;
    }
    if (!record.ok()) return record.status();
    const std::string where =
        absl::StrCat(files_[file_], ": record ", stream_->record() - 1, " (offset ", offset, ")");
    if (!example.ParseFromArray(record->data(), static_cast<int>(record->size()))) {
      return absl::DataLossError(absl::StrCat(where, " is not a tf.train.Example"));
    }
    // The features in name order (a proto map has none of its own).
    std::vector<std::pair<std::string, const tf::Feature*>> features;
    for (const auto& [name, f] : example.features().feature()) features.emplace_back(name, &f);
    std::sort(features.begin(), features.end());
    for (const auto& [name, f] : features) {
      ExampleColumn::Kind kind = ExampleColumn::Kind::kInt64;
      if (f->has_float_list()) kind = ExampleColumn::Kind::kFloat;
      if (f->has_bytes_list()) kind = ExampleColumn::Kind::kBytes;
      const auto [first, new_feature] = kinds_.emplace(name, std::make_pair(kind, where));
      if (!new_feature && first->second.first != kind) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": feature ", name, " holds ", ExampleKindName(kind), " values, but ",
            ExampleKindName(first->second.first), " values at ", first->second.second));
      }
      auto [it, added] = index.emplace(name, columns.size());
      if (added) {
        ExampleColumn& c = columns.emplace_back();
        c.name = name;
        c.kind = kind;
        c.offsets.assign(examples + 1, 0);
      }
      ExampleColumn& c = columns[it->second];
      // Examples before this one without the feature.
      c.offsets.resize(examples + 1, c.offsets.back());
      switch (kind) {
        case ExampleColumn::Kind::kInt64:
          c.ints.insert(c.ints.end(), f->int64_list().value().begin(),
                        f->int64_list().value().end());
          break;
        case ExampleColumn::Kind::kFloat:
          c.floats.insert(c.floats.end(), f->float_list().value().begin(),
                          f->float_list().value().end());
          break;
        case ExampleColumn::Kind::kBytes:
          c.bytes.insert(c.bytes.end(), f->bytes_list().value().begin(),
                         f->bytes_list().value().end());
          break;
      }
      c.offsets.push_back(static_cast<int64_t>(ValuesOf(c)));
    }
    ++examples;
  }
  for (ExampleColumn& c : columns) c.offsets.resize(examples + 1, c.offsets.back());
  return piece;
}

}  // namespace pstrain
