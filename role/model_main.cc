// pstrain-model: what a model file holds.
//   pstrain-model describe FILE
// FILE is an ONNX model (.onnx) or a model spec (.yaml), local or gs://.
// Prints the model spec as YAML (what `model: FILE` trains) on stdout and a
// summary (layers, parameters, notes) on stderr. Exits 0, 1 when the file
// cannot be read, 2 for bad usage or a file that is not a model pstrain can
// build (the error says why).
#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/version.h"
#include "config/cluster_config.h"
#include "config/model_spec.h"
#include "models/spec_builder.h"
#include "onnx/onnx_import.h"
#include "role/model_source.h"

namespace {

constexpr char kUsage[] =
    "usage: pstrain-model describe FILE\n"
    "  FILE: an ONNX model (.onnx) or a model spec (.yaml), local or gs://\n"
    "  prints the model spec as YAML on stdout, a summary on stderr\n";

int Describe(const std::string& path) {
  absl::StatusOr<std::string> bytes = pstrain::ProcessEnv()->ReadFile(path);
  if (!bytes.ok()) {
    std::fprintf(stderr, "pstrain-model: cannot read %s: %s\n", path.c_str(),
                 std::string(bytes.status().message()).c_str());
    return 1;
  }
  std::vector<std::string> notes;
  size_t weights = 0;
  if (absl::EndsWith(path, ".onnx")) {
    absl::StatusOr<pstrain::ImportedOnnx> imported = pstrain::ImportOnnx(*bytes, path);
    if (!imported.ok()) {
      std::fprintf(stderr, "pstrain-model: %s\n", imported.status().ToString().c_str());
      return 2;
    }
    notes = std::move(imported->notes);
    weights = imported->weights.size();
  }
  // The spec exactly as a job with `model: FILE` takes it: named after the
  // file when unnamed, an ONNX file's starting values in `weights:`.
  pstrain::TrainingSpec training;
  training.model = path;
  if (absl::Status s = pstrain::LoadModelSpecFile(pstrain::ProcessEnv(), &training); !s.ok()) {
    std::fprintf(stderr, "pstrain-model: %s\n", s.ToString().c_str());
    return 2;
  }
  if (!training.model_spec.has_value()) {
    // A name that is not a spec path (no '/', no .yaml, .yml or .onnx):
    // read as a spec all the same, as the file it is.
    absl::StatusOr<pstrain::JobModelSpec> read = pstrain::ParseJobModelSpec(*bytes, path);
    if (!read.ok()) {
      std::fprintf(stderr, "pstrain-model: %s\n", read.status().ToString().c_str());
      return 2;
    }
    training.model_spec = *std::move(read);
  }
  const pstrain::ModelSpec* spec = &training.model_spec->spec;
  absl::StatusOr<std::unique_ptr<pstrain::Model>> model =
      pstrain::BuildModelFromSpec(*spec, training.model_spec->source);
  if (!model.ok()) {
    std::fprintf(stderr, "pstrain-model: %s\n", model.status().ToString().c_str());
    return 2;
  }
  std::fputs(pstrain::ModelSpecToYaml(*spec).c_str(), stdout);
  const pstrain::Model& m = **model;
  std::string summary = absl::StrCat(
      path, ": ", spec->layers.size(), " layers, input [", absl::StrJoin(spec->input, ", "), "], ",
      spec->classes, " classes, ", m.num_params(), " trainable parameters, ", m.num_state(),
      " state values in ", m.variables().size(), " variables");
  if (absl::EndsWith(path, ".onnx")) {
    absl::StrAppend(&summary, " (", weights, " starting values from the file)");
  }
  std::fprintf(stderr, "%s\n", summary.c_str());
  for (const std::string& note : notes) std::fprintf(stderr, "  note: %s\n", note.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-model")) return 0;
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 3 || std::string(argv[1]) != "describe") {
    std::fputs(kUsage, stderr);
    return 2;
  }
  return Describe(argv[2]);
}
