#include "ps/optimizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tbb/task_arena.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

OptimizerConfig MakeConfig(OptimizerType type, float lr, bool nesterov = false) {
  OptimizerConfig config;
  config.type = type;
  config.learning_rate = *LearningRateSchedule::Constant(lr);
  config.nesterov = nesterov;
  return config;
}

std::unique_ptr<Optimizer> MustCreate(const OptimizerConfig& config, std::vector<Segment> segments,
                                      int64_t size) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      Optimizer::Create(config, std::move(segments), size);
  CHECK(optimizer.ok()) << optimizer.status();
  return *std::move(optimizer);
}

std::unique_ptr<Optimizer> MustCreate(const OptimizerConfig& config, int64_t size) {
  return MustCreate(config, {{"w", 0, size}}, size);
}

// The update rules of optimizer.h in double precision, element by element.
struct Reference {
  OptimizerConfig config;
  std::vector<bool> decay;
  std::vector<double> p, accum, m, v;
  int64_t t = 0;

  Reference(const OptimizerConfig& c, std::vector<double> params)
      : config(c), decay(params.size(), true), p(std::move(params)) {
    accum.assign(p.size(), 0.0);
    m.assign(p.size(), 0.0);
    v.assign(p.size(), 0.0);
  }

  void Apply(int64_t step, const std::vector<double>& grad) {
    const double lr = config.learning_rate.At(step);
    const double mu = config.momentum, b1 = config.beta1, b2 = config.beta2;
    if (config.type == OptimizerType::kAdam) ++t;
    const double lr_t = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
    for (size_t i = 0; i < p.size(); ++i) {
      const double g = grad[i] + (decay[i] ? config.weight_decay * p[i] : 0.0);
      switch (config.type) {
        case OptimizerType::kSgd:
          p[i] -= lr * g;
          break;
        case OptimizerType::kMomentum:
          accum[i] = mu * accum[i] + g;
          p[i] -= config.nesterov ? lr * (g + mu * accum[i]) : lr * accum[i];
          break;
        case OptimizerType::kAdam:
          m[i] = b1 * m[i] + (1 - b1) * g;
          v[i] = b2 * v[i] + (1 - b2) * g * g;
          p[i] -= lr_t * m[i] / (std::sqrt(v[i]) + config.epsilon);
          break;
      }
    }
  }
};

void ExpectClose(const float* got, const std::vector<double>& want, double tolerance) {
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tolerance * std::max(1.0, std::abs(want[i]))) << "element " << i;
  }
}

// Runs `config` for three steps on a small vector, with the learning rate
// changing at step 1, and compares params and slots with Reference.
void CheckAgainstReference(OptimizerConfig config) {
  config.learning_rate = *LearningRateSchedule::Piecewise({1}, {0.1f, 0.05f});
  const std::vector<float> initial = {0.5f, -1.0f, 2.0f, 0.0f, -0.25f};
  const std::vector<std::vector<float>> grads = {{0.1f, -0.2f, 0.3f, 0.0f, 1.5f},
                                                 {-0.4f, 0.5f, 0.25f, 0.01f, -1.0f},
                                                 {0.2f, 0.2f, -2.0f, 0.3f, 0.0f}};
  std::vector<float> params = initial;
  std::unique_ptr<Optimizer> optimizer = MustCreate(config, params.size());
  Reference ref(config, {initial.begin(), initial.end()});
  for (int64_t step = 0; step < 3; ++step) {
    optimizer->Apply(step, grads[step].data(), params.data());
    ref.Apply(step, {grads[step].begin(), grads[step].end()});
    SCOPED_TRACE(step);
    ExpectClose(params.data(), ref.p, 1e-6);
    if (config.type == OptimizerType::kMomentum) ExpectClose(optimizer->slot(0), ref.accum, 1e-6);
    if (config.type == OptimizerType::kAdam) {
      ExpectClose(optimizer->slot(0), ref.m, 1e-6);
      ExpectClose(optimizer->slot(1), ref.v, 1e-6);
    }
  }
}

