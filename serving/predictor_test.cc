#include "serving/predictor.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "io/png.h"

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
  std::vector<int32_t> labels(n, 0);
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

}  // namespace
}  // namespace pstrain
