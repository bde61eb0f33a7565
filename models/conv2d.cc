#include "models/conv2d.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "models/direct_conv.h"
#include "models/gemm.h"
#include "models/parallel.h"
#include "tbb/blocked_range.h"
#include "tbb/parallel_for.h"

namespace pstrain {
namespace {

// Rows of the unfolded matrix per task: enough for an efficient GEMM, small
// enough that the unfolded chunk stays near the caches and the batch splits
// into several tasks.
constexpr int64_t kTargetChunkRows = 1024;

Eigen::Map<Eigen::ArrayXf> ArrayMap(float* p, int64_t n) { return {p, n}; }
Eigen::Map<const Eigen::ArrayXf> ArrayMap(const float* p, int64_t n) { return {p, n}; }

}  // namespace

PaddedDim ComputePadding(int64_t in, int64_t kernel, int64_t stride, Padding padding) {
  PaddedDim d;
  if (padding == Padding::kSame) {
    d.out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((d.out - 1) * stride + kernel - in, 0);
    d.pad_before = total / 2;
  } else if (padding == Padding::kFixed) {
    const int64_t padded = in + kernel - 1;
    d.out = padded >= kernel ? (padded - kernel) / stride + 1 : 0;
    d.pad_before = (kernel - 1) / 2;
  } else {
    d.out = in >= kernel ? (in - kernel) / stride + 1 : 0;
    d.pad_before = 0;
  }
  return d;
}

absl::StatusOr<PoolGeometry> ComputePoolGeometry(const std::string& layer, const char* kind,
                                                 const Shape& input, int pool, int stride,
                                                 Padding padding) {
  if (input.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        layer, ": ", kind, " needs height x width x channels inputs, got ", ShapeToString(input)));
  }
  if (pool <= 0 || stride <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(layer, ": pool size and stride must be positive"));
  }
  PoolGeometry g;
  g.in_h = input[0];
  g.in_w = input[1];
  g.c = input[2];
  const PaddedDim h = ComputePadding(g.in_h, pool, stride, padding);
  const PaddedDim w = ComputePadding(g.in_w, pool, stride, padding);
  if (h.out <= 0 || w.out <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(layer, ": pool ", pool, " does not fit in ", ShapeToString(input)));
  }
  g.out_h = h.out;
  g.out_w = w.out;
  g.pad_top = h.pad_before;
  g.pad_left = w.pad_before;
  return g;
}

Conv2D::Conv2D(std::string name, const Conv2DOptions& options)
    : Layer(std::move(name)), options_(options) {}

absl::StatusOr<Shape> Conv2D::Build(const Shape& input) {
  if (input.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": Conv2D needs height x width x channels inputs, got ", ShapeToString(input)));
  }
  if (options_.filters <= 0 || options_.kernel_size <= 0 || options_.stride <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": filters, kernel_size and stride must be positive, got ",
                     options_.filters, ", ", options_.kernel_size, ", ", options_.stride));
  }
  in_h_ = input[0];
  in_w_ = input[1];
  in_c_ = input[2];
  PaddedDim h = ComputePadding(in_h_, options_.kernel_size, options_.stride, options_.padding);
  PaddedDim w = ComputePadding(in_w_, options_.kernel_size, options_.stride, options_.padding);
  if (h.out <= 0 || w.out <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": a ", options_.kernel_size, "x",
                                                   options_.kernel_size, " kernel does not fit in ",
                                                   ShapeToString(input), " with valid padding"));
  }
  out_h_ = h.out;
  out_w_ = w.out;
  pad_top_ = h.pad_before;
  pad_left_ = w.pad_before;
  k_ = int64_t{options_.kernel_size} * options_.kernel_size * in_c_;
  const int64_t half = (options_.kernel_size - 1) / 2;
  direct_forward_ = options_.stride == 1 && options_.kernel_size % 2 == 1 && out_h_ == in_h_ &&
                    out_w_ == in_w_ && pad_top_ == half && pad_left_ == half &&
                    DirectConvSupported(options_.filters);
  direct_backward_ = direct_forward_ && DirectConvSupported(in_c_);
  return Shape{out_h_, out_w_, options_.filters};
}

std::vector<VariableSpec> Conv2D::Variables() const {
  const int64_t ks = options_.kernel_size;
  std::vector<VariableSpec> vars;
  vars.push_back({"kernel",
                  {ks, ks, in_c_, options_.filters},
                  true,
                  options_.kernel_initializer,
                  k_,
                  ks * ks * options_.filters});
  if (options_.use_bias)
    vars.push_back({"bias", {options_.filters}, true, options_.bias_initializer});
  return vars;
}