TEST(ParseOptimizerTypeTest, AcceptsNamesInAnyCase) {
  EXPECT_EQ(*ParseOptimizerType("sgd"), OptimizerType::kSgd);
  EXPECT_EQ(*ParseOptimizerType("SGD"), OptimizerType::kSgd);
  EXPECT_EQ(*ParseOptimizerType("Momentum"), OptimizerType::kMomentum);
  EXPECT_EQ(*ParseOptimizerType("adam"), OptimizerType::kAdam);
  for (OptimizerType type : {OptimizerType::kSgd, OptimizerType::kMomentum, OptimizerType::kAdam}) {
    EXPECT_EQ(*ParseOptimizerType(OptimizerTypeName(type)), type);
  }
}

TEST(ParseOptimizerTypeTest, UnknownNameListsValidOnes) {
  absl::StatusOr<OptimizerType> type = ParseOptimizerType("rmsprop");
  EXPECT_EQ(type.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(type.status().message(), HasSubstr("\"rmsprop\""));
  EXPECT_THAT(type.status().message(), HasSubstr("sgd, momentum, adam"));
  EXPECT_FALSE(ParseOptimizerType("").ok());
}

TEST(OptimizerTest, SgdMatchesReference) {
  CheckAgainstReference(MakeConfig(OptimizerType::kSgd, 0));
}

TEST(OptimizerTest, MomentumMatchesReference) {
  CheckAgainstReference(MakeConfig(OptimizerType::kMomentum, 0));
}

TEST(OptimizerTest, NesterovMatchesReference) {
  CheckAgainstReference(MakeConfig(OptimizerType::kMomentum, 0, /*nesterov=*/true));
}

TEST(OptimizerTest, AdamMatchesReference) {
  CheckAgainstReference(MakeConfig(OptimizerType::kAdam, 0));
}

TEST(OptimizerTest, WeightDecayedUpdatesMatchReference) {
  for (OptimizerType type : {OptimizerType::kSgd, OptimizerType::kMomentum, OptimizerType::kAdam}) {
    SCOPED_TRACE(OptimizerTypeName(type));
    OptimizerConfig config = MakeConfig(type, 0);
    config.weight_decay = 0.3f;
    CheckAgainstReference(config);
  }
}

// Hand-computed: p = 1, g = 1 at both steps, lr = 0.1, momentum = 0.9.
// Plain: accum 1 then 1.9; p 0.9 then 0.71.
// Nesterov: p -= 0.1 * (1 + 0.9 * 1) -> 0.81, then p -= 0.1 * (1 + 0.9 * 1.9) -> 0.539.
TEST(OptimizerTest, NesterovLooksAheadOfPlainMomentum) {
  const float grad = 1.0f;
  float plain_p = 1.0f, nesterov_p = 1.0f;
  std::unique_ptr<Optimizer> plain = MustCreate(MakeConfig(OptimizerType::kMomentum, 0.1f), 1);
  std::unique_ptr<Optimizer> nesterov =
      MustCreate(MakeConfig(OptimizerType::kMomentum, 0.1f, /*nesterov=*/true), 1);
  plain->Apply(0, &grad, &plain_p);
  nesterov->Apply(0, &grad, &nesterov_p);
  EXPECT_NEAR(plain_p, 0.9f, 1e-6);
  EXPECT_NEAR(nesterov_p, 0.81f, 1e-6);
  plain->Apply(1, &grad, &plain_p);
  nesterov->Apply(1, &grad, &nesterov_p);
  EXPECT_NEAR(plain_p, 0.71f, 1e-6);
  EXPECT_NEAR(nesterov_p, 0.539f, 1e-6);
  EXPECT_NEAR(plain->slot(0)[0], 1.9f, 1e-6);
  EXPECT_NEAR(nesterov->slot(0)[0], 1.9f, 1e-6);  // same accumulator, different step
}

// Hand-computed with lr = 0.1 and TF's defaults, p = 1, g = 0.5 then -0.25:
// t=1: lr_t = 0.1 * sqrt(0.001) / 0.1 = 0.0316227766, m = 0.05, v = 0.00025,
//      p = 1 - lr_t * 0.05 / (0.0158113883 + 1e-8) = 0.9000000632 (a step of ~lr).
// t=2: lr_t = 0.1 * sqrt(1 - 0.999^2) / (1 - 0.9^2) = 0.0235316725, m = 0.02,
//      v = 0.00031225, p = 0.8733663744.
TEST(OptimizerTest, AdamBiasCorrectionAtFirstTwoSteps) {
  std::unique_ptr<Optimizer> adam = MustCreate(MakeConfig(OptimizerType::kAdam, 0.1f), 1);
  float p = 1.0f;
  const float g1 = 0.5f, g2 = -0.25f;
  EXPECT_EQ(adam->adam_step(), 0);
  adam->Apply(/*global_step=*/500, &g1, &p);  // Adam's t does not follow the global step
  EXPECT_EQ(adam->adam_step(), 1);
  EXPECT_NEAR(p, 0.9000000632, 2e-7);
  // The slots carry float's rounding of the betas: 1 - 0.999f is 0.001 * (1 - 1.3e-5).
  EXPECT_NEAR(adam->slot(0)[0], 0.05, 0.05 * 1e-6);
  EXPECT_NEAR(adam->slot(1)[0], 0.00025, 0.00025 * 2e-5);
  adam->Apply(/*global_step=*/900, &g2, &p);
  EXPECT_EQ(adam->adam_step(), 2);
  EXPECT_NEAR(p, 0.8733663744, 2e-7);
  EXPECT_NEAR(adam->slot(0)[0], 0.02, 0.02 * 1e-6);
  EXPECT_NEAR(adam->slot(1)[0], 0.00031225, 0.00031225 * 2e-5);
}

TEST(OptimizerTest, AdamStepCountCanBeRestored) {
  OptimizerConfig config = MakeConfig(OptimizerType::kAdam, 0.1f);
  std::unique_ptr<Optimizer> adam = MustCreate(config, 2);
  adam->set_adam_step(10);
  std::vector<float> p = {1.0f, -2.0f};
  const std::vector<float> g = {0.5f, 0.125f};
  adam->Apply(0, g.data(), p.data());
  EXPECT_EQ(adam->adam_step(), 11);
  Reference ref(config, {1.0, -2.0});
  ref.t = 10;
  ref.Apply(0, {0.5, 0.125});
  ExpectClose(p.data(), ref.p, 1e-6);
}

TEST(OptimizerTest, WeightDecaySkipsExcludedVariables) {
  const std::vector<Segment> segments = {{"conv1/kernel", 0, 3},
                                         {"conv1/bias", 3, 5},
                                         {"bn1/batch_norm/gamma", 5, 7},
                                         {"dense/kernel", 7, 10}};
  const std::vector<bool> decayed = {1, 1, 1, 0, 0, 0, 0, 1, 1, 1};
  for (OptimizerType type : {OptimizerType::kSgd, OptimizerType::kMomentum, OptimizerType::kAdam}) {
    SCOPED_TRACE(OptimizerTypeName(type));
    OptimizerConfig config = MakeConfig(type, 0.5f);
    config.weight_decay = 0.1f;
    config.weight_decay_exclusions = {"bias", "batch_norm"};
    std::unique_ptr<Optimizer> optimizer = MustCreate(config, segments, 10);
    std::vector<float> params(10, 2.0f);
    const std::vector<float> zero(10, 0.0f);
    optimizer->Apply(0, zero.data(), params.data());
    for (int i = 0; i < 10; ++i) {
      if (!decayed[i]) {
        EXPECT_EQ(params[i], 2.0f) << "element " << i;
      } else if (type == OptimizerType::kAdam) {
        EXPECT_NEAR(params[i], 2.0f - 0.5f, 1e-5) << "element " << i;  // Adam's first step ~ lr
      } else {
        EXPECT_NEAR(params[i], 2.0f * (1 - 0.5f * 0.1f), 1e-6) << "element " << i;
      }
    }
  }
}

TEST(OptimizerTest, WeightDecayExclusionsMayBeShellPatterns) {
  const std::vector<Segment> segments = {{"conv2d/kernel", 0, 2},
                                         {"conv2d_1/kernel", 2, 4},
                                         {"stage1/block0/bn1/gamma", 4, 6},
                                         {"dense/kernel", 6, 8},
                                         {"dense/kernel_extra", 8, 10}};
  // conv2d_*/kernel: conv2d_1 only; */gamma: the whole name; dense/kernel?:
  // exactly one more character: neither dense/kernel nor dense/kernel_extra.
  const std::vector<bool> decayed = {1, 1, 0, 0, 0, 0, 1, 1, 1, 1};
  OptimizerConfig config = MakeConfig(OptimizerType::kSgd, 0.5f);
  config.weight_decay = 0.1f;
  config.weight_decay_exclusions = {"conv2d_*/kernel", "*/gamma", "dense/kernel?"};
  std::unique_ptr<Optimizer> optimizer = MustCreate(config, segments, 10);
  std::vector<float> params(10, 2.0f);
  const std::vector<float> zero(10, 0.0f);
  optimizer->Apply(0, zero.data(), params.data());
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(params[i] != 2.0f, decayed[i]) << "element " << i << ": " << params[i];
  }
}

