// The kinds of keys a layer type has (a number, a choice, a flag, an
// initializer, a name), each reading its text into a LayerSpec field and
// writing it back, so that every type's keys check their values alike.
#include <cmath>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/config_yaml_util.h"
#include "config/model_spec_keys_internal.h"
#include "config/model_spec_types.h"

namespace pstrain {
namespace model_spec_internal {

using config_internal::Sv;

KeySpec Key(std::string name, std::string default_text, std::string accepts,
            std::function<std::string(const std::string&, LayerSpec*)> set,
            std::function<std::string(const LayerSpec&)> get,
            std::function<std::string(const std::vector<std::string>&, LayerSpec*)> set_list,
            std::function<bool(const LayerSpec&)> written) {
  KeySpec key;
  key.name = std::move(name);
  key.default_text = std::move(default_text);
  key.accepts = std::move(accepts);
  key.set = std::move(set);
  key.get = std::move(get);
  key.set_list = std::move(set_list);
  key.written = std::move(written);
  return key;
}

// A whole number in [min, max].
KeySpec IntKey(std::string name, int LayerSpec::*field, int min, int max, std::string default_text,
               std::string accepts) {
  return Key(
      std::move(name), std::move(default_text), std::move(accepts),
      [field, min, max](const std::string& text, LayerSpec* layer) -> std::string {
        int v = 0;
        if (!absl::SimpleAtoi(Sv(text), &v)) return "is a whole number";
        if (v < min || v > max) return absl::StrCat("must be in [", min, ", ", max, "]");
        layer->*field = v;
        return "";
      },
      [field](const LayerSpec& layer) { return absl::StrCat(layer.*field); });
}
// A number in [min, max) (or [min, max] when `max_inclusive`), or > min when
// `min_exclusive`.
KeySpec FloatKey(std::string name, float LayerSpec::*field, float min, bool min_exclusive,
                 float max, bool max_inclusive, std::string default_text, std::string accepts) {
  return Key(
      std::move(name), std::move(default_text), std::move(accepts),
      [=](const std::string& text, LayerSpec* layer) -> std::string {
        float v = 0;
        if (!absl::SimpleAtof(Sv(text), &v) || !(v == v)) return "is a number";
        const bool low = min_exclusive ? !(v > min) : !(v >= min);
        const bool high = max_inclusive ? !(v <= max) : !(v < max);
        if (low || high) {
          return absl::StrCat("must be in ", min_exclusive ? "(" : "[", min, ", ", max,
                              max_inclusive ? "]" : ")");
        }
        layer->*field = v;
        return "";
      },
      [field](const LayerSpec& layer) { return FloatText(layer.*field); });
}

KeySpec BoolKey(std::string name, bool LayerSpec::*field, std::string default_text,
                std::string accepts) {
  return Key(
      std::move(name), std::move(default_text), std::move(accepts),
      [field](const std::string& text, LayerSpec* layer) -> std::string {
        if (text == "true") {
          layer->*field = true;
        } else if (text == "false") {
          layer->*field = false;
        } else {
          return "is true or false";
        }
        return "";
      },
      [field](const LayerSpec& layer) { return std::string(layer.*field ? "true" : "false"); });
}

KeySpec ChoiceKey(std::string name, std::string LayerSpec::*field, std::vector<std::string> choices,
                  std::string default_text, std::string accepts) {
  return Key(
      std::move(name), std::move(default_text), std::move(accepts),
      [field, choices](const std::string& text, LayerSpec* layer) -> std::string {
        for (const std::string& c : choices) {
          if (text == c) {
            layer->*field = text;
            return "";
          }
        }
        return absl::StrCat("is one of ", absl::StrJoin(choices, ", "), DidYouMean(text, choices));
      },
      [field](const LayerSpec& layer) { return layer.*field; });
}

// batch_norm's momentum: a number in [0, 1), or "job" (kept as -1, as is an
// absent one): the job's batch_norm_decay where the job sets one, else Keras'
// 0.99 (models/spec_builder.h).
KeySpec MomentumKey() {
  return Key(
      "momentum", "job",
      "a number in [0, 1): the moving statistics' decay (Keras' momentum), or job: the job's "
      "batch_norm_decay where the job sets one, else Keras' 0.99",
      [](const std::string& text, LayerSpec* layer) -> std::string {
        if (text == "job") {
          layer->momentum = -1.0f;
          return "";
        }
        float v = 0;
        if (!absl::SimpleAtof(Sv(text), &v) || !(v >= 0 && v < 1)) {
          return "is a number in [0, 1) or job";
        }
        layer->momentum = v;
        return "";
      },
      [](const LayerSpec& layer) {
        return layer.momentum < 0 ? std::string("job") : FloatText(layer.momentum);
      });
}

// "name" or "name(number)" for the initializers InitializerSetting lists,
// of `kinds`; `accepts` lists them for messages.
KeySpec InitializerKey(std::string name, InitializerSetting LayerSpec::*field,
                       std::string default_text, std::set<std::string> kinds, std::string accepts) {
  return Key(
      std::move(name), std::move(default_text), accepts,
      [field, kinds, accepts](const std::string& text, LayerSpec* layer) -> std::string {
        InitializerSetting setting;
        const size_t open = text.find('(');
        setting.kind = text.substr(0, open);
        const bool takes_number = setting.kind == "truncated_normal" ||
                                  setting.kind == "constant" || setting.kind == "uniform";
        if (open == std::string::npos) {
          if (setting.kind == "constant") return "constant takes its value: constant(0.1)";
          if (setting.kind == "truncated_normal" || setting.kind == "uniform") {
            setting.arg = 0.05f;
          }
        } else {
          if (text.back() != ')' || !takes_number || !kinds.count(setting.kind)) {
            return "is " + accepts;
          }
          const std::string number = text.substr(open + 1, text.size() - open - 2);
          if (!absl::SimpleAtof(Sv(number), &setting.arg) || !std::isfinite(setting.arg)) {
            return absl::StrCat("has ", number, " where a number goes");
          }
          if (setting.kind == "truncated_normal" && !(setting.arg > 0)) {
            return "truncated_normal's stddev must be positive";
          }
          if (setting.kind == "uniform" && !(setting.arg > 0)) {
            return "uniform's scale must be positive";
          }
        }
        if (!kinds.count(setting.kind)) return "is " + accepts;
        layer->*field = setting;
        return "";
      },
      [field](const LayerSpec& layer) {
        const InitializerSetting& i = layer.*field;
        if (i.kind == "truncated_normal" || i.kind == "constant" || i.kind == "uniform") {
          return absl::StrCat(i.kind, "(", FloatText(i.arg), ")");
        }
        return i.kind;
      });
}

// A dense variable's initializer.
KeySpec DenseInitializerKey(std::string name, InitializerSetting LayerSpec::*field,
                            std::string default_text) {
  return InitializerKey(
      std::move(name), field, std::move(default_text),
      {"glorot_uniform", "he_normal", "zeros", "ones", "truncated_normal", "constant"},
      "glorot_uniform, he_normal, zeros, ones, truncated_normal, "
      "truncated_normal(<stddev>) or constant(<value>)");
}

// mmoe's units: a non-empty list of whole numbers in [1, kMaxSize], each
// expert's dense layers in order, written back as a list.
KeySpec UnitsListKey(std::string accepts) {
  return Key(
      "units", "", std::move(accepts), nullptr,
      [](const LayerSpec& layer) {
        return absl::StrCat("[", absl::StrJoin(layer.expert_units, ", "), "]");
      },
      [](const std::vector<std::string>& items, LayerSpec* layer) -> std::string {
        if (items.empty()) {
          return "is a non-empty list of whole numbers >= 1, e.g. [64, 32]: each expert's layers";
        }
        if (items.size() > 64) return absl::StrCat("has ", items.size(), " layers, over 64");
        std::vector<int> units;
        for (const std::string& item : items) {
          int v = 0;
          if (!absl::SimpleAtoi(Sv(item), &v) || v < 1 || v > kMaxSize) {
            return absl::StrCat("has ", config_internal::Quoted(item),
                                ": each is a whole number in [1, ", kMaxSize, "]");
          }
          units.push_back(v);
        }
        layer->expert_units = std::move(units);
        return "";
      });
}

// A name written only when given: an earlier layer's (multi_head_attention's
// query) or a shared table's (embedding's table).
KeySpec LayerNameKey(std::string name, std::string LayerSpec::*field, std::string accepts,
                     std::string default_text) {
  KeySpec key = Key(
      std::move(name), std::move(default_text), std::move(accepts),
      [field](const std::string& text, LayerSpec* layer) -> std::string {
        if (text == "none") {  // the default, written out
          (layer->*field).clear();
          return "";
        }
        if (!ValidName(text)) {
          return "is a name: letters, digits, _ - . and / (not leading, trailing or doubled), "
                 "at most 128";
        }
        layer->*field = text;
        return "";
      },
      [field](const LayerSpec& layer) { return config_internal::Quoted(layer.*field); });
  key.written = [field](const LayerSpec& layer) { return !(layer.*field).empty(); };
  return key;
}

}  // namespace model_spec_internal
}  // namespace pstrain
