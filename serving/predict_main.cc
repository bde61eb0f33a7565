// pstrain-predict: predictions from an exported model, as
// `gcloud ml-engine predict --json-instances` prints them.
//   pstrain-predict --model_dir=DIR --json_instances=FILE [--format=table|json]
// DIR: an export version, an export dir (its newest version) or a job dir
// (its export/). FILE: one JSON instance per line: a list of numbers in
// [0, 1] (pixel / 255) shaped [H][W], [H][W][C] or flat, {"image": ...}, or
// {"b64": "<base64 PNG>"}; for a click model (one with embedding tables), an
// object of "dense" and its sparse features (serving/click_request.h:
// {"dense": [...], "user_id": [17], "tokens": ["a", "b"]}). Prints "CLASSES  PROBABILITIES" rows
// (a regression head's "PREDICTIONS", one value a row), or
// {"predictions": [{"classes": k, "probabilities": [...]}, ...]} (a
// regression head's {"predictions": [12.4, ...]}) with --format=json. Exits 1 on a bad instance or
// model (the error says which line and what), 2 on bad usage.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/flags.h"
#include "common/version.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "serving/predictor.h"

DEFINE_string(model_dir, "", "The exported model: a version dir, an export dir, or a job dir.");
DEFINE_string(json_instances, "", "A file of instances, one JSON value per line.");
DEFINE_string(format, "table", "table (gcloud's) or json ({\"predictions\": [...]}).");

namespace {

constexpr char kUsage[] =
    "usage: pstrain-predict --model_dir=DIR --json_instances=FILE [--format=table|json]";
constexpr int64_t kBatch = 64;

std::string ProbabilitiesText(const std::vector<float>& p) {
  std::string s = "[";
  for (size_t i = 0; i < p.size(); ++i)
    absl::StrAppend(&s, i ? ", " : "", absl::StrFormat("%.6g", p[i]));
  return s + "]";
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "pstrain-predict: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-predict")) return 0;
  gflags::SetUsageMessage(kUsage);
  pstrain::NormalizeFlagSpellings(argc, argv);
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  if (argc != 1 || FLAGS_model_dir.empty() || FLAGS_json_instances.empty() ||
      (FLAGS_format != "table" && FLAGS_format != "json")) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  pstrain::Env* env = pstrain::ProcessEnv();
  absl::StatusOr<std::unique_ptr<pstrain::Predictor>> predictor =
      pstrain::Predictor::Load(env, FLAGS_model_dir);
  if (!predictor.ok()) return Fail(predictor.status().ToString());
  absl::StatusOr<std::string> text = env->ReadFile(FLAGS_json_instances);
  if (!text.ok()) return Fail(text.status().ToString());

  pstrain::Predictor& model = **predictor;
  const int64_t size = model.example_size();
  const std::vector<int64_t>& shape = model.exported().input_shape;
  std::vector<float> images;
  pstrain::ClickRequest clicks = pstrain::EmptyClickRequest(model.click_inputs());
  int64_t n = 0;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    const std::string where = absl::StrCat(FLAGS_json_instances, " line ", line_number);
    nlohmann::json instance = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (instance.is_discarded()) return Fail(absl::StrCat(where, ": not JSON"));
    absl::Status s;
    if (model.is_click_model()) {
      s = pstrain::AppendClickInstance(instance, model.click_inputs(), "", &clicks);
    } else {
      images.resize(images.size() + size);
      s = pstrain::ParseInstance(instance, shape, images.data() + images.size() - size);
    }
    if (!s.ok()) return Fail(absl::StrCat(where, ": ", s.message()));
    ++n;
  }
  if (n == 0) return Fail(absl::StrCat(FLAGS_json_instances, " holds no instances"));
  std::vector<pstrain::Prediction> predictions;
  if (model.is_click_model()) {
    absl::StatusOr<std::vector<pstrain::Prediction>> all = model.PredictClicks(clicks);
    if (!all.ok()) return Fail(absl::StrCat(FLAGS_json_instances, ": ", all.status().message()));
    predictions = std::move(*all);
  }
  for (int64_t begin = 0; !model.is_click_model() && begin < n; begin += kBatch) {
    std::vector<pstrain::Prediction> batch =
        model.Predict(images.data() + begin * size, std::min(kBatch, n - begin));
    predictions.insert(predictions.end(), batch.begin(), batch.end());
  }
  if (FLAGS_format == "json") {
    nlohmann::json out = {{"predictions", nlohmann::json::array()}};
    for (const pstrain::Prediction& p : predictions)
      out["predictions"].push_back(PredictionJson(p));
    std::printf("%s\n", out.dump().c_str());
  } else if (model.is_regression()) {
    std::printf("PREDICTIONS\n");
    for (const pstrain::Prediction& p : predictions) std::printf("%g\n", p.value);
  } else {
    std::printf("CLASSES  PROBABILITIES\n");
    for (const pstrain::Prediction& p : predictions) {
      std::printf("%-8lld %s\n", static_cast<long long>(p.classes),
                  ProbabilitiesText(p.probabilities).c_str());
    }
  }
  return 0;
}
