#include "serving/model_server.h"

#include <atomic>
#include <cmath>
#include <set>
#include <thread>

#include "data/feature_hash.h"
#include "export/export.h"
#include "gtest/gtest.h"
#include "testing/click_test_model.h"

namespace pstrain {
namespace {

using nlohmann::json;

class ModelServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = *BuildModel("mnist_cnn", ModelOptions());
    params_.resize(model_->num_params());
    state_.resize(model_->num_state());
    Export(3);
    options_.model_name = "mnist";
    options_.model_base_path = "/job/export";
    options_.max_instances = 16;
    absl::StatusOr<std::unique_ptr<ModelServer>> server = ModelServer::Create(&env_, options_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  std::string Export(uint64_t seed) {
    model_->InitializeVariables(seed, params_.data(), state_.data());
    return *WriteExport(&env_, "/job/export", *model_, ModelOptions(), seed, "", params_, state_);
  }

  // An image whose values come from `k`.
  static json Image(int k) {
    std::vector<float> v(784);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 31 + k * 7) % 256) / 255;
    return json(v);
  }

  // The predictions the model gives for Image(k) with the current values.
  json Expected(int k) {
    std::vector<float> image = Image(k).get<std::vector<float>>();
    std::vector<float> label(1, 0);
    model_->Evaluate(params_.data(), state_.data(), image.data(), label.data(), 1);
    const float* z = model_->logits().data();
    return std::max_element(z, z + 10) - z;
  }

  json Post(const std::string& path, const json& body, int want_status = 200) {
    HttpAnswer a = server_->Handle("POST", path, body.dump());
    EXPECT_EQ(a.status, want_status) << a.body;
    return json::parse(a.body);
  }

  MemEnv env_;
  std::unique_ptr<Model> model_;
  std::vector<float> params_, state_;
  ModelServerOptions options_;
  std::unique_ptr<ModelServer> server_;
};

TEST_F(ModelServerTest, AnEmptyBasePathIsAClearError) {
  ModelServerOptions options;
  options.model_base_path = "/nothing/here";
  absl::StatusOr<std::unique_ptr<ModelServer>> server = ModelServer::Create(&env_, options);
  EXPECT_TRUE(absl::IsNotFound(server.status()));
  EXPECT_NE(server.status().message().find("pstrain-export <job_dir>"), std::string::npos);
}

TEST_F(ModelServerTest, PredictsInRowAndColumnarForm) {
  json rows = Post("/v1/models/mnist:predict", {{"instances", {Image(1), Image(2)}}});
  ASSERT_EQ(rows["predictions"].size(), 2u);
  EXPECT_EQ(rows["predictions"][0]["classes"], Expected(1));
  EXPECT_EQ(rows["predictions"][1]["classes"], Expected(2));
  EXPECT_EQ(rows["predictions"][0]["probabilities"].size(), 10u);
  json columns =
      Post("/v1/models/mnist/versions/" + std::to_string(server_->version()) + ":predict",
           {{"inputs", {{"image", {Image(1), Image(2)}}}}});
  EXPECT_EQ(columns["outputs"]["classes"], json({Expected(1), Expected(2)}));
  EXPECT_EQ(columns["outputs"]["probabilities"][1], rows["predictions"][1]["probabilities"]);
}

TEST_F(ModelServerTest, StatusMetadataAndHealth) {
  HttpAnswer status = server_->Handle("GET", "/v1/models/mnist", "");
  ASSERT_EQ(status.status, 200);
  json s = json::parse(status.body)["model_version_status"][0];
  EXPECT_EQ(s["version"], std::to_string(server_->version()));
  EXPECT_EQ(s["state"], "AVAILABLE");
  HttpAnswer metadata = server_->Handle("GET", "/v1/models/mnist/metadata", "");
  ASSERT_EQ(metadata.status, 200);
  json sig =
      json::parse(metadata.body)["metadata"]["signature_def"]["signature_def"]["serving_default"];
  EXPECT_EQ(sig["inputs"]["image"]["dtype"], "DT_FLOAT");
  EXPECT_EQ(sig["inputs"]["image"]["tensor_shape"]["dim"][1]["size"], "28");
  EXPECT_EQ(sig["outputs"]["probabilities"]["tensor_shape"]["dim"][1]["size"], "10");
  HttpAnswer health = server_->Handle("GET", "/healthz", "");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(json::parse(health.body)["status"], "ok");
}

