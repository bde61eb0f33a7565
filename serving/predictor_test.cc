#include "serving/predictor.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "data/feature_hash.h"
#include "data/formats/csv_format.h"
#include "data/formats/example_writer.h"
#include "data/formats/tabular_examples.h"
#include "export/export.h"
#include "gtest/gtest.h"
#include "io/png.h"
#include "models/registry.h"
#include "testing/click_test_model.h"

namespace pstrain {
namespace {

const std::vector<int64_t> kShape = {28, 28, 1};

// A 28x28 image with distinct values, as floats and as 8-bit pixels.
std::vector<uint8_t> Pixels() {
  std::vector<uint8_t> p(784);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>((i * 37) % 256);
  return p;
}
std::vector<float> Floats() {
  std::vector<float> f;
  for (uint8_t p : Pixels()) f.push_back(p / 255.0f);
  return f;
}

nlohmann::json Rows(const std::vector<float>& f, bool channels) {
  nlohmann::json rows = nlohmann::json::array();
  for (int y = 0; y < 28; ++y) {
    nlohmann::json row = nlohmann::json::array();
    for (int x = 0; x < 28; ++x) {
      row.push_back(channels ? nlohmann::json::array({f[y * 28 + x]})
                             : nlohmann::json(f[y * 28 + x]));
    }
    rows.push_back(row);
  }
  return rows;
}

std::string PngBase64(int h, int w, int c) {
  std::vector<uint8_t> pixels(static_cast<size_t>(h) * w * c);
  const std::vector<uint8_t> image = Pixels();
  for (int p = 0; p < h * w; ++p) {
    for (int k = 0; k < c; ++k) pixels[p * c + k] = k == 0 && p < 784 ? image[p] : 255;
  }
  return absl::Base64Escape(*EncodePng(h, w, c, pixels));
}

TEST(ParseInstanceTest, EveryFormGivesTheSameImage) {
  const std::vector<float> want = Floats();
  const std::vector<nlohmann::json> forms = {
      nlohmann::json(want),
      Rows(want, false),
      Rows(want, true),
      {{"image", want}},
      {{"image", Rows(want, false)}},
      {{"b64", PngBase64(28, 28, 1)}},
      {{"image", {{"b64", PngBase64(28, 28, 1)}}}},
      {{"b64", PngBase64(28, 28, 2)}},  // gray + alpha: the alpha is dropped
  };
  for (size_t i = 0; i < forms.size(); ++i) {
    std::vector<float> got(784, -1.0f);
    absl::Status s = ParseInstance(forms[i], kShape, got.data());
    ASSERT_TRUE(s.ok()) << "form " << i << ": " << s;
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_NEAR(got[k], want[k], 1e-6) << "form " << i << " value " << k;
    }
  }
}

TEST(ParseInstanceTest, BadInstancesSayWhatIsWrongAndWhere) {
  std::vector<float> out(784);
  nlohmann::json rows = Rows(Floats(), false);
  rows[3][27] = 255;
  std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {rows, "[3][27]: 255 is outside [0, 1]: send pixel / 255"},
      {nlohmann::json(std::vector<float>(783, 0.5f)), "a list of 783 where 784 belong"},
      {nlohmann::json::parse("[[[[0.5]]]]"), "numbers nested 4 deep"},
      {nlohmann::json("an image"), "not a string"},
      {nlohmann::json::parse(R"({"pixels": [1]})"), "this one has \"pixels\""},
      {nlohmann::json::parse(R"({"b64": "!!not base64!!"})"), "b64: is not base64"},
      {{{"b64", PngBase64(32, 32, 1)}}, "a PNG of 32x32 with 1 channels; the model takes 28x28"},
      {{{"b64", PngBase64(28, 28, 3)}}, "with 3 channels; the model takes 28x28 with 1"},
      {{{"b64", absl::Base64Escape("not a png")}}, "b64: not a PNG pstrain reads"},
  };
  rows = Rows(Floats(), false);
  rows[0][1] = "x";
  cases.push_back({rows, "[0][1]: expected a number, got string"});
  for (const auto& [instance, message] : cases) {
    absl::Status s = ParseInstance(instance, kShape, out.data());
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << instance.dump().substr(0, 80) << ": " << s;
    EXPECT_NE(s.message().find(message), std::string::npos) << s << "\nwanted: " << message;
  }
}

