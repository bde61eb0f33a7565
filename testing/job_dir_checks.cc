#include "testing/job_dir_checks.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/record_reader.h"
#include "data/feature_hash.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "io/projector.h"
#include "proto/checkpoint.pb.h"
#include "proto/event.pb.h"
#include "proto/graph.pb.h"
#include "proto/projector_config.pb.h"

namespace pstrain {
namespace testutil {
namespace {

// The events of every events file in `dir` (not its subdirectories), file
// by file in name order.
std::vector<std::vector<tensorboard::Event>> ReadEventFiles(Env* env, const std::string& dir) {
  std::vector<std::vector<tensorboard::Event>> files;
  absl::StatusOr<std::vector<std::string>> names = env->ListDir(dir);
  EXPECT_TRUE(names.ok()) << dir << ": " << names.status();
  if (!names.ok()) return files;
  std::sort(names->begin(), names->end());
  for (const std::string& name : *names) {
    if (!absl::StartsWith(name, "events.out.tfevents.")) continue;
    const std::string path = JoinPath(dir, name);
    absl::StatusOr<std::string> bytes = env->ReadFile(path);
    EXPECT_TRUE(bytes.ok()) << path << ": " << bytes.status();
    if (!bytes.ok()) continue;
    RecordReader reader(*bytes, path);
    std::vector<tensorboard::Event> events;
    for (;;) {
      absl::StatusOr<std::string_view> record = reader.ReadRecord();
      if (absl::IsOutOfRange(record.status())) break;
      EXPECT_TRUE(record.ok()) << path << ": " << record.status();
      if (!record.ok()) break;
      tensorboard::Event event;
      EXPECT_TRUE(event.ParseFromArray(record->data(), static_cast<int>(record->size()))) << path;
      events.push_back(std::move(event));
    }
    files.push_back(std::move(events));
  }
  return files;
}

// The newest checkpoint's index in `job_dir`.
absl::StatusOr<CheckpointIndex> NewestIndex(Env* env, const std::string& job_dir) {
  absl::StatusOr<std::vector<int64_t>> steps = ListCheckpointSteps(env, job_dir);
  if (!steps.ok()) return steps.status();
  if (steps->empty()) return absl::NotFoundError(absl::StrCat("no checkpoint in ", job_dir));
  return ReadCheckpointIndex(env,
                             JoinPath(job_dir, IndexFileName(CheckpointPrefix(steps->front()))));
}

std::vector<int64_t> Dims(const tensorboard::TensorShapeProto& shape) {
  std::vector<int64_t> dims;
  for (const auto& d : shape.dim()) dims.push_back(d.size());
  return dims;
}

std::vector<std::vector<std::string>> Tsv(Env* env, const std::string& path) {
  std::vector<std::vector<std::string>> lines;
  absl::StatusOr<std::string> text = env->ReadFile(path);
  EXPECT_TRUE(text.ok()) << path << ": " << text.status();
  if (!text.ok()) return lines;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    lines.push_back(absl::StrSplit(line, '\t'));
  }
  return lines;
}

}  // namespace

int64_t ExpectJobGraph(Env* env, const std::string& job_dir) {
  absl::StatusOr<CheckpointIndex> index = NewestIndex(env, job_dir);
  EXPECT_TRUE(index.ok()) << index.status();
  if (!index.ok()) return 0;
  const std::vector<std::vector<tensorboard::Event>> files = ReadEventFiles(env, job_dir);
  EXPECT_FALSE(files.empty()) << "no events file in " << job_dir;
  int64_t nodes_seen = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const std::vector<tensorboard::Event>& events = files[f];
    std::vector<const tensorboard::Event*> graphs;
    for (const tensorboard::Event& e : events) {
      if (e.what_case() == tensorboard::Event::kGraphDef) graphs.push_back(&e);
    }
    EXPECT_EQ(graphs.size(), 1u) << "graphs in an events file of " << job_dir;
    if (graphs.size() != 1) return 0;
    tensorboard::GraphDef graph;
    EXPECT_TRUE(graph.ParseFromString(graphs[0]->graph_def()));
    std::map<std::string, const tensorboard::NodeDef*> nodes;
    for (const tensorboard::NodeDef& n : graph.node()) {
      EXPECT_TRUE(nodes.emplace(n.name(), &n).second) << "node " << n.name() << " twice";
    }
    for (const tensorboard::NodeDef& n : graph.node()) {
      for (const std::string& in : n.input()) {
        EXPECT_TRUE(nodes.contains(in)) << n.name() << " takes " << in << ", no node";
      }
    }
    // An earlier file's graph is of the cluster the chief had then (a job
    // restarted on more ps): the newest file's is checked against the
    // newest checkpoint.
    if (f + 1 < files.size()) continue;
    int workers = 0;
    for (const tensorboard::NodeDef& n : graph.node()) workers += n.device() == "/job:worker";
    EXPECT_GT(workers, 0);
    for (const CheckpointVariable& v : index->variables()) {
      const auto it = nodes.find(v.name());
      EXPECT_NE(it, nodes.end()) << "no node for variable " << v.name();
      if (it == nodes.end()) continue;
      const tensorboard::NodeDef& n = *it->second;
      EXPECT_EQ(n.op(), "VariableV2") << v.name();
      int task = 0;
      for (int s = 0; s < index->shards_size() && v.trainable(); ++s) {
        if (v.offset() >= index->shards(s).begin() && v.offset() < index->shards(s).end()) task = s;
      }
      EXPECT_EQ(n.device(), absl::StrCat("/job:ps/replica:0/task:", task)) << v.name();
      EXPECT_EQ(Dims(n.attr().at("shape").shape()),
                std::vector<int64_t>(v.shape().begin(), v.shape().end()))
          << v.name();
      int feeds = 0;
      for (const tensorboard::NodeDef& m : graph.node()) {
        if (m.device() == "/job:worker")
          feeds += std::count(m.input().begin(), m.input().end(), v.name());
      }
      EXPECT_EQ(feeds, 1) << v.name() << " feeds " << feeds << " layers";
    }
    for (const CheckpointTable& t : index->tables()) {
      const auto it = nodes.find(t.name());
      EXPECT_NE(it, nodes.end()) << "no node for table " << t.name();
      if (it == nodes.end()) continue;
      EXPECT_EQ(it->second->device(), "/job:ps") << t.name();
      EXPECT_EQ(it->second->attr().at("dim").i(), t.dim()) << t.name();
    }
    EXPECT_TRUE(nodes.contains("loss"));
    nodes_seen = graph.node_size();
  }
  return nodes_seen;
}

