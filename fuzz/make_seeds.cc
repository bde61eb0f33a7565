// Writes the fuzzers' seed corpora (fuzz/seeds/<fuzzer>/) with pstrain's own
// writers, so every seed is a valid input the fuzzer then mutates:
//   make_seeds SRC_DIR OUT_DIR
// SRC_DIR is the source tree (for the example configs).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/record_writer.h"
#include "data/formats/tfrecord_dataset.h"
#include "data/stream/input_redeal.h"
#include "data/stream/streamed_batches.h"
#include "io/checkpoint.h"
#include "io/event_writer.h"
#include "io/export_format.h"
#include "io/png.h"
#include "io/row_checkpoint.h"
#include "nlohmann/json.hpp"
#include "proto/example.pb.h"
#include "proto/parameter_server.pb.h"
#include "rpc/testing/ps_test_util.h"
#include "testing/click_test_model.h"
#include "testing/data_test_util.h"
#include "testing/onnx_test_graph.h"

namespace {

std::string out_dir;

void Put(const std::string& fuzzer, const std::string& name, const std::string& bytes) {
  const std::filesystem::path dir = std::filesystem::path(out_dir) / fuzzer;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// [selector][second byte] + rest, as the data and checkpoint fuzzers read it.
std::string Picked(char selector, const std::string& a, const std::string& b = "") {
  const int cut =
      a.size() + b.size() == 0 ? 0 : static_cast<int>(255 * a.size() / (a.size() + b.size()));
  return std::string(1, selector) + static_cast<char>(cut) + a + b;
}

// One RPC of the ps fuzzer: [method][length LE16][request].
std::string Rpc(int method, const google::protobuf::Message& m) {
  const std::string bytes = m.SerializeAsString();
  return std::string(1, static_cast<char>(method)) + static_cast<char>(bytes.size() & 0xff) +
         static_cast<char>(bytes.size() >> 8) + bytes;
}

// row_checkpoint_fuzzer: row files of three tables (one without rows, the
// others in blocks of two rows), of one row, and of no tables. (The v1_* and
// v2_* seeds beside them are the same files in format versions 1 and 2, kept
// from before versions 2 and 3: this writer no longer makes them.)
bool WriteRowCheckpointSeeds() {
  using pstrain::RowFileWriter;
  pstrain::MemEnv env;
  RowFileWriter three({{"emb_C1/embeddings", 4, 4, "adagrad"},
                       {"emb_C2/embeddings", 2, 4, "ftrl"},
                       {"emb_C3/embeddings", 3, 7, "adam"}},
                      /*block_bytes=*/100);
  for (int i = 0; i < 5; ++i) {
    const std::vector<float> values = {0.5f * i, -1.0f, 2.0f, 0.25f};
    three.Add(0, 10 * i + 3, values, values, 100 + i, /*pushes=*/7 * i);
    if (i < 3) three.Add(1, -1 - i, {values.data(), 2}, values, 200 + i, /*pushes=*/1);
  }
  RowFileWriter one({{"emb", 1, 0, "sgd"}});
  one.Add(0, 7, std::vector<float>{1.5f}, {}, 9, /*pushes=*/3);
  RowFileWriter none({});
  for (const auto& [name, writer] : {std::pair{"three_tables", &three}, std::pair{"one_row", &one},
                                     std::pair{"no_tables", &none}}) {
    if (!writer->Write(&env, "/f", 12).ok()) return false;
    Put("row_checkpoint", name, *env.ReadFile("/f"));
  }
  return true;
}

// export_fuzzer: a click model's full version and a delta of the fuzzer's
// version 1 (MakeClickModel's values), as version 2.
bool WriteExportSeeds() {
  pstrain::MemEnv env;
  pstrain::ClickModel c = pstrain::MakeClickModel();
  pstrain::ExportOnnxFile no_onnx;
  no_onnx.missing_reason = "a seed";
  absl::StatusOr<std::string> full = pstrain::WriteExportVersion(
      &env, "/e", *c.model, pstrain::ModelOptions(), 1, "", c.params, c.state, c.tables, no_onnx);
  if (!full.ok()) return false;
  const std::vector<pstrain::TrainedTableRows> delta = pstrain::MoveOn(&c, 1);
  absl::StatusOr<std::string> next = pstrain::WriteExportVersion(
      &env, "/e", *c.model, pstrain::ModelOptions(), 2, "", c.params, c.state, delta, no_onnx,
      *pstrain::ExportDeltaOf(&env, *full) == 0 ? pstrain::ListExportVersions(&env, "/e")->back()
                                                : 0);
  if (!next.ok()) return false;
  const auto piece = [](const std::string& s) {
    return std::string(1, static_cast<char>(s.size() & 0xff)) +
           static_cast<char>((s.size() >> 8) & 0xff) + s;
  };
  for (const auto& [name, dir] : {std::pair{"full", *full}, std::pair{"delta", *next}}) {
    nlohmann::json m = nlohmann::json::parse(*env.ReadFile(dir + "/model.json"));
    m["version"] = 2;
    if (m.contains("delta_of")) m["delta_of"] = 1;
    Put("export", name,
        piece(m.dump()) + piece(*env.ReadFile(dir + "/embeddings.rows")) +
            *env.ReadFile(dir + "/variables.bin"));
  }
  return true;
}

void WriteOnnxSeeds() {
  using pstrain::onnx_test::GraphBuilder;
  Put("onnx", "small_cnn.onnx", pstrain::onnx_test::SmallCnn().Build().Bytes());
  GraphBuilder b;
  b.Input("x", {-1, 3, 2, 2});
  b.Node("Flatten", {"x"}, {"f"});
  b.Init("W", {12, 4}, pstrain::onnx_test::TestValues(48, 1));
  b.Init("B", {4}, pstrain::onnx_test::TestValues(4, 2));
  b.Node("MatMul", {"f", "W"}, {"m"}, "fc/MatMul");
  b.Node("Add", {"m", "B"}, {"a"}, "fc/Add");
  b.Node("Softmax", {"a"}, {"y"}, "softmax");
  b.Output("y", {-1, 4});
  Put("onnx", "matmul_add.onnx", b.Bytes());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_seeds SRC_DIR OUT_DIR\n");
    return 2;
  }
  const std::string src = argv[1];
  out_dir = argv[2];
  using namespace pstrain;

  // config_fuzzer: the example configs and a TF_CONFIG.
  Put("config", "cluster.yaml", Read(src + "/deploy/local/cluster.yaml"));
  Put("config", "mlengine.yaml", Read(src + "/deploy/local/mlengine.yaml"));
  Put("config", "tf_config.json",
      R"({"cluster": {"chief": ["h:1"], "worker": ["h:2"], "ps": ["h:3"]},)"
      R"( "task": {"type": "worker", "index": 0}, "environment": "cloud"})");

  // png_fuzzer: gray, gray + alpha, RGB.
  const std::vector<uint8_t> bytes(18, 0x40);
  Put("png", "gray.png", *EncodePng(2, 3, 1, absl::MakeConstSpan(bytes).subspan(0, 6)));
  Put("png", "gray_alpha.png", *EncodePng(2, 2, 2, absl::MakeConstSpan(bytes).subspan(0, 8)));
  Put("png", "rgb.png", *EncodePng(3, 2, 3, bytes));

  // input_state_fuzzer: a position log and a deal.
  {
    MemEnv env;
    InputPosition p;
    p.epoch = 1;
    p.next_file = 3;
    p.open = {{0, 4096, 17}, {2, 0, 0}};
    p.window = 5;
    p.taken = 40;
    InputPositionLog log(&env, "/log.txt", 12345, 1, 200, "replica=1 replicas=3 base=678");
    if (!log.Record(50, InputPosition()).ok() || !log.Record(100, p).ok()) return 1;
    Put("input_state", "positions", std::string(1, '\0') + *env.ReadFile("/log.txt"));
    InputDeal deal;
    deal.base = 678;
    deal.from_replicas = 2;
    deal.replicas = 3;
    deal.step = 120;
    deal.epoch = 1;
    deal.read_again = 300;
    deal.pieces = {{1, 0, 0}, {4, 9000, 31}, {5, 0, 0}, {0, 77, 2}};
    Put("input_state", "deal", std::string(1, '\1') + deal.ToString());
    Put("input_state", "files",
        std::string(1, '\2') + "/logs/hour=13/part-0\n/logs/hour=13/part-1\n");
  }

  // data_fuzzer: idx raw and gzip, CIFAR-10, TFRecords of both layouts.
  std::vector<uint8_t> pixels(2 * 4 * 4);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7);
  const std::string images = testutil::IdxImages(2, 4, 4, pixels);
  const std::string labels = testutil::IdxLabels({3, 9});
  Put("data", "idx", Picked(0, images, labels));
  Put("data", "idx_gz", Picked(0, testutil::Gzip(images), testutil::Gzip(labels)));
  Put("data", "cifar", Picked(1, std::string(1, '\x07') + std::string(3072, '\x11')));
  Dataset d;
  d.height = 2, d.width = 2, d.channels = 1;
  d.images = {1, 2, 3, 4, 5, 6, 7, 8};
  d.labels = {1, 2};
  for (const auto& [name, layout] : {std::pair{"tfrecord_mnist", ExampleLayout::kMnist},
                                     std::pair{"tfrecord_cifar", ExampleLayout::kCifar10}}) {
    MemEnv env;
    if (!WriteExampleFile(&env, "/t", d, layout).ok()) return 1;
    Put("data", name, Picked(2, *env.ReadFile("/t")));
  }
  // Tabular Examples (data/formats/tabular_examples.h) with 2 dense features: ids and
  // tokens, one Example without them.
  std::string tabular;
  for (int i = 0; i < 3; ++i) {
    pstrain::tf::Example example;
    auto& f = *example.mutable_features()->mutable_feature();
    f["label"].mutable_int64_list()->add_value(i % 2);
    f["dense"].mutable_float_list()->add_value(0.5f * i);
    f["dense"].mutable_float_list()->add_value(-1.0f);
    if (i < 2) {
      f["user"].mutable_int64_list()->add_value(17 + i);
      f["tokens"].mutable_bytes_list()->add_value("good");
      f["tokens"].mutable_bytes_list()->add_value("day");
    }
    tabular += RecordWriter::Frame(example.SerializeAsString());
  }
  Put("data", "tfrecord_tabular", std::string("\x02\x02", 2) + tabular);  // [reader][dense]