// The predictor's answers are the model's evaluation outputs on the same
// images: arg-max of the logits and their softmax.
TEST(PredictorTest, AnswersAsTheModelEvaluates) {
  MemEnv env;
  std::unique_ptr<Model> model = *BuildModel("mnist_cnn", ModelOptions());
  std::vector<float> params(model->num_params()), state(model->num_state());
  model->InitializeVariables(11, params.data(), state.data());
  ASSERT_TRUE(WriteExport(&env, "/job/export", *model, ModelOptions(), 9, "", params, state).ok());
  absl::StatusOr<std::unique_ptr<Predictor>> predictor = Predictor::Load(&env, "/job");
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  EXPECT_EQ((*predictor)->example_size(), 784);

  const int n = 5;
  std::vector<float> images(n * 784);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>((i * 7919) % 256) / 255;
  std::vector<float> labels(n, 0);
  model->Evaluate(params.data(), state.data(), images.data(), labels.data(), n);
  const Tensor& logits = model->logits();
  std::vector<Prediction> got = (*predictor)->Predict(images.data(), n);
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const float* z = logits.data() + i * 10;
    EXPECT_EQ(got[i].classes, std::max_element(z, z + 10) - z);
    double sum = 0;
    for (int k = 0; k < 10; ++k) sum += std::exp(static_cast<double>(z[k]));
    for (int k = 0; k < 10; ++k) {
      EXPECT_NEAR(got[i].probabilities[k], std::exp(static_cast<double>(z[k])) / sum, 1e-6);
    }
  }
  EXPECT_EQ(PredictionJson(got[0])["classes"], got[0].classes);
}

// A regression head's export answers each instance with its one value, as
// the model evaluates it: a bare number in JSON, "predictions" in columns.
// A tabular model without tables takes its dense features as a click model
// does, of any value (not pixels in [0, 1]).
TEST(PredictorTest, ARegressionHeadAnswersItsValues) {
  MemEnv env;
  std::unique_ptr<Model> model = *BuildModelFromSpecText(
      "input: [3]\nhead: regression\nloss: mae\nlayers:\n  - dense: {units: 4, activation: "
      "relu}\n  - dense: {units: 1}\n",
      "net.yaml");
  std::vector<float> params(model->num_params()), state(model->num_state());
  model->InitializeVariables(5, params.data(), state.data());
  const std::string dir =
      *WriteExport(&env, "/job/export", *model, ModelOptions(), 9, "", params, state);
  absl::StatusOr<std::string> manifest = env.ReadFile(dir + "/model.json");
  ASSERT_TRUE(manifest.ok());
  const nlohmann::json m = nlohmann::json::parse(*manifest);
  EXPECT_EQ(m["format_version"], 5);
  EXPECT_EQ(m["num_classes"], 0);
  EXPECT_EQ(m["outputs"].size(), 1u);
  EXPECT_TRUE(m["outputs"].contains("predictions"));
  absl::StatusOr<std::unique_ptr<Predictor>> predictor = Predictor::Load(&env, "/job");
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  EXPECT_TRUE((*predictor)->is_regression());
  EXPECT_TRUE((*predictor)->is_click_model());
  const std::vector<float> x = {0.5f, -1, 2, 3, 0.25f, -0.5f};
  const std::vector<float> labels(2, 0);
  model->Evaluate(params.data(), state.data(), x.data(), labels.data(), 2);
  ClickRequest request;
  ASSERT_TRUE(
      ReadClickRequest(R"({"instances": [{"dense": [0.5, -1, 2]}, {"dense": [3, 0.25, -0.5]}]})",
                       (*predictor)->click_inputs(), 4, &request)
          .ok());
  absl::StatusOr<std::vector<Prediction>> answered = (*predictor)->PredictClicks(request);
  ASSERT_TRUE(answered.ok()) << answered.status();
  const std::vector<Prediction>& got = *answered;
  ASSERT_EQ(got.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(got[i].regression);
    EXPECT_EQ(got[i].value, model->logits().data()[i]);
    EXPECT_TRUE(got[i].probabilities.empty());
    EXPECT_EQ(PredictionJson(got[i]), nlohmann::json(got[i].value));
  }
  EXPECT_EQ(PredictionColumns(got),
            nlohmann::json({{"predictions", {got[0].value, got[1].value}}}));
}

