#include "config/model_source.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "config/model_spec.h"

namespace pstrain {

bool IsModelSpecPath(std::string_view model) {
  const absl::string_view m(model.data(), model.size());
  return absl::StartsWith(m, "gs://") || absl::StrContains(m, "/") || absl::EndsWith(m, ".yaml") ||
         absl::EndsWith(m, ".yml");
}

absl::Status LoadModelSpecFile(Env* env, TrainingSpec* training) {
  if (!training->model_spec.empty() || !IsModelSpecPath(training->model)) {
    return absl::OkStatus();
  }
  const std::string path = training->model;
  absl::StatusOr<std::string> text = env->ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model \"", path, "\" (training.model, --model) names a model spec file that ",
        "cannot be read (", text.status().message(),
        "); give a spec file (local or gs://) or a built-in model: mnist_cnn, cifar10_resnet"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelSpec(*text, path));
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
  training->model_spec = ModelSpecToYaml(spec);
  training->model_origin = {path, *std::move(text)};
  return absl::OkStatus();
}

}  // namespace pstrain