  // checkpoint_fuzzer: a tiny ps's checkpoint, its state file, events.
  MemEnv env;
  std::unique_ptr<testing_util::TestPs> ps = testing_util::StartPs(0, 1, &env);
  if (!ps->task
           ->Initialize(0, "tiny", testing_util::kNumParams,
                        std::vector<float>(testing_util::kNumParams, 0.5f),
                        std::vector<float>(1, 2.0f), 3)
           .ok()) {
    return 1;
  }
  absl::StatusOr<ShardSaved> saved = ps->task->Save(3, 3, absl::Seconds(1));
  if (!saved.ok()) return 1;
  CheckpointIndex index;
  index.set_model("tiny");
  index.set_global_step(3);
  index.set_num_params(testing_util::kNumParams);
  index.set_num_state(1);
  index.set_optimizer(saved->optimizer);
  CheckpointShardFile* f = index.add_shards();
  f->set_file(saved->file);
  f->set_begin(saved->begin);
  f->set_end(saved->end);
  f->set_num_state(saved->num_state);
  f->set_size_bytes(saved->size_bytes);
  f->set_crc32c(saved->crc32c);
  if (!WriteCheckpointIndex(&env, "/job/model.ckpt-3.index", index).ok()) return 1;
  const std::string index_bytes = *env.ReadFile("/job/model.ckpt-3.index");
  const std::string shard_bytes = *env.ReadFile("/job/" + saved->file);
  Put("checkpoint", "index", Picked(0, index_bytes));
  Put("checkpoint", "shard", Picked(1, shard_bytes));
  Put("checkpoint", "state",
      Picked(2,
             "model_checkpoint_path: \"model.ckpt-3\"\n"
             "all_model_checkpoint_paths: \"model.ckpt-2\"\n"
             "all_model_checkpoint_paths: \"model.ckpt-3\"\n"));
  // The whole-checkpoint reader names the shard "model.ckpt-1.shard-0-of-1".
  index.set_global_step(1);
  index.mutable_shards(0)->set_file("model.ckpt-1.shard-0-of-1");
  {
    MemEnv e;
    if (!WriteCheckpointIndex(&e, "/i", index).ok()) return 1;
    Put("checkpoint", "whole", Picked(3, *e.ReadFile("/i"), shard_bytes));
  }
  {
    MemEnv e;
    auto writer = EventWriter::Create(&e, "/logs", absl::Seconds(1));
    if (!writer.ok()) return 1;
    (void)(*writer)->WriteScalar("loss", 1, 0.5f);
    (void)(*writer)->WriteHistogram("w", 1, std::vector<float>{1, 2, 3});
    const std::string path = (*writer)->path();
    writer->reset();  // flushes
    Put("checkpoint", "events", Picked(4, *e.ReadFile(path)));
  }

