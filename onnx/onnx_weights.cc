#include "onnx/onnx_weights.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "config/model_spec.h"
#include "glog/logging.h"
#include "onnx/onnx_import.h"

namespace pstrain {

absl::Status InitializeModelVariables(Env* env, const Model& model, uint64_t seed, float* params,
                                      float* state) {
  model.InitializeVariables(seed, params, state);
  if (model.spec() == nullptr) return absl::OkStatus();
  const std::string& path = model.spec()->weights;
  if (path.empty() || model.variables().empty()) return absl::OkStatus();
  absl::StatusOr<std::string> bytes = env->ReadFile(path);
  if (!bytes.ok()) {
    // The code stays the read's: a gs:// hiccup is Unavailable, not a bad job.
    return absl::Status(
        bytes.status().code(),
        absl::StrCat("the model's starting weights (weights: ", path, ") cannot be read (",
                     bytes.status().message(),
                     "); give a readable ONNX file, or onnx_weights: ignore to draw fresh values"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(ImportedOnnx imported, ImportOnnx(*bytes, path));
  std::map<std::string, const ImportedTensor*> by_name;
  for (const ImportedTensor& t : imported.weights) by_name[t.name] = &t;
  std::vector<std::string> fresh;
  int from_file = 0;
  for (const VariableInfo& v : model.variables()) {
    auto it = by_name.find(v.name);
    if (it == by_name.end()) {
      fresh.push_back(v.name);
      continue;
    }
    const ImportedTensor& t = *it->second;
    if (t.shape != v.shape || static_cast<int64_t>(t.values.size()) != v.size) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": ", v.name, " is ", ShapeToString(t.shape), " in the file but ",
          ShapeToString(v.shape), " in the model ", model.name(),
          "; make the layer match the file, rename it to start from fresh values, or set "
          "onnx_weights: ignore"));
    }
    std::copy(t.values.begin(), t.values.end(), (v.trainable ? params : state) + v.offset);
    ++from_file;
  }
  if (from_file == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": holds none of the ", model.variables().size(), " variables of ", model.name(),
        " (", model.variables().front().name, ", ...); is it the right file?"));
  }
  LOG(INFO) << "starting values of " << from_file << " of " << model.variables().size()
            << " variables from " << path
            << (fresh.empty() ? std::string()
                              : absl::StrCat("; drawn fresh (seed ", seed,
                                             "): ", absl::StrJoin(fresh, ", ")));
  return absl::OkStatus();
}

}  // namespace pstrain