int64_t Conv2D::ExamplesPerChunk() const {
  return std::max<int64_t>(1, kTargetChunkRows / (out_h_ * out_w_));
}

void Conv2D::Im2Col(const float* in, float* col) const {
  const int64_t ks = options_.kernel_size;
  const int64_t s = options_.stride;
  const int64_t span = ks * in_c_;  // One kernel row: contiguous in NHWC.
  for (int64_t oh = 0; oh < out_h_; ++oh) {
    for (int64_t ow = 0; ow < out_w_; ++ow) {
      float* row = col + (oh * out_w_ + ow) * k_;
      const int64_t iw0 = ow * s - pad_left_;
      const int64_t j_lo = std::max<int64_t>(0, -iw0);
      const int64_t j_hi = std::min<int64_t>(ks, in_w_ - iw0);
      for (int64_t i = 0; i < ks; ++i) {
        float* dst = row + i * span;
        const int64_t ih = oh * s - pad_top_ + i;
        if (ih < 0 || ih >= in_h_ || j_lo >= j_hi) {
          std::memset(dst, 0, span * sizeof(float));
          continue;
        }
        if (j_lo > 0) std::memset(dst, 0, j_lo * in_c_ * sizeof(float));
        std::memcpy(dst + j_lo * in_c_, in + (ih * in_w_ + iw0 + j_lo) * in_c_,
                    (j_hi - j_lo) * in_c_ * sizeof(float));
        if (j_hi < ks) std::memset(dst + j_hi * in_c_, 0, (ks - j_hi) * in_c_ * sizeof(float));
      }
    }
  }
}

void Conv2D::Col2Im(const float* col, float* in) const {
  const int64_t ks = options_.kernel_size;
  const int64_t s = options_.stride;
  const int64_t span = ks * in_c_;
  for (int64_t oh = 0; oh < out_h_; ++oh) {
    for (int64_t ow = 0; ow < out_w_; ++ow) {
      const float* row = col + (oh * out_w_ + ow) * k_;
      const int64_t iw0 = ow * s - pad_left_;
      const int64_t j_lo = std::max<int64_t>(0, -iw0);
      const int64_t j_hi = std::min<int64_t>(ks, in_w_ - iw0);
      if (j_lo >= j_hi) continue;
      const int64_t n = (j_hi - j_lo) * in_c_;
      for (int64_t i = 0; i < ks; ++i) {
        const int64_t ih = oh * s - pad_top_ + i;
        if (ih < 0 || ih >= in_h_) continue;
        ArrayMap(in + (ih * in_w_ + iw0 + j_lo) * in_c_, n) +=
            ArrayMap(row + i * span + j_lo * in_c_, n);
      }
    }
  }
}

void Conv2D::Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) {
  const int64_t batch = in.dim(0);
  const int64_t cout = options_.filters;
  out->Resize({batch, out_h_, out_w_, cout});
  const float* kernel = args.params + offset(0);
  const float* bias = options_.use_bias ? args.params + offset(1) : nullptr;
  const int64_t pixels = out_h_ * out_w_;
  const int64_t in_size = in_h_ * in_w_ * in_c_;
  const int64_t per_chunk = ExamplesPerChunk();
  const int64_t chunks = (batch + per_chunk - 1) / per_chunk;
  if (direct_forward_) {
    const int64_t ks = options_.kernel_size;
    PadInput(in);
    DirectConvStride1(padded_.data(), batch, out_h_, out_w_, in_c_, kernel, ks, cout, out->data());
    if (bias != nullptr || options_.activation == Activation::kRelu) {
      ParallelFor(batch * pixels, 256, [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          auto v = ArrayMap(out->data() + p * cout, cout);
          if (bias) v += ArrayMap(bias, cout);
          if (options_.activation == Activation::kRelu) v = v.max(0.0f);
        }
      });
    }
    return;
  }
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, chunks, 1),
      [&](const tbb::blocked_range<int64_t>& r) {
        Buffer& col = col_scratch_.local();
        for (int64_t c = r.begin(); c < r.end(); ++c) {
          const int64_t n0 = c * per_chunk;
          const int64_t n = std::min(per_chunk, batch - n0);
          const int64_t rows = n * pixels;
          if (static_cast<int64_t>(col.size()) < rows * k_) col.resize(rows * k_);
          for (int64_t e = 0; e < n; ++e) {
            Im2Col(in.data() + (n0 + e) * in_size, col.data() + e * pixels * k_);
          }
          float* y = out->data() + n0 * pixels * cout;
          Gemm(false, false, rows, cout, k_, col.data(), k_, kernel, cout, false, y, cout);
          for (int64_t p = 0; p < rows; ++p) {
            auto v = ArrayMap(y + p * cout, cout);
            if (bias) v += ArrayMap(bias, cout);
            if (options_.activation == Activation::kRelu) v = v.max(0.0f);
          }
        }
      },
      tbb::simple_partitioner());
}

