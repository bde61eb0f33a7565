#ifndef PSTRAIN_MODELS_DENSE_H_
#define PSTRAIN_MODELS_DENSE_H_

#include "models/conv2d.h"
#include "models/layer.h"

namespace pstrain {

struct DenseOptions {
  int units = 0;
  Activation activation = Activation::kNone;  // Fused into the layer's passes.
  bool use_bias = true;
  InitializerSpec kernel_initializer = Initializer::kGlorotUniform;
  InitializerSpec bias_initializer = Initializer::kZeros;
};

// Fully connected layer on [batch, features] inputs with a [features, units]
// "kernel" and "bias", as tf.layers.dense. On a sequence [L, ..., features]
// it acts on the last dimension, each position alike (Keras' Dense on rank 3):
// [L, ..., units]. Each product is one GEMM over every row of the batch,
// split over the oneTBB pool by output blocks.
class Dense : public Layer {
 public:
  Dense(std::string name, const DenseOptions& options);

  absl::StatusOr<Shape> Build(const Shape& input) override;
  std::vector<VariableSpec> Variables() const override;
  int64_t ForwardMultiplyAdds() const override { return rows_ * in_features_ * options_.units; }
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  DenseOptions options_;
  int64_t in_features_ = 0;
  int64_t rows_ = 1;  // per example: the product of the dimensions before the last
  Tensor dz_;         // dL/d(pre-activation) when an activation is fused.
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_DENSE_H_
