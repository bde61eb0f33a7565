#include <cmath>
#include <numeric>

#include "gtest/gtest.h"
#include "models/batch_norm.h"
#include "models/conv2d.h"
#include "models/dense.h"
#include "models/direct_conv.h"
#include "models/dropout.h"
#include "models/flatten.h"
#include "models/global_avg_pool.h"
#include "models/layer_norm.h"
#include "models/loss.h"
#include "models/max_pool2d.h"
#include "models/random.h"
#include "models/relu.h"
#include "models/residual_block.h"
#include "testing/gradient_check.h"

namespace pstrain {
namespace {

Conv2DOptions ConvOpts(int filters, int kernel, int stride, Padding padding,
                       Activation act = Activation::kNone) {
  Conv2DOptions o;
  o.filters = filters;
  o.kernel_size = kernel;
  o.stride = stride;
  o.padding = padding;
  o.activation = act;
  return o;
}

// Direct convolution with TensorFlow's padding rules, as the reference.
Tensor NaiveConv(const Tensor& in, const float* kernel, const float* bias, int filters, int k,
                 int stride, Padding padding) {
  const int64_t n = in.dim(0), h = in.dim(1), w = in.dim(2), c = in.dim(3);
  PaddedDim ph = ComputePadding(h, k, stride, padding);
  PaddedDim pw = ComputePadding(w, k, stride, padding);
  Tensor out({n, ph.out, pw.out, filters});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oh = 0; oh < ph.out; ++oh)
      for (int64_t ow = 0; ow < pw.out; ++ow)
        for (int f = 0; f < filters; ++f) {
          double sum = bias[f];
          for (int i = 0; i < k; ++i)
            for (int j = 0; j < k; ++j)
              for (int64_t ci = 0; ci < c; ++ci) {
                const int64_t ih = oh * stride - ph.pad_before + i;
                const int64_t iw = ow * stride - pw.pad_before + j;
                if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                sum += in[((b * h + ih) * w + iw) * c + ci] *
                       kernel[((i * k + j) * c + ci) * filters + f];
              }
          out[((b * ph.out + oh) * pw.out + ow) * filters + f] = static_cast<float>(sum);
        }
  return out;
}

struct ConvCase {
  int64_t size;
  int kernel;
  int stride;
  Padding padding;
};

class Conv2DTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2DTest, ForwardMatchesDirectConvolution) {
  const ConvCase p = GetParam();
  Conv2D conv("conv", ConvOpts(4, p.kernel, p.stride, p.padding));
  ASSERT_TRUE(conv.Build({p.size, p.size + 1, 3}).ok());
  LayerVariables vars = BindRandomVariables(&conv, 5);
  Tensor in({2, p.size, p.size + 1, 3});
  SplitMix64 rng(9);
  for (int64_t i = 0; i < in.size(); ++i) in[i] = rng.Uniform() - 0.5f;
  Tensor out;
  ForwardArgs args;
  args.params = vars.params.data();
  conv.Forward(in, &out, args);
  const int64_t kernel_size = int64_t{p.kernel} * p.kernel * 3 * 4;
  Tensor want = NaiveConv(in, vars.params.data(), vars.params.data() + kernel_size, 4, p.kernel,
                          p.stride, p.padding);
  ASSERT_EQ(out.shape(), want.shape());
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-4) << i;
}

TEST_P(Conv2DTest, GradientsMatchNumeric) {
  const ConvCase p = GetParam();
  Conv2D conv("conv", ConvOpts(4, p.kernel, p.stride, p.padding));
  EXPECT_TRUE(CheckGradients(&conv, {2, p.size, p.size + 1, 3}, {}));
}

INSTANTIATE_TEST_SUITE_P(
    Paddings, Conv2DTest,
    ::testing::Values(ConvCase{6, 3, 1, Padding::kSame}, ConvCase{6, 3, 1, Padding::kValid},
                      ConvCase{7, 3, 2, Padding::kSame}, ConvCase{7, 3, 2, Padding::kValid},
                      ConvCase{6, 5, 1, Padding::kSame}, ConvCase{8, 1, 2, Padding::kSame},
                      ConvCase{8, 3, 2, Padding::kFixed}, ConvCase{7, 3, 2, Padding::kFixed}));