TEST(PredictorTest, ADamagedExportIsNotLoaded) {
  MemEnv env;
  std::unique_ptr<Model> model = *BuildModel("mnist_cnn", ModelOptions());
  std::vector<float> params(model->num_params()), state(model->num_state());
  const std::string dir =
      *WriteExport(&env, "/job/export", *model, ModelOptions(), 9, "", params, state);
  std::string bytes = *env.ReadFile(dir + "/variables.bin");
  bytes[100] ^= 1;
  ASSERT_TRUE(env.WriteFileAtomic(dir + "/variables.bin", bytes).ok());
  absl::StatusOr<std::unique_ptr<Predictor>> predictor = Predictor::Load(&env, "/job");
  EXPECT_TRUE(absl::IsDataLoss(predictor.status())) << predictor.status();
}

TEST(PredictorTest, AClickModelAnswersAsItsRowsSay) {
  MemEnv env;
  ClickModel c = MakeClickModel();
  ASSERT_EQ(c.model->sparse_tables().size(), 3u);
  absl::StatusOr<std::string> dir = WriteExport(&env, "/job/export", *c.model, ModelOptions(), 9,
                                                "", c.params, c.state, c.tables);
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<std::unique_ptr<Predictor>> predictor = Predictor::Load(&env, "/job");
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  Predictor& p = **predictor;
  ASSERT_TRUE(p.is_click_model());
  EXPECT_EQ(p.click_inputs().num_dense, 2);
  EXPECT_EQ(p.click_inputs().features, (std::vector<std::string>{"user", "tokens"}));

  ClickRequest request;
  ASSERT_TRUE(ReadClickRequest(R"({"instances": [
      {"dense": [0.5, -1], "user": [17], "tokens": ["a", "b"]},
      {"dense": [0, 1], "user": 99, "tokens": ["a", "a"]},
      {"dense": [2, 2], "user": [5, 17]},
      {"dense": [2, 2], "user": [99]}]})",
                               p.click_inputs(), 10, &request)
                  .ok());
  absl::StatusOr<std::vector<Prediction>> got = p.PredictClicks(request);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 4u);

  // The same forward pass with the rows looked up here: an id that is not in
  // the export (user 99) reads as zeros.
  SparseStep step;
  ASSERT_TRUE(c.model->PrepareSparse(request.sparse, 4, &step).ok());
  for (size_t t = 0; t < step.tables.size(); ++t) {
    const int64_t dim = c.model->sparse_tables()[t].dim;
    TableStep& table = step.tables[t];
    table.rows.assign(table.ids.size() * dim, 0.0f);
    for (size_t k = 0; k < table.ids.size(); ++k) {
      const std::vector<int64_t>& ids = c.tables[t].ids;
      const auto at = std::find(ids.begin(), ids.end(), table.ids[k]);
      if (at == ids.end()) continue;
      std::copy_n(c.tables[t].weights.begin() + (at - ids.begin()) * dim, dim,
                  table.rows.begin() + k * dim);
    }
  }
  const Tensor& logits =
      c.model->Infer(c.params.data(), c.state.data(), request.dense.data(), 4, &step);
  for (int i = 0; i < 4; ++i) {
    const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(logits.data()[i])));
    EXPECT_NEAR((*got)[i].logistic, want, 1e-6) << i;
    EXPECT_TRUE((*got)[i].binary);
    EXPECT_EQ((*got)[i].classes, want > 0.5 ? 1 : 0);
    ASSERT_EQ((*got)[i].probabilities.size(), 2u);
    EXPECT_NEAR((*got)[i].probabilities[0], 1 - want, 1e-6);
    EXPECT_NEAR((*got)[i].probabilities[1], want, 1e-6);
  }
  // The rows matter: the two instances that differ only in their users'
  // rows (trained ones, and an untrained one's zeros) differ.
  EXPECT_NE((*got)[2].logistic, (*got)[3].logistic);
  EXPECT_EQ(PredictionJson((*got)[0])["logistic"][0], (*got)[0].logistic);

  // An integer id past a bucketed table is refused, naming it.
  ClickRequest bad;
  ASSERT_TRUE(ReadClickRequest(R"({"instances": [{"dense": [0, 0]},
      {"dense": [0, 0], "tokens": [16]}]})",
                               p.click_inputs(), 10, &bad)
                  .ok());
  absl::StatusOr<std::vector<Prediction>> refused = p.PredictClicks(bad);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find(
                "feature tokens, instance 1 (0-based): id 16 is out of range"),
            std::string::npos)
      << refused.status();
}

