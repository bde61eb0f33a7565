#include "role/model_source.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "config/model_spec.h"
#include "onnx/onnx_import.h"

namespace pstrain {

bool IsModelSpecPath(std::string_view model) {
  const absl::string_view m(model.data(), model.size());
  return absl::StartsWith(m, "gs://") || absl::StrContains(m, "/") || absl::EndsWith(m, ".yaml") ||
         absl::EndsWith(m, ".yml") || absl::EndsWith(m, ".onnx");
}

namespace {

// A local path made absolute (every role of a local cluster reads it,
// whatever its directory); gs:// as it is.
std::string AbsoluteLocation(const std::string& path) {
  if (absl::StartsWith(path, "gs://")) return path;
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  return error ? path : absolute.lexically_normal().string();
}

}  // namespace

absl::Status LoadModelSpecFile(Env* env, TrainingSpec* training) {
  if (training->model_spec.has_value() || !IsModelSpecPath(training->model)) {
    return absl::OkStatus();
  }
  const std::string path = training->model;
  absl::StatusOr<std::string> text = env->ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model \"", path, "\" (training.model, --model) names a model file that ",
        "cannot be read (", text.status().message(),
        "); give a spec file or an ONNX file (local or gs://) or a built-in model: mnist_cnn, "
        "cifar10_resnet"));
  }
  const bool onnx = absl::EndsWith(path, ".onnx");
  ModelSpec spec;
  if (onnx) {
    // The graph becomes a spec; its initializers are read again where the
    // variables are initialized (onnx/onnx_weights.h), from spec.weights.
    absl::StatusOr<ImportedOnnx> imported = ImportOnnx(*text, path);
    if (!imported.ok()) {
      // A damaged file is a bad model for the job, as a bad spec is.
      return absl::InvalidArgumentError(imported.status().message());
    }
    spec = std::move(imported->spec);
    spec.weights = AbsoluteLocation(path);
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(spec, ParseModelSpec(*text, path));
    // A spec's relative weights are beside it, as its author sees them.
    if (!spec.weights.empty() && !absl::StartsWith(spec.weights, "gs://") &&
        !absl::StartsWith(spec.weights, "/")) {
      const size_t slash = path.find_last_of('/');
      if (slash != std::string::npos) spec.weights = path.substr(0, slash + 1) + spec.weights;
      spec.weights = AbsoluteLocation(spec.weights);
    }
  }
  if (training->onnx_weights == "ignore") spec.weights.clear();
  // A spec without a name is named after its file: nets/small.yaml is "small".
  if (spec.name.empty()) {
    std::string stem = path.substr(path.find_last_of('/') + 1);
    stem = stem.substr(0, stem.find('.'));
    const bool plain =
        !stem.empty() && stem.size() <= 128 && std::all_of(stem.begin(), stem.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
        });
    spec.name = plain ? stem : "model";
  }
  training->model = spec.name;
  // An ONNX file's layers have no lines: the binary file has none.
  training->model_spec = JobModelSpec{std::move(spec), path};
  return absl::OkStatus();
}

}  // namespace pstrain