// Output channels in multiples of 16 take the direct kernels
// (models/direct_conv.h) on AVX-512 and AVX2 builds, and their input gradients too
// when the input channels are a multiple of 16: checked against the direct
// loop and numeric gradients for every register-block width.
TEST(Conv2DLayerTest, DirectKernelsMatchReference) {
  struct Case {
    int64_t h, w, cin;
    int filters, kernel;
  };
  for (const Case& p :
       {Case{5, 37, 3, 16, 3}, Case{4, 13, 16, 32, 3}, Case{3, 7, 32, 48, 3}, Case{3, 9, 16, 64, 3},
        Case{4, 6, 16, 80, 5}, Case{2, 3, 16, 16, 1}, Case{2, 14, 16, 64, 3}, Case{3, 5, 3, 64, 3},
        Case{2, 4, 5, 48, 3}, Case{4, 11, 16, 16, 3}, Case{6, 20, 4, 16, 5}}) {
    Conv2D conv("conv", ConvOpts(p.filters, p.kernel, 1, Padding::kSame));
    ASSERT_TRUE(conv.Build({p.h, p.w, p.cin}).ok());
    LayerVariables vars = BindRandomVariables(&conv, 5);
    Tensor in({2, p.h, p.w, p.cin});
    SplitMix64 rng(9);
    for (int64_t i = 0; i < in.size(); ++i) in[i] = rng.Uniform() - 0.5f;
    Tensor out;
    ForwardArgs args;
    args.params = vars.params.data();
    conv.Forward(in, &out, args);
    const int64_t kernel_size = int64_t{p.kernel} * p.kernel * p.cin * p.filters;
    Tensor want = NaiveConv(in, vars.params.data(), vars.params.data() + kernel_size, p.filters,
                            p.kernel, 1, Padding::kSame);
    ASSERT_EQ(out.shape(), want.shape());
    for (int64_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(out[i], want[i], 1e-4) << i << " of case " << p.w << "x" << p.filters;
    }
    // With and without a bias (ResNet's convolutions have none): both take
    // the direct kernel-gradient kernels.
    for (bool bias : {true, false}) {
      Conv2DOptions o = ConvOpts(p.filters, p.kernel, 1, Padding::kSame);
      o.use_bias = bias;
      Conv2D fresh("conv", o);
      GradientCheckOptions options;
      options.max_checks = 60;
      EXPECT_TRUE(CheckGradients(&fresh, {2, p.h, p.w, p.cin}, options))
          << p.w << "x" << p.filters << (bias ? " with bias" : "");
    }
  }
}

TEST(DirectConvTest, KernelGradientOverManyGroupsMatchesDirectSum) {
  if (!DirectConvSupported(16)) GTEST_SKIP() << "no direct kernels in this build";
  struct Case {
    int64_t batch, h, w, cin, cout, k;
    size_t min_groups;
  };
  // 32x32x16 examples make one (AVX-512) or two (AVX2) examples per group:
  // five or three groups summed, the last one short on AVX2. Every case
  // spans several tiles of output rows: 3x3 over an even channel count
  // (AVX2: three taps x two channels per block), over three channels (the
  // generic blocks), and 5x5 (five taps x one channel).
  for (const Case& p : {Case{5, 32, 32, 16, 32, 3, 3}, Case{3, 32, 32, 3, 16, 3, 1},
                        Case{3, 14, 14, 32, 32, 5, 1}}) {
    SCOPED_TRACE(testing::Message() << p.k << "x" << p.k << " " << p.cin << " -> " << p.cout);
    const int64_t pad = (p.k - 1) / 2, ph = p.h + p.k - 1, pw = p.w + p.k - 1;
    SplitMix64 rng(3);
    std::vector<float> in(p.batch * p.h * p.w * p.cin), dout(p.batch * p.h * p.w * p.cout);
    for (float& x : in) x = rng.Uniform() - 0.5f;
    for (float& x : dout) x = rng.Uniform() - 0.5f;
    std::vector<float> padded(p.batch * ph * pw * p.cin);
    PadNhwc(in.data(), p.batch, p.h, p.w, p.cin, pad, pad, ph, pw, padded.data());
    const size_t size = p.k * p.k * p.cin * p.cout;
    std::vector<float> grad(size), scratch;
    DirectConvKernelGradStride1(padded.data(), p.batch, p.h, p.w, p.cin, dout.data(), p.k, p.cout,
                                &scratch, grad.data());
    EXPECT_EQ(scratch.size() % size, 0u);
    EXPECT_GE(scratch.size() / size, p.min_groups);
    for (int64_t i = 0; i < p.k; ++i)
      for (int64_t j = 0; j < p.k; ++j)
        for (int64_t ci = 0; ci < p.cin; ci += 2)
          for (int64_t co = 0; co < p.cout; co += 3) {
            double want = 0;
            for (int64_t n = 0; n < p.batch; ++n)
              for (int64_t y = 0; y < p.h; ++y)
                for (int64_t x = 0; x < p.w; ++x) {
                  const int64_t iy = y + i - pad, ix = x + j - pad;
                  if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                  want += double{in[((n * p.h + iy) * p.w + ix) * p.cin + ci]} *
                          dout[((n * p.h + y) * p.w + x) * p.cout + co];
                }
            ASSERT_NEAR(grad[((i * p.k + j) * p.cin + ci) * p.cout + co], want, 1e-3)
                << i << j << " " << ci << " " << co;
          }
  }
}

