#include "config/model_spec_types.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/float_text.h"
#include "config/config_yaml_util.h"
#include "config/model_spec_keys_internal.h"

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
        {"mmoe",
         "mmoe",
         "multi-gate mixture of experts (Ma et al., KDD 2018) on a flat input [d]: experts MLPs "
         "(dense layers of units, a ReLU after each) shared by every task, and per task a gate, "
         "softmax(x W + b) over the experts; task t's output is the gate-weighted sum of the "
         "experts' outputs [u] (u the last units), the layer's every task's in order: [tasks * "
         "u], task t's at [t * u, (t + 1) * u) (slice: {begin: t * u, size: u} takes it); "
         "variables expert<e>/kernel<k> [in, units[k]] and expert<e>/bias<k> for every expert "
         "and layer, gate<t>/kernel [d, experts] and gate<t>/bias",
         {IntKey("experts", &LayerSpec::experts, 1, 1024, "",
                 "a whole number in [1, 1024]: the expert networks, shared by every task"),
          IntKey("tasks", &LayerSpec::tasks, 1, 1024, "",
                 "a whole number in [1, 1024]: the tasks, a gate and an output each"),
          UnitsListKey("a non-empty list of whole numbers >= 1, e.g. [64, 32]: each expert's "
                       "dense layers, a ReLU after each, the last one's units each task's "
                       "output"),
          initializer}},
        {"slice",
         "slice",
         "the features [begin, begin + size) of a flat input [d]: [size] (a task's part of an "
         "mmoe's output); its gradient is the output's there and zero elsewhere",
         {IntKey("begin", &LayerSpec::begin, 0, kMaxSize - 1, "0",
                 "a whole number >= 0: the first feature taken"),
          IntKey("size", &LayerSpec::size, 1, kMaxSize, "",
                 "a whole number >= 1: the features taken; begin + size is at most the input's")}},
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