// A model trained from CSV rows keeps its schema in its export and takes
// raw rows: their predictions equal those of the rows as the training
// pipeline parses them (CsvParser of the same schema), to the bit.
constexpr char kRawSchema[] = R"(csv:
  label: clicked
  numeric:
    - {name: price, transform: log1p}
    - {name: age, transform: standardize, mean: 40, std: 12, default: 35}
    - {name: count}
  categorical:
    - {name: country, hash_buckets: 50}
    - {name: tags, hash_buckets: 100, separator: "|"}
    - {name: age, bucketize: [18, 30, 50]}
  missing: default
)";

constexpr char kRawSpec[] = R"(name: raw_click
input: [3]
head: binary
layers:
  - embedding: {feature: country, dim: 3, buckets: 50, name: emb_country}
  - embedding: {feature: tags, dim: 3, buckets: 100, combiner: sum, name: emb_tags}
  - embedding: {feature: age, dim: 2, buckets: 4, name: emb_age}
  - concat: {input: input, inputs: [emb_country, emb_tags, emb_age]}
  - dense: {units: 4, activation: relu}
  - dense: {units: 1, name: deep}
  - linear: {features: [country], crosses: [[age, country]], buckets: 100, name: wide}
  - add: {input: deep, inputs: [wide]}
)";

constexpr char kRawCsv[] =
    "clicked,country,price,tags,age,count\n"
    "1,US,12.5,a|b,17,3\n"
    "0,FR,0,,30,0\n"
    "1,\"Côte d'Ivoire\",1e3,b||c|a,49.99,-2\n"
    "0,,7,x,,1\n"
    "1,JP, 2 ,a,50,100000\n";

// The raw rows of kRawCsv as a client sends them: numbers as JSON numbers,
// the label too (ignored), a missing field absent or null.
constexpr char kRawInstances[] = R"([
  {"clicked": 1, "country": "US", "price": 12.5, "tags": "a|b", "age": 17, "count": 3},
  {"country": "FR", "price": 0, "tags": "", "age": 30, "count": 0},
  {"country": "Côte d'Ivoire", "price": 1e3, "tags": "b||c|a", "age": 49.99, "count": -2},
  {"country": null, "price": 7, "tags": "x", "count": 1},
  {"country": "JP", "price": "2", "tags": "a", "age": 50, "count": 100000}])";

// A job config's beginning (an export's hparams are a whole job config).
constexpr char kRawCluster[] =
    "cluster:\n  chief: [\"127.0.0.1:2000\"]\n  ps: [\"127.0.0.1:2001\"]\ntraining:\n";