TEST(Conv2DLayerTest, FixedPaddingIsSymmetric) {
  // 32 -> 16 with one row of zeros on each side (TF's fixed_padding), where
  // SAME would pad 0 before and 1 after.
  PaddedDim fixed = ComputePadding(32, 3, 2, Padding::kFixed);
  EXPECT_EQ(fixed.out, 16);
  EXPECT_EQ(fixed.pad_before, 1);
  PaddedDim same = ComputePadding(32, 3, 2, Padding::kSame);
  EXPECT_EQ(same.out, 16);
  EXPECT_EQ(same.pad_before, 0);
}

TEST(Conv2DLayerTest, ManyChunksGradients) {
  // 34x34 outputs exceed one chunk's rows, so each example is its own chunk
  // and the kernel gradient is a sum over chunks.
  Conv2D conv("conv", ConvOpts(3, 3, 1, Padding::kSame));
  GradientCheckOptions options;
  options.max_checks = 60;
  EXPECT_TRUE(CheckGradients(&conv, {3, 34, 34, 2}, options));
}

TEST(Conv2DLayerTest, DirectKernelsWithBiasAndFusedReluGradients) {
  // 16k filters, stride 1, same padding: the direct kernels (on AVX-512
  // and AVX2 builds) compute the forward pass and, through the ReLU's mask, the
  // kernel and bias gradients; the input gradient too when the input
  // channels are 16k (the first case), else im2col + GEMM (the second).
  GradientCheckOptions options;
  options.epsilon = 1e-3f;
  options.tolerance = 2e-2f;
  options.max_checks = 80;
  for (const Shape& input : {Shape{2, 6, 6, 16}, Shape{2, 7, 5, 3}}) {
    Conv2D conv("conv", ConvOpts(16, 5, 1, Padding::kSame, Activation::kRelu));
    EXPECT_TRUE(CheckGradients(&conv, input, options)) << ShapeToString(input);
  }
}

