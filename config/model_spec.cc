#include "config/model_spec.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "config/config_yaml_util.h"
#include "yaml-cpp/yaml.h"

namespace pstrain {
namespace {

using config_internal::ErrorAt;
using config_internal::Source;
using config_internal::Sv;

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
std::string FloatText(float v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", static_cast<double>(v));
  return buffer;
}

// A whole number in [min, max].
KeySpec IntKey(std::string name, int LayerSpec::*field, int min, int max, std::string default_text,
               std::string accepts) {
  return {std::move(name), std::move(default_text), std::move(accepts),
          [field, min, max](const std::string& text, LayerSpec* layer) -> std::string {
            int v = 0;
            if (!absl::SimpleAtoi(Sv(text), &v)) return "is a whole number";
            if (v < min || v > max) return absl::StrCat("must be in [", min, ", ", max, "]");
            layer->*field = v;
            return "";
          },
          [field](const LayerSpec& layer) { return absl::StrCat(layer.*field); }};
}

// A number in [min, max) (or [min, max] when `max_inclusive`), or > min when
// `min_exclusive`.
KeySpec FloatKey(std::string name, float LayerSpec::*field, float min, bool min_exclusive,
                 float max, bool max_inclusive, std::string default_text, std::string accepts) {
  return {std::move(name), std::move(default_text), std::move(accepts),
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
          [field](const LayerSpec& layer) { return FloatText(layer.*field); }};
}

KeySpec BoolKey(std::string name, bool LayerSpec::*field, std::string default_text,
                std::string accepts) {
  return {std::move(name), std::move(default_text), std::move(accepts),
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
          [field](const LayerSpec& layer) { return std::string(layer.*field ? "true" : "false"); }};
}

KeySpec ChoiceKey(std::string name, std::string LayerSpec::*field, std::vector<std::string> choices,
                  std::string default_text, std::string accepts) {
  return {std::move(name), std::move(default_text), std::move(accepts),
          [field, choices](const std::string& text, LayerSpec* layer) -> std::string {
            for (const std::string& c : choices) {
              if (text == c) {
                layer->*field = text;
                return "";
              }
            }
            return absl::StrCat("is one of ", absl::StrJoin(choices, ", "));
          },
          [field](const LayerSpec& layer) { return layer.*field; }};
}

// batch_norm's momentum: a number in [0, 1), or "job" (kept as -1): the
// job's batch_norm_decay.
KeySpec MomentumKey() {
  return {"momentum", "job",
          "a number in [0, 1): the moving statistics' decay (Keras' momentum), or job: the job's "
          "batch_norm_decay",
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
          }};
}

// "name" or "name(number)" for the initializers InitializerSetting lists.
KeySpec InitializerKey(std::string name, InitializerSetting LayerSpec::*field,
                       std::string default_text) {
  return {std::move(name), std::move(default_text),
          "glorot_uniform, he_normal, zeros, ones, truncated_normal, truncated_normal(<stddev>) "
          "or constant(<value>)",
          [field](const std::string& text, LayerSpec* layer) -> std::string {
            constexpr char kAccepts[] =
                "is glorot_uniform, he_normal, zeros, ones, truncated_normal, "
                "truncated_normal(<stddev>) or constant(<value>)";
            InitializerSetting setting;
            const size_t open = text.find('(');
            setting.kind = text.substr(0, open);
            if (open == std::string::npos) {
              if (setting.kind == "constant") return "constant takes its value: constant(0.1)";
              if (setting.kind == "truncated_normal") setting.arg = 0.05f;
            } else {
              if (text.back() != ')' ||
                  (setting.kind != "truncated_normal" && setting.kind != "constant")) {
                return kAccepts;
              }
              const std::string number = text.substr(open + 1, text.size() - open - 2);
              if (!absl::SimpleAtof(Sv(number), &setting.arg) || !std::isfinite(setting.arg)) {
                return absl::StrCat("has ", number, " where a number goes");
              }
              if (setting.kind == "truncated_normal" && !(setting.arg > 0)) {
                return "truncated_normal's stddev must be positive";
              }
            }
            static const std::set<std::string> kKinds = {
                "glorot_uniform", "he_normal", "zeros", "ones", "truncated_normal", "constant"};
            if (!kKinds.count(setting.kind)) return kAccepts;
            layer->*field = setting;
            return "";
          },
          [field](const LayerSpec& layer) {
            const InitializerSetting& i = layer.*field;
            if (i.kind == "truncated_normal" || i.kind == "constant") {
              return absl::StrCat(i.kind, "(", FloatText(i.arg), ")");
            }
            return i.kind;
          }};
}

// Sizes are capped well below what would overflow a shape's product.
constexpr int kMaxSize = 1 << 20;

const std::vector<TypeSpec>& Types() {
  static const std::vector<TypeSpec>* types = [] {
    const KeySpec padding = ChoiceKey("padding", &LayerSpec::padding, {"same", "valid"}, "valid",
                                      "same (output size = input / strides) or valid (no padding)");
    const KeySpec conv_padding =
        ChoiceKey("padding", &LayerSpec::padding, {"same", "valid", "fixed"}, "valid",
                  "same (output size = input / strides), valid (no padding) or fixed ((kernel - "
                  "1) / 2 before and the rest after whatever the stride, then valid: "
                  "TensorFlow's conv2d_fixed_padding)");
    const KeySpec activation = ChoiceKey(
        "activation", &LayerSpec::activation, {"none", "relu", "sigmoid", "tanh", "leaky_relu"},
        "none", "none, relu (fused into the layer), sigmoid, tanh or leaky_relu");
    const KeySpec use_bias = BoolKey("use_bias", &LayerSpec::use_bias, "true", "true or false");
    const KeySpec initializer =
        InitializerKey("kernel_initializer", &LayerSpec::kernel_initializer, "glorot_uniform");
    const KeySpec bias_initializer =
        InitializerKey("bias_initializer", &LayerSpec::bias_initializer, "zeros");
    const KeySpec strides =
        IntKey("strides", &LayerSpec::strides, 1, 64, "1", "a whole number in [1, 64]");
    const KeySpec pool =
        IntKey("pool", &LayerSpec::pool, 1, 1024, "2", "a whole number in [1, 1024]: the window");
    const KeySpec pool_strides = IntKey("strides", &LayerSpec::strides, 1, 1024, "the pool size",
                                        "a whole number in [1, 1024]");
    const KeySpec alpha = FloatKey("alpha", &LayerSpec::alpha, 0, false, 1, true, "0.3",
                                   "a number in [0, 1]: the slope below zero");
    const KeySpec trainable =
        BoolKey("trainable", &LayerSpec::trainable, "true",
                "false: the optimizer leaves the layer's variables as they are (no update, no "
                "weight decay); batch_norm's moving statistics still follow the batches");
    return new std::vector<TypeSpec>{
        {"conv2d",
         "conv2d",
         "2-D convolution, as tf.keras.layers.Conv2D; variables kernel [k, k, in, filters] and "
         "bias [filters]",
         {IntKey("filters", &LayerSpec::filters, 1, kMaxSize, "", "a whole number >= 1"),
          IntKey("kernel", &LayerSpec::kernel, 1, 64, "", "a whole number in [1, 64]"), strides,
          conv_padding, activation, use_bias, initializer, bias_initializer,
          FloatKey("alpha", &LayerSpec::alpha, 0, false, 1, true, "0.3",
                   "with activation: leaky_relu, its slope below zero"),
          trainable}},
        {"dense",
         "dense",
         "fully connected, as tf.keras.layers.Dense, on a flat input; variables kernel [in, "
         "units] and bias [units]",
         {IntKey("units", &LayerSpec::units, 1, kMaxSize, "", "a whole number >= 1"), activation,
          use_bias, initializer, bias_initializer,
          FloatKey("alpha", &LayerSpec::alpha, 0, false, 1, true, "0.3",
                   "with activation: leaky_relu, its slope below zero"),
          trainable}},
        {"max_pool",
         "max_pooling2d",
         "max pooling, as tf.keras.layers.MaxPool2D",
         {pool, pool_strides, padding}},
        {"average_pool",
         "average_pooling2d",
         "average pooling, as tf.keras.layers.AveragePooling2D (with padding: same, the inputs a "
         "window covers are averaged, not the padding)",
         {pool, pool_strides, padding}},
        {"global_average_pool",
         "global_average_pooling2d",
         "the mean over height and width: [h, w, c] -> [c]",
         {}},
        {"flatten", "flatten", "[h, w, c] -> [h * w * c]", {}},
        {"dropout",
         "dropout",
         "in training, zeroes a fraction `rate` of its inputs and scales the rest by 1 / (1 - "
         "rate); nothing in evaluation",
         {FloatKey("rate", &LayerSpec::rate, 0, false, 1, false, "",
                   "a number in [0, 1): the fraction dropped")}},
        {"batch_norm",
         "batch_normalization",
         "batch normalization over the channels, as tf.keras.layers.BatchNormalization; variables "
         "gamma, beta (trained) and moving_mean, moving_variance (moving averages of the "
         "batches' statistics, with decay momentum)",
         {FloatKey("epsilon", &LayerSpec::epsilon, 0, true, 1, true, "0.001", "a number in (0, 1]"),
          BoolKey("relu", &LayerSpec::relu, "false", "true: a ReLU fused after it"), MomentumKey(),
          trainable}},
        {"add",
         "add",
         "the sum of the previous output (or input's) and the outputs named in inputs, all of "
         "one shape",
         {}},
        {"concat",
         "concatenate",
         "the previous output (or input's) and the outputs named in inputs, joined along the "
         "last (channel) dimension; the other dimensions equal",
         {}},
        {"pad_channels",
         "pad_channels",
         "zero channels added evenly on both sides of the last dimension, no variables: ResNet's "
         "parameter-free \"option A\" shortcut (after an average_pool when the block is strided)",
         {IntKey("filters", &LayerSpec::filters, 1, kMaxSize, "",
                 "a whole number >= 1: the output's channels, the input's plus an even number")}},
        {"identity", "identity", "its input unchanged: a named junction", {}},
        {"relu", "re_lu", "max(x, 0)", {}},
        {"sigmoid", "activation", "1 / (1 + e^-x)", {}},
        {"tanh", "activation", "tanh(x)", {}},
        {"leaky_relu", "leaky_re_lu", "x if x > 0, else alpha * x", {alpha}},
    };
  }();
  return *types;
}

const TypeSpec* FindType(const std::string& type) {
  for (const TypeSpec& t : Types()) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 128 || name.front() == '/' || name.back() == '/' ||
      name.find("//") != std::string::npos) {
    return false;
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' &&
        c != '/') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::string> Scalar(const Source& source, const YAML::Node& node,
                                   std::string_view path) {
  return config_internal::ScalarOf(source, node, path);
}

// One entry of `layers`: "type" or {type: {options}}.
absl::StatusOr<LayerSpec> ParseLayer(const Source& source, const YAML::Node& node, int index) {
  const std::string where = absl::StrCat("layers[", index, "]");
  LayerSpec layer;
  layer.line = node.Mark().is_null() ? 0 : node.Mark().line + 1;
  YAML::Node options;
  if (node.IsScalar()) {
    layer.type = node.Scalar();
  } else if (node.IsMap() && node.size() == 1) {
    const auto entry = *node.begin();
    if (!entry.first.IsScalar()) return ErrorAt(source, node, where + ": the layer type is a name");
    layer.type = entry.first.Scalar();
    options = entry.second;
  } else {
    return ErrorAt(source, node,
                   absl::StrCat(where,
                                " is a layer: its type alone (flatten) or its type with its "
                                "options ({dense: {units: 10}})"));
  }
  const TypeSpec* type = FindType(layer.type);
  if (type == nullptr) {
    std::vector<std::string> names;
    for (const TypeSpec& t : Types()) names.push_back(t.type);
    return ErrorAt(
        source, node,
        absl::StrCat(where, ": unknown layer type ",
                     absl::StripPrefix(config_internal::UnknownKeyMessage("", layer.type, names),
                                       "unknown key "),
                     "; the types: ", absl::StrJoin(names, ", ")));
  }
  // Defaults that differ by type.
  if (layer.type == "max_pool" || layer.type == "average_pool") layer.strides = 0;
  std::set<std::string> given;
  PSTRAIN_RETURN_IF_ERROR(config_internal::ForEachEntry(
      source, options, absl::StrCat(where, " ", layer.type),
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        const std::string path = absl::StrCat(where, " ", layer.type, ".", key);
        if (!given.insert(key).second) return ErrorAt(source, key_node, path + " is given twice");
        if (key == "inputs") {
          if (layer.type != "add" && layer.type != "concat") {
            return ErrorAt(source, key_node,
                           absl::StrCat(path,
                                        ": only add and concat take inputs (any layer "
                                        "takes input: <name>)"));
          }
          if (!value.IsSequence() || value.size() == 0) {
            return ErrorAt(source, value,
                           path + " is a list of the names of earlier layers, e.g. [conv2d]");
          }
          for (const YAML::Node& n : value) {
            if (!n.IsScalar()) return ErrorAt(source, n, path + ": each is a layer's name");
            layer.inputs.push_back(n.Scalar());
          }
          return absl::OkStatus();
        }
        PSTRAIN_ASSIGN_OR_RETURN(std::string text, Scalar(source, value, path));
        if (key == "input") {
          layer.input = text;
          return absl::OkStatus();
        }
        if (key == "name") {
          if (!ValidName(text)) {
            return ErrorAt(source, value,
                           absl::StrCat(path, " = ", config_internal::Quoted(text),
                                        ": a name is letters, digits, _ - . and / (not "
                                        "leading, trailing or doubled), at most 128"));
          }
          if (text == "input") {
            return ErrorAt(source, value, path + ": input names the model's input, not a layer");
          }
          layer.name = text;
          return absl::OkStatus();
        }
        for (const KeySpec& k : type->keys) {
          if (k.name != key) continue;
          const std::string error = k.set(text, &layer);
          if (error.empty()) return absl::OkStatus();
          return ErrorAt(
              source, value,
              absl::StrCat(path, " = ", config_internal::Quoted(text), ": ", key, " ", error));
        }
        std::vector<std::string> known = {"name", "input"};
        if (layer.type == "add" || layer.type == "concat") known.push_back("inputs");
        for (const KeySpec& k : type->keys) known.push_back(k.name);
        return ErrorAt(source, key_node,
                       absl::StrCat(where, " ",
                                    config_internal::UnknownKeyMessage(
                                        absl::StrCat(layer.type, "."), key, known),
                                    "; ", layer.type, " takes ", absl::StrJoin(known, ", ")));
      }));
  for (const KeySpec& k : type->keys) {
    if (k.default_text.empty() && !given.count(k.name)) {
      return ErrorAt(source, node,
                     absl::StrCat(where, " ", layer.type, " needs ", k.name, " (", k.accepts, ")"));
    }
  }
  if ((layer.type == "add" || layer.type == "concat") && layer.inputs.empty()) {
    return ErrorAt(source, node,
                   absl::StrCat(where, " ", layer.type,
                                " needs inputs: [<name>, ...], the layers whose outputs it takes "
                                "with the previous one's"));
  }
  if (layer.strides == 0) layer.strides = layer.pool;
  return layer;
}