// Whether an update can leave every parameter as it is, checked against
// what Apply does with that gradient.
TEST(OptimizerTest, LeavesParamsUnchangedOnlyWhenApplyDoes) {
  const std::vector<Segment> segments = {{"a/kernel", 0, 3}, {"b/kernel", 3, 6, /*frozen=*/true}};
  struct Case {
    OptimizerType type;
    float weight_decay;
    std::vector<float> grad;
    bool unchanged;
  };
  const std::vector<float> zeros(6, 0.0f);
  const std::vector<float> frozen_only = {0, 0, 0, 1, 1, 1};  // gradient on the frozen one only
  const std::vector<float> one = {0, 1, 0, 0, 0, 0};
  const std::vector<float> nan = {0, std::numeric_limits<float>::quiet_NaN(), 0, 0, 0, 0};
  for (const Case& c :
       {Case{OptimizerType::kSgd, 0.0f, zeros, true},
        Case{OptimizerType::kSgd, 0.0f, frozen_only, true},
        Case{OptimizerType::kSgd, 0.0f, one, false}, Case{OptimizerType::kSgd, 0.0f, nan, false},
        Case{OptimizerType::kSgd, 0.1f, zeros, false},
        Case{OptimizerType::kMomentum, 0.0f, zeros, false},
        Case{OptimizerType::kAdam, 0.0f, zeros, false}}) {
    SCOPED_TRACE(OptimizerTypeName(c.type));
    OptimizerConfig config = MakeConfig(c.type, 0.5f);
    config.weight_decay = c.weight_decay;
    std::unique_ptr<Optimizer> optimizer = MustCreate(config, segments, 6);
    std::vector<float> params(6, 2.0f);
    // A step with a gradient first, so momentum and Adam have slots to move.
    const std::vector<float> ones(6, 1.0f);
    optimizer->Apply(0, ones.data(), params.data());
    EXPECT_EQ(optimizer->LeavesParamsUnchanged(c.grad.data()), c.unchanged);
    const std::vector<float> before = params;
    optimizer->Apply(1, c.grad.data(), params.data());
    if (c.unchanged) {
      EXPECT_EQ(params, before);
    }
  }
  // Every variable frozen: nothing ever moves, whatever the optimizer.
  std::unique_ptr<Optimizer> all_frozen =
      MustCreate(MakeConfig(OptimizerType::kAdam, 0.5f), {{"b/kernel", 0, 6, /*frozen=*/true}}, 6);
  EXPECT_TRUE(all_frozen->LeavesParamsUnchanged(frozen_only.data()));
}

