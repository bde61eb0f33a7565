#include "models/registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/cifar10_resnet.h"
#include "models/mnist_cnn.h"

namespace pstrain {
namespace {

struct Entry {
  const char* name;
  absl::StatusOr<std::unique_ptr<Model>> (*build)(const ModelOptions&);
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
  if (options.num_layers < 8 || (options.num_layers - 2) % 6 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("training.num_layers = ", options.num_layers,
                     ": cifar10_resnet needs 6n + 2 layers (20, 32, 44, 56, 110)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Model>> BuildResNet(const ModelOptions& options) {
  ResNetOptions resnet;
  resnet.num_layers = options.num_layers;
  resnet.batch_norm_epsilon = options.batch_norm_epsilon;
  return BuildCifar10ResNet(resnet);
}

constexpr Entry kModels[] = {
    {"mnist_cnn", &BuildMnistCnn, "adam", nullptr, nullptr},
    {"cifar10_resnet", &BuildResNet, "momentum", &Cifar10EstimatorSchedule, &CheckResNetOptions},
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

absl::StatusOr<std::unique_ptr<Model>> BuildModel(const std::string& name,
                                                  const ModelOptions& options) {
  if (const Entry* e = FindEntry(name)) return e->build(options);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model \"", name, "\"; known models: ", absl::StrJoin(ModelNames(), ", ")));
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
