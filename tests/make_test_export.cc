// make_test_export EXPORT_BASE [SEED]: writes a version of mnist_cnn with its
// initial values for SEED (default 1) under EXPORT_BASE and prints its dir. A
// servable model in a fraction of a second, for tests that need one but not a
// trained one.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "io/export.h"
#include "models/registry.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: make_test_export EXPORT_BASE [SEED]\n");
    return 2;
  }
  const uint64_t seed = argc == 3 ? std::strtoull(argv[2], nullptr, 10) : 1;
  absl::StatusOr<std::unique_ptr<pstrain::Model>> model =
      pstrain::BuildModel("mnist_cnn", pstrain::ModelOptions());
  if (!model.ok()) {
    std::fprintf(stderr, "make_test_export: %s\n", model.status().ToString().c_str());
    return 1;
  }
  std::vector<float> params((*model)->num_params()), state((*model)->num_state());
  (*model)->InitializeVariables(seed, params.data(), state.data());
  absl::StatusOr<std::string> dir =
      pstrain::WriteExport(pstrain::Env::Default(), argv[1], **model, pstrain::ModelOptions(),
                           /*global_step=*/0, /*hparams_yaml=*/"", params, state);
  if (!dir.ok()) {
    std::fprintf(stderr, "make_test_export: %s\n", dir.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", dir->c_str());
  return 0;
}