// An export of kRawSpec with random values and a row for every id of its
// tables, trained (its job config says) with kRawSchema.
std::unique_ptr<Predictor> RawRowPredictor(MemEnv* env) {
  std::unique_ptr<Model> model = *BuildModelFromSpecText(kRawSpec, "the test's spec");
  std::vector<float> params(model->num_params()), state(model->num_state());
  model->InitializeVariables(7, params.data(), state.data());
  std::vector<TrainedTableRows> tables;
  float v = 0.3f;
  for (const SparseTableInfo& info : model->sparse_tables()) {
    TrainedTableRows rows;
    for (int64_t id = 0; id < info.buckets; ++id) {
      rows.ids.push_back(id);
      for (int64_t k = 0; k < info.dim; ++k) {
        rows.weights.push_back(v);
        v = std::fmod(v * 1.37f + 0.11f, 1.0f) - 0.4f;
      }
    }
    tables.push_back(std::move(rows));
  }
  EXPECT_TRUE(env->WriteFileAtomic("/job/schema.yaml", kRawSchema).ok());
  const std::string hparams = absl::StrCat(kRawCluster, "  csv_schema: /job/schema.yaml\n");
  absl::StatusOr<std::string> dir =
      WriteExport(env, "/job/export", *model, ModelOptions(), 9, hparams, params, state, tables);
  EXPECT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<std::unique_ptr<Predictor>> p = Predictor::Load(env, "/job");
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

TEST(PredictorRawRowsTest, RawRowsPredictExactlyAsTheTrainingPipelinesExamples) {
  MemEnv env;
  std::unique_ptr<Predictor> p = RawRowPredictor(&env);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(p->click_inputs().schema, nullptr);
  EXPECT_EQ(p->click_inputs().raw_columns,
            (std::vector<std::string>{"price", "age", "count", "country", "tags"}));

  // The training pipeline's examples of the CSV rows.
  const std::string_view csv = kRawCsv;
  const size_t header_end = csv.find('\n');
  absl::StatusOr<CsvParser> parser =
      CsvParser::Create(*p->click_inputs().schema, csv.substr(0, header_end), "rows.csv");
  ASSERT_TRUE(parser.ok()) << parser.status();
  int64_t line = 1;
  for (size_t at = header_end + 1; at < csv.size();) {
    const size_t end = csv.find('\n', at);
    ASSERT_TRUE(parser->AppendLine(csv.substr(at, end - at), ++line).ok());
    at = end + 1;
  }
  const Dataset examples = parser->Take();
  ASSERT_EQ(examples.size(), 5);
  const ClickRequest parsed = ClickRequestOfExamples(examples, p->click_inputs());
  absl::StatusOr<std::vector<Prediction>> want = p->PredictClicks(parsed);
  ASSERT_TRUE(want.ok()) << want.status();

  for (const std::string& body :
       {absl::StrCat(R"({"instances": )", kRawInstances, "}"),
        // The columnar form of the same rows.
        std::string(R"({"inputs": {"country": ["US", "FR", "Côte d'Ivoire", null, "JP"],
            "price": [12.5, 0, 1e3, 7, "2"], "tags": ["a|b", "", "b||c|a", "x", "a"],
            "age": [17, 30, 49.99, null, 50], "count": [3, 0, -2, 1, 100000]}})")}) {
    ClickRequest raw;
    absl::Status read = ReadClickRequest(body, p->click_inputs(), 10, &raw);
    ASSERT_TRUE(read.ok()) << read << "\n" << body;
    EXPECT_EQ(raw.dense, parsed.dense);
    absl::StatusOr<std::vector<Prediction>> got = p->PredictClicks(raw);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_EQ((*got)[i].logistic, (*want)[i].logistic) << "row " << i << "\n" << body;
    }
  }
  // The rows differ, so equal answers are not a constant's.
  EXPECT_NE((*want)[0].logistic, (*want)[1].logistic);

  // A job from Examples (the rows converted by pstrain-data convert
  // --csv_schema, read back by the training's Example parser) with that
  // schema: its raw rows predict exactly as its Examples too.
  TabularFeatures features;
  features.num_dense = 3;
  features.sparse = {"country", "tags", "age"};
  TabularExampleParser from_examples(features);
  for (int64_t i = 0; i < examples.size(); ++i) {
    absl::StatusOr<std::string> record = EncodeTabularExample(examples, i);
    ASSERT_TRUE(record.ok()) << record.status();
    ASSERT_TRUE(from_examples.AppendRecord(*record, absl::StrCat("record ", i)).ok());
  }
  const ClickRequest of_examples = ClickRequestOfExamples(from_examples.Take(), p->click_inputs());
  absl::StatusOr<std::vector<Prediction>> examples_want = p->PredictClicks(of_examples);
  ASSERT_TRUE(examples_want.ok()) << examples_want.status();
  ASSERT_EQ(examples_want->size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) {
    EXPECT_EQ((*examples_want)[i].logistic, (*want)[i].logistic) << "example " << i;
  }

  // The id form keeps working (an instance with a list is one).
  ClickRequest ids;
  EXPECT_TRUE(ReadClickRequest(R"({"instances": [{"dense": [1, 0, 3], "country": [7]}]})",
                               p->click_inputs(), 10, &ids)
                  .ok());
}

