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
// backward pass with its two gradient buffers.

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "config/model_spec.h"
#include "models/model.h"

namespace pstrain {

// `source` (the spec's file name) begins every message.
absl::StatusOr<std::unique_ptr<Model>> BuildModelFromSpec(const ModelSpec& spec,
                                                          std::string_view source);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_SPEC_BUILDER_H_