TEST(OptimizerTest, FrozenVariablesKeepTheirValuesAndSlots) {
  // Frozen between two trainable ones: the runs around it stay apart.
  const std::vector<Segment> segments = {
      {"a/kernel", 0, 3}, {"b/kernel", 3, 6, /*frozen=*/true}, {"c/kernel", 6, 8}};
  for (OptimizerType type : {OptimizerType::kSgd, OptimizerType::kMomentum, OptimizerType::kAdam}) {
    SCOPED_TRACE(OptimizerTypeName(type));
    OptimizerConfig config = MakeConfig(type, 0.5f);
    config.weight_decay = 0.1f;
    std::unique_ptr<Optimizer> optimizer = MustCreate(config, segments, 8);
    std::vector<float> params(8, 2.0f);
    const std::vector<float> grad(8, 1.0f);
    for (int step = 0; step < 3; ++step) optimizer->Apply(step, grad.data(), params.data());
    for (int i = 0; i < 8; ++i) {
      if (i >= 3 && i < 6) {
        EXPECT_EQ(params[i], 2.0f) << "element " << i;
        for (int k = 0; k < optimizer->num_slots(); ++k) EXPECT_EQ(optimizer->slot(k)[i], 0.0f);
      } else {
        EXPECT_LT(params[i], 2.0f) << "element " << i;
      }
    }
  }
}

