#include "models/registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/mnist_cnn.h"

namespace pstrain {
namespace {

struct Entry {
  const char* name;
  absl::StatusOr<std::unique_ptr<Model>> (*build)(const ModelOptions&);
};

constexpr Entry kModels[] = {
    {"mnist_cnn", &BuildMnistCnn},
};

}  // namespace

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const Entry& e : kModels) names.push_back(e.name);
  return names;
}

absl::StatusOr<std::unique_ptr<Model>> BuildModel(const std::string& name,
                                                  const ModelOptions& options) {
  for (const Entry& e : kModels) {
    if (name == e.name) return e.build(options);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model \"", name, "\"; known models: ", absl::StrJoin(ModelNames(), ", ")));
}

}  // namespace pstrain
