#include "config/model_spec_types.h"

#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/float_text.h"
#include "config/config_yaml_util.h"

namespace pstrain {
namespace model_spec_internal {

std::string FloatText(float v) { return ShortestFloatText(v); }

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

std::string DidYouMean(const std::string& text, const std::vector<std::string>& known) {
  return std::string(absl::StripPrefix(config_internal::UnknownKeyMessage("", text, known),
                                       absl::StrCat("unknown key ", text)));
}

bool TakesInputs(const std::string& type) {
  return type == "add" || type == "concat" || type == "dot_interaction";
}

namespace {

using config_internal::Sv;

KeySpec Key(
    std::string name, std::string default_text, std::string accepts,
    std::function<std::string(const std::string&, LayerSpec*)> set,
    std::function<std::string(const LayerSpec&)> get,
    std::function<std::string(const std::vector<std::string>&, LayerSpec*)> set_list = nullptr,
    std::function<bool(const LayerSpec&)> written = nullptr) {
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

// A whole number in [1, kMaxBuckets], written only when the table is not
// dynamic.
KeySpec BucketsKey() {
  return Key(
      "buckets", "none",
      absl::StrCat("a whole number in [1, ", kMaxBuckets,
                   "]: a table of rows [0, buckets) (ids as they are, strings hashed as "
                   "tf.strings.to_hash_bucket_fast); exactly one of buckets and dynamic: true"),
      [](const std::string& text, LayerSpec* layer) -> std::string {
        int64_t v = 0;
        if (!absl::SimpleAtoi(Sv(text), &v)) return "is a whole number";
        if (v < 1 || v > kMaxBuckets) return absl::StrCat("must be in [1, ", kMaxBuckets, "]");
        layer->buckets = v;
        return "";
      },
      [](const LayerSpec& layer) { return absl::StrCat(layer.buckets); }, nullptr,
      [](const LayerSpec& layer) { return !layer.dynamic; });
}

// A sparse feature's name.
KeySpec FeatureKey() {
  return Key(
      "feature", "",
      "the name of the sparse feature whose ids it looks up (Criteo's C1 .. C26, an "
      "Example's key): letters, digits, _ - . and /",
      [](const std::string& text, LayerSpec* layer) -> std::string {
        if (!ValidName(text)) {
          return "is a feature's name: letters, digits, _ - . and / (not leading, trailing "
                 "or doubled), at most 128";
        }
        layer->feature = text;
        return "";
      },
      [](const LayerSpec& layer) { return config_internal::Quoted(layer.feature); });
}

// linear's features: a non-empty list of distinct names.
KeySpec FeaturesKey() {
  return Key(
      "features", "", "a list of the sparse features' names, e.g. [C1, C2], non-empty and distinct",
      nullptr,
      [](const LayerSpec& layer) {
        std::vector<std::string> quoted;
        for (const std::string& f : layer.features) quoted.push_back(config_internal::Quoted(f));
        return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
      },
      [](const std::vector<std::string>& items, LayerSpec* layer) -> std::string {
        if (items.empty()) return "is a non-empty list of the sparse features' names";
        std::set<std::string> seen;
        for (const std::string& f : items) {
          if (!ValidName(f)) {
            return absl::StrCat("has ", config_internal::Quoted(f),
                                ": a feature's name is letters, digits, _ - . and / (not "
                                "leading, trailing or doubled), at most 128");
          }
          if (!seen.insert(f).second) {
            return absl::StrCat("names ", f, " twice; each feature has one table");
          }
        }
        layer->features = items;
        return "";
      });
}

// linear's crosses: lists of features' names. Whether each is a cross (two
// or more distinct features, no two of the same features) is checked once
// the layer has its name (model_spec.cc), so that the message can name it.
KeySpec CrossesKey() {
  KeySpec key =
      Key("crosses", "none",
          "a list of crosses, e.g. [[C1, C2], [C3, C4, C5]], each a list of two or more distinct "
          "sparse features' names (listed in features or not), as "
          "tf.feature_column.crossed_column: a table <name>/<a>_X_<b>... of one weight per "
          "combination of an example's values of the features (none if one has none), its row "
          "the combination's fingerprint as tf.sparse.cross_hashed takes it, modulo buckets "
          "(with dynamic: true, its low 63 bits)",
          nullptr, [](const LayerSpec& layer) {
            std::vector<std::string> crosses;
            for (const std::vector<std::string>& cross : layer.crosses) {
              std::vector<std::string> quoted;
              for (const std::string& f : cross) quoted.push_back(config_internal::Quoted(f));
              crosses.push_back(absl::StrCat("[", absl::StrJoin(quoted, ", "), "]"));
            }
            return absl::StrCat("[", absl::StrJoin(crosses, ", "), "]");
          });
  key.set_lists = [](const std::vector<std::vector<std::string>>& lists,
                     LayerSpec* layer) -> std::string {
    for (const std::vector<std::string>& cross : lists) {
      for (const std::string& f : cross) {
        if (!ValidName(f)) {
          return absl::StrCat("has ", config_internal::Quoted(f),
                              ": a feature's name is letters, digits, _ - . and / (not "
                              "leading, trailing or doubled), at most 128");
        }
      }
    }
    layer->crosses = lists;
    return "";
  };
  key.written = [](const LayerSpec& layer) { return !layer.crosses.empty(); };
  return key;
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

// A name written only when given: an earlier layer's (multi_head_attention's
// query) or a shared table's (embedding's table).
KeySpec LayerNameKey(std::string name, std::string LayerSpec::*field, std::string accepts,
                     std::string default_text = "none") {
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

// embedding's sequence: {max_length: L, positions: none}, written only for
// a sequence.
KeySpec SequenceKey() {
  KeySpec key =
      Key("sequence", "none",
          "a map {max_length: L, positions: ...}: the feature's values in order as a sequence [L, "
          "dim] with a mask instead of one combined row; an example keeps its last L values, "
          "padding follows them (the combiner does not apply)",
          nullptr, [](const LayerSpec& layer) {
            return absl::StrCat("{max_length: ", layer.max_length, ", positions: ", layer.positions,
                                "}");
          });
  key.written = [](const LayerSpec& layer) { return layer.max_length > 0; };
  key.sub_keys = {
      IntKey("max_length", &LayerSpec::max_length, 1, 16384, "",
             "a whole number in [1, 16384]: the positions kept"),
      ChoiceKey("positions", &LayerSpec::positions, {"none", "from_start", "from_end"}, "none",
                "none, from_start (a trainable <name>/positions [L, dim] added by position "
                "from the first kept value: text) or from_end (from the last: a history, 0 the "
                "most recent)")};
  return key;
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
    const KeySpec activation =
        ChoiceKey("activation", &LayerSpec::activation,
                  {"none", "relu", "sigmoid", "tanh", "leaky_relu", "gelu"}, "none",
                  "none, relu (fused into the layer), sigmoid, tanh, leaky_relu or gelu");
    const KeySpec use_bias = BoolKey("use_bias", &LayerSpec::use_bias, "true", "true or false");
    const KeySpec initializer =
        DenseInitializerKey("kernel_initializer", &LayerSpec::kernel_initializer, "glorot_uniform");
    const KeySpec bias_initializer =
        DenseInitializerKey("bias_initializer", &LayerSpec::bias_initializer, "zeros");
    KeySpec dynamic =
        BoolKey("dynamic", &LayerSpec::dynamic, "false",
                "true: a table of any id >= 0 (strings: their fingerprint's low 63 bits), a hash "
                "table on the parameter servers whose rows are created on first touch; exactly "
                "one of buckets and dynamic: true");
    dynamic.written = [](const LayerSpec& layer) { return layer.dynamic; };
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
         "fully connected, as tf.keras.layers.Dense, on a flat input or on each position of a "
         "sequence [L, in]; variables kernel [in, units] and bias [units]",
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
        {"layer_norm",
         "layer_normalization",
         "layer normalization over the last dimension, as torch.nn.LayerNorm and "
         "tf.keras.layers.LayerNormalization: each example's (or position's) values to mean 0 and "
         "variance 1 by their own statistics, then times gamma plus beta (variables [last dim]); "
         "the same in training and evaluation",
         {FloatKey("epsilon", &LayerSpec::epsilon, 0, true, 1, true, "0.001", "a number in (0, 1]"),
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
        {"gelu",
         "gelu",
         "x * Phi(x), Phi the normal CDF: x / 2 * (1 + erf(x / sqrt(2))), as "
         "torch.nn.GELU()",
         {}},
        {"embedding",
         "embedding",
         "an embedding table and its lookup of one sparse feature, as tf.keras.layers.Embedding "
         "and tf.feature_column.embedding_column: output [dim], the combiner over the example's "
         "values (zeros for none); table <name>/embeddings of dim floats per row, held by the "
         "parameter servers, which move only the rows a batch touches; reads no activation "
         "(without input, takes the model's)",
         {FeatureKey(), IntKey("dim", &LayerSpec::dim, 1, kMaxSize, "", "a whole number >= 1"),
          BucketsKey(), dynamic,
          ChoiceKey("combiner", &LayerSpec::combiner, {"sum", "mean", "sqrtn"}, "mean",
                    "sum, mean or sqrtn (the sum over the square root of the count): how an "
                    "example's several values become one row, as tf.nn.embedding_lookup_sparse"),
          InitializerKey("embeddings_initializer", &LayerSpec::embeddings_initializer,
                         "uniform(0.05)", {"uniform", "truncated_normal", "zeros"},
                         "uniform (scale 0.05), uniform(<scale>) (values in [-scale, scale)), "
                         "truncated_normal, truncated_normal(<stddev>) or zeros: a row's values "
                         "when first touched"),
          SequenceKey(),
          LayerNameKey("table", &LayerSpec::table,
                       "a table's name (letters, digits, _ - and .): the table it reads, "
                       "shared with every embedding that names it (each with the same dim, "
                       "buckets or dynamic, and initializer): a history and a candidate looking "
                       "up the same items; none: its own, <name>/embeddings")}},
        {"linear",
         "linear",
         "the wide part of Wide & Deep, as tf.feature_column.linear_model: a weight per "
         "(feature, value) summed over every value of every listed feature and cross, plus a "
         "bias; output [1]; tables <name>/<feature> and <name>/<a>_X_<b>... of one float per "
         "row, starting at zero, and variable bias; reads no activation (without input, takes "
         "the model's)",
         {FeaturesKey(), CrossesKey(), BucketsKey(), dynamic,
          BoolKey("use_bias", &LayerSpec::use_bias, "true", "true or false")}},
        {"multi_head_attention",
         "multi_head_attention",
         "multi-head scaled dot-product attention, as tf.keras.layers.MultiHeadAttention and "
         "torch.nn.MultiheadAttention: over its input, a sequence [L, d] (keys and values), with "
         "queries from the same sequence (self-attention) or from the layer named in query ([Lq, "
         "dq] or [dq]: target attention); output the query's shape; padded keys (the sequence's "
         "mask) get no weight; variables query/kernel, key/kernel, value/kernel, output/kernel "
         "and their biases",
         {IntKey("heads", &LayerSpec::heads, 1, 1024, "", "a whole number in [1, 1024]"),
          IntKey("key_dim", &LayerSpec::key_dim, 1, kMaxSize, "",
                 "a whole number >= 1: each head's size of queries and keys"),
          IntKey("value_dim", &LayerSpec::value_dim, 0, kMaxSize, "0",
                 "a whole number: each head's size of values; 0: key_dim"),
          FloatKey("dropout", &LayerSpec::dropout, 0, false, 1, false, "0",
                   "a number in [0, 1): the fraction of attention weights dropped in training"),
          BoolKey("causal", &LayerSpec::causal, "false",
                  "true: a position attends only to positions up to its own (a decoder's mask)"),
          LayerNameKey("query", &LayerSpec::query,
                       "the name of an earlier layer whose output is the query (target "
                       "attention: a candidate against a history); none: self-attention"),
          initializer}},
        {"din_attention",
         "din_attention",
         "DIN's attention unit (Zhou et al. 2018): over its input, a history [L, d], against the "
         "candidate [d] named in query, each valid position scored by a small MLP over [h, c, h "
         "- c, h * c] (4d -> units -> 1) and the history summed with those weights: [d]; "
         "variables hidden/kernel, hidden/bias, score/kernel, score/bias",
         {LayerNameKey("query", &LayerSpec::query,
                       "the name of an earlier layer whose output [d] is the candidate", ""),
          IntKey("units", &LayerSpec::units, 1, kMaxSize, "36",
                 "a whole number >= 1: the unit's hidden layer"),
          ChoiceKey("activation", &LayerSpec::activation,
                    {"none", "relu", "sigmoid", "tanh", "gelu"}, "sigmoid",
                    "none, relu, sigmoid, tanh or gelu: the hidden layer's"),
          initializer}},
        {"sequence_pool",
         "sequence_pool",
         "a sequence [L, d] pooled over its valid positions (padding left out) into [d]",
         {ChoiceKey("mode", &LayerSpec::mode, {"mean", "max", "sum", "last"}, "mean",
                    "mean, max, sum or last: of the valid positions (zeros for none)")}},
        {"dot_interaction",
         "dot_interaction",
         "DLRM's feature interaction: the previous output (or input's) and the outputs named in "
         "inputs, k flat outputs of one size d (the bottom MLP's first, then the embeddings), "
         "give the first followed by the dot product of every pair: d + k (k - 1) / 2 values",
         {}},
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