TEST(OptimizerTest, SlotsAreNamedAndZeroed) {
  std::unique_ptr<Optimizer> sgd = MustCreate(MakeConfig(OptimizerType::kSgd, 0.1f), 4);
  EXPECT_EQ(sgd->num_slots(), 0);
  std::unique_ptr<Optimizer> momentum = MustCreate(MakeConfig(OptimizerType::kMomentum, 0.1f), 4);
  ASSERT_EQ(momentum->num_slots(), 1);
  EXPECT_EQ(momentum->slot_name(0), "momentum");
  std::unique_ptr<Optimizer> adam = MustCreate(MakeConfig(OptimizerType::kAdam, 0.1f), 4);
  ASSERT_EQ(adam->num_slots(), 2);
  EXPECT_EQ(adam->slot_name(0), "m");
  EXPECT_EQ(adam->slot_name(1), "v");
  EXPECT_EQ(adam->size(), 4);
  for (int s = 0; s < 2; ++s) {
    EXPECT_THAT(std::vector<float>(adam->slot(s), adam->slot(s) + 4), ::testing::Each(0.0f));
  }
}

TEST(OptimizerTest, EmptySliceIsAllowed) {
  std::unique_ptr<Optimizer> adam = MustCreate(MakeConfig(OptimizerType::kAdam, 0.1f), {}, 0);
  adam->Apply(0, nullptr, nullptr);
  EXPECT_EQ(adam->adam_step(), 1);
}

TEST(OptimizerDeathTest, ApplyWithNullPointersIsAProgrammerError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::unique_ptr<Optimizer> sgd = MustCreate(MakeConfig(OptimizerType::kSgd, 0.1f), 4);
  EXPECT_DEATH(sgd->Apply(0, nullptr, nullptr), "needs grad and params");
}

