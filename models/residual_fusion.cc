#include "models/residual_fusion.h"

#include <algorithm>

#include "models/spec_builder.h"

namespace pstrain {
namespace {

// A 3x3 convolution ResidualBlock's sublayers compute.
bool IsBlockConv(const LayerSpec& l) {
  return l.type == "conv2d" && l.kernel == 3 && !l.use_bias && l.activation == "none" &&
         (l.padding == "same" || l.padding == "fixed");
}

// The longest "<block>" such that every name is "<block>/<rest>", or "".
std::string CommonPrefix(const std::vector<const std::string*>& names) {
  const std::string& first = *names[0];
  for (size_t slash = first.rfind('/'); slash != std::string::npos && slash > 0;
       slash = first.rfind('/', slash - 1)) {
    const std::string prefix = first.substr(0, slash + 1);  // with its '/'
    bool all = true;
    for (const std::string* name : names) {
      all = all && name->size() > prefix.size() && name->compare(0, prefix.size(), prefix) == 0;
    }
    if (all) return first.substr(0, slash);
  }
  return "";
}

}  // namespace

ResidualFusionMatcher::ResidualFusionMatcher(const ModelSpec& spec)
    : spec_(spec), uses_(spec.layers.size(), 0) {
  for (size_t i = 0; i < spec.layers.size(); ++i) index_[spec.layers[i].name] = static_cast<int>(i);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    for (int t : Taken(static_cast<int>(i))) {
      if (t >= 0) ++uses_[t];
    }
  }
}

std::vector<int> ResidualFusionMatcher::Taken(int i) const {
  const LayerSpec& l = spec_.layers[i];
  std::vector<std::string> names = l.inputs;
  names.insert(names.begin(), l.input);
  std::vector<int> taken;
  for (const std::string& name : names) {
    if (name.empty()) {
      taken.push_back(i - 1);  // -1 for the first layer: the model's input
    } else if (name == "input") {
      taken.push_back(-1);
    } else {
      auto it = index_.find(name);
      taken.push_back(it == index_.end() || it->second >= i ? -2 : it->second);
    }
  }
  return taken;
}

std::optional<ResidualFusion> ResidualFusionMatcher::Match(int first, const Shape& input) const {
  const std::vector<LayerSpec>& layers = spec_.layers;
  const int n = static_cast<int>(layers.size());
  // Where each layer of the pattern would be.
  int pool = -1, pad = -1, conv1 = first;
  if (first < n && layers[first].type == "average_pool") {
    pool = first;
    pad = first + 1;
    conv1 = first + 2;
  }
  const int bn1 = conv1 + 1, conv2 = conv1 + 2, bn2 = conv1 + 3;
  int next = conv1 + 4;
  if (pool < 0 && next < n && layers[next].type == "average_pool") {
    pool = next;
    pad = next + 1;
    next += 2;
  }
  const int add = next, relu = next + 1;
  if (relu >= n) return std::nullopt;
  const bool option_a = pool >= 0;
  const auto takes = [&](int layer, std::vector<int> want) {
    std::vector<int> got = Taken(layer);
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    return got == want;
  };
  const auto only_taken_by_the_next = [&](int layer) { return uses_[layer] == 1; };

  const LayerSpec& c1 = layers[conv1];
  if (!IsBlockConv(c1) || Taken(conv1).size() != 1) return std::nullopt;
  const int x = Taken(conv1)[0];  // the block's input
  if (x < -1) return std::nullopt;
  const int filters = c1.filters;
  const int stride = c1.strides;
  const LayerSpec &b1 = layers[bn1], &c2 = layers[conv2], &b2 = layers[bn2];
  if (b1.type != "batch_norm" || !b1.relu || !takes(bn1, {conv1}) ||
      !only_taken_by_the_next(conv1)) {
    return std::nullopt;
  }
  if (!IsBlockConv(c2) || c2.strides != 1 || c2.filters != filters || !takes(conv2, {bn1}) ||
      !only_taken_by_the_next(bn1)) {
    return std::nullopt;
  }
  if (b2.type != "batch_norm" || b2.relu || !takes(bn2, {conv2}) ||
      !only_taken_by_the_next(conv2) || !only_taken_by_the_next(bn2)) {
    return std::nullopt;
  }
  // The shortcut, and that the block's shapes fit it (ResidualBlock::Build
  // checks them again).
  if (input.size() != 3) return std::nullopt;
  int shortcut = x;
  if (option_a) {
    const LayerSpec &p = layers[pool], &z = layers[pad];
    if (p.type != "average_pool" || p.pool != stride || p.strides != stride || !takes(pool, {x}) ||
        !only_taken_by_the_next(pool)) {
      return std::nullopt;
    }
    if (z.type != "pad_channels" || z.filters != filters || !takes(pad, {pool}) ||
        !only_taken_by_the_next(pad)) {
      return std::nullopt;
    }
    if (input[0] % stride != 0 || input[1] % stride != 0 || filters < input[2] ||
        (filters - input[2]) % 2 != 0) {
      return std::nullopt;
    }
    shortcut = pad;
  } else if (stride != 1 || input[2] != filters) {
    return std::nullopt;
  }
  if (layers[add].type != "add" || !takes(add, {bn2, shortcut}) || !only_taken_by_the_next(add)) {
    return std::nullopt;
  }
  if (layers[relu].type != "relu" || !takes(relu, {add})) return std::nullopt;

  const std::string block = CommonPrefix({&c1.name, &b1.name, &c2.name, &b2.name});
  if (block.empty()) return std::nullopt;
  const auto relative = [&](const std::string& name) { return name.substr(block.size() + 1); };
  ResidualFusion fusion;
  fusion.first = first;
  fusion.last = relu;
  fusion.name = block;
  ResidualBlockOptions& o = fusion.options;
  o.filters = filters;
  o.stride = stride;
  o.conv1_padding = SpecPadding(c1);
  o.conv2_padding = SpecPadding(c2);
  o.conv1_initializer = SpecInitializer(c1.kernel_initializer);
  o.conv2_initializer = SpecInitializer(c2.kernel_initializer);
  o.bn1_epsilon = b1.epsilon;
  o.bn2_epsilon = b2.epsilon;
  o.conv1_name = relative(c1.name);
  o.bn1_name = relative(b1.name);
  o.conv2_name = relative(c2.name);
  o.bn2_name = relative(b2.name);
  o.bn1_decay = b1.momentum;
  o.bn2_decay = b2.momentum;
  o.conv1_frozen = !c1.trainable;
  o.bn1_frozen = !b1.trainable;
  o.conv2_frozen = !c2.trainable;
  o.bn2_frozen = !b2.trainable;
  return fusion;
}

}  // namespace pstrain
