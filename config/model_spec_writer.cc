// A model spec written out (ModelSpecToYaml), and its layer types described
// (ModelSpecLayerTypes, LayerReference) from the table in model_spec_types.h.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/float_text.h"
#include "config/config_yaml_util.h"
#include "config/model_spec.h"
#include "config/model_spec_types.h"

namespace pstrain {
namespace {

using model_spec_internal::FindType;
using model_spec_internal::KeySpec;
using model_spec_internal::TakesInputs;
using model_spec_internal::Types;
using model_spec_internal::TypeSpec;

}  // namespace

std::vector<std::pair<std::string, std::string>> LayerOptions(const LayerSpec& layer) {
  std::vector<std::pair<std::string, std::string>> options;
  const TypeSpec* type = FindType(layer.type);
  if (type == nullptr) return options;
  for (const KeySpec& k : type->keys) {
    if (k.written != nullptr && !k.written(layer)) continue;
    options.emplace_back(k.name, k.get(layer));
  }
  return options;
}

bool SameModelSpec(const ModelSpec& a, const ModelSpec& b) {
  if (a.layers.size() != b.layers.size()) return false;
  if (a.heads.size() != b.heads.size()) return false;
  ModelSpec lineless = b;
  for (size_t i = 0; i < a.layers.size(); ++i) lineless.layers[i].line = a.layers[i].line;
  for (size_t i = 0; i < a.heads.size(); ++i) lineless.heads[i].line = a.heads[i].line;
  return a == lineless;
}

std::string ModelSpecToYaml(const ModelSpec& spec) {
  std::string out;
  // Names are quoted: "null", "true" or "1e3" would read back as something else.
  using config_internal::Quoted;
  if (!spec.name.empty()) absl::StrAppend(&out, "name: ", Quoted(spec.name), "\n");
  absl::StrAppend(&out, "input: [", absl::StrJoin(spec.input, ", "), "]\n");
  // A regression head has no classes (0); a multi-task model's heads say theirs.
  if (spec.head != "regression" && spec.heads.empty()) {
    absl::StrAppend(&out, "classes: ", spec.classes, "\n");
  }
  if (!spec.heads.empty()) absl::StrAppend(&out, "heads:\n");
  for (const HeadSpec& h : spec.heads) {
    absl::StrAppend(&out, "  - {name: ", h.name, ", kind: ", h.kind);
    if (h.kind == "softmax") absl::StrAppend(&out, ", classes: ", h.classes);
    absl::StrAppend(&out, ", input: ", Quoted(h.input), ", label: ", Quoted(h.label),
                    ", weight: ", ShortestFloatText(h.weight));
    if (h.kind == "regression") absl::StrAppend(&out, ", loss: ", h.loss);
    if (h.loss == "huber") {
      absl::StrAppend(&out, ", huber_delta: ", ShortestFloatText(h.huber_delta));
    }
    absl::StrAppend(&out, "}\n");
  }
  // Only when binary or regression, so that the YAML of a softmax model
  // (which checkpoints store) is what it was before heads.
  if (spec.head != "softmax") absl::StrAppend(&out, "head: ", spec.head, "\n");
  if (spec.head == "regression") {
    absl::StrAppend(&out, "loss: ", spec.loss, "\n");
    if (spec.loss == "huber") {
      absl::StrAppend(&out, "huber_delta: ", ShortestFloatText(spec.huber_delta), "\n");
    }
  }
  if (spec.crop_padding != 0 || spec.random_flip || spec.per_image_standardization) {
    absl::StrAppend(
        &out, "preprocessing: {crop_padding: ", spec.crop_padding,
        ", random_flip: ", spec.random_flip ? "true" : "false",
        ", per_image_standardization: ", spec.per_image_standardization ? "true" : "false", "}\n");
  }
  if (!spec.weights.empty()) absl::StrAppend(&out, "weights: ", Quoted(spec.weights), "\n");
  absl::StrAppend(&out, "layers:\n");
  for (const LayerSpec& layer : spec.layers) {
    const TypeSpec* type = FindType(layer.type);
    std::vector<std::string> options = {absl::StrCat("name: ", Quoted(layer.name))};
    if (!layer.input.empty()) options.push_back(absl::StrCat("input: ", Quoted(layer.input)));
    if (!layer.inputs.empty()) {
      std::vector<std::string> quoted;
      for (const std::string& name : layer.inputs) quoted.push_back(Quoted(name));
      options.push_back(absl::StrCat("inputs: [", absl::StrJoin(quoted, ", "), "]"));
    }
    if (type != nullptr) {
      for (const KeySpec& k : type->keys) {
        if (k.written != nullptr && !k.written(layer)) continue;
        options.push_back(absl::StrCat(k.name, ": ", k.get(layer)));
      }
    }
    absl::StrAppend(&out, "  - ", layer.type, ": {", absl::StrJoin(options, ", "), "}\n");
  }
  return out;
}

const std::vector<std::string>& ModelSpecLayerTypes() {
  static const std::vector<std::string>* names = [] {
    auto* v = new std::vector<std::string>();
    for (const TypeSpec& t : Types()) v->push_back(t.type);
    return v;
  }();
  return *names;
}

std::string LayerReference() {
  std::string out;
  for (const TypeSpec& t : Types()) {
    absl::StrAppend(&out, t.type, ": ", t.what, ". Default name ", t.keras_name, ".\n");
    absl::StrAppend(&out, "  name: the layer's name (variables are <name>/<variable>)\n");
    LayerSpec layer;
    layer.type = t.type;
    absl::StrAppend(&out, "  input: the name of an earlier layer whose output it takes, or input ",
                    LayerTakesModelInputByDefault(layer)
                        ? "(default: input; only its place in the graph matters)\n"
                        : "(default: the previous layer's output)\n");
    if (TakesInputs(t.type)) {
      absl::StrAppend(&out,
                      "  inputs: the names of the other layers whose outputs it takes "
                      "(required)\n");
    }
    for (const KeySpec& k : t.keys) {
      absl::StrAppend(
          &out, "  ", k.name, ": ", k.accepts,
          k.default_text.empty() ? " (required)" : absl::StrCat(" (default ", k.default_text, ")"),
          "\n");
      for (const KeySpec& s : k.sub_keys) {
        absl::StrAppend(&out, "    ", s.name, ": ", s.accepts,
                        s.default_text.empty() ? " (required)"
                                               : absl::StrCat(" (default ", s.default_text, ")"),
                        "\n");
      }
    }
  }
  return out;
}

}  // namespace pstrain
