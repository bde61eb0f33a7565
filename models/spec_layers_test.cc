// The layers model specs add to the ones the built-in models use: average
// pooling, zero channel padding and the element-wise activations, each
// against numeric gradients and a value worked by hand.
#include <cmath>

#include "gtest/gtest.h"
#include "models/activation.h"
#include "models/avg_pool2d.h"
#include "models/pad_channels.h"
#include "models/random.h"
#include "testing/gradient_check.h"

namespace pstrain {
namespace {

// Inputs away from leaky_relu's kink at 0: |x| >= 0.1.
void AwayFromZero(Tensor* t) {
  SplitMix64 rng(3);
  for (int64_t i = 0; i < t->size(); ++i) {
    const float u = rng.Uniform();
    (*t)[i] = (u < 0.5f ? -1.0f : 1.0f) * (0.1f + u);
  }
}

TEST(ElementwiseActivationTest, GradientsMatchNumeric) {
  GradientCheckOptions options;
  options.epsilon = 1e-3f;
  ElementwiseActivation sigmoid("sigmoid", ActivationKind::kSigmoid);
  EXPECT_TRUE(CheckGradients(&sigmoid, {3, 4, 4, 2}, options));
  ElementwiseActivation tanh_layer("tanh", ActivationKind::kTanh);
  EXPECT_TRUE(CheckGradients(&tanh_layer, {3, 17}, options));
  options.make_input = AwayFromZero;
  ElementwiseActivation leaky("leaky_re_lu", ActivationKind::kLeakyRelu, 0.3f);
  EXPECT_TRUE(CheckGradients(&leaky, {2, 5, 3, 2}, options));
  ElementwiseActivation gelu("gelu", ActivationKind::kGelu);
  EXPECT_TRUE(CheckGradients(&gelu, {3, 4, 5}, options));
}

TEST(ElementwiseActivationTest, Values) {
  Tensor in({1, 3});
  in[0] = -2.0f;
  in[1] = 0.0f;
  in[2] = 1.5f;
  Tensor out;
  ElementwiseActivation sigmoid("s", ActivationKind::kSigmoid);
  sigmoid.Forward(in, &out, {});
  EXPECT_NEAR(out[0], 1.0 / (1.0 + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(out[1], 0.5, 1e-6);
  ElementwiseActivation tanh_layer("t", ActivationKind::kTanh);
  tanh_layer.Forward(in, &out, {});
  EXPECT_NEAR(out[2], std::tanh(1.5), 1e-6);
  ElementwiseActivation leaky("l", ActivationKind::kLeakyRelu, 0.2f);
  leaky.Forward(in, &out, {});
  EXPECT_FLOAT_EQ(out[0], -0.4f);
  EXPECT_FLOAT_EQ(out[2], 1.5f);
  // torch.nn.GELU()(torch.tensor([-2., 0., 1.5])): the exact (erf) form.
  ElementwiseActivation gelu("g", ActivationKind::kGelu);
  gelu.Forward(in, &out, {});
  EXPECT_NEAR(out[0], -0.0455002630, 1e-7);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_NEAR(out[2], 1.3997892, 1e-6);
}

TEST(AvgPool2DTest, GradientsMatchNumeric) {
  AvgPool2D pool("average_pooling2d", 2, 2);
  EXPECT_TRUE(CheckGradients(&pool, {2, 6, 5, 3}, {}));
  AvgPool2D same("average_pooling2d_1", 3, 2, Padding::kSame);
  EXPECT_TRUE(CheckGradients(&same, {2, 5, 5, 2}, {}));
}

TEST(AvgPool2DTest, AveragesTheWindowAndOnlyTheInputsItCovers) {
  AvgPool2D pool("p", 2, 2);
  ASSERT_EQ(*pool.Build({2, 2, 1}), (Shape{1, 1, 1}));
  Tensor in({1, 2, 2, 1});
  in[0] = 1;
  in[1] = 4;
  in[2] = -3;
  in[3] = 2;
  Tensor out;
  pool.Forward(in, &out, {});
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  // SAME, pool 2 stride 2 on a 3x3 input: the last row and column average
  // the inputs their windows cover (2 or 1), not the padding.
  AvgPool2D same("s", 2, 2, Padding::kSame);
  ASSERT_EQ(*same.Build({3, 3, 1}), (Shape{2, 2, 1}));
  Tensor in3({1, 3, 3, 1});
  for (int i = 0; i < 9; ++i) in3[i] = static_cast<float>(i);
  same.Forward(in3, &out, {});
  EXPECT_FLOAT_EQ(out[0], (0 + 1 + 3 + 4) / 4.0f);
  EXPECT_FLOAT_EQ(out[1], (2 + 5) / 2.0f);
  EXPECT_FLOAT_EQ(out[2], (6 + 7) / 2.0f);
  EXPECT_FLOAT_EQ(out[3], 8.0f);
}

TEST(AvgPool2DTest, RefusesWhatItCannotPool) {
  AvgPool2D pool("p", 3, 1);
  EXPECT_FALSE(pool.Build({2, 2, 1}).ok());
  EXPECT_FALSE(pool.Build({4, 4}).ok());
  AvgPool2D zero("z", 0, 1);
  EXPECT_FALSE(zero.Build({4, 4, 1}).ok());
}

TEST(PadChannelsTest, GradientsMatchNumeric) {
  PadChannels pad("pad_channels", 8);
  EXPECT_TRUE(CheckGradients(&pad, {2, 3, 4, 2}, {}));
  PadChannels same("pad_channels_1", 3);
  EXPECT_TRUE(CheckGradients(&same, {3, 2, 2, 3}, {}));
  PadChannels flat("pad_channels_2", 9);
  EXPECT_TRUE(CheckGradients(&flat, {2, 5}, {}));
}

TEST(PadChannelsTest, ZerosGoEvenlyOnBothSides) {
  PadChannels pad("p", 6);
  ASSERT_EQ(*pad.Build({1, 2, 2}), (Shape{1, 2, 6}));
  EXPECT_TRUE(pad.Variables().empty());
  Tensor in({2, 1, 2, 2});
  for (int64_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i + 1);
  Tensor out;
  pad.Forward(in, &out, {});
  ASSERT_EQ(out.shape(), (Shape{2, 1, 2, 6}));
  for (int64_t row = 0; row < 4; ++row) {
    const float* y = out.data() + row * 6;
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_EQ(y[2], in[row * 2]);
    EXPECT_EQ(y[3], in[row * 2 + 1]);
    EXPECT_EQ(y[4], 0.0f);
    EXPECT_EQ(y[5], 0.0f);
  }
}

TEST(PadChannelsTest, RefusesAnOddOrNegativeIncrease) {
  EXPECT_FALSE(PadChannels("odd", 5).Build({4, 4, 2}).ok());
  EXPECT_FALSE(PadChannels("fewer", 2).Build({4, 4, 4}).ok());
  EXPECT_FALSE(PadChannels("scalar", 2).Build({}).ok());
  absl::StatusOr<Shape> odd = PadChannels("odd", 5).Build({4, 4, 2});
  EXPECT_NE(odd.status().message().find("odd: pad_channels pads channels evenly"),
            std::string::npos)
      << odd.status();
}

}  // namespace
}  // namespace pstrain