TEST(Conv2DLayerTest, FusedReluEqualsSeparateRelu) {
  Conv2D fused("fused", ConvOpts(5, 3, 1, Padding::kSame, Activation::kRelu));
  Conv2D plain("plain", ConvOpts(5, 3, 1, Padding::kSame));
  ReLU relu("relu");
  ASSERT_TRUE(fused.Build({6, 6, 2}).ok());
  ASSERT_TRUE(plain.Build({6, 6, 2}).ok());
  ASSERT_TRUE(relu.Build({6, 6, 5}).ok());
  LayerVariables vars = BindRandomVariables(&fused, 3);
  BindRandomVariables(&plain, 3);
  Tensor in({2, 6, 6, 2});
  SplitMix64 rng(4);
  for (int64_t i = 0; i < in.size(); ++i) in[i] = rng.Uniform() - 0.5f;
  ForwardArgs f;
  f.training = true;
  f.params = vars.params.data();
  Tensor y1, z, y2;
  fused.Forward(in, &y1, f);
  plain.Forward(in, &z, f);
  relu.Forward(z, &y2, f);
  for (int64_t i = 0; i < y1.size(); ++i) ASSERT_FLOAT_EQ(y1[i], y2[i]);
  Tensor dy(y1.shape());
  for (int64_t i = 0; i < dy.size(); ++i) dy[i] = rng.Uniform() - 0.5f;
  std::vector<float> g1(vars.params.size()), g2(vars.params.size());
  Tensor dx1, dz, dx2;
  fused.Backward(in, y1, dy, &dx1, {vars.params.data(), g1.data()});
  relu.Backward(z, y2, dy, &dz, {});
  plain.Backward(in, z, dz, &dx2, {vars.params.data(), g2.data()});
  for (int64_t i = 0; i < dx1.size(); ++i) ASSERT_NEAR(dx1[i], dx2[i], 1e-6);
  for (size_t i = 0; i < g1.size(); ++i) ASSERT_NEAR(g1[i], g2[i], 1e-5);
}

TEST(Conv2DLayerTest, RejectsBadInput) {
  Conv2D conv("conv", ConvOpts(4, 5, 1, Padding::kValid));
  EXPECT_FALSE(conv.Build({3, 3, 1}).ok());  // kernel larger than the image
  EXPECT_FALSE(conv.Build({9}).ok());
  Conv2D none("none", ConvOpts(0, 3, 1, Padding::kSame));
  EXPECT_FALSE(none.Build({4, 4, 1}).ok());
}

// Distinct values at least 0.05 apart: no ties within epsilon.
void DistinctInput(Tensor* t) {
  std::vector<int64_t> perm(t->size());
  std::iota(perm.begin(), perm.end(), 0);
  SplitMix64 rng(11);
  for (int64_t i = t->size() - 1; i > 0; --i) std::swap(perm[i], perm[rng.Next() % (i + 1)]);
  for (int64_t i = 0; i < t->size(); ++i) (*t)[i] = 0.05f * static_cast<float>(perm[i]) - 1.0f;
}

TEST(MaxPool2DTest, GradientsMatchNumeric) {
  GradientCheckOptions options;
  options.make_input = DistinctInput;
  MaxPool2D pool("pool", 2, 2);
  EXPECT_TRUE(CheckGradients(&pool, {2, 6, 5, 3}, options));
  MaxPool2D same("same", 3, 2, Padding::kSame);
  EXPECT_TRUE(CheckGradients(&same, {2, 5, 5, 2}, options));
}

TEST(MaxPool2DTest, PicksMaximum) {
  MaxPool2D pool("pool", 2, 2);
  ASSERT_EQ(*pool.Build({2, 2, 1}), (Shape{1, 1, 1}));
  Tensor in({1, 2, 2, 1});
  in[0] = 1;
  in[1] = 4;
  in[2] = -3;
  in[3] = 2;
  Tensor out;
  pool.Forward(in, &out, {});
  EXPECT_EQ(out[0], 4.0f);
}

