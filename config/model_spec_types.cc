#include "config/model_spec_types.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/config_yaml_util.h"

namespace pstrain {
namespace model_spec_internal {

std::string FloatText(float v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", static_cast<double>(v));
  return buffer;
}

namespace {

using config_internal::Sv;

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

}  // namespace

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

}  // namespace model_spec_internal
}  // namespace pstrain