int64_t ExpectJobProjector(Env* env, const std::string& job_dir, int64_t rows,
                           int64_t hash_buckets) {
  absl::StatusOr<CheckpointIndex> index = NewestIndex(env, job_dir);
  EXPECT_TRUE(index.ok()) << index.status();
  if (!index.ok()) return 0;
  absl::StatusOr<std::string> text = env->ReadFile(JoinPath(job_dir, kProjectorConfigFile));
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return 0;
  tensorboard::ProjectorConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, &config)) << *text;
  std::vector<std::string> with_rows, written;
  std::map<std::string, const CheckpointTable*> tables;
  for (int t = 0; t < index->tables_size(); ++t) {
    int64_t n = 0;
    for (const CheckpointShardFile& s : index->shards()) n += s.table_rows(t);
    if (n > 0) with_rows.push_back(index->tables(t).name());
    tables[index->tables(t).name()] = &index->tables(t);
  }
  int64_t named = 0;
  for (const tensorboard::EmbeddingInfo& e : config.embeddings()) {
    written.push_back(e.tensor_name());
    EXPECT_TRUE(tables.contains(e.tensor_name())) << e.tensor_name();
    if (!tables.contains(e.tensor_name())) continue;
    const CheckpointTable& table = *tables[e.tensor_name()];
    EXPECT_EQ(e.tensor_shape_size(), 2) << e.tensor_name();
    if (e.tensor_shape_size() != 2) continue;
    const int64_t n = e.tensor_shape(0);
    EXPECT_GT(n, 0);
    EXPECT_LE(n, rows);
    EXPECT_EQ(e.tensor_shape(1), table.dim());
    const auto tensor = Tsv(env, JoinPath(job_dir, e.tensor_path()));
    EXPECT_EQ(static_cast<int64_t>(tensor.size()), n) << e.tensor_path();
    for (const auto& line : tensor) {
      EXPECT_EQ(static_cast<int64_t>(line.size()), table.dim()) << e.tensor_path();
      for (const std::string& v : line) {
        float f;
        EXPECT_TRUE(absl::SimpleAtof(v, &f)) << e.tensor_path() << ": " << v;
      }
    }
    const auto metadata = Tsv(env, JoinPath(job_dir, e.metadata_path()));
    EXPECT_EQ(static_cast<int64_t>(metadata.size()), n + 1) << e.metadata_path();
    if (metadata.empty()) continue;
    EXPECT_EQ(metadata[0], (std::vector<std::string>{"id", "value", "pushes"}));
    int64_t last = INT64_MAX;
    for (size_t r = 1; r < metadata.size(); ++r) {
      const auto& line = metadata[r];
      EXPECT_EQ(line.size(), 3u) << e.metadata_path() << " line " << r + 1;
      if (line.size() != 3) continue;
      int64_t id = 0, pushes = 0;
      EXPECT_TRUE(absl::SimpleAtoi(line[0], &id) && absl::SimpleAtoi(line[2], &pushes));
      EXPECT_GE(pushes, 1) << "a row the checkpoint holds was trained";
      EXPECT_LE(pushes, last) << "most pushes first";
      last = pushes;
      if (line[1].empty()) continue;
      ++named;
      if (hash_buckets > 0 && !table.feature().empty()) {
        EXPECT_EQ(HashBucketFast(line[1], hash_buckets), id) << line[1];
      }
    }
  }
  std::sort(with_rows.begin(), with_rows.end());
  std::sort(written.begin(), written.end());
  EXPECT_EQ(written, with_rows) << "a projector tensor per table with rows";
  return named;
}