// A regression head's export answers numbers: each instance's value in the
// row form, {"predictions": [...]} in the columnar one, and its signature
// has that one output.
TEST(RegressionModelServerTest, AnswersValuesAndItsSignatureSaysSo) {
  MemEnv env;
  std::unique_ptr<Model> model = *BuildModelFromSpecText(
      "input: [3]\nhead: regression\nlayers:\n  - dense: {units: 4, activation: relu}\n"
      "  - dense: {units: 1}\n",
      "net.yaml");
  std::vector<float> params(model->num_params()), state(model->num_state());
  model->InitializeVariables(2, params.data(), state.data());
  ASSERT_TRUE(WriteExport(&env, "/job/export", *model, ModelOptions(), 3, "", params, state).ok());
  ModelServerOptions options;
  options.model_name = "delay";
  options.model_base_path = "/job/export";
  absl::StatusOr<std::unique_ptr<ModelServer>> server = ModelServer::Create(&env, options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::vector<float> x = {-1.5f, 9.0f, 0.3f, 0.5f, 0.0f, 2.0f};  // any values: not pixels
  const std::vector<float> labels(2, 0);
  model->Evaluate(params.data(), state.data(), x.data(), labels.data(), 2);
  const json want = {model->logits().data()[0], model->logits().data()[1]};

  HttpAnswer rows =
      (*server)->Handle("POST", "/v1/models/delay:predict",
                        R"({"instances": [{"dense": [-1.5, 9, 0.3]}, {"dense": [0.5, 0, 2]}]})");
  ASSERT_EQ(rows.status, 200) << rows.body;
  EXPECT_EQ(json::parse(rows.body)["predictions"], want) << rows.body;
  HttpAnswer columns = (*server)->Handle("POST", "/v1/models/delay:predict",
                                         R"({"inputs": {"dense": [[-1.5, 9, 0.3], [0.5, 0, 2]]}})");
  ASSERT_EQ(columns.status, 200) << columns.body;
  EXPECT_EQ(json::parse(columns.body)["outputs"], json({{"predictions", want}})) << columns.body;
  HttpAnswer metadata = (*server)->Handle("GET", "/v1/models/delay/metadata", "");
  ASSERT_EQ(metadata.status, 200);
  const json outputs = json::parse(
      metadata.body)["metadata"]["signature_def"]["signature_def"]["serving_default"]["outputs"];
  ASSERT_EQ(outputs.size(), 1u) << outputs;
  EXPECT_EQ(outputs["predictions"]["dtype"], "DT_FLOAT");
}

// Bad requests get a 4xx with {"error": ...} saying what is wrong, and the
// server goes on serving.
TEST_F(ModelServerTest, BadRequestsAreRefusedAndServingGoesOn) {
  json wrong_shape = Image(1);
  wrong_shape.erase(wrong_shape.begin());
  json out_of_range = Image(1);
  out_of_range[5] = 255;
  json strings = Image(1);
  strings[0] = "0.5";
  std::vector<json> too_many(17, Image(1));
  struct Case {
    std::string method, path, body;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"POST", "/v1/models/mnist:predict", "{\"instances\": [", 400, "malformed JSON"},
      {"POST", "/v1/models/mnist:predict", "", 400, "empty request body"},
      {"POST", "/v1/models/mnist:predict", "[1, 2]", 400, "is a JSON object"},
      {"POST", "/v1/models/mnist:predict", "{\"instances\": []}", 400, "non-empty list"},
      {"POST", "/v1/models/mnist:predict", "{\"rows\": []}", 400, "\"instances\" (row format)"},
      {"POST", "/v1/models/mnist:predict", json({{"instances", {Image(1), wrong_shape}}}).dump(),
       400, "instances[1]: a list of 783 where 784 belong"},
      {"POST", "/v1/models/mnist:predict", json({{"instances", {out_of_range}}}).dump(), 400,
       "instances[0][5]: 255 is outside [0, 1]"},
      {"POST", "/v1/models/mnist:predict", json({{"instances", {strings}}}).dump(), 400,
       "instances[0][0]: expected a number, got string"},
      {"POST", "/v1/models/mnist:predict", json({{"instances", too_many}}).dump(), 413,
       "17 instances; at most 16"},
      {"POST", "/v1/models/mnist:predict",
       json({{"signature_name", "classify"}, {"instances", {Image(1)}}}).dump(), 400,
       "no signature \"classify\""},
      {"POST", "/v1/models/other:predict", json({{"instances", {Image(1)}}}).dump(), 404,
       "this server serves model mnist"},
      {"POST", "/v1/models/mnist/versions/7:predict", json({{"instances", {Image(1)}}}).dump(), 404,
       "version 7 of model mnist is not available"},
      {"GET", "/v1/models/mnist:predict", "", 405, "use POST"},
      {"GET", "/v1/nothing", "", 404, "no such endpoint"},
      {"GET", "/v1/models/other", "", 404, "Servable not found"},
  };
  for (const Case& c : cases) {
    HttpAnswer a = server_->Handle(c.method, c.path, c.body);
    EXPECT_EQ(a.status, c.status) << c.path << " " << c.body.substr(0, 60) << ": " << a.body;
    json error = json::parse(a.body, nullptr, false);
    ASSERT_TRUE(error.is_object() && error.contains("error")) << a.body;
    EXPECT_NE(error["error"].get<std::string>().find(c.message), std::string::npos)
        << error["error"] << "\nwanted: " << c.message;
  }
  json ok = Post("/v1/models/mnist:predict", {{"instances", {Image(4)}}});
  EXPECT_EQ(ok["predictions"][0]["classes"], Expected(4));
}

