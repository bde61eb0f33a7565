#ifndef PSTRAIN_MODELS_SLICE_H_
#define PSTRAIN_MODELS_SLICE_H_

#include <string>

#include "models/layer.h"

namespace pstrain {

// The features [begin, begin + size) of a flat input [d]: [size] (a task's
// part of an mmoe's output, models/mmoe.h). No variables; the input's
// gradient is the output's there and zero elsewhere.
class Slice : public Layer {
 public:
  Slice(std::string name, int begin, int size)
      : Layer(std::move(name)), begin_(begin), size_(size) {}

  // InvalidArgument naming the layer, begin and size for an input that is
  // not flat or a range that is not inside it.
  absl::StatusOr<Shape> Build(const Shape& input) override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  const int begin_;
  const int size_;
  int64_t in_features_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_SLICE_H_