int64_t CountPrCurves(Env* env, const std::string& job_dir, const std::string& tag) {
  int64_t curves = 0, with_metadata = 0;
  for (const auto& events : ReadEventFiles(env, JoinPath(job_dir, "eval"))) {
    for (const tensorboard::Event& e : events) {
      for (const tensorboard::Summary::Value& v : e.summary().value()) {
        if (v.tag() != tag) continue;
        ++curves;
        EXPECT_EQ(v.tensor().dtype(), 1);
        EXPECT_EQ(Dims(v.tensor().tensor_shape()), (std::vector<int64_t>{6, 201}));
        EXPECT_EQ(v.tensor().float_val_size(), 6 * 201);
        if (v.metadata().plugin_data().plugin_name() == "pr_curves") {
          tensorboard::PrCurvePluginData data;
          EXPECT_TRUE(data.ParseFromString(v.metadata().plugin_data().content()));
          EXPECT_EQ(data.num_thresholds(), 201u);
          ++with_metadata;
        }
        // Counts: tp + fn at threshold 0 is every positive, at every threshold.
        if (v.tensor().float_val_size() == 6 * 201) {
          const auto& f = v.tensor().float_val();
          for (int i = 0; i < 201; ++i) {
            EXPECT_FLOAT_EQ(f[0 * 201 + i] + f[3 * 201 + i], f[0] + f[3 * 201]) << tag;
          }
        }
      }
    }
  }
  EXPECT_GT(with_metadata, 0) << "the pr_curves plugin's metadata on " << tag;
  return curves;
}

}  // namespace testutil
}  // namespace pstrain