TEST_F(ModelServerTest, BodiesThatAreNotUtf8AndBytesInThePathAre400sNot500s) {
  const std::string request = json({{"instances", {Image(1)}}}).dump();
  std::string utf16 = "\xFF\xFE";  // UTF-16LE with its byte-order mark
  for (char c : request) utf16 += std::string{c, '\0'};
  struct Case {
    std::string body;
    std::string says;
  };
  const Case cases[] = {
      {utf16, "UTF-16, not UTF-8 (it starts with the byte-order mark FF FE)"},
      {utf16.substr(2), "looks like UTF-16"},
      {std::string("\x00\x00\xFE\xFF", 4) + utf16.substr(2), "UTF-32"},
      {"{\"instances\": [[0.5]], \"note\": \"caf\xE9\"}", "not UTF-8: byte 35 is 0xe9"},
      {"{\"instances\": [\"\xC0\xAF\"]}", "not UTF-8: byte 16 is 0xc0"},  // an overlong '/'
  };
  for (const Case& c : cases) {
    HttpAnswer a = server_->Handle("POST", "/v1/models/mnist:predict", c.body);
    EXPECT_EQ(a.status, 400) << a.body;
    const std::string error = json::parse(a.body)["error"];
    EXPECT_NE(error.find(c.says), std::string::npos) << c.says << " vs " << error;
    EXPECT_NE(error.find("send the JSON as UTF-8"), std::string::npos) << error;
  }
  // A UTF-8 byte-order mark is allowed (JSON parsers may skip it).
  HttpAnswer bom = server_->Handle("POST", "/v1/models/mnist:predict", "\xEF\xBB\xBF" + request);
  EXPECT_EQ(bom.status, 200) << bom.body;
  // The path is echoed in the 404; its bytes that are not UTF-8 are replaced.
  HttpAnswer path = server_->Handle("GET", "/v1/models/\xFF\xFE:predict/x", "");
  EXPECT_EQ(path.status, 404) << path.body;
  EXPECT_TRUE(json::accept(path.body)) << path.body;
}

TEST_F(ModelServerTest, PicksUpANewVersionAndSkipsADamagedOne) {
  const int64_t first = server_->version();
  EXPECT_FALSE(server_->PollOnce());
  const std::string dir = Export(4);  // new values, a new version
  ASSERT_TRUE(server_->PollOnce());
  EXPECT_GT(server_->version(), first);
  json p = Post("/v1/models/mnist:predict", {{"instances", {Image(1)}}});
  EXPECT_EQ(p["predictions"][0]["classes"], Expected(1));
  const json served = p["predictions"][0]["probabilities"];
  // A newer version whose variables are damaged is not loaded.
  const std::string bad = Export(5);
  std::string bytes = *env_.ReadFile(bad + "/variables.bin");
  bytes[7] ^= 4;
  ASSERT_TRUE(env_.WriteFileAtomic(bad + "/variables.bin", bytes).ok());
  EXPECT_FALSE(server_->PollOnce());
  EXPECT_EQ(Post("/v1/models/mnist:predict",
                 {{"instances", {Image(1)}}})["predictions"][0]["probabilities"],
            served);
}

