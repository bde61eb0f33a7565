#ifndef PSTRAIN_MODELS_SEQUENCE_POOL_H_
#define PSTRAIN_MODELS_SEQUENCE_POOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "models/layer.h"

namespace pstrain {

enum class SequencePoolMode { kMean, kMax, kSum, kLast };

// A sequence [L, d] pooled over its valid positions into [d] (Keras'
// GlobalAveragePooling1D / GlobalMaxPooling1D with a mask): their mean, max
// or sum, or the last one. Padding (ForwardArgs::lengths) takes no part; an
// example with no valid position gives zeros. A sequence without a mask has
// all L valid.
class SequencePool : public Layer {
 public:
  SequencePool(std::string name, SequencePoolMode mode) : Layer(std::move(name)), mode_(mode) {}

  absl::StatusOr<Shape> Build(const Shape& input) override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  const SequencePoolMode mode_;
  int64_t length_ = 0;
  int64_t dim_ = 0;
  std::vector<int32_t> valid_;   // per example, last forward pass
  std::vector<int32_t> argmax_;  // kMax: per example and channel, the position taken
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_SEQUENCE_POOL_H_
