#include "models/registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "config/model_spec.h"
#include "models/builtin_specs.h"
#include "models/cifar10_resnet.h"
#include "models/spec_builder.h"

namespace pstrain {
namespace {

struct Entry {
  const char* name;
  std::string (*spec)(const ModelOptions&);
  const char* optimizer;
  // nullptr: a constant learning rate.
  std::string (*schedule)(int batch_size, int replicas);
  // nullptr: every option fits.
  absl::Status (*check)(const ModelOptions&);
};

std::string Cifar10EstimatorSchedule(int batch_size, int replicas) {
  const int64_t batches_per_epoch =
      std::max<int64_t>(45000 / (int64_t{std::max(batch_size, 1)} * std::max(replicas, 1)), 1);
  return absl::StrCat(82 * batches_per_epoch, ":0.1,", 123 * batches_per_epoch, ":0.01,",
                      300 * batches_per_epoch, ":0.002");
}

absl::Status CheckResNetOptions(const ModelOptions& options) {
  // 1202: the deepest of He et al.'s CIFAR-10 ResNets (and a spec well
  // within kMaxSpecLayers).
  if (options.num_layers < 8 || options.num_layers > 1202 || (options.num_layers - 2) % 6 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("training.num_layers = ", options.num_layers,
                     ": cifar10_resnet needs 6n + 2 layers, 8 to 1202 (20, 32, 44, 56, 110)"));
  }
  if (!(options.batch_norm_epsilon > 0 && options.batch_norm_epsilon <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("training.batch_norm_epsilon = ", options.batch_norm_epsilon,
                     ": cifar10_resnet's batch norms need an epsilon in (0, 1]"));
  }
  return absl::OkStatus();
}

std::string MnistCnnSpec(const ModelOptions&) { return kMnistCnnSpecYaml; }

std::string ResNetSpec(const ModelOptions& options) {
  // The CIFAR-10 estimator's decay, 0.997, unless the job sets its own.
  return Cifar10ResNetSpecYaml(options.num_layers, options.batch_norm_epsilon,
                               options.batch_norm_decay >= 0 ? options.batch_norm_decay : 0.997);
}

constexpr Entry kModels[] = {
    {"mnist_cnn", &MnistCnnSpec, "adam", nullptr, nullptr},
    {"cifar10_resnet", &ResNetSpec, "momentum", &Cifar10EstimatorSchedule, &CheckResNetOptions},
};

const Entry* FindEntry(const std::string& name) {
  for (const Entry& e : kModels) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const Entry& e : kModels) names.push_back(e.name);
  return names;
}

absl::StatusOr<std::string> BuiltinModelSpec(const std::string& name, const ModelOptions& options) {
  const Entry* e = FindEntry(name);
  if (e == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown model \"", name, "\"; known models: ", absl::StrJoin(ModelNames(), ", "),
        ", or a model spec file (net.yaml)"));
  }
  if (e->check != nullptr) PSTRAIN_RETURN_IF_ERROR(e->check(options));
  return e->spec(options);
}

SpecBuildOptions SpecBuildOptionsOf(double batch_norm_decay) {
  SpecBuildOptions options;
  if (batch_norm_decay >= 0) options.batch_norm_momentum = static_cast<float>(batch_norm_decay);
  return options;
}

absl::StatusOr<std::unique_ptr<Model>> BuildModelFromSpecText(std::string_view yaml,
                                                              std::string_view source,
                                                              const SpecBuildOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelSpec(yaml, source));
  return BuildSpecModel(spec, source, options);
}

absl::StatusOr<std::unique_ptr<Model>> BuildSpecModel(const ModelSpec& spec,
                                                      std::string_view source,
                                                      const SpecBuildOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildModelFromSpec(spec, source, options));
  const bool learns =
      std::any_of(model->variables().begin(), model->variables().end(),
                  [](const VariableInfo& v) { return v.trainable && !v.spec.frozen; });
  if (!learns) {
    return absl::InvalidArgumentError(absl::StrCat(
        absl::string_view(source.data(), source.size()), ": model ", model->name(),
        " has no trainable variable, so training cannot change it; add a conv2d or dense layer "
        "(or drop trainable: false from one)"));
  }
  model->set_spec(spec);
  return model;
}

absl::StatusOr<std::unique_ptr<Model>> BuildModel(const std::string& name,
                                                  const ModelOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string spec, BuiltinModelSpec(name, options));
  return BuildModelFromSpecText(spec, name, SpecBuildOptionsOf(options.batch_norm_decay));
}

std::string DefaultOptimizer(const std::string& model) {
  const Entry* e = FindEntry(model);
  return e != nullptr ? e->optimizer : "adam";
}

std::string DefaultLearningRateSchedule(const std::string& model, int batch_size, int replicas) {
  const Entry* e = FindEntry(model);
  return e != nullptr && e->schedule != nullptr ? e->schedule(batch_size, replicas) : "";
}

absl::Status CheckModelOptions(const std::string& model, const ModelOptions& options) {
  const Entry* e = FindEntry(model);
  return e != nullptr && e->check != nullptr ? e->check(options) : absl::OkStatus();
}

}  // namespace pstrain