TEST_F(ModelServerTest, ConcurrentRequestsAreBatchedAndEachGetsItsOwnAnswer) {
  std::vector<json> want;
  for (int k = 0; k < 8; ++k) {
    want.push_back(Post("/v1/models/mnist:predict", {{"instances", {Image(k)}}})["predictions"][0]);
  }
  std::vector<std::thread> clients;
  std::vector<int> wrong(8, 0);
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        const int k = (t + round) % 8;
        HttpAnswer a = server_->Handle("POST", "/v1/models/mnist:predict",
                                       json({{"instances", {Image(k)}}}).dump());
        if (a.status != 200) {
          ADD_FAILURE() << a.status << " " << a.body;
          ++wrong[t];
          continue;
        }
        // Batched with others, the same answer up to float rounding.
        const json got = json::parse(a.body)["predictions"][0];
        bool same = got["classes"] == want[k]["classes"];
        for (int c = 0; c < 10; ++c) {
          same = same && std::abs(got["probabilities"][c].get<double>() -
                                  want[k]["probabilities"][c].get<double>()) < 1e-5;
        }
        if (!same) {
          ++wrong[t];
          ADD_FAILURE() << "image " << k << ": got " << got.dump() << "\nwant " << want[k].dump();
        }
      }
    });
  }
  for (std::thread& c : clients) c.join();
  EXPECT_EQ(wrong, std::vector<int>(8, 0));
  // 48 one-instance requests: 8 one at a time, then 40 from 8 threads at
  // once, which share forward passes.
  const auto [passes, instances] = server_->batch_stats();
  EXPECT_EQ(instances, 48);
  EXPECT_LT(passes, 48);
  std::cerr << instances << " instances in " << passes << " forward passes\n";
}

// A click model is served from its export's rows: row and columnar requests
// answer as the Predictor does, bad ones are 400s naming what is wrong.
TEST(ClickModelServerTest, PredictsFromSparseFeatures) {
  MemEnv env;
  ClickModel c = MakeClickModel();
  ASSERT_TRUE(
      WriteExport(&env, "/job/export", *c.model, ModelOptions(), 4, "", c.params, c.state, c.tables)
          .ok());
  ModelServerOptions options;
  options.model_name = "ctr";
  options.model_base_path = "/job/export";
  options.max_instances = 4;
  absl::StatusOr<std::unique_ptr<ModelServer>> server = ModelServer::Create(&env, options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<Predictor> predictor = *Predictor::Load(&env, "/job/export");

  const json instances = json::parse(R"([{"dense": [1, -2], "user": [17], "tokens": ["a", "b"]},
                                         {"dense": [0.5, 0], "user": 5}])");
  ClickRequest request;
  ASSERT_TRUE(ReadClickRequest(json({{"instances", instances}}).dump(), predictor->click_inputs(),
                               4, &request)
                  .ok());
  std::vector<Prediction> want = *predictor->PredictClicks(request);

  HttpAnswer rows =
      (*server)->Handle("POST", "/v1/models/ctr:predict", json({{"instances", instances}}).dump());
  ASSERT_EQ(rows.status, 200) << rows.body;
  const json r = json::parse(rows.body)["predictions"];
  ASSERT_EQ(r.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r[i]["classes"], want[i].classes);
    EXPECT_NEAR(r[i]["logistic"][0].get<double>(), want[i].logistic, 1e-6);
    EXPECT_NEAR(r[i]["probabilities"][1].get<double>(), want[i].logistic, 1e-6);
  }
  HttpAnswer columns = (*server)->Handle(
      "POST", "/v1/models/ctr:predict",
      R"({"inputs": {"dense": [[1, -2], [0.5, 0]], "user": [[17], 5], "tokens": [["a", "b"], []]}})");
  ASSERT_EQ(columns.status, 200) << columns.body;
  const json o = json::parse(columns.body)["outputs"];
  EXPECT_NEAR(o["logistic"][1][0].get<double>(), want[1].logistic, 1e-6);
  EXPECT_EQ(o["classes"][0], want[0].classes);

  HttpAnswer misspelt = (*server)->Handle("POST", "/v1/models/ctr:predict",
                                          R"({"instances": [{"dense": [1, 2], "usr": [1]}]})");
  EXPECT_EQ(misspelt.status, 400);
  EXPECT_NE(json::parse(misspelt.body)["error"].get<std::string>().find("no input \"usr\""),
            std::string::npos)
      << misspelt.body;
  HttpAnswer out_of_range = (*server)->Handle(
      "POST", "/v1/models/ctr:predict", R"({"instances": [{"dense": [1, 2], "tokens": [99]}]})");
  EXPECT_EQ(out_of_range.status, 400);
  EXPECT_NE(out_of_range.body.find("out of range"), std::string::npos) << out_of_range.body;
  HttpAnswer too_many = (*server)->Handle(
      "POST", "/v1/models/ctr:predict",
      json({{"instances",
             json::array({instances[0], instances[0], instances[0], instances[0], instances[0]})}})
          .dump());
  EXPECT_EQ(too_many.status, 413);

  HttpAnswer metadata = (*server)->Handle("GET", "/v1/models/ctr/metadata", "");
  ASSERT_EQ(metadata.status, 200);
  const json sig =
      json::parse(metadata.body)["metadata"]["signature_def"]["signature_def"]["serving_default"];
  EXPECT_EQ(sig["inputs"]["dense"]["tensor_shape"]["dim"][1]["size"], "2");
  EXPECT_TRUE(sig["inputs"].contains("user"));
  EXPECT_TRUE(sig["inputs"].contains("tokens"));
  EXPECT_FALSE(sig["inputs"].contains("image"));
}