TEST(MaxPool2DTest, TiesGoToTheFirstTapAndMatchAWindowScan) {
  // Values from a handful of levels, so most windows tie: the gradient goes
  // to the first maximum in window order, as a plain scan picks it.
  for (Padding padding : {Padding::kValid, Padding::kSame}) {
    MaxPool2D pool("pool", 3, 2, padding);
    ASSERT_TRUE(pool.Build({7, 6, 5}).ok());
    Tensor in({2, 7, 6, 5});
    SplitMix64 rng(5);
    for (int64_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(rng.Next() % 3);
    Tensor out, din;
    ForwardArgs f;
    f.training = true;
    pool.Forward(in, &out, f);
    Tensor dy(out.shape());
    for (int64_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(i + 1);
    pool.Backward(in, out, dy, &din, {});
    const PaddedDim h = ComputePadding(7, 3, 2, padding), w = ComputePadding(6, 3, 2, padding);
    std::vector<float> want_din(in.size(), 0.0f);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t oh = 0; oh < h.out; ++oh)
        for (int64_t ow = 0; ow < w.out; ++ow)
          for (int64_t c = 0; c < 5; ++c) {
            int64_t at = -1;
            for (int64_t i = 0; i < 3; ++i)
              for (int64_t j = 0; j < 3; ++j) {
                const int64_t ih = oh * 2 - h.pad_before + i, iw = ow * 2 - w.pad_before + j;
                if (ih < 0 || ih >= 7 || iw < 0 || iw >= 6) continue;
                const int64_t idx = ((n * 7 + ih) * 6 + iw) * 5 + c;
                if (at < 0 || in[idx] > in[at]) at = idx;
              }
            const int64_t o = ((n * h.out + oh) * w.out + ow) * 5 + c;
            ASSERT_EQ(out[o], in[at]) << o;
            want_din[at] += dy[o];
          }
    for (int64_t i = 0; i < din.size(); ++i) ASSERT_EQ(din[i], want_din[i]) << i;
  }
}

TEST(DenseTest, GradientsMatchNumeric) {
  DenseOptions o;
  o.units = 7;
  Dense dense("dense", o);
  EXPECT_TRUE(CheckGradients(&dense, {5, 13}, {}));
}

TEST(DenseTest, LargeGradientsMatchNumeric) {
  // Big enough that the parallel GEMM splits into blocks.
  DenseOptions o;
  o.units = 300;
  Dense dense("dense", o);
  GradientCheckOptions options;
  options.max_checks = 40;
  EXPECT_TRUE(CheckGradients(&dense, {9, 520}, options));
}

TEST(DenseTest, FusedReluGradients) {
  DenseOptions o;
  o.units = 6;
  o.activation = Activation::kRelu;
  Dense dense("dense", o);
  // Inputs and weights chosen so no pre-activation sits near the kink is not
  // guaranteed; use a small epsilon and a loose tolerance for the rare one.
  GradientCheckOptions options;
  options.epsilon = 1e-3f;
  options.tolerance = 2e-2f;
  EXPECT_TRUE(CheckGradients(&dense, {4, 5}, options));
}

TEST(DenseTest, RejectsUnflattenedInput) {
  DenseOptions o;
  o.units = 3;
  Dense dense("dense", o);
  absl::StatusOr<Shape> s = dense.Build({4, 4, 1});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("Flatten"), std::string::npos);
}

TEST(ReLUTest, GradientsMatchNumeric) {
  ReLU relu("relu");
  GradientCheckOptions options;
  options.make_input = [](Tensor* t) {
    SplitMix64 rng(2);
    for (int64_t i = 0; i < t->size(); ++i) {
      const float u = rng.Uniform();
      (*t)[i] = (u < 0.5f ? -1.0f : 1.0f) * (0.1f + u);  // |x| >= 0.1
    }
  };
  EXPECT_TRUE(CheckGradients(&relu, {3, 4, 4, 2}, options));
}

TEST(FlattenTest, GradientsMatchNumeric) {
  Flatten flatten("flatten");
  EXPECT_TRUE(CheckGradients(&flatten, {2, 3, 4, 5}, {}));
}

TEST(DropoutTest, GradientsMatchNumericWithFixedSeed) {
  Dropout dropout("dropout", 0.4f);
  EXPECT_TRUE(CheckGradients(&dropout, {4, 50}, {}));
}

TEST(DropoutTest, DropsAboutRateAndScalesTheRest) {
  Dropout dropout("dropout", 0.4f);
  ASSERT_TRUE(dropout.Build({1000}).ok());
  Tensor in({20, 1000}), out;
  std::fill_n(in.data(), in.size(), 1.0f);
  ForwardArgs args;
  args.training = true;
  args.seed = 77;
  dropout.Forward(in, &out, args);
  int64_t zeros = 0;
  for (int64_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0.0f) {
      ++zeros;
    } else {
      ASSERT_FLOAT_EQ(out[i], 1.0f / 0.6f);
    }
  }
  EXPECT_NEAR(static_cast<double>(zeros) / out.size(), 0.4, 0.02);
  Tensor again;
  dropout.Forward(in, &again, args);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], again[i]);  // same seed, same mask
  args.seed = 78;
  dropout.Forward(in, &again, args);
  int64_t differ = 0;
  for (int64_t i = 0; i < out.size(); ++i) differ += out[i] != again[i];
  EXPECT_GT(differ, out.size() / 10);
}

