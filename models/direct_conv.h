#ifndef PSTRAIN_MODELS_DIRECT_CONV_H_
#define PSTRAIN_MODELS_DIRECT_CONV_H_

#include <cstdint>
#include <vector>

namespace pstrain {

// Direct (no im2col) stride-1 convolution over NHWC inputs with vectorized
// micro-kernels: each task computes a run of output pixels times up to 64
// output channels in registers, reading the input once per kernel tap. Used
// by Conv2D for stride-1 convolutions whose output channels are a multiple
// of 16, on builds with AVX-512 or AVX2 with FMA (each with its own register
// blocks).

// Whether the kernels exist in this build (AVX-512F, or AVX2 and FMA) and
// take `out_channels`.
bool DirectConvSupported(int64_t out_channels);

// Copies `in` (batch x h x w x c) into `out` (batch x out_h x out_w x c) at
// offset (top, left), zeros elsewhere.
void PadNhwc(const float* in, int64_t batch, int64_t h, int64_t w, int64_t c, int64_t top,
             int64_t left, int64_t out_h, int64_t out_w, float* out);

// out[n, y, x, :] = sum over i, j < k and ci of
//   padded[n, y + i, x + j, ci] * kernel[i, j, ci, :]
// `padded` is batch x (out_h + k - 1) x (out_w + k - 1) x cin; `kernel` is
// HWIO (k x k x cin x cout); `out` is batch x out_h x out_w x cout and is
// overwritten. Each output element is written by one task in a fixed order,
// so results do not depend on the number of threads. Requires
// DirectConvSupported(cout).
void DirectConvStride1(const float* padded, int64_t batch, int64_t out_h, int64_t out_w,
                       int64_t cin, const float* kernel, int64_t k, int64_t cout, float* out);

// The kernel gradient of that convolution (HWIO, overwritten):
//   grad[i, j, ci, co] = sum over n, y, x of
//     padded[n, y + i, x + j, ci] * dout[n, y, x, co]
// Examples are taken in fixed groups whose partial sums are added in order,
// so the result does not depend on the number of threads. `scratch` is
// resized as needed. Requires DirectConvSupported(cout).
void DirectConvKernelGradStride1(const float* padded, int64_t batch, int64_t out_h, int64_t out_w,
                                 int64_t cin, const float* dout, int64_t k, int64_t cout,
                                 std::vector<float>* scratch, float* grad);

// The kernel of the adjoint convolution: flipped spatially, input and output
// channels swapped: out[i, j, co, ci] = kernel[k-1-i, k-1-j, ci, co].
void FlipKernel(const float* kernel, int64_t k, int64_t cin, int64_t cout, float* out);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_DIRECT_CONV_H_
