#ifndef PSTRAIN_CONFIG_MODEL_SPEC_TYPES_H_
#define PSTRAIN_CONFIG_MODEL_SPEC_TYPES_H_

// Internal to model_spec.cc: the table of layer types a model spec accepts,
// each with its keys (how a key is read into a LayerSpec, how it is written
// out, and how LayerReference describes it).

#include <functional>
#include <string>
#include <vector>

#include "config/model_spec.h"

namespace pstrain {
namespace model_spec_internal {

// One key of a layer type: how to read it into a LayerSpec, and how to
// describe it.
struct KeySpec {
  std::string name;
  std::string default_text;  // "" for a required key
  std::string accepts;
  // Reads `text` into `layer`; an error message (without the key) or "".
  std::function<std::string(const std::string& text, LayerSpec* layer)> set;
  // The value as ModelSpecToYaml writes it.
  std::function<std::string(const LayerSpec& layer)> get;
};

struct TypeSpec {
  std::string type;
  std::string keras_name;  // the default layer name
  std::string what;
  std::vector<KeySpec> keys;
};

// Enough digits that reading the text back gives the same float.
std::string FloatText(float v);

// Sizes are capped well below what would overflow a shape's product.
inline constexpr int kMaxSize = 1 << 20;

// Every layer type, in the order LayerReference lists them.
const std::vector<TypeSpec>& Types();

// The type named `type`, or nullptr.
const TypeSpec* FindType(const std::string& type);

}  // namespace model_spec_internal
}  // namespace pstrain

#endif  // PSTRAIN_CONFIG_MODEL_SPEC_TYPES_H_