void Conv2D::Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                      const BackwardArgs& args) {
  const int64_t batch = in.dim(0);
  const int64_t cout = options_.filters;
  const float* kernel = args.params + offset(0);
  const int64_t pixels = out_h_ * out_w_;
  const int64_t in_size = in_h_ * in_w_ * in_c_;
  const int64_t per_chunk = ExamplesPerChunk();
  const int64_t chunks = (batch + per_chunk - 1) / per_chunk;
  if (direct_forward_ && (din == nullptr || direct_backward_)) {
    DirectBackward(in, out, dout, din, args);
    return;
  }
  const int64_t grad_size = k_ * cout + cout;  // Kernel, then bias.
  if (static_cast<int64_t>(chunk_grads_.size()) < chunks * grad_size) {
    chunk_grads_.resize(chunks * grad_size);
  }
  // The direct kernels compute the input gradient after the loop below.
  const bool col2im = din != nullptr;
  if (col2im) {
    din->Resize(in.shape());
    din->SetZero();
  }
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, chunks, 1),
      [&](const tbb::blocked_range<int64_t>& r) {
        Buffer& col = col_scratch_.local();
        Buffer& dz_buf = dz_scratch_.local();
        for (int64_t c = r.begin(); c < r.end(); ++c) {
          const int64_t n0 = c * per_chunk;
          const int64_t n = std::min(per_chunk, batch - n0);
          const int64_t rows = n * pixels;
          const float* dy = dout.data() + n0 * pixels * cout;
          const float* dz = dy;
          if (options_.activation == Activation::kRelu) {
            if (static_cast<int64_t>(dz_buf.size()) < rows * cout) dz_buf.resize(rows * cout);
            const float* y = out.data() + n0 * pixels * cout;
            ArrayMap(dz_buf.data(), rows * cout) =
                (ArrayMap(y, rows * cout) > 0.0f).select(ArrayMap(dy, rows * cout), 0.0f);
            dz = dz_buf.data();
          }
          float* g = chunk_grads_.data() + c * grad_size;
          // Bias gradient: column sums of dz.
          auto db = ArrayMap(g + k_ * cout, cout);
          db.setZero();
          for (int64_t p = 0; p < rows; ++p) db += ArrayMap(dz + p * cout, cout);
          if (static_cast<int64_t>(col.size()) < rows * k_) col.resize(rows * k_);
          for (int64_t e = 0; e < n; ++e) {
            Im2Col(in.data() + (n0 + e) * in_size, col.data() + e * pixels * k_);
          }
          Gemm(true, false, k_, cout, rows, col.data(), k_, dz, cout, false, g, cout);
          if (col2im) {
            // The unfolded input is no longer needed: reuse it for d(col).
            Gemm(false, true, rows, k_, cout, dz, cout, kernel, cout, false, col.data(), k_);
            for (int64_t e = 0; e < n; ++e) {
              Col2Im(col.data() + e * pixels * k_, din->data() + (n0 + e) * in_size);
            }
          }
        }
      },
      tbb::simple_partitioner());
  // Sum the chunks' gradients in chunk order (deterministic), in parallel over
  // elements.
  float* kernel_grad = args.grads + offset(0);
  float* bias_grad = options_.use_bias ? args.grads + offset(1) : nullptr;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, grad_size, 4096),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      const int64_t len = r.end() - r.begin();
                      Eigen::ArrayXf sum = ArrayMap(chunk_grads_.data() + r.begin(), len);
                      for (int64_t c = 1; c < chunks; ++c) {
                        sum += ArrayMap(chunk_grads_.data() + c * grad_size + r.begin(), len);
                      }
                      for (int64_t i = 0; i < len; ++i) {
                        const int64_t idx = r.begin() + i;
                        if (idx < k_ * cout) {
                          kernel_grad[idx] = sum[i];
                        } else if (bias_grad != nullptr) {
                          bias_grad[idx - k_ * cout] = sum[i];
                        }
                      }
                    });
}

