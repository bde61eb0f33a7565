#ifndef PSTRAIN_MODELS_RESIDUAL_FUSION_H_
#define PSTRAIN_MODELS_RESIDUAL_FUSION_H_

// Finds, in a model spec's layer graph, the residual blocks that one
// ResidualBlock (models/residual_block.h) computes faster than the layers
// written out, so the spec builder can build that instead. What is fused is
// decided by the layers' types, options, connections and shapes only, never
// by a model's name. The pattern, on the block input X:
//
//   conv2d(kernel 3, no bias, no activation, padding same or fixed) on X
//   -> batch_norm(relu: true)
//   -> conv2d(kernel 3, strides 1, the same filters, no bias, no activation,
//             padding same or fixed)
//   -> batch_norm(relu: false)
//   -> add(that, shortcut)      with shortcut = X (stride 1, as many channels)
//                               or pad_channels(filters: the same)
//                                  (average_pool(pool = strides = conv1's) on X)
//   -> relu
//
// written as consecutive spec layers in that order (the shortcut's two layers
// right after the second batch_norm or right before the first conv2d), each
// output but the relu's taken by the next layer of the block only, and the
// four layers with variables named "<block>/<something>" with one <block>
// (the model prefixes a layer's variables with its name, so the block's name
// is that common prefix and its sublayers' the rest: the variables keep their
// names, "<conv2d name>/kernel", ..., and their order). Anything else is left
// to the plain layers, which compute the same function (to rounding).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/model_spec.h"
#include "models/residual_block.h"
#include "models/tensor.h"

namespace pstrain {

// A match: spec.layers[first..last] are one block.
struct ResidualFusion {
  int first = 0;
  int last = 0;
  std::string name;  // the block layer's name
  ResidualBlockOptions options;
};

// Holds a reference to `spec`, which must outlive it.
class ResidualFusionMatcher {
 public:
  explicit ResidualFusionMatcher(const ModelSpec& spec);

  // The block beginning at spec.layers[first] whose input, X, has shape
  // `input` (one example), or nullopt when the layers from there are not
  // exactly the pattern above.
  std::optional<ResidualFusion> Match(int first, const Shape& input) const;

 private:
  // The spec layers whose outputs layer i takes, in order (-1: the model's
  // input; -2: a name that is no layer's, which the builder reports).
  std::vector<int> Taken(int i) const;

  const ModelSpec& spec_;
  std::map<std::string, int> index_;  // name -> position
  std::vector<int> uses_;             // per layer: how many times later layers take its output
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_RESIDUAL_FUSION_H_
