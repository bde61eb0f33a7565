#ifndef PSTRAIN_CONFIG_MODEL_SPEC_TYPES_H_
#define PSTRAIN_CONFIG_MODEL_SPEC_TYPES_H_

// Internal to model_spec*.cc: the table of layer types a model spec accepts,
// each with its keys (how a key is read into a LayerSpec, how it is written
// out, and how LayerReference describes it).

#include <cstdint>
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
  // Null for a list key.
  std::function<std::string(const std::string& text, LayerSpec* layer)> set;
  // The value as ModelSpecToYaml writes it.
  std::function<std::string(const LayerSpec& layer)> get;
  // A list key (linear's features) reads its list's scalars with this
  // instead of `set`.
  std::function<std::string(const std::vector<std::string>& items, LayerSpec* layer)> set_list;
  // A list-of-lists key (linear's crosses) reads its lists' scalars with
  // this instead of `set`.
  std::function<std::string(const std::vector<std::vector<std::string>>& lists, LayerSpec* layer)>
      set_lists;
  // When set, ModelSpecToYaml writes the key only if it returns true (of
  // buckets and dynamic, the one in use).
  std::function<bool(const LayerSpec& layer)> written;
  // A map key (embedding's sequence: {max_length: 50}) reads its entries
  // with these instead of `set`; its `get` writes the map.
  std::vector<KeySpec> sub_keys;
};

struct TypeSpec {
  std::string type;
  std::string keras_name;  // the default layer name
  std::string what;
  std::vector<KeySpec> keys;
};

// The shortest text that reads back as the same float (common/float_text.h).
std::string FloatText(float v);

// A layer's or feature's name: letters, digits, _ - . and / (not leading,
// trailing or doubled), at most 128, so that it is written and read back as
// itself.
bool ValidName(const std::string& name);

// " (did you mean X?)" for the closest of `known` within edit distance 2, or "".
std::string DidYouMean(const std::string& text, const std::vector<std::string>& known);

// The layer types that take `inputs` besides `input`: add, concat,
// dot_interaction.
bool TakesInputs(const std::string& type);

// Sizes are capped well below what would overflow a shape's product.
inline constexpr int kMaxSize = 1 << 20;
// A bucketed table's rows: with dim <= kMaxSize, rows x dim fits in int64.
inline constexpr int64_t kMaxBuckets = int64_t{1} << 40;

// Every layer type, in the order LayerReference lists them.
const std::vector<TypeSpec>& Types();

// The type named `type`, or nullptr.
const TypeSpec* FindType(const std::string& type);

}  // namespace model_spec_internal
}  // namespace pstrain

#endif  // PSTRAIN_CONFIG_MODEL_SPEC_TYPES_H_
