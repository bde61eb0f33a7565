#include "models/residual_block.h"

#include "absl/strings/str_cat.h"
#include "models/parallel.h"

namespace pstrain {
namespace {

Conv2DOptions ConvOptions(int filters, int stride, Padding padding,
                          const InitializerSpec& initializer) {
  Conv2DOptions o;
  o.filters = filters;
  o.kernel_size = 3;
  o.stride = stride;
  o.padding = padding;
  o.use_bias = false;
  o.kernel_initializer = initializer;
  return o;
}

ResidualBlockOptions EstimatorOptions(int filters, int stride, float bn_epsilon) {
  ResidualBlockOptions o;
  o.filters = filters;
  o.stride = stride;
  o.conv1_padding = stride > 1 ? Padding::kFixed : Padding::kSame;
  o.bn1_epsilon = bn_epsilon;
  o.bn2_epsilon = bn_epsilon;
  return o;
}

}  // namespace

ResidualBlock::ResidualBlock(std::string name, const ResidualBlockOptions& options)
    : Layer(std::move(name)),
      filters_(options.filters),
      stride_(options.stride),
      conv1_(options.conv1_name, ConvOptions(options.filters, options.stride, options.conv1_padding,
                                             options.conv1_initializer)),
      conv2_(options.conv2_name,
             ConvOptions(options.filters, 1, options.conv2_padding, options.conv2_initializer)),
      bn1_(options.bn1_name, options.bn1_epsilon, /*relu=*/true),
      bn2_(options.bn2_name, options.bn2_epsilon) {
  conv1_.set_frozen(options.conv1_frozen);
  bn1_.set_frozen(options.bn1_frozen);
  conv2_.set_frozen(options.conv2_frozen);
  bn2_.set_frozen(options.bn2_frozen);
  bn1_.set_state_decay(options.bn1_decay);
  bn2_.set_state_decay(options.bn2_decay);
}

ResidualBlock::ResidualBlock(std::string name, int filters, int stride, float bn_epsilon)
    : ResidualBlock(std::move(name), EstimatorOptions(filters, stride, bn_epsilon)) {}

std::vector<Layer*> ResidualBlock::Sublayers() { return {&conv1_, &bn1_, &conv2_, &bn2_}; }

absl::StatusOr<Shape> ResidualBlock::Build(const Shape& input) {
  if (input.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": a residual block needs height x width x channels inputs, got ",
                     ShapeToString(input)));
  }
  if (stride_ <= 0 || filters_ <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": filters and stride must be positive, got ", filters_, " and ", stride_));
  }
  in_h_ = input[0];
  in_w_ = input[1];
  in_c_ = input[2];
  identity_ = stride_ == 1 && in_c_ == filters_;
  if (!identity_) {
    if (filters_ < in_c_ || (filters_ - in_c_) % 2 != 0 || in_h_ % stride_ != 0 ||
        in_w_ % stride_ != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name(), ": the option-A shortcut needs an even filter increase (", in_c_,
                       " -> ", filters_, ") and a size divisible by the stride ", stride_, " (",
                       ShapeToString(input), ")"));
    }
    channel_pad_ = (filters_ - in_c_) / 2;
  }
  absl::StatusOr<Shape> s = conv1_.Build(input);
  if (s.ok()) s = bn1_.Build(*s);
  if (s.ok()) s = conv2_.Build(*s);
  if (s.ok()) s = bn2_.Build(*s);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(name(), "/", s.status().message()));
  out_h_ = (*s)[0];
  out_w_ = (*s)[1];
  if (out_h_ * stride_ != in_h_ || out_w_ * stride_ != in_w_) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": output ", ShapeToString(*s), " does not match the shortcut's"));
  }
  return s;
}

std::vector<VariableSpec> ResidualBlock::Variables() const {
  std::vector<VariableSpec> all;
  const Layer* const sublayers[] = {&conv1_, &bn1_, &conv2_, &bn2_};  // as Sublayers()
  for (const Layer* layer : sublayers) {
    for (VariableSpec v : layer->Variables()) {
      // What Model::Create does for a layer of its own.
      if (v.trainable && layer->frozen()) v.frozen = true;
      if (!v.trainable && layer->state_decay() >= 0) v.decay = layer->state_decay();
      v.name = absl::StrCat(layer->name(), "/", v.name);
      all.push_back(std::move(v));
    }
  }
  return all;
}

void ResidualBlock::BindOffsets(std::vector<int64_t> offsets) {
  size_t at = 0;
  for (Layer* layer : Sublayers()) {
    const size_t n = layer->Variables().size();
    layer->BindOffsets(std::vector<int64_t>(offsets.begin() + at, offsets.begin() + at + n));
    at += n;
  }
  Layer::BindOffsets(std::move(offsets));
}