// An export of a CSV-trained job takes raw rows over REST: answered as the
// ids the training computed from them; a bad row is a 400 naming its column.
TEST(ClickModelServerTest, TakesRawRowsOfItsCsvSchema) {
  MemEnv env;
  ClickModel c = MakeClickModel();
  ASSERT_TRUE(env.WriteFileAtomic("/job/schema.yaml",
                                  "csv:\n  label: clicked\n  numeric:\n    - {name: x}\n"
                                  "    - {name: y, transform: log1p}\n  categorical:\n"
                                  "    - {name: user, hash_buckets: 1000}\n"
                                  "    - {name: tokens, hash_buckets: 16, separator: \" \"}\n"
                                  "  missing: default\n")
                  .ok());
  const std::string hparams =
      "cluster:\n  chief: [\"127.0.0.1:2000\"]\n  ps: [\"127.0.0.1:2001\"]\ntraining:\n"
      "  csv_schema: /job/schema.yaml\n";
  ASSERT_TRUE(WriteExport(&env, "/job/export", *c.model, ModelOptions(), 4, hparams, c.params,
                          c.state, c.tables)
                  .ok());
  ModelServerOptions options;
  options.model_name = "ctr";
  options.model_base_path = "/job/export";
  absl::StatusOr<std::unique_ptr<ModelServer>> server = ModelServer::Create(&env, options);
  ASSERT_TRUE(server.ok()) << server.status();

  HttpAnswer raw = (*server)->Handle(
      "POST", "/v1/models/ctr:predict",
      R"({"instances": [{"x": 1, "y": 0.5, "user": "u1", "tokens": "a b"}, {"x": -3, "y": 2}]})");
  ASSERT_EQ(raw.status, 200) << raw.body;
  const json ids = {{"instances",
                     {{{"dense", {1.0, std::log1p(0.5)}},
                       {"user", {HashBucketFast("u1", 1000)}},
                       {"tokens", {HashBucketFast("a", 16), HashBucketFast("b", 16)}}},
                      {{"dense", {-3.0, std::log1p(2.0)}}}}}};
  HttpAnswer by_ids = (*server)->Handle("POST", "/v1/models/ctr:predict", ids.dump());
  ASSERT_EQ(by_ids.status, 200) << by_ids.body;
  const json r = json::parse(raw.body)["predictions"], w = json::parse(by_ids.body)["predictions"];
  ASSERT_EQ(r.size(), 2u);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(r[i]["logistic"], w[i]["logistic"]) << raw.body;
  EXPECT_NE(r[0]["logistic"], r[1]["logistic"]) << raw.body;  // not a constant's answers

  HttpAnswer bad = (*server)->Handle("POST", "/v1/models/ctr:predict",
                                     R"({"instances": [{"x": 1, "y": "many"}]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find(R"(instances[0]: column \"y\": \"many\" is not a number)"),
            std::string::npos)
      << bad.body;
  HttpAnswer unknown =
      (*server)->Handle("POST", "/v1/models/ctr:predict", R"({"instances": [{"x": 1, "z": 2}]})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(unknown.body.find("no column \\\"z\\\""), std::string::npos) << unknown.body;
  // Serving goes on.
  EXPECT_EQ((*server)->Handle("POST", "/v1/models/ctr:predict", ids.dump()).status, 200);
}

