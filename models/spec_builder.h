#ifndef PSTRAIN_MODELS_SPEC_BUILDER_H_
#define PSTRAIN_MODELS_SPEC_BUILDER_H_

// Builds a Model from a model spec (config/model_spec.h): each spec layer
// becomes the layer that computes it, named as the spec names it, so the
// variables are "<layer name>/<variable>" in the spec's order. A conv2d or
// dense with activation relu gets the ReLU fused into its passes (the fast
// path comes from the option, not from a model's name); sigmoid, tanh and
// leaky_relu follow it as a layer of their own ("<name>/activation", no
// variables). Shapes are checked here, layer by layer: an error names the
// layer, its line in the spec, the input shape it got and what it needs.
// Layers that take other layers' outputs (input, add, concat) make the
// model a graph (Model::Create's inputs); a chain of layers keeps the chain's
// backward pass with its two gradient buffers. A residual block written out
// layer by layer (conv2d, batch_norm + relu, conv2d, batch_norm, add the
// shortcut, relu; models/residual_fusion.h says exactly which) becomes one
// ResidualBlock, the fast path, with the same variables in the same order;
// the choice comes from the layers' types, options, connections and shapes.

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "config/model_spec.h"
#include "models/conv2d.h"
#include "models/layer.h"
#include "models/model.h"

namespace pstrain {

// Keras' default batch-norm momentum (tf.keras.layers.BatchNormalization).
inline constexpr float kKerasBatchNormMomentum = 0.99f;

struct SpecBuildOptions {
  // Residual blocks become ResidualBlock layers. Off, every spec layer is
  // built as itself: for tests that compare the two.
  bool fuse_residual_blocks = true;
  // The moving-average decay of a batch_norm without its own momentum (or
  // with momentum: job): Keras' default, or the job's batch_norm_decay where
  // the job sets one (BuildJobModel). Built layers always have a decay.
  float batch_norm_momentum = kKerasBatchNormMomentum;
};

// `source` (the spec's file name) begins every message.
absl::StatusOr<std::unique_ptr<Model>> BuildModelFromSpec(const ModelSpec& spec,
                                                          std::string_view source,
                                                          const SpecBuildOptions& options = {});

// What a spec's settings are as layer options: padding (same, valid, fixed)
// and an initializer.
Padding SpecPadding(const LayerSpec& layer);
InitializerSpec SpecInitializer(const InitializerSetting& setting);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_SPEC_BUILDER_H_
