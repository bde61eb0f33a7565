#ifndef PSTRAIN_MODELS_FLATTEN_H_
#define PSTRAIN_MODELS_FLATTEN_H_

#include <cstring>

#include "models/layer.h"

namespace pstrain {

// [batch, d1, d2, ...] -> [batch, d1 * d2 * ...], in NHWC order (as
// tf.layers.flatten and the tutorials' reshape to [-1, 7 * 7 * 64]).
class Flatten : public Layer {
 public:
  explicit Flatten(std::string name) : Layer(std::move(name)) {}

  absl::StatusOr<Shape> Build(const Shape& input) override { return Shape{NumElements(input)}; }

  void Forward(const Tensor& in, Tensor* out, const ForwardArgs&) override {
    out->Resize({in.dim(0), in.size() / in.dim(0)});
    std::memcpy(out->data(), in.data(), in.size() * sizeof(float));
  }

  void Backward(const Tensor& in, const Tensor&, const Tensor& dout, Tensor* din,
                const BackwardArgs&) override {
    if (din == nullptr) return;
    din->Resize(in.shape());
    std::memcpy(din->data(), dout.data(), dout.size() * sizeof(float));
  }
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_FLATTEN_H_