  if (!WriteRowCheckpointSeeds()) return 1;
  if (!WriteExportSeeds()) return 1;

  // ps_rpc_fuzzer: a job's calls (methods as kMethods in ps_rpc_fuzzer.cc).
  InitializeRequest init;
  init.set_chunk(0);
  init.set_model("tiny");
  init.set_num_params(testing_util::kNumParams);
  init.set_params(Floats(std::vector<float>(testing_util::kNumParams, 1.0f)));
  init.set_state(Floats({0.0f}));
  PushRequest push;
  push.set_chunk(0);
  push.set_replica(1);
  push.set_gradients(Floats(std::vector<float>(testing_util::kNumParams, 0.25f)));
  push.set_batch_stats(Floats({1.0f}));
  push.set_loss_sum(0.7);
  push.set_loss_batches(1);
  push.set_examples(20);
  PullRequest pull;
  SaveRequest save;
  save.set_step(1);
  save.set_global_step(1);
  RestoreRequest restore;
  restore.set_step(1);
  restore.set_model("tiny");
  restore.set_num_params(testing_util::kNumParams);
  LeaveRequest leave;
  leave.set_replica(1);
  leave.set_reason("seed");
  Put("ps_rpc", "job",
      Rpc(0, init) + Rpc(2, push) + Rpc(3, push) + Rpc(1, pull) + Rpc(4, StatusRequest()) +
          Rpc(5, save) + Rpc(6, restore) + Rpc(7, leave));
  push.set_dtype(BFLOAT16);
  push.set_gradients(std::string(2 * testing_util::kNumParams, '\x3f'));
  Put("ps_rpc", "bf16", Rpc(0, init) + Rpc(3, push));

  // predict_request_fuzzer: every request form.
  Put("predict_request", "row", R"({"instances": [[0, 0.5, 1, 0.25, 0.75, 0.125]]})");
  Put("predict_request", "nested", R"({"instances": [[[0, 0.5, 1], [0.25, 0.75, 0.125]]]})");
  Put("predict_request", "columnar",
      R"({"signature_name": "serving_default", "inputs": {"image": [[0,0,0,0,0,0]]}})");
  Put("predict_request", "objects",
      R"({"instances": [{"image": [0,0,0,0,0,0]}, {"b64": "AA=="}]})");
  Put("predict_request", "color", R"({"instances": [[[[0,0,0],[1,1,1]],[[0,0,0],[1,1,1]]]]})");

  // onnx_fuzzer: a torch-style CNN and a MatMul + Add net (torch_cnn.onnx,
  // tests/onnx/torch_cnn.py's export, is checked in beside them).
  WriteOnnxSeeds();
  return 0;
}