TEST(DropoutTest, IdentityInEvaluation) {
  Dropout dropout("dropout", 0.4f);
  ASSERT_TRUE(dropout.Build({10}).ok());
  Tensor in({3, 10}), out;
  for (int64_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  dropout.Forward(in, &out, {});
  for (int64_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], in[i]);
  EXPECT_FALSE(Dropout("bad", 1.0f).Build({3}).ok());
}

TEST(BatchNormTest, TrainingGradientsMatchNumeric) {
  BatchNorm bn("bn", 1e-3f);
  EXPECT_TRUE(CheckGradients(&bn, {4, 3, 3, 5}, {}));
  BatchNorm flat("flat", 1e-3f);
  EXPECT_TRUE(CheckGradients(&flat, {6, 4}, {}));
}

TEST(LayerNormTest, GradientsMatchNumeric) {
  LayerNorm flat("ln", 1e-3f);
  EXPECT_TRUE(CheckGradients(&flat, {5, 7}, {}));
  LayerNorm sequence("ln_seq", 1e-5f);  // [L, d] per example
  EXPECT_TRUE(CheckGradients(&sequence, {3, 4, 6}, {}));
}

// Each row to mean 0 and variance 1 (biased, as torch.nn.LayerNorm), then
// gamma and beta; a row shifted by a constant normalizes the same.
TEST(LayerNormTest, NormalizesEachRowOnItsOwn) {
  LayerNorm ln("ln", 1e-5f);
  ASSERT_TRUE(ln.Build({4}).ok());
  ln.BindOffsets({0, 4});
  const std::vector<float> params = {1, 2, 1, 1, 0, 0, 0.5f, 0};  // gamma, beta
  Tensor in({2, 4}), out;
  const float row[] = {1, 2, 3, 6};
  for (int j = 0; j < 4; ++j) {
    in[j] = row[j];
    in[4 + j] = row[j] + 100;
  }
  ForwardArgs args;
  args.params = params.data();
  ln.Forward(in, &out, args);
  // mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5.
  const float s = 1.0f / std::sqrt(3.5f + 1e-5f);
  EXPECT_NEAR(out[0], -2 * s, 1e-5);
  EXPECT_NEAR(out[1], 2 * (-1 * s), 1e-5);
  EXPECT_NEAR(out[2], 0.5f, 1e-5);
  EXPECT_NEAR(out[3], 3 * s, 1e-5);
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(out[4 + j], out[j], 1e-4) << j;
  EXPECT_FALSE(LayerNorm("bad", 0.0f).Build({3}).ok());
  EXPECT_FALSE(LayerNorm("none", 1e-3f).Build({}).ok());
}

TEST(BatchNormTest, FusedReluEqualsSeparateRelu) {
  BatchNorm fused("bn", 1e-3f, true), plain("bn", 1e-3f);
  ASSERT_TRUE(fused.Build({5}).ok() && plain.Build({5}).ok());
  LayerVariables vars = BindRandomVariables(&fused, 2);
  plain.BindOffsets({0, 5, 0, 5});
  Tensor in({7, 5}), a, b;
  SplitMix64 rng(1);
  for (int64_t i = 0; i < in.size(); ++i) in[i] = rng.Uniform() - 0.5f;
  std::vector<float> stats(vars.state.size());
  ForwardArgs args;
  args.training = true;
  args.params = vars.params.data();
  args.state = vars.state.data();
  args.batch_stats = stats.data();
  fused.Forward(in, &a, args);
  plain.Forward(in, &b, args);
  for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], std::max(b[i], 0.0f)) << i;
  // Backward: the fused layer's gradients are the plain batch norm's with the
  // output gradient zeroed where the ReLU clipped (the plain layer's and the
  // ReLU's gradients are checked numerically above; the fused layer's kinks
  // make a numeric check of its own flaky).
  Tensor dout(in.shape()), masked(in.shape()), da, db;
  for (int64_t i = 0; i < dout.size(); ++i) {
    dout[i] = rng.Uniform() - 0.5f;
    masked[i] = b[i] > 0.0f ? dout[i] : 0.0f;
  }
  std::vector<float> ga(vars.params.size()), gb(vars.params.size());
  BackwardArgs ba{vars.params.data(), ga.data()}, bb{vars.params.data(), gb.data()};
  fused.Backward(in, a, dout, &da, ba);
  plain.Backward(in, b, masked, &db, bb);
  for (int64_t i = 0; i < da.size(); ++i) EXPECT_NEAR(da[i], db[i], 1e-5) << i;
  for (size_t i = 0; i < ga.size(); ++i) EXPECT_NEAR(ga[i], gb[i], 1e-5) << i;
}

