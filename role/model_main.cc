// pstrain-model: what a model file holds.
//   pstrain-model describe FILE   each layer's type, output shape and
//                                 parameters, as Keras' model.summary()
//   pstrain-model spec FILE       the model spec as YAML (what `model: FILE`
//                                 trains; an ONNX file's, to edit)
// FILE is an ONNX model (.onnx) or a model spec (.yaml), local or gs://.
// Both print on stdout, and a line (layers, parameters, an ONNX import's
// notes) on stderr. Exit 0, 1 when the file cannot be read, 2 for bad usage
// or a file that is not a model pstrain can build (the error says why).
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
#include "models/model_summary.h"
#include "models/spec_builder.h"
#include "onnx/onnx_import.h"
#include "role/model_source.h"

namespace {

constexpr char kUsage[] =
    "usage: pstrain-model describe FILE   each layer's type, output shape and parameters\n"
    "       pstrain-model spec FILE       the model spec as YAML\n"
    "  FILE: an ONNX model (.onnx) or a model spec (.yaml), local or gs://\n";

int Describe(const std::string& path, bool as_yaml) {
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
  if (as_yaml) {
    std::fputs(pstrain::ModelSpecToYaml(*spec).c_str(), stdout);
  } else {
    absl::StatusOr<pstrain::ModelSummary> table =
        pstrain::SummarizeModelSpec(*spec, training.model_spec->source);
    if (!table.ok()) {
      std::fprintf(stderr, "pstrain-model: %s\n", table.status().ToString().c_str());
      return 2;
    }
    std::fputs(pstrain::FormatModelSummary(*table).c_str(), stdout);
  }
  const pstrain::Model& m = **model;
  std::string summary = absl::StrCat(path, ": ", spec->layers.size(), " layers, input [",
                                     absl::StrJoin(spec->input, ", "), "], ",
                                     m.multi_head() ? absl::StrCat(m.heads().size(), " heads")
                                                    : absl::StrCat(spec->classes, " classes"),
                                     ", ", m.num_params(), " trainable parameters, ", m.num_state(),
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
  const std::string command = argc == 3 ? argv[1] : "";
  if (command != "describe" && command != "spec") {
    std::fputs(kUsage, stderr);
    return 2;
  }
  return Describe(argv[2], command == "spec");
}