TEST(PredictorRawRowsTest, ABadRowIsRefusedNamingItsColumn) {
  MemEnv env;
  std::unique_ptr<Predictor> p = RawRowPredictor(&env);
  ASSERT_NE(p, nullptr);
  const struct {
    const char* body;
    const char* message;
  } cases[] = {
      {R"({"instances": [{"price": 1}, {"price": "cheap"}]})",
       "instances[1]: column \"price\": \"cheap\" is not a number"},
      {R"({"instances": [{"price": -1}]})", "instances[0]: column \"price\": \"-1\""},
      {R"({"instances": [{"prise": 1}]})",
       "instances[0].prise: the model has no column \"prise\"; its CSV schema reads price, age, "
       "count, country, tags"},
      {R"({"instances": [{"age": true}]})",
       "instances[0].age: a raw row's value is the CSV field: a string, a number or null"},
      {R"({"instances": [{"age": {"years": 3}}]})", "instances[0].age: a raw row's value"},
      {R"({"instances": [{"age": "old"}]})",
       "instances[0]: column \"age\": \"old\" is not a number"},
      {R"({"instances": [{"count": 1e40}]})", "instances[0]: column \"count\""},
  };
  for (const auto& c : cases) {
    ClickRequest request;
    absl::Status s = ReadClickRequest(c.body, p->click_inputs(), 10, &request);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s << "\n" << c.body;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s << "\n" << c.body;
  }
}

TEST(PredictorRawRowsTest, UnderMissingErrorAnAbsentColumnIsNamed) {
  MemEnv env;
  std::string schema = kRawSchema;
  schema.replace(schema.find("missing: default"), 16, "missing: error");
  std::unique_ptr<Model> model = *BuildModelFromSpecText(kRawSpec, "the test's spec");
  std::vector<float> params(model->num_params()), state(model->num_state());
  std::vector<TrainedTableRows> tables(model->sparse_tables().size());
  ASSERT_TRUE(env.WriteFileAtomic("/s.yaml", schema).ok());
  ASSERT_TRUE(WriteExport(&env, "/job/export", *model, ModelOptions(), 1,
                          absl::StrCat(kRawCluster, "  csv_schema: /s.yaml\n"), params, state,
                          tables)
                  .ok());
  absl::StatusOr<std::unique_ptr<Predictor>> p = Predictor::Load(&env, "/job");
  ASSERT_TRUE(p.ok()) << p.status();
  ClickRequest request;
  absl::Status s =
      ReadClickRequest(R"({"instances": [{"price": 1, "age": 3, "count": 2, "tags": "a"}]})",
                       (*p)->click_inputs(), 10, &request);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("instances[0]: column \"country\" is missing or empty"),
            std::string::npos)
      << s;
}