TEST(BatchNormTest, TrainingNormalizesAndReportsUnbiasedStatistics) {
  BatchNorm bn("bn", 1e-5f);
  ASSERT_TRUE(bn.Build({2}).ok());
  bn.BindOffsets({0, 2, 0, 2});
  std::vector<float> params = {1, 1, 0, 0};  // gamma, beta
  std::vector<float> state = {0, 0, 1, 1};   // moving mean, variance
  std::vector<float> stats(4);
  Tensor in({4, 2}), out;
  const float xs[] = {1, 10, 2, 20, 3, 30, 4, 40};
  std::copy(xs, xs + 8, in.data());
  ForwardArgs args;
  args.training = true;
  args.params = params.data();
  args.state = state.data();
  args.batch_stats = stats.data();
  bn.Forward(in, &out, args);
  EXPECT_NEAR(stats[0], 2.5, 1e-6);
  EXPECT_NEAR(stats[1], 25, 1e-5);
  EXPECT_NEAR(stats[2], 5.0 / 3.0, 1e-5);  // sum of squared deviations 5, over n - 1
  EXPECT_NEAR(stats[3], 500.0 / 3.0, 1e-3);
  double mean = 0, sq = 0;
  for (int r = 0; r < 4; ++r) {
    mean += out[r * 2];
    sq += out[r * 2] * out[r * 2];
  }
  EXPECT_NEAR(mean, 0, 1e-5);
  EXPECT_NEAR(sq / 4, 1, 1e-3);

  MovingAverageUpdate(0.9f, stats.data(), 4, state.data());
  EXPECT_NEAR(state[0], 0.25, 1e-6);
  EXPECT_NEAR(state[2], 0.9 + 0.1 * 5.0 / 3.0, 1e-6);
}

TEST(BatchNormTest, EvaluationUsesMovingStatistics) {
  BatchNorm bn("bn", 1e-5f);
  ASSERT_TRUE(bn.Build({1}).ok());
  bn.BindOffsets({0, 1, 0, 1});
  std::vector<float> params = {2, 0.5f};  // gamma, beta
  std::vector<float> state = {3, 4};      // mean 3, variance 4
  Tensor in({2, 1}), out;
  in[0] = 5;
  in[1] = 1;
  ForwardArgs args;
  args.params = params.data();
  args.state = state.data();
  bn.Forward(in, &out, args);
  EXPECT_NEAR(out[0], 2 * (5 - 3) / 2.0 + 0.5, 1e-4);
  EXPECT_NEAR(out[1], 2 * (1 - 3) / 2.0 + 0.5, 1e-4);
}

TEST(GlobalAvgPoolTest, GradientsMatchNumeric) {
  GlobalAvgPool gap("gap");
  EXPECT_TRUE(CheckGradients(&gap, {3, 4, 5, 6}, {}));
}

TEST(SoftmaxCrossEntropyTest, GradientMatchesNumeric) {
  Tensor logits({3, 4});
  SplitMix64 rng(6);
  for (int64_t i = 0; i < logits.size(); ++i) logits[i] = 4.0f * rng.Uniform() - 2.0f;
  const float labels[] = {0, 3, 2};
  Tensor grad;
  LossResult base = SoftmaxCrossEntropy(logits, labels, &grad);
  EXPECT_GT(base.loss_sum, 0);
  for (int64_t i = 0; i < logits.size(); ++i) {
    const float saved = logits[i];
    logits[i] = saved + 1e-2f;
    const double plus = SoftmaxCrossEntropy(logits, labels, nullptr).loss_sum / 3;
    logits[i] = saved - 1e-2f;
    const double minus = SoftmaxCrossEntropy(logits, labels, nullptr).loss_sum / 3;
    logits[i] = saved;
    EXPECT_NEAR(grad[i], (plus - minus) / 2e-2, 2e-4) << i;
  }
}

