#ifndef PSTRAIN_CONFIG_MODEL_SPEC_KEYS_INTERNAL_H_
#define PSTRAIN_CONFIG_MODEL_SPEC_KEYS_INTERNAL_H_

// Internal to model_spec_types.cc and the key files: the builders of a layer
// type's keys, shared so that Types() (model_spec_types.cc) reads as the
// table of types alone. Each is described where it is defined.

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "config/model_spec_types.h"

namespace pstrain {
namespace model_spec_internal {

// The kinds of keys (model_spec_keys.cc).
KeySpec Key(
    std::string name, std::string default_text, std::string accepts,
    std::function<std::string(const std::string&, LayerSpec*)> set,
    std::function<std::string(const LayerSpec&)> get,
    std::function<std::string(const std::vector<std::string>&, LayerSpec*)> set_list = nullptr,
    std::function<bool(const LayerSpec&)> written = nullptr);
KeySpec IntKey(std::string name, int LayerSpec::*field, int min, int max, std::string default_text,
               std::string accepts);
KeySpec FloatKey(std::string name, float LayerSpec::*field, float min, bool min_exclusive,
                 float max, bool max_inclusive, std::string default_text, std::string accepts);
KeySpec BoolKey(std::string name, bool LayerSpec::*field, std::string default_text,
                std::string accepts);
KeySpec ChoiceKey(std::string name, std::string LayerSpec::*field, std::vector<std::string> choices,
                  std::string default_text, std::string accepts);
KeySpec MomentumKey();
KeySpec InitializerKey(std::string name, InitializerSetting LayerSpec::*field,
                       std::string default_text, std::set<std::string> kinds, std::string accepts);
KeySpec DenseInitializerKey(std::string name, InitializerSetting LayerSpec::*field,
                            std::string default_text);
KeySpec UnitsListKey(std::string accepts);
KeySpec LayerNameKey(std::string name, std::string LayerSpec::*field, std::string accepts,
                     std::string default_text = "none");

// The sparse layers' keys: embedding's and linear's (model_spec_sparse_keys.cc).
KeySpec BucketsKey();
KeySpec FeatureKey();
KeySpec FeaturesKey();
KeySpec CrossesKey();
KeySpec SequenceKey();

}  // namespace model_spec_internal
}  // namespace pstrain

#endif  // PSTRAIN_CONFIG_MODEL_SPEC_KEYS_INTERNAL_H_