TEST(OptimizerTest, RejectsSegmentsThatDoNotTileTheSlice) {
  const OptimizerConfig config = MakeConfig(OptimizerType::kSgd, 0.1f);
  struct Case {
    std::vector<Segment> segments;
    int64_t size;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{{"a", 1, 4}}, 4, "segment 0 (variable \"a\") begins at 1 but the slice starts at 0"},
      {{{"a", 0, 2}, {"b", 3, 4}},
       4,
       "segment 1 (variable \"b\") begins at 3 but segment 0 ends at 2"},
      {{{"a", 0, 3}, {"b", 2, 4}}, 4, "begins at 2 but segment 0 ends at 3"},
      {{{"a", 0, 3}}, 4, "segments cover [0, 3) but the slice has size 4"},
      {{{"a", 0, 5}}, 4, "segments cover [0, 5) but the slice has size 4"},
      {{{"a", 0, 2}, {"b", 2, 1}}, 1, "segment 1 (variable \"b\") ends at 1 before it begins at 2"},
      {{}, 4, "segments cover [0, 0)"},
      {{}, -1, "slice size is -1"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
        Optimizer::Create(config, c.segments, c.size);
    EXPECT_EQ(optimizer.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(optimizer.status().message(), HasSubstr(c.message));
  }
}

TEST(OptimizerTest, RejectsBadHyperparameters) {
  const float nan = std::nanf("");
  std::vector<std::pair<OptimizerConfig, const char*>> cases;
  auto add = [&](OptimizerType type, auto mutate, const char* message) {
    OptimizerConfig config = MakeConfig(type, 0.1f);
    mutate(config);
    cases.emplace_back(config, message);
  };
  add(
      OptimizerType::kMomentum, [](OptimizerConfig& c) { c.momentum = -0.5f; }, "momentum");
  add(
      OptimizerType::kMomentum, [&](OptimizerConfig& c) { c.momentum = nan; }, "momentum");
  add(
      OptimizerType::kAdam, [](OptimizerConfig& c) { c.beta1 = 1.0f; }, "beta1");
  add(
      OptimizerType::kAdam, [](OptimizerConfig& c) { c.beta2 = -0.1f; }, "beta2");
  add(
      OptimizerType::kAdam, [&](OptimizerConfig& c) { c.beta2 = nan; }, "beta2");
  add(
      OptimizerType::kAdam, [](OptimizerConfig& c) { c.epsilon = 0.0f; }, "epsilon");
  add(
      OptimizerType::kSgd, [](OptimizerConfig& c) { c.weight_decay = -1e-4f; }, "weight_decay");
  add(
      OptimizerType::kSgd,
      [](OptimizerConfig& c) {
        c.weight_decay_exclusions = {"bias", ""};
      },
      "empty weight_decay_exclusions entry");
  for (const auto& [config, message] : cases) {
    absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = Optimizer::Create(config, {}, 0);
    EXPECT_EQ(optimizer.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(optimizer.status().message(), HasSubstr(message));
  }
  // A negative learning rate cannot even be put into a config.
  EXPECT_EQ(LearningRateSchedule::Constant(-0.1f).status().code(),
            absl::StatusCode::kInvalidArgument);
}

struct Variant {
  const char* name;
  OptimizerType type;
  bool nesterov;
};

std::string VariantName(const ::testing::TestParamInfo<Variant>& info) { return info.param.name; }

class OptimizerVariantTest : public ::testing::TestWithParam<Variant> {};

INSTANTIATE_TEST_SUITE_P(AllOptimizers, OptimizerVariantTest,
                         ::testing::Values(Variant{"Sgd", OptimizerType::kSgd, false},
                                           Variant{"Momentum", OptimizerType::kMomentum, false},
                                           Variant{"Nesterov", OptimizerType::kMomentum, true},
                                           Variant{"Adam", OptimizerType::kAdam, false}),
                         VariantName);

// A slice large enough for many parallel blocks, with segment edges that fall
// inside blocks and on block edges, must match a serial float loop written as
// in optimizer.h. Elementwise math does not depend on the split, so any
// difference beyond rounding means an element was skipped, updated twice or
// got the wrong segment's weight decay.
TEST_P(OptimizerVariantTest, LargeSliceMatchesSerialReference) {
  const int64_t size = (1 << 20) + 17;
  const int64_t piece_sizes[] = {1, 7, 65535, 65537, 100003, 3, 65536};
  std::vector<Segment> segments;
  std::vector<bool> decay;
  for (int64_t begin = 0, i = 0; begin < size; ++i) {
    const int64_t end = std::min(size, begin + piece_sizes[i % 7]);
    const bool is_bias = i % 3 == 2;  // two kernels in a row, then a bias
    segments.push_back({absl::StrCat("layer", i, is_bias ? "/bias" : "/kernel"), begin, end});
    decay.insert(decay.end(), end - begin, !is_bias);
    begin = end;
  }
  OptimizerConfig config = MakeConfig(GetParam().type, 0.01f, GetParam().nesterov);
  config.weight_decay = 0.05f;
  config.weight_decay_exclusions = {"bias"};
  std::unique_ptr<Optimizer> optimizer = MustCreate(config, segments, size);

  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  std::vector<float> params(size), grad(size);
  for (float& x : params) x = normal(rng);
  std::vector<float> ref_p = params, ref_a(size, 0.0f), ref_m(size, 0.0f), ref_v(size, 0.0f);
  const float lr = 0.01f, wd = 0.05f, mu = config.momentum, b1 = config.beta1, b2 = config.beta2;
  for (int64_t t = 1; t <= 3; ++t) {
    for (float& x : grad) x = normal(rng);
    optimizer->Apply(t, grad.data(), params.data());
    const float lr_t = static_cast<float>(lr * std::sqrt(1.0 - std::pow(double{b2}, t)) /
                                          (1.0 - std::pow(double{b1}, t)));
    for (int64_t i = 0; i < size; ++i) {
      float g = grad[i];
      if (decay[i]) g += wd * ref_p[i];
      if (GetParam().type == OptimizerType::kSgd) {
        ref_p[i] -= lr * g;
      } else if (GetParam().type == OptimizerType::kMomentum) {
        ref_a[i] = mu * ref_a[i] + g;
        ref_p[i] -= GetParam().nesterov ? lr * (g + mu * ref_a[i]) : lr * ref_a[i];
      } else {
        ref_m[i] = b1 * ref_m[i] + (1.0f - b1) * g;
        ref_v[i] = b2 * ref_v[i] + (1.0f - b2) * g * g;
        ref_p[i] -= lr_t * ref_m[i] / (std::sqrt(ref_v[i]) + config.epsilon);
      }
    }
  }
  // Allow a few ulps in case the compiler contracts one side into FMAs.
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < size; ++i) {
    if (std::abs(params[i] - ref_p[i]) > 1e-6f * std::max(1.0f, std::abs(ref_p[i]))) {
      if (mismatches++ == 0) first = i;
    }
  }
  EXPECT_EQ(mismatches, 0) << "first at " << first << ": " << params[std::max<int64_t>(first, 0)]
                           << " vs " << ref_p[std::max<int64_t>(first, 0)];
}

// Minimizes f(x) = sum_i a_i (x_i - c_i)^2 / 2 from x = 0.
TEST_P(OptimizerVariantTest, ConvergesOnQuadratic) {
  const int n = 100;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> curvature(0.5f, 2.0f), target(-1.0f, 1.0f);
  std::vector<float> a(n), c(n), x(n, 0.0f), grad(n);
  for (int i = 0; i < n; ++i) {
    a[i] = curvature(rng);
    c[i] = target(rng);
  }
  OptimizerConfig config = MakeConfig(GetParam().type, 0.1f, GetParam().nesterov);
  int steps = 300;
  if (GetParam().type == OptimizerType::kAdam) {
    // Adam's steps stay ~lr in size, so it needs a decaying rate to settle.
    config.learning_rate = *LearningRateSchedule::Piecewise({500, 1000}, {0.05f, 0.005f, 0.0005f});
    steps = 2000;
  }
  std::unique_ptr<Optimizer> optimizer = MustCreate(config, n);
  for (int step = 0; step < steps; ++step) {
    for (int i = 0; i < n; ++i) grad[i] = a[i] * (x[i] - c[i]);
    optimizer->Apply(step, grad.data(), x.data());
  }
  for (int i = 0; i < n; ++i) EXPECT_NEAR(x[i], c[i], 1e-3) << "element " << i;
}

// Not a timed assertion: logs the cost of one Apply on a slice the size a ps
// holds for the CIFAR-10 ResNet, to spot a lost vectorization or parallel loop.
TEST_P(OptimizerVariantTest, LogsApplyTimeOnLargeSlice) {
  const int64_t size = 3'300'000;
  std::unique_ptr<Optimizer> optimizer =
      MustCreate(MakeConfig(GetParam().type, 1e-4f, GetParam().nesterov), size);
  std::vector<float> params(size, 0.5f), grad(size, 0.01f);
  optimizer->Apply(0, grad.data(), params.data());  // touch the slots' pages first
  const int iterations = 20;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1; i <= iterations; ++i) optimizer->Apply(i, grad.data(), params.data());
  const std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  std::cout << "[ timing ] " << GetParam().name << " Apply on " << size
            << " floats: " << elapsed.count() / iterations << " ms ("
            << tbb::this_task_arena::max_concurrency() << " TBB threads)" << std::endl;
  EXPECT_TRUE(std::isfinite(params[0]));
}

}  // namespace
}  // namespace pstrain