TEST(SoftmaxCrossEntropyTest, StableForLargeLogitsAndCountsCorrect) {
  Tensor logits({2, 3});
  const float v[] = {1000, 0, -1000, 0, 0, 1};
  std::copy(v, v + 6, logits.data());
  const float labels[] = {0, 1};
  LossResult r = SoftmaxCrossEntropy(logits, labels, nullptr);
  EXPECT_TRUE(std::isfinite(r.loss_sum));
  EXPECT_EQ(r.correct, 1);
  EXPECT_NEAR(r.loss_sum, 0.0 + (std::log(2 + std::exp(1.0)) - 0.0), 1e-5);
}

TEST(ResidualBlockTest, IdentityShortcutGradientsMatchNumeric) {
  // Small, so few of the two ReLUs' inputs lie within epsilon of their kink
  // (a crossing there is a true non-differentiability, not an error).
  ResidualBlock block("block", 4, 1, 1e-3f);
  GradientCheckOptions options;
  options.epsilon = 1e-3f;
  EXPECT_TRUE(CheckGradients(&block, {2, 4, 4, 4}, options));
}

TEST(ResidualBlockTest, PooledPaddedShortcutGradientsMatchNumeric) {
  ResidualBlock block("block", 8, 2, 1e-3f);
  GradientCheckOptions options;
  options.epsilon = 1e-3f;
  EXPECT_TRUE(CheckGradients(&block, {3, 6, 4, 4}, options));
}

TEST(ResidualBlockTest, ShortcutIsPooledAndChannelPadded) {
  // With zero conv kernels the residual branch is beta = 0 everywhere, so the
  // block's output is relu(shortcut(x)): the 2x2 average of x in channels
  // [2, 4) of 8... here 2 -> 6 filters: pad 2 on each side.
  ResidualBlock block("block", 6, 2, 1e-3f);
  absl::StatusOr<Shape> shape = block.Build({4, 4, 2});
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(*shape, (Shape{2, 2, 6}));
  std::vector<VariableSpec> vars = block.Variables();
  ASSERT_EQ(vars.size(), 10u);
  EXPECT_EQ(vars[0].name, "conv1/kernel");
  EXPECT_EQ(vars[1].name, "bn1/gamma");
  EXPECT_EQ(vars[5].name, "conv2/kernel");
  std::vector<int64_t> offsets;
  int64_t params = 0, state = 0;
  for (const VariableSpec& v : vars) {
    int64_t& cursor = v.trainable ? params : state;
    offsets.push_back(cursor);
    cursor += NumElements(v.shape);
  }
  block.BindOffsets(offsets);
  std::vector<float> p(params, 0.0f), st(state, 1.0f);
  Tensor in({1, 4, 4, 2}), out;
  for (int64_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 7) - 1.0f;
  ForwardArgs args;
  args.params = p.data();
  args.state = st.data();
  block.Forward(in, &out, args);
  ASSERT_EQ(out.shape(), (Shape{1, 2, 2, 6}));
  for (int64_t oh = 0; oh < 2; ++oh) {
    for (int64_t ow = 0; ow < 2; ++ow) {
      for (int64_t c = 0; c < 6; ++c) {
        float want = 0;
        if (c >= 2 && c < 4) {
          for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) want += in[((2 * oh + i) * 4 + 2 * ow + j) * 2 + c - 2];
          want = std::max(want / 4, 0.0f);
        }
        EXPECT_NEAR(out[(oh * 2 + ow) * 6 + c], want, 1e-5) << oh << ow << c;
      }
    }
  }
  EXPECT_FALSE(ResidualBlock("odd", 5, 2, 1e-3f).Build({4, 4, 2}).ok());
}

}  // namespace
}  // namespace pstrain