// Online training's exports: deltas between full versions. While 8 clients
// send requests without pause, 12 new versions land (every third full, the
// others deltas applied in place); no request fails, every answer names a
// version that was written, and the server ends on the newest, answering as
// that version loaded whole.
TEST(ClickModelServerTest, FollowsDeltasAndFullVersionsWhileAnswering) {
  MemEnv env;
  ClickModel c = MakeClickModel();
  const std::string base = "/job/export";
  std::set<std::string> written;
  std::string dir =
      *WriteExport(&env, base, *c.model, ModelOptions(), 1, "", c.params, c.state, c.tables);
  written.insert(dir.substr(dir.rfind('/') + 1));
  ModelServerOptions options;
  options.model_name = "ctr";
  options.model_base_path = base;
  std::unique_ptr<ModelServer> server = *ModelServer::Create(&env, options);
  const std::string body =
      R"({"instances": [{"dense": [1, -2], "user": [5], "tokens": ["a", "b"]},
                        {"dense": [0.5, 0], "user": 101}]})";
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0}, answered{0};
  absl::Mutex mu;
  std::set<std::string> seen;
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&] {
      std::set<std::string> mine;
      while (!stop) {
        HttpAnswer a = server->Handle("POST", "/v1/models/ctr:predict", body);
        if (a.status != 200) {
          ++failed;
          continue;
        }
        ++answered;
        mine.insert(json::parse(a.body).value("model_version", "none"));
      }
      absl::MutexLock lock(&mu);
      seen.insert(mine.begin(), mine.end());
    });
  }
  int deltas = 0;
  for (int round = 1; round <= 12; ++round) {
    const std::vector<TrainedTableRows> delta = MoveOn(&c, round);
    if (round % 3 == 0) {
      dir = *WriteExport(&env, base, *c.model, ModelOptions(), 1 + round, "", c.params, c.state,
                         c.tables);
    } else {
      ExportOnnxFile no_onnx;
      no_onnx.missing_reason = "a delta";
      dir = *WriteExportVersion(&env, base, *c.model, ModelOptions(), 1 + round, "", c.params,
                                c.state, delta, no_onnx, server->version());
      ++deltas;
    }
    written.insert(dir.substr(dir.rfind('/') + 1));
    ASSERT_TRUE(server->PollOnce()) << round;
    EXPECT_EQ(std::to_string(server->version()), dir.substr(dir.rfind('/') + 1));
    absl::SleepFor(absl::Milliseconds(5));
  }
  stop = true;
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(deltas, 8);
  EXPECT_EQ(server->deltas_applied(), 8);  // in place, not loaded whole
  EXPECT_EQ(failed, 0);
  EXPECT_GT(answered, 0);
  for (const std::string& v : seen) EXPECT_EQ(written.count(v), 1u) << v;
  std::unique_ptr<Predictor> whole = *Predictor::Load(&env, dir);
  ClickRequest request;
  ASSERT_TRUE(ReadClickRequest(body, whole->click_inputs(), 4, &request).ok());
  const std::vector<Prediction> want = *whole->PredictClicks(request);
  const json got = json::parse(server->Handle("POST", "/v1/models/ctr:predict", body).body);
  EXPECT_EQ(got["model_version"], dir.substr(dir.rfind('/') + 1));
  EXPECT_EQ(got["predictions"][1]["logistic"][0].get<float>(), want[1].logistic);
}

}  // namespace
}  // namespace pstrain