TEST(PredictorRawRowsTest, AnExportWithoutItsSchemaTakesIdsOnly) {
  // The schema file gone by export time: the version is written without it
  // (a warning says why) and serves the id form.
  MemEnv env;
  std::unique_ptr<Model> model = *BuildModelFromSpecText(kRawSpec, "the test's spec");
  std::vector<float> params(model->num_params()), state(model->num_state());
  std::vector<TrainedTableRows> tables(model->sparse_tables().size());
  ASSERT_TRUE(WriteExport(&env, "/job/export", *model, ModelOptions(), 1,
                          absl::StrCat(kRawCluster, "  csv_schema: /gone.yaml\n"), params, state,
                          tables)
                  .ok());
  absl::StatusOr<std::unique_ptr<Predictor>> p = Predictor::Load(&env, "/job");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->click_inputs().schema, nullptr);
  ClickRequest request;
  absl::Status s =
      ReadClickRequest(R"({"instances": [{"country": "US"}]})", (*p)->click_inputs(), 10, &request);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no \"dense\""), std::string::npos) << s;
}

// Deltas (online training's exports between full versions): a predictor
// holding a version applies the next one's delta in place and then answers
// exactly as the whole version loaded afresh; a delta of another version, or
// with a row its table cannot hold, is refused and changes nothing.
TEST(PredictorTest, ADeltaAppliedInPlaceAnswersAsItsWholeVersion) {
  MemEnv env;
  ClickModel c = MakeClickModel();
  const std::string base = "/job/export";
  const std::string v1 =
      *WriteExport(&env, base, *c.model, ModelOptions(), 9, "", c.params, c.state, c.tables);
  std::unique_ptr<Predictor> p = *Predictor::Load(&env, v1);
  ClickRequest request;
  ASSERT_TRUE(ReadClickRequest(R"({"instances": [
      {"dense": [0.5, -1], "user": [17], "tokens": ["a", "b"]},
      {"dense": [0, 1], "user": 101, "tokens": ["c"]},
      {"dense": [2, 2], "user": [5, 17], "tokens": ["a"]},
      {"dense": [1, 2], "user": [99]}]})",
                               p->click_inputs(), 10, &request)
                  .ok());
  const std::vector<Prediction> before = *p->PredictClicks(request);
  std::string last = v1;
  for (int round = 1; round <= 3; ++round) {
    const std::vector<TrainedTableRows> delta = MoveOn(&c, round);
    ExportOnnxFile no_onnx;
    no_onnx.missing_reason = "a delta";
    const int64_t base_version = p->version();
    absl::StatusOr<std::string> dir =
        WriteExportVersion(&env, base, *c.model, ModelOptions(), 9 + round, "", c.params, c.state,
                           delta, no_onnx, base_version);
    ASSERT_TRUE(dir.ok()) << dir.status();
    absl::StatusOr<ExportedModel> files = ReadExportFiles(&env, *dir);
    ASSERT_TRUE(files.ok()) << files.status();
    EXPECT_EQ(files->delta_of, base_version);
    ASSERT_TRUE(p->ApplyDelta(*files).ok());
    EXPECT_EQ(p->version(), files->version);
    EXPECT_EQ(p->global_step(), 9 + round);
    EXPECT_TRUE(absl::IsInvalidArgument(p->ApplyDelta(*files)));  // a delta of the last version
    // The whole version (its chain read back to the full one) answers alike.
    std::unique_ptr<Predictor> whole = *Predictor::Load(&env, *dir);
    int64_t answered = 0;
    const std::vector<Prediction> got = *p->PredictClicks(request, &answered);
    EXPECT_EQ(answered, files->version);
    const std::vector<Prediction> want = *whole->PredictClicks(request);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].logistic, want[i].logistic) << round << " " << i;
    }
    last = *dir;
  }
  const std::vector<Prediction> after = *p->PredictClicks(request);
  EXPECT_NE(after[0].logistic, before[0].logistic);
  // A row past a bucketed table: refused before anything changes.
  absl::StatusOr<ExportedModel> bad = ReadExportFiles(&env, last);
  ASSERT_TRUE(bad.ok());
  bad->delta_of = p->version();
  bad->version = p->version() + 1;
  bad->tables[1].ids[0] = 16;
  EXPECT_TRUE(absl::IsInvalidArgument(p->ApplyDelta(*bad)));
  EXPECT_EQ(p->version(), bad->delta_of);
  EXPECT_EQ(p->PredictClicks(request)->at(0).logistic, after[0].logistic);
}