// Names the layers without one, Keras' way (conv2d, conv2d_1, ...), skipping
// names given explicitly; refuses a name given twice.
absl::Status NameLayers(const Source& source, std::vector<LayerSpec>* layers) {
  std::map<std::string, int> taken;  // name -> line
  for (const LayerSpec& layer : *layers) {
    if (layer.name.empty()) continue;
    auto [it, inserted] = taken.emplace(layer.name, layer.line);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(source.name, ": two layers are named ", layer.name, " (lines ", it->second,
                       " and ", layer.line, "); every layer's name is its own"));
    }
  }
  std::map<std::string, int> next;  // keras name -> next number
  for (LayerSpec& layer : *layers) {
    if (!layer.name.empty()) continue;
    const std::string base = FindType(layer.type)->keras_name;
    int& n = next[base];
    std::string name;
    do {
      name = n == 0 ? base : absl::StrCat(base, "_", n);
      ++n;
    } while (taken.count(name));
    layer.name = name;
    taken.emplace(name, layer.line);
  }
  return absl::OkStatus();
}

// Every name a layer takes is "input" or an earlier layer's, and every
// layer's output but the last is taken by a later one.
absl::Status CheckGraph(const Source& source, const std::vector<LayerSpec>& layers) {
  std::map<std::string, int> index;  // name -> position
  for (size_t i = 0; i < layers.size(); ++i) index[layers[i].name] = static_cast<int>(i);
  std::vector<std::string> names = {"input"};
  std::vector<int> uses(layers.size(), 0);
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    std::vector<std::string> taken = l.inputs;
    taken.insert(taken.begin(), l.input);
    for (const std::string& name : taken) {
      if (name.empty()) {  // the previous layer's output
        if (i > 0) ++uses[i - 1];
        continue;
      }
      if (name == "input") continue;
      auto it = index.find(name);
      if (it == index.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            source.name, ": layer ", l.name, " (line ", l.line, ") takes ",
            absl::StripPrefix(config_internal::UnknownKeyMessage("", name, names), "unknown key "),
            ", which is no layer's name"));
      }
      if (it->second >= static_cast<int>(i)) {
        return absl::InvalidArgumentError(absl::StrCat(
            source.name, ": layer ", l.name, " (line ", l.line, ") takes ", name, ", which ",
            it->second == static_cast<int>(i) ? "is itself" : "comes after it",
            "; a layer takes the outputs of layers before it"));
      }
      ++uses[it->second];
    }
    names.push_back(l.name);
  }
  for (size_t i = 0; i + 1 < layers.size(); ++i) {
    if (uses[i] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          source.name, ": the output of layer ", layers[i].name, " (line ", layers[i].line,
          ") is not taken by any later layer (the next one takes input: ", layers[i + 1].input,
          "); remove it or take it"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParsePreprocessing(const Source& source, const YAML::Node& node, ModelSpec* spec) {
  static const std::vector<std::string> kKeys = {"crop_padding", "random_flip",
                                                 "per_image_standardization"};
  return config_internal::ForEachEntry(
      source, node, "preprocessing",
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        const std::string path = absl::StrCat("preprocessing.", key);
        PSTRAIN_ASSIGN_OR_RETURN(std::string text, Scalar(source, value, path));
        if (key == "crop_padding") {
          if (!absl::SimpleAtoi(Sv(text), &spec->crop_padding) || spec->crop_padding < 0 ||
              spec->crop_padding > 1024) {
            return ErrorAt(source, value,
                           absl::StrCat(path, " = ", config_internal::Quoted(text),
                                        ": a whole number in [0, 1024]"));
          }
          return absl::OkStatus();
        }
        bool* flag = key == "random_flip"                 ? &spec->random_flip
                     : key == "per_image_standardization" ? &spec->per_image_standardization
                                                          : nullptr;
        if (flag == nullptr) {
          return ErrorAt(source, key_node,
                         config_internal::UnknownKeyMessage("preprocessing.", key, kKeys));
        }
        if (text != "true" && text != "false") {
          return ErrorAt(
              source, value,
              absl::StrCat(path, " = ", config_internal::Quoted(text), ": true or false"));
        }
        *flag = text == "true";
        return absl::OkStatus();
      });
}

absl::Status ParseTop(const Source& source, const YAML::Node& root, ModelSpec* spec) {
  bool have_input = false, have_classes = false, have_layers = false;
  static const std::vector<std::string> kKeys = {"name", "input", "classes", "preprocessing",
                                                 "layers"};
  PSTRAIN_RETURN_IF_ERROR(config_internal::ForEachEntry(
      source, root, "",
      [&](const std::string& key, const YAML::Node& key_node,
          const YAML::Node& value) -> absl::Status {
        if (key == "name") {
          PSTRAIN_ASSIGN_OR_RETURN(spec->name, Scalar(source, value, "name"));
          if (!ValidName(spec->name)) {
            return ErrorAt(source, value,
                           absl::StrCat("name = ", config_internal::Quoted(spec->name),
                                        ": a name is letters, digits, _ - . and / (not "
                                        "leading, trailing or doubled), at most 128"));
          }
        } else if (key == "input") {
          have_input = true;
          if (!value.IsSequence() || value.size() != 3) {
            return ErrorAt(source, value,
                           "input is [height, width, channels] of one example, e.g. [28, 28, 1]");
          }
          for (const YAML::Node& d : value) {
            int64_t v = 0;
            if (!d.IsScalar() || !absl::SimpleAtoi(d.Scalar(), &v) || v < 1 || v > kMaxSize) {
              return ErrorAt(
                  source, d,
                  absl::StrCat("input: every size is a whole number in [1, ", kMaxSize, "]"));
            }
            spec->input.push_back(v);
          }
        } else if (key == "classes") {
          have_classes = true;
          PSTRAIN_ASSIGN_OR_RETURN(std::string text, Scalar(source, value, "classes"));
          if (!absl::SimpleAtoi(Sv(text), &spec->classes) || spec->classes < 2 ||
              spec->classes > kMaxSize) {
            return ErrorAt(source, value,
                           absl::StrCat("classes = ", config_internal::Quoted(text),
                                        ": a whole number in [2, ", kMaxSize, "]"));
          }
        } else if (key == "preprocessing") {
          return ParsePreprocessing(source, value, spec);
        } else if (key == "layers") {
          have_layers = true;
          if (!value.IsSequence() || value.size() == 0) {
            return ErrorAt(source, value, "layers is a non-empty list of layers");
          }
          if (value.size() > static_cast<size_t>(kMaxSpecLayers)) {
            return ErrorAt(source, value,
                           absl::StrCat("layers: ", value.size(), " layers, over the limit of ",
                                        kMaxSpecLayers));
          }
          int index = 0;
          for (const YAML::Node& entry : value) {
            PSTRAIN_ASSIGN_OR_RETURN(LayerSpec layer, ParseLayer(source, entry, index++));
            spec->layers.push_back(std::move(layer));
          }
        } else {
          return ErrorAt(source, key_node, config_internal::UnknownKeyMessage("", key, kKeys));
        }
        return absl::OkStatus();
      }));
  if (!have_input || !have_classes || !have_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        source.name, ": a model spec has input ([height, width, channels]), classes and layers",
        !have_input ? "; input is missing" : "", !have_classes ? "; classes is missing" : "",
        !have_layers ? "; layers is missing" : ""));
  }
  PSTRAIN_RETURN_IF_ERROR(NameLayers(source, &spec->layers));
  return CheckGraph(source, spec->layers);
}

}  // namespace

