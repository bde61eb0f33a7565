#ifndef PSTRAIN_MODELS_CONV2D_H_
#define PSTRAIN_MODELS_CONV2D_H_

#include <vector>

#include "models/layer.h"
#include "tbb/enumerable_thread_specific.h"

namespace pstrain {

// TensorFlow's "SAME" and "VALID"; kFixed pads (kernel - 1) / 2 before and the
// rest after whatever the stride, as the TF models' fixed_padding + "VALID"
// (the CIFAR-10 estimator's strided convolutions).
enum class Padding { kSame, kValid, kFixed };
enum class Activation { kNone, kRelu };

struct Conv2DOptions {
  int filters = 0;
  int kernel_size = 3;  // Square kernels.
  int stride = 1;
  Padding padding = Padding::kSame;
  Activation activation = Activation::kNone;  // Fused into the layer's passes.
  bool use_bias = true;
  InitializerSpec kernel_initializer = Initializer::kGlorotUniform;
  InitializerSpec bias_initializer = Initializer::kZeros;
};

// 2-D convolution over NHWC inputs with an HWIO kernel ("kernel", "bias"), as
// tf.layers.conv2d. Computed as im2col + GEMM on chunks of examples: each task
// unfolds a few examples into a per-thread buffer and multiplies it by the
// kernel, so the unfolded matrix never exists for the whole batch.
class Conv2D : public Layer {
 public:
  Conv2D(std::string name, const Conv2DOptions& options);

  absl::StatusOr<Shape> Build(const Shape& input) override;
  std::vector<VariableSpec> Variables() const override;
  int64_t ForwardMultiplyAdds() const override { return out_h_ * out_w_ * k_ * options_.filters; }
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  using Buffer = std::vector<float, Eigen::aligned_allocator<float>>;

  // Unfolds example `in` (H x W x Cin) into `col` ((Ho*Wo) x K), K = k*k*Cin in
  // the kernel's HWI order, with zeros where the window leaves the image.
  void Im2Col(const float* in, float* col) const;
  // The adjoint: adds `col` back into `in` (which the caller zeroed).
  void Col2Im(const float* col, float* in) const;
  int64_t ExamplesPerChunk() const;

  // Stride 1, odd square kernel, output the input's size: the direct kernels
  // (models/direct_conv.h) compute the forward pass and the kernel gradient,
  // and the input gradient when the input channels suit them too.
  bool direct_forward_ = false;
  bool direct_backward_ = false;
  // `in` with its zero border into padded_ (remembering whose it is).
  void PadInput(const Tensor& in);
  // The backward pass with the direct kernels: the fused ReLU's mask and
  // the bias gradient first, then the kernel and input gradients.
  void DirectBackward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                      const BackwardArgs& args);
  void DirectInputGradient(const float* dout, int64_t batch, const float* kernel, Tensor* din);
  // The last forward input with its zero border (reused by the backward pass
  // for the padded output gradient once the kernel gradient is done),
  Buffer padded_;
  const float* padded_from_ = nullptr;  // padded from this tensor data
  int64_t padded_batch_ = 0;            // of this many examples.
  Buffer flipped_;                      // The adjoint's kernel.
  std::vector<float> grad_scratch_;     // Per-group kernel gradients.
  Buffer dz_;                           // d(out) through the ReLU's mask.
  std::vector<float> bias_partial_;     // Per-piece bias gradients.

  Conv2DOptions options_;
  int64_t in_h_ = 0, in_w_ = 0, in_c_ = 0;
  int64_t out_h_ = 0, out_w_ = 0;
  int64_t pad_top_ = 0, pad_left_ = 0;
  int64_t k_ = 0;  // Rows of the kernel matrix: kernel_size^2 * in_c_.

  tbb::enumerable_thread_specific<Buffer> col_scratch_;
  tbb::enumerable_thread_specific<Buffer> dz_scratch_;
  Buffer chunk_grads_;  // Per-chunk kernel+bias gradients, summed in order.
};

// Output size and leading padding of one spatial dimension, as TensorFlow
// computes them.
struct PaddedDim {
  int64_t out = 0;
  int64_t pad_before = 0;
};
PaddedDim ComputePadding(int64_t in, int64_t kernel, int64_t stride, Padding padding);

// Where a square `pool`-sized window moved by `stride` goes over an HWC input
// (max and average pooling).
struct PoolGeometry {
  int64_t in_h = 0, in_w = 0, c = 0, out_h = 0, out_w = 0, pad_top = 0, pad_left = 0;
};
// InvalidArgument naming `layer` and its `kind` ("MaxPool2D") for an input
// that is not HWC, a size that is not positive or a window that does not fit.
absl::StatusOr<PoolGeometry> ComputePoolGeometry(const std::string& layer, const char* kind,
                                                 const Shape& input, int pool, int stride,
                                                 Padding padding);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_CONV2D_H_
