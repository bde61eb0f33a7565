#ifndef PSTRAIN_MODELS_TENSOR_H_
#define PSTRAIN_MODELS_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Core"

namespace pstrain {

// Dimensions, outermost first. Images are NHWC (TensorFlow's default layout),
// so a flattened example matches TensorFlow's reshape of the same model.
using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);

// A dense float32 tensor with 64-byte aligned storage. Resize() reuses the
// buffer when it is large enough, so a model's workspace allocates only when a
// batch grows. Not thread-safe; value semantics.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape) { Resize(std::move(shape)); }

  // Contents are unspecified after a resize that grows the buffer.
  void Resize(Shape shape);
  void SetZero();

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t size() const { return size_; }
  float* data() { return buffer_.data(); }
  const float* data() const { return buffer_.data(); }
  float& operator[](int64_t i) { return buffer_[i]; }
  float operator[](int64_t i) const { return buffer_[i]; }

 private:
  Shape shape_;
  int64_t size_ = 0;
  std::vector<float, Eigen::aligned_allocator<float>> buffer_;
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_TENSOR_H_
