#include "models/spec_builder.h"

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/activation.h"
#include "models/attention.h"
#include "models/avg_pool2d.h"
#include "models/batch_norm.h"
#include "models/conv2d.h"
#include "models/dense.h"
#include "models/din_attention.h"
#include "models/dot_interaction.h"
#include "models/dropout.h"
#include "models/embedding.h"
#include "models/flatten.h"
#include "models/global_avg_pool.h"
#include "models/layer_norm.h"
#include "models/max_pool2d.h"
#include "models/merge.h"
#include "models/mmoe.h"
#include "models/pad_channels.h"
#include "models/relu.h"
#include "models/residual_block.h"
#include "models/residual_fusion.h"
#include "models/sequence_pool.h"
#include "models/slice.h"

namespace pstrain {
namespace {

// The activation layer for a type or an `activation` option other than relu.
std::unique_ptr<Layer> ActivationLayer(const std::string& kind, std::string name, float alpha) {
  if (kind == "sigmoid") {
    return std::make_unique<ElementwiseActivation>(std::move(name), ActivationKind::kSigmoid);
  }
  if (kind == "tanh") {
    return std::make_unique<ElementwiseActivation>(std::move(name), ActivationKind::kTanh);
  }
  if (kind == "gelu") {
    return std::make_unique<ElementwiseActivation>(std::move(name), ActivationKind::kGelu);
  }
  if (kind == "leaky_relu") {
    return std::make_unique<ElementwiseActivation>(std::move(name), ActivationKind::kLeakyRelu,
                                                   alpha);
  }
  return nullptr;
}

// An embedding table's initializer: uniform, truncated_normal or zeros (the
// spec accepts no other).
TableInitializer SpecTableInitializer(const InitializerSetting& setting) {
  if (setting.kind == "uniform") return {TableInitializer::kUniform, setting.arg};
  if (setting.kind == "truncated_normal") return {TableInitializer::kTruncatedNormal, setting.arg};
  return {TableInitializer::kZeros, 0.0f};
}

// The layers computing `l`, appended to `layers`; false for a type it does
// not know.
bool AppendLayers(const LayerSpec& l, std::vector<std::unique_ptr<Layer>>* layers) {
  const Activation fused = l.activation == "relu" ? Activation::kRelu : Activation::kNone;
  if (l.type == "conv2d") {
    Conv2DOptions o;
    o.filters = l.filters;
    o.kernel_size = l.kernel;
    o.stride = l.strides;
    o.padding = SpecPadding(l);
    o.activation = fused;
    o.use_bias = l.use_bias;
    o.kernel_initializer = SpecInitializer(l.kernel_initializer);
    o.bias_initializer = SpecInitializer(l.bias_initializer);
    layers->push_back(std::make_unique<Conv2D>(l.name, o));
  } else if (l.type == "dense") {
    DenseOptions o;
    o.units = l.units;
    o.activation = fused;
    o.use_bias = l.use_bias;
    o.kernel_initializer = SpecInitializer(l.kernel_initializer);
    o.bias_initializer = SpecInitializer(l.bias_initializer);
    layers->push_back(std::make_unique<Dense>(l.name, o));
  } else if (l.type == "max_pool") {
    layers->push_back(std::make_unique<MaxPool2D>(l.name, l.pool, l.strides, SpecPadding(l)));
  } else if (l.type == "average_pool") {
    layers->push_back(std::make_unique<AvgPool2D>(l.name, l.pool, l.strides, SpecPadding(l)));
  } else if (l.type == "global_average_pool") {
    layers->push_back(std::make_unique<GlobalAvgPool>(l.name));
  } else if (l.type == "flatten") {
    layers->push_back(std::make_unique<Flatten>(l.name));
  } else if (l.type == "dropout") {
    layers->push_back(std::make_unique<Dropout>(l.name, l.rate));
  } else if (l.type == "batch_norm") {
    layers->push_back(std::make_unique<BatchNorm>(l.name, l.epsilon, l.relu));
    layers->back()->set_state_decay(l.momentum);
  } else if (l.type == "layer_norm") {
    layers->push_back(std::make_unique<LayerNorm>(l.name, l.epsilon));
  } else if (l.type == "add") {
    layers->push_back(std::make_unique<Add>(l.name));
  } else if (l.type == "concat") {
    layers->push_back(std::make_unique<Concat>(l.name));
  } else if (l.type == "embedding") {
    EmbeddingOptions o;
    o.feature = l.feature;
    o.dim = l.dim;
    o.buckets = l.dynamic ? 0 : l.buckets;
    o.combiner = l.combiner == "sum"     ? Combiner::kSum
                 : l.combiner == "sqrtn" ? Combiner::kSqrtn
                                         : Combiner::kMean;
    o.initializer = SpecTableInitializer(l.embeddings_initializer);
    o.max_length = l.max_length;
    o.table = l.table;
    o.positions = l.positions == "from_start" ? Positions::kFromStart
                  : l.positions == "from_end" ? Positions::kFromEnd
                                              : Positions::kNone;
    layers->push_back(std::make_unique<Embedding>(l.name, o));
  } else if (l.type == "multi_head_attention") {
    MultiHeadAttentionOptions o;
    o.heads = l.heads;
    o.key_dim = l.key_dim;
    o.value_dim = l.value_dim;
    o.dropout = l.dropout;
    o.causal = l.causal;
    o.kernel_initializer = SpecInitializer(l.kernel_initializer);
    layers->push_back(std::make_unique<MultiHeadAttention>(l.name, o));
  } else if (l.type == "din_attention") {
    DinAttentionOptions o;
    o.units = l.units;
    o.fused = fused;
    o.has_activation = l.activation != "none" && l.activation != "relu";
    o.activation = l.activation == "tanh"   ? ActivationKind::kTanh
                   : l.activation == "gelu" ? ActivationKind::kGelu
                                            : ActivationKind::kSigmoid;
    o.kernel_initializer = SpecInitializer(l.kernel_initializer);
    layers->push_back(std::make_unique<DinAttention>(l.name, o));
  } else if (l.type == "sequence_pool") {
    const SequencePoolMode mode = l.mode == "max"    ? SequencePoolMode::kMax
                                  : l.mode == "sum"  ? SequencePoolMode::kSum
                                  : l.mode == "last" ? SequencePoolMode::kLast
                                                     : SequencePoolMode::kMean;
    layers->push_back(std::make_unique<SequencePool>(l.name, mode));
  } else if (l.type == "linear") {
    LinearOptions o;
    o.features = l.features;
    o.crosses = l.crosses;
    o.buckets = l.dynamic ? 0 : l.buckets;
    o.use_bias = l.use_bias;
    layers->push_back(std::make_unique<Linear>(l.name, o));
  } else if (l.type == "dot_interaction") {
    layers->push_back(std::make_unique<DotInteraction>(l.name));
  } else if (l.type == "mmoe") {
    MmoeOptions o;
    o.experts = l.experts;
    o.tasks = l.tasks;
    o.units = l.expert_units;
    o.kernel_initializer = SpecInitializer(l.kernel_initializer);
    layers->push_back(std::make_unique<Mmoe>(l.name, o));
  } else if (l.type == "slice") {
    layers->push_back(std::make_unique<Slice>(l.name, l.begin, l.size));
  } else if (l.type == "pad_channels") {
    layers->push_back(std::make_unique<PadChannels>(l.name, l.filters));
  } else if (l.type == "identity") {
    layers->push_back(std::make_unique<Identity>(l.name));
  } else if (l.type == "relu") {
    layers->push_back(std::make_unique<ReLU>(l.name));
  } else {
    std::unique_ptr<Layer> activation = ActivationLayer(l.type, l.name, l.alpha);
    if (activation == nullptr) return false;
    layers->push_back(std::move(activation));
  }
  if (!l.trainable) layers->back()->set_frozen(true);
  if ((l.type == "conv2d" || l.type == "dense") && fused == Activation::kNone &&
      l.activation != "none") {
    std::unique_ptr<Layer> activation =
        ActivationLayer(l.activation, l.name + "/activation", l.alpha);
    if (activation == nullptr) return false;
    layers->push_back(std::move(activation));
  }
  return true;
}

}  // namespace

Padding SpecPadding(const LayerSpec& l) {
  if (l.padding == "same") return Padding::kSame;
  if (l.padding == "fixed") return Padding::kFixed;
  return Padding::kValid;
}

InitializerSpec SpecInitializer(const InitializerSetting& setting) {
  InitializerSpec out;
  if (setting.kind == "glorot_uniform") out.kind = Initializer::kGlorotUniform;
  if (setting.kind == "he_normal") out.kind = Initializer::kHeNormal;
  if (setting.kind == "ones") out.kind = Initializer::kOnes;
  if (setting.kind == "truncated_normal") {
    out.kind = Initializer::kTruncatedNormal;
    out.stddev = setting.arg;
  }
  if (setting.kind == "constant") {
    out.kind = Initializer::kConstant;
    out.value = setting.arg;
  }
  return out;  // zeros
}

absl::StatusOr<std::unique_ptr<Model>> BuildModelFromSpec(const ModelSpec& written,
                                                          std::string_view source,
                                                          const SpecBuildOptions& options) {
  // Batch norms without their own momentum take the options' (the model's
  // spec_yaml, set by the caller, stays as written).
  ModelSpec spec = written;
  for (LayerSpec& l : spec.layers) {
    if (l.type == "batch_norm" && l.momentum < 0) l.momentum = options.batch_norm_momentum;
  }
  const std::string where(source);
  const bool binary = spec.head == "binary";
  const bool regression = spec.head == "regression";
  const bool softmax = spec.head == "softmax";
  const bool multi = !spec.heads.empty();
  if ((spec.input.size() != 3 && spec.input.size() != 1) || spec.layers.empty() ||
      (!multi && ((!binary && !regression && !softmax) || (softmax && spec.classes < 2) ||
                  (binary && spec.classes != 2) || (regression && spec.classes != 0)))) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": a model spec has input [h, w, c] or [n], classes (2 with head: binary, "
                     "none with head: regression) and layers"));
  }
  RegressionLossOptions regression_loss;
  if (regression) {
    if (spec.loss == "mae") {
      regression_loss.loss = RegressionLoss::kMae;
    } else if (spec.loss == "huber") {
      regression_loss.loss = RegressionLoss::kHuber;
    } else if (spec.loss != "mse") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": loss ", spec.loss, " is not mse, mae or huber"));
    }
    regression_loss.huber_delta = spec.huber_delta;
  }
  // Shapes layer by layer, so that an error can name the spec's layer and
  // line; Model::Create builds them again for its own bookkeeping.
  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<std::vector<int>> inputs;  // per model layer: the activations it takes
  std::vector<Shape> shapes = {Shape(spec.input.begin(), spec.input.end())};  // per activation
  std::map<std::string, int> activation_of = {{"input", 0}};  // spec layer -> its output
  const ResidualFusionMatcher fusion(spec);
  for (size_t index = 0; index < spec.layers.size(); ++index) {
    const LayerSpec& l = spec.layers[index];
    std::vector<int> taken;
    // embedding and linear read no activation; without input they take the
    // model's, leaving the previous output to a later layer.
    for (const std::string& name : LayerInputNames(l)) {
      if (name.empty()) {
        taken.push_back(static_cast<int>(shapes.size()) - 1);
        continue;
      }
      auto it = activation_of.find(name);
      if (it == activation_of.end()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": layer ", l.name, " (line ", l.line,
                                                       ") takes ", name,
                                                       ", which is not a layer before it"));
      }
      taken.push_back(it->second);
    }
    if (options.fuse_residual_blocks && taken.size() == 1) {
      std::optional<ResidualFusion> block = fusion.Match(static_cast<int>(index), shapes[taken[0]]);
      if (block.has_value()) {
        auto layer = std::make_unique<ResidualBlock>(block->name, block->options);
        absl::StatusOr<Shape> out = layer->Build(shapes[taken[0]]);
        if (out.ok()) {  // else the plain layers say what does not fit
          layers.push_back(std::move(layer));
          inputs.push_back(taken);
          shapes.push_back(*out);
          activation_of[spec.layers[block->last].name] = static_cast<int>(shapes.size()) - 1;
          index = block->last;
          continue;
        }
      }
    }
    const size_t first = layers.size();
    if (!AppendLayers(l, &layers)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": layer ", l.name, " has type ",
                                                     l.type, " or activation ", l.activation,
                                                     ", which this build cannot make"));
    }
    for (size_t i = first; i < layers.size(); ++i) {
      // A fused activation's layer takes what its layer gave.
      std::vector<int> in =
          i == first ? taken : std::vector<int>{static_cast<int>(shapes.size()) - 1};
      std::vector<Shape> in_shapes;
      for (int a : in) in_shapes.push_back(shapes[a]);
      absl::StatusOr<Shape> out = BuildLayer(layers[i].get(), in_shapes);
      if (!out.ok()) {
        std::vector<std::string> got;
        for (const Shape& shape : in_shapes) got.push_back(ShapeToString(shape));
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": layer ", l.name, " (", l.type, ", line ", l.line, ") cannot take its input",
            got.size() > 1 ? "s " : " ", absl::StrJoin(got, ", "), ": ", out.status().message()));
      }
      shapes.push_back(*out);
      inputs.push_back(std::move(in));
    }
    activation_of[l.name] = static_cast<int>(shapes.size()) - 1;
  }
  InputPreprocessing input;
  input.crop_padding = spec.crop_padding;
  input.random_flip = spec.random_flip;
  input.per_image_standardization = spec.per_image_standardization;
  if (multi) {
    std::vector<ModelHead> heads;
    for (const HeadSpec& h : spec.heads) {
      ModelHead head;
      head.name = h.name;
      head.label = h.label;
      head.kind = h.kind == "binary"       ? Head::kBinary
                  : h.kind == "regression" ? Head::kRegression
                                           : Head::kSoftmax;
      head.num_classes = h.classes;
      head.weight = h.weight;
      head.regression.loss = h.loss == "mae"     ? RegressionLoss::kMae
                             : h.loss == "huber" ? RegressionLoss::kHuber
                                                 : RegressionLoss::kMse;
      head.regression.huber_delta = h.huber_delta;
      auto it = activation_of.find(h.input);
      if (it == activation_of.end() || it->second == 0) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": head ", h.name, " (line ", h.line,
                                                       ") takes ", h.input,
                                                       ", which is no layer's name"));
      }
      head.activation = it->second;
      const Shape want{head.num_logits()};
      if (shapes[head.activation] != want) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": head ", h.name, " (", h.kind, ", line ", h.line, ") takes layer ", h.input,
            ", which gives ", ShapeToString(shapes[head.activation]), "; a ", h.kind,
            " head takes ", ShapeToString(want),
            ": give it a layer dense: {units: ", head.num_logits(), "}"));
      }
      heads.push_back(std::move(head));
    }
    absl::StatusOr<std::unique_ptr<Model>> model = Model::CreateWithHeads(
        spec.name.empty() ? "model" : spec.name, Shape(spec.input.begin(), spec.input.end()),
        std::move(heads), std::move(layers), std::move(inputs));
    if (!model.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", model.status().message()));
    }
    (*model)->set_input_preprocessing(input);
    return model;
  }
  const Shape& shape = shapes.back();
  if ((binary || regression) && shape != Shape{1}) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the last layer (", spec.layers.back().name, ", line ", spec.layers.back().line,
        ") gives ", ShapeToString(shape), ", but with head: ", spec.head,
        " the last layer gives one ", binary ? "logit" : "value", ": end with dense: {units: 1}"));
  }
  if (softmax && shape != Shape{spec.classes}) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the last layer (", spec.layers.back().name, ") gives ", ShapeToString(shape),
        " but the model has classes: ", spec.classes,
        "; end with a flat layer of that many outputs (dense: {units: ", spec.classes, "})"));
  }
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(
      spec.name.empty() ? "model" : spec.name, Shape(spec.input.begin(), spec.input.end()),
      spec.classes, std::move(layers), std::move(inputs),
      binary ? Head::kBinary : (regression ? Head::kRegression : Head::kSoftmax), regression_loss);
  if (!model.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", model.status().message()));
  }
  (*model)->set_input_preprocessing(input);
  return model;
}

}  // namespace pstrain