absl::StatusOr<ModelSpec> ParseModelSpec(std::string_view yaml, std::string_view source_name) {
  const Source source{std::string(source_name), /*show_lines=*/true};
  return config_internal::CatchYamlExceptions<ModelSpec>(
      source_name, [&]() -> absl::StatusOr<ModelSpec> {
        PSTRAIN_ASSIGN_OR_RETURN(YAML::Node root,
                                 config_internal::LoadYaml(yaml, source_name, "YAML"));
        ModelSpec spec;
        PSTRAIN_RETURN_IF_ERROR(ParseTop(source, root, &spec));
        return spec;
      });
}

std::string ModelSpecToYaml(const ModelSpec& spec) {
  std::string out;
  // Names are quoted: "null", "true" or "1e3" would read back as something else.
  using config_internal::Quoted;
  if (!spec.name.empty()) absl::StrAppend(&out, "name: ", Quoted(spec.name), "\n");
  absl::StrAppend(&out, "input: [", absl::StrJoin(spec.input, ", "), "]\n");
  absl::StrAppend(&out, "classes: ", spec.classes, "\n");
  if (spec.crop_padding != 0 || spec.random_flip || spec.per_image_standardization) {
    absl::StrAppend(
        &out, "preprocessing: {crop_padding: ", spec.crop_padding,
        ", random_flip: ", spec.random_flip ? "true" : "false",
        ", per_image_standardization: ", spec.per_image_standardization ? "true" : "false", "}\n");
  }
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
      for (const KeySpec& k : type->keys)
        options.push_back(absl::StrCat(k.name, ": ", k.get(layer)));
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
    absl::StrAppend(&out,
                    "  input: the name of an earlier layer whose output it takes, or input "
                    "(default: the previous layer's output)\n");
    if (t.type == "add" || t.type == "concat") {
      absl::StrAppend(&out,
                      "  inputs: the names of the other layers whose outputs it takes "
                      "(required)\n");
    }
    for (const KeySpec& k : t.keys) {
      absl::StrAppend(
          &out, "  ", k.name, ": ", k.accepts,
          k.default_text.empty() ? " (required)" : absl::StrCat(" (default ", k.default_text, ")"),
          "\n");
    }
  }
  return out;
}

}  // namespace pstrain
