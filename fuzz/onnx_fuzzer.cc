// ONNX models from any bytes: ImportOnnx never crashes, and what it refuses
// it says why (the file's name first). What it accepts writes out as a spec
// that reads back the same, and, when small enough to build quickly, builds
// or is refused cleanly; a built model's variables are exactly the imported
// weights, shape for shape.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string_view>

#include "absl/strings/match.h"
#include "config/model_spec.h"
#include "models/spec_builder.h"
#include "onnx/onnx_import.h"

namespace {

bool SmallEnough(const pstrain::ModelSpec& spec) {
  int64_t input = 1;
  for (int64_t d : spec.input) input *= d;
  if (input > 65536 || spec.classes > 4096 || spec.layers.size() > 256) return false;
  for (const pstrain::LayerSpec& l : spec.layers) {
    if (l.filters > 1024 || l.units > 4096) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<pstrain::ImportedOnnx> imported = pstrain::ImportOnnx(bytes, "fuzz.onnx");
  if (!imported.ok()) {
    if (!absl::StartsWith(imported.status().message(), "fuzz.onnx: ")) std::abort();
    return 0;
  }
  const pstrain::ModelSpec& spec = imported->spec;
  absl::StatusOr<pstrain::ModelSpec> again =
      pstrain::ParseModelSpec(pstrain::ModelSpecToYaml(spec), "again.yaml");
  if (!again.ok()) std::abort();
  for (pstrain::LayerSpec& l : again->layers) l.line = 0;
  if (!(*again == spec)) std::abort();
  if (!SmallEnough(spec)) return 0;
  absl::StatusOr<std::unique_ptr<pstrain::Model>> model =
      pstrain::BuildModelFromSpec(spec, "fuzz.onnx");
  if (!model.ok()) {
    if (model.status().message().empty()) std::abort();
    return 0;
  }
  std::map<std::string, const pstrain::ImportedTensor*> weights;
  for (const pstrain::ImportedTensor& t : imported->weights) weights[t.name] = &t;
  if (weights.size() != (*model)->variables().size()) std::abort();
  for (const pstrain::VariableInfo& v : (*model)->variables()) {
    auto it = weights.find(v.name);
    if (it == weights.end() || static_cast<int64_t>(it->second->values.size()) != v.size ||
        it->second->shape != std::vector<int64_t>(v.shape.begin(), v.shape.end())) {
      std::abort();
    }
  }
  return 0;
}