void Conv2D::DirectBackward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                            const BackwardArgs& args) {
  const int64_t batch = in.dim(0);
  const int64_t cout = options_.filters;
  const int64_t rows = batch * out_h_ * out_w_;
  const float* dz = dout.data();
  const bool relu = options_.activation == Activation::kRelu;
  if (relu && static_cast<int64_t>(dz_.size()) < rows * cout) dz_.resize(rows * cout);
  // d(z) through the ReLU's mask and, in the same pass, each piece's column
  // sums for the bias gradient, added in piece order (the same for any
  // thread count).
  constexpr int64_t kPiece = 256;
  const int64_t pieces = (rows + kPiece - 1) / kPiece;
  if (options_.use_bias) bias_partial_.assign(pieces * cout, 0.0f);
  if (relu || options_.use_bias) {
    ParallelFor(rows, kPiece, [&](int64_t begin, int64_t end) {
      const int64_t n = (end - begin) * cout;
      const float* piece = dout.data() + begin * cout;
      if (relu) {
        ArrayMap(dz_.data() + begin * cout, n) =
            (ArrayMap(out.data() + begin * cout, n) > 0.0f).select(ArrayMap(piece, n), 0.0f);
        piece = dz_.data() + begin * cout;
      }
      if (options_.use_bias) {
        auto sum = ArrayMap(bias_partial_.data() + (begin / kPiece) * cout, cout);
        for (int64_t p = 0; p < end - begin; ++p) sum += ArrayMap(piece + p * cout, cout);
      }
    });
  }
  if (relu) dz = dz_.data();
  if (options_.use_bias) {
    auto db = ArrayMap(args.grads + offset(1), cout);
    db.setZero();
    for (int64_t p = 0; p < pieces; ++p) db += ArrayMap(bias_partial_.data() + p * cout, cout);
  }
  // Kernel gradient from the padded input the forward pass left in padded_
  // (padded again should another input have passed through since).
  const int64_t ks = options_.kernel_size;
  if (padded_from_ != in.data() || padded_batch_ != batch) PadInput(in);
  DirectConvKernelGradStride1(padded_.data(), batch, out_h_, out_w_, in_c_, dz, ks, cout,
                              &grad_scratch_, args.grads + offset(0));
  if (din != nullptr) DirectInputGradient(dz, batch, args.params + offset(0), din);
}

void Conv2D::PadInput(const Tensor& in) {
  const int64_t batch = in.dim(0);
  const int64_t ks = options_.kernel_size;
  const int64_t ph = in_h_ + ks - 1, pw = in_w_ + ks - 1;
  if (static_cast<int64_t>(padded_.size()) < batch * ph * pw * in_c_) {
    padded_.resize(batch * ph * pw * in_c_);
  }
  PadNhwc(in.data(), batch, in_h_, in_w_, in_c_, pad_top_, pad_left_, ph, pw, padded_.data());
  padded_from_ = in.data();
  padded_batch_ = batch;
}

void Conv2D::DirectInputGradient(const float* dout, int64_t batch, const float* kernel,
                                 Tensor* din) {
  // d(in) is the stride-1 convolution of d(out), padded as the input was,
  // with the flipped, transposed kernel.
  const int64_t cout = options_.filters;
  const int64_t ks = options_.kernel_size;
  const int64_t ph = out_h_ + ks - 1, pw = out_w_ + ks - 1;
  // padded_ is free once the kernel gradient is computed: it takes the
  // padded output gradient (one buffer per layer instead of two).
  if (static_cast<int64_t>(padded_.size()) < batch * ph * pw * cout) {
    padded_.resize(batch * ph * pw * cout);
  }
  padded_from_ = nullptr;
  flipped_.resize(k_ * cout);
  FlipKernel(kernel, ks, in_c_, cout, flipped_.data());
  PadNhwc(dout, batch, out_h_, out_w_, cout, ks - 1 - pad_top_, ks - 1 - pad_left_, ph, pw,
          padded_.data());
  din->Resize({batch, in_h_, in_w_, in_c_});
  DirectConvStride1(padded_.data(), batch, in_h_, in_w_, cout, flipped_.data(), ks, in_c_,
                    din->data());
}

}  // namespace pstrain
