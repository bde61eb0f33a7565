#ifndef PSTRAIN_MODELS_RESIDUAL_BLOCK_H_
#define PSTRAIN_MODELS_RESIDUAL_BLOCK_H_

#include <string>
#include <vector>

#include "models/batch_norm.h"
#include "models/conv2d.h"
#include "models/layer.h"

namespace pstrain {

// The CIFAR-10 estimator's residual block (ResNet v1, He et al. 2015):
//   out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))
// conv1 is 3x3 with `stride` (the estimator's: fixed padding when strided),
// conv2 3x3 stride 1, neither with a bias. When the block strides or changes
// the filter count, the shortcut is "option A": a stride x stride average pool,
// then zero channels padded evenly on both sides (no parameters); otherwise
// the identity.
// Variables, in this order: conv1/kernel, bn1/{gamma,beta,moving_mean,
// moving_variance}, conv2/kernel, bn2/{...}, the sublayers' names as
// ResidualBlockOptions gives them. The same variables in the same order as the
// four layers conv2d, batch_norm(relu), conv2d, batch_norm of a model spec, so
// the spec builder can fuse those (models/residual_fusion.h).
struct ResidualBlockOptions {
  int filters = 0;
  int stride = 1;  // conv1's
  // conv1's: kSame, or kFixed (the estimator's strided convolutions; the same
  // as kSame at stride 1). conv2 is stride 1, where kSame and kFixed agree.
  Padding conv1_padding = Padding::kSame;
  Padding conv2_padding = Padding::kSame;
  InitializerSpec conv1_initializer = Initializer::kGlorotUniform;  // tf.layers' default
  InitializerSpec conv2_initializer = Initializer::kGlorotUniform;
  float bn1_epsilon = 1e-3f;
  float bn2_epsilon = 1e-3f;
  // The batch norms' moving-average decay (their momentum); < 0: the job's
  // batch_norm_decay. And which sublayers' trainable variables are frozen
  // (a spec's `trainable: false`). As Layer::set_state_decay / set_frozen on
  // the layers written out.
  float bn1_decay = -1.0f;
  float bn2_decay = -1.0f;
  bool conv1_frozen = false;
  bool bn1_frozen = false;
  bool conv2_frozen = false;
  bool bn2_frozen = false;
  // The sublayers' names, relative to the block's: variables are
  // "<block>/<conv1_name>/kernel", ...
  std::string conv1_name = "conv1";
  std::string bn1_name = "bn1";
  std::string conv2_name = "conv2";
  std::string bn2_name = "bn2";
};

class ResidualBlock : public Layer {
 public:
  ResidualBlock(std::string name, const ResidualBlockOptions& options);
  // The CIFAR-10 estimator's block: sublayers conv1, bn1, conv2, bn2, fixed
  // padding when strided, glorot_uniform kernels, one epsilon.
  ResidualBlock(std::string name, int filters, int stride, float bn_epsilon);

  absl::StatusOr<Shape> Build(const Shape& input) override;
  std::vector<VariableSpec> Variables() const override;
  int64_t ForwardMultiplyAdds() const override {
    return conv1_.ForwardMultiplyAdds() + conv2_.ForwardMultiplyAdds();
  }
  void BindOffsets(std::vector<int64_t> offsets) override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  // The sublayers in order, with how many variables each declares.
  std::vector<Layer*> Sublayers();

  const int filters_;
  const int stride_;
  int64_t in_h_ = 0, in_w_ = 0, in_c_ = 0, out_h_ = 0, out_w_ = 0;
  int64_t channel_pad_ = 0;  // zero channels before the input's (option A)
  bool identity_ = true;

  Conv2D conv1_, conv2_;
  BatchNorm bn1_, bn2_;
  // Activations of the last forward pass, for the backward pass (bn1's
  // output is after its fused ReLU).
  Tensor conv1_out_, bn1_out_, conv2_out_, bn2_out_;
  // Backward scratch.
  Tensor dsum_, d_conv2_out_, d_bn1_out_, d_conv1_out_;
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_RESIDUAL_BLOCK_H_
