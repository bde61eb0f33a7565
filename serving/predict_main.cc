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
//   pstrain-predict --model_dir=DIR --csv_instances=FILE
// A model trained from CSV (its export keeps the CSV schema) also predicts
// raw rows: a JSON instance of the CSV's columns ({"origin": "LAS",
// "distance": 2176}), or with --csv_instances a CSV file with a header of
// the columns (gzip'd when its name ends .gz; the label column and others
// the schema does not read may be there), each row's features computed as
// the training computed them.
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
#include "common/status_macros.h"
#include "common/version.h"
#include "data/formats/csv_format.h"
#include "data/formats/csv_lines.h"
#include "data/formats/record_stream.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "serving/predictor.h"

DEFINE_string(model_dir, "", "The exported model: a version dir, an export dir, or a job dir.");
DEFINE_string(json_instances, "", "A file of instances, one JSON value per line.");
DEFINE_string(csv_instances, "",
              "A CSV file with a header: raw rows, for a model trained from CSV (its export "
              "keeps the CSV schema).");
DEFINE_string(format, "table", "table (gcloud's) or json ({\"predictions\": [...]}).");

namespace {

constexpr char kUsage[] =
    "usage: pstrain-predict --model_dir=DIR (--json_instances=FILE | --csv_instances=FILE) "
    "[--format=table|json]";
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

// Prints `predictions` as --format says.
void Print(const pstrain::Predictor& model, const std::vector<pstrain::Prediction>& predictions) {
  if (FLAGS_format == "json") {
    nlohmann::json out = {{"predictions", nlohmann::json::array()}};
    for (const pstrain::Prediction& p : predictions)
      out["predictions"].push_back(PredictionJson(p));
    std::printf("%s\n", out.dump().c_str());
  } else if (!predictions.empty() && !predictions.front().heads.empty()) {
    // A multi-task model: a column per head (a binary head's probability, a
    // regression head's value, a softmax head's class).
    std::string header;
    for (const pstrain::Prediction& h : predictions.front().heads) {
      absl::StrAppend(&header, header.empty() ? "" : "  ", h.name);
    }
    std::printf("%s\n", header.c_str());
    for (const pstrain::Prediction& p : predictions) {
      std::string row;
      for (const pstrain::Prediction& h : p.heads) {
        absl::StrAppend(&row, row.empty() ? "" : "  ",
                        h.regression ? absl::StrFormat("%g", h.value)
                        : h.binary   ? absl::StrFormat("%.6g", h.logistic)
                                     : absl::StrCat(h.classes));
      }
      std::printf("%s\n", row.c_str());
    }
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
}

// The rows of CSV file `path` (its header first; gzip'd when its name ends
// .gz), read by the export's schema as training read them, every row a
// prediction: a row `missing: skip` would drop is an error naming its line.
absl::StatusOr<pstrain::ClickRequest> ReadCsvRows(pstrain::Env* env,
                                                  const pstrain::Predictor& model,
                                                  const std::string& path) {
  const pstrain::ClickInputs& inputs = model.click_inputs();
  if (inputs.schema == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(model.exported().dir,
                     " keeps no CSV schema (its job did not read CSV with csv_schema); predict "
                     "with --json_instances in the features' form"));
  }
  const pstrain::Compression compression =
      pstrain::CompressionOf(path, pstrain::Compression::kAuto);
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<pstrain::RecordStream> stream,
      pstrain::RecordStream::Open(env, path, compression, pstrain::RecordFraming::kLines));
  stream->AcceptUnterminatedLastLine();
  PSTRAIN_ASSIGN_OR_RETURN(const std::string header,
                           pstrain::ReadCsvHeader(env, path, compression, 0, stream.get()));
  PSTRAIN_ASSIGN_OR_RETURN(
      pstrain::CsvParser parser,
      pstrain::CsvParser::Create(*inputs.schema, header, path, pstrain::CsvLabel::kNone));
  std::string joined;
  while (true) {
    const int64_t line_number = stream->record() + 1;
    absl::StatusOr<std::string_view> line = stream->Next();
    if (absl::IsOutOfRange(line.status())) break;
    PSTRAIN_RETURN_IF_ERROR(line.status());
    PSTRAIN_ASSIGN_OR_RETURN(const std::string_view record,
                             pstrain::JoinCsvRecord(stream.get(), *line, inputs.schema->delimiter,
                                                    &joined, [](uint64_t) {}));
    if (record.empty()) continue;  // a blank line is no row
    const int64_t before = parser.size();
    PSTRAIN_RETURN_IF_ERROR(parser.AppendLine(record, line_number));
    if (parser.size() == before) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line_number,
          ": a field is empty, and the model's CSV schema has missing: skip, which drops such "
          "rows in training; a prediction needs every row's values"));
    }
  }
  return pstrain::ClickRequestOfExamples(parser.Take(), inputs);
}

}  // namespace

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-predict")) return 0;
  gflags::SetUsageMessage(kUsage);
  pstrain::NormalizeFlagSpellings(argc, argv);
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  google::InitGoogleLogging(argv[0]);
  if (argc != 1 || FLAGS_model_dir.empty() ||
      FLAGS_json_instances.empty() == FLAGS_csv_instances.empty() ||
      (FLAGS_format != "table" && FLAGS_format != "json")) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  pstrain::Env* env = pstrain::ProcessEnv();
  absl::StatusOr<std::unique_ptr<pstrain::Predictor>> predictor =
      pstrain::Predictor::Load(env, FLAGS_model_dir);
  if (!predictor.ok()) return Fail(predictor.status().ToString());
  pstrain::Predictor& model = **predictor;
  if (!FLAGS_csv_instances.empty()) {
    const std::string& input = FLAGS_csv_instances;
    if (!model.is_click_model()) {
      return Fail(absl::StrCat(model.exported().dir, " takes images, not CSV rows"));
    }
    absl::StatusOr<pstrain::ClickRequest> rows = ReadCsvRows(env, model, input);
    if (!rows.ok()) return Fail(std::string(rows.status().message()));
    if (rows->n == 0) return Fail(absl::StrCat(input, " holds no rows"));
    absl::StatusOr<std::vector<pstrain::Prediction>> all = model.PredictClicks(*rows);
    if (!all.ok()) return Fail(absl::StrCat(input, ": ", all.status().message()));
    Print(model, *all);
    return 0;
  }
  absl::StatusOr<std::string> text = env->ReadFile(FLAGS_json_instances);
  if (!text.ok()) return Fail(text.status().ToString());
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
  Print(model, predictions);
  return 0;
}