void ResidualBlock::Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) {
  conv1_.Forward(in, &conv1_out_, args);
  bn1_.Forward(conv1_out_, &bn1_out_, args);  // with the ReLU
  conv2_.Forward(bn1_out_, &conv2_out_, args);
  bn2_.Forward(conv2_out_, &bn2_out_, args);
  out->Resize(bn2_out_.shape());
  const int64_t batch = in.dim(0);
  const int64_t positions = out_h_ * out_w_;
  const int64_t s = stride_;
  const float inv_window = 1.0f / static_cast<float>(s * s);
  ParallelFor(batch * out_h_, 8, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / out_h_, oh = row % out_h_;
      for (int64_t ow = 0; ow < out_w_; ++ow) {
        const int64_t o = (b * positions + oh * out_w_ + ow) * filters_;
        const float* z = bn2_out_.data() + o;
        float* y = out->data() + o;
        if (identity_) {
          Eigen::Map<Eigen::ArrayXf>(y, filters_) =
              (Eigen::Map<const Eigen::ArrayXf>(z, filters_) +
               Eigen::Map<const Eigen::ArrayXf>(in.data() + o, filters_))
                  .max(0.0f);
          continue;
        }
        // Average of the s x s window, into channels [pad, pad + in_c).
        for (int64_t c = 0; c < filters_; ++c) y[c] = z[c];
        for (int64_t i = 0; i < s; ++i) {
          for (int64_t j = 0; j < s; ++j) {
            const float* x = in.data() + ((b * in_h_ + oh * s + i) * in_w_ + ow * s + j) * in_c_;
            for (int64_t c = 0; c < in_c_; ++c) y[channel_pad_ + c] += x[c] * inv_window;
          }
        }
        for (int64_t c = 0; c < filters_; ++c) y[c] = std::max(y[c], 0.0f);
      }
    }
  });
}

void ResidualBlock::Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                             const BackwardArgs& args) {
  // Through the final ReLU.
  dsum_.Resize(out.shape());
  ParallelFor(out.size(), 1 << 14, [&](int64_t begin, int64_t end) {
    const int64_t n = end - begin;
    Eigen::Map<Eigen::ArrayXf>(dsum_.data() + begin, n) =
        (Eigen::Map<const Eigen::ArrayXf>(out.data() + begin, n) > 0.0f)
            .select(Eigen::Map<const Eigen::ArrayXf>(dout.data() + begin, n), 0.0f);
  });
  bn2_.Backward(conv2_out_, bn2_out_, dsum_, &d_conv2_out_, args);
  conv2_.Backward(bn1_out_, conv2_out_, d_conv2_out_, &d_bn1_out_, args);
  bn1_.Backward(conv1_out_, bn1_out_, d_bn1_out_, &d_conv1_out_, args);
  if (din == nullptr) {
    conv1_.Backward(in, conv1_out_, d_conv1_out_, nullptr, args);
    return;
  }
  conv1_.Backward(in, conv1_out_, d_conv1_out_, din, args);
  // Plus the shortcut's gradient.
  const int64_t batch = in.dim(0);
  const int64_t s = stride_;
  const float inv_window = 1.0f / static_cast<float>(s * s);
  if (identity_) {
    ParallelFor(din->size(), 1 << 14, [&](int64_t begin, int64_t end) {
      const int64_t n = end - begin;
      Eigen::Map<Eigen::ArrayXf>(din->data() + begin, n) +=
          Eigen::Map<const Eigen::ArrayXf>(dsum_.data() + begin, n);
    });
    return;
  }
  ParallelFor(batch * out_h_, 8, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / out_h_, oh = row % out_h_;
      for (int64_t ow = 0; ow < out_w_; ++ow) {
        const float* g = dsum_.data() + ((b * out_h_ + oh) * out_w_ + ow) * filters_;
        if (identity_) {
          float* d = din->data() + ((b * out_h_ + oh) * out_w_ + ow) * filters_;
          for (int64_t c = 0; c < filters_; ++c) d[c] += g[c];
          continue;
        }
        for (int64_t i = 0; i < s; ++i) {
          for (int64_t j = 0; j < s; ++j) {
            float* d = din->data() + ((b * in_h_ + oh * s + i) * in_w_ + ow * s + j) * in_c_;
            for (int64_t c = 0; c < in_c_; ++c) d[c] += g[channel_pad_ + c] * inv_window;
          }
        }
      }
    }
  });
}

}  // namespace pstrain