// A request runs in slices of instances; each instance gets the answer it
// gets alone, and an error names the instance by its place in the request.
TEST(PredictorTest, AClickRequestOfManySlicesAnswersEachInstanceAsAlone) {
  MemEnv env;
  ClickModel c = MakeClickModel();
  ASSERT_TRUE(
      WriteExport(&env, "/job/export", *c.model, ModelOptions(), 9, "", c.params, c.state, c.tables)
          .ok());
  std::unique_ptr<Predictor> p = *Predictor::Load(&env, "/job");
  nlohmann::json instances = nlohmann::json::array();
  for (int i = 0; i < 150; ++i) {
    nlohmann::json instance = {{"dense", {0.01 * i, 1.0 - 0.02 * i}}};
    if (i % 3 != 0) instance["user"] = {i % 2 ? 5 : 17};
    if (i % 4 != 0) instance["tokens"] = {"a", i % 5 ? "b" : "c"};
    instances.push_back(instance);
  }
  ClickRequest all;
  ASSERT_TRUE(ReadClickRequest(nlohmann::json({{"instances", instances}}).dump(), p->click_inputs(),
                               1000, &all)
                  .ok());
  std::vector<Prediction> got = *p->PredictClicks(all);
  ASSERT_EQ(got.size(), 150u);
  for (int i = 0; i < 150; i += 7) {
    ClickRequest one = EmptyClickRequest(p->click_inputs());
    ASSERT_TRUE(AppendClickInstance(instances[i], p->click_inputs(), "", &one).ok());
    EXPECT_FLOAT_EQ(got[i].logistic, (*p->PredictClicks(one))[0].logistic) << i;
  }
  instances[130]["tokens"] = {16};  // an id past the table's 16 buckets
  for (auto& instance : instances) {
    if (instance.contains("tokens")) instance["tokens"] = {3};
  }
  instances[130]["tokens"] = {16};
  ClickRequest bad;
  ASSERT_TRUE(ReadClickRequest(nlohmann::json({{"instances", instances}}).dump(), p->click_inputs(),
                               1000, &bad)
                  .ok());
  absl::StatusOr<std::vector<Prediction>> refused = p->PredictClicks(bad);
  EXPECT_NE(refused.status().message().find("feature tokens, instance 130 (0-based): id 16"),
            std::string::npos)
      << refused.status();
}

TEST(PredictorTest, AClickModelWithDamagedRowsIsNotLoaded) {
  MemEnv env;
  ClickModel c = MakeClickModel();
  const std::string dir = *WriteExport(&env, "/job/export", *c.model, ModelOptions(), 9, "",
                                       c.params, c.state, c.tables);
  std::string bytes = *env.ReadFile(dir + "/embeddings.rows");
  bytes[bytes.size() / 2] ^= 4;
  ASSERT_TRUE(env.WriteFileAtomic(dir + "/embeddings.rows", bytes).ok());
  absl::StatusOr<std::unique_ptr<Predictor>> predictor = Predictor::Load(&env, "/job");
  EXPECT_TRUE(absl::IsDataLoss(predictor.status())) << predictor.status();
  EXPECT_NE(predictor.status().message().find("embeddings.rows"), std::string::npos);
}

}  // namespace
}  // namespace pstrain
