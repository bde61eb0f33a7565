// Models of several heads (a spec's heads:, issue 53): the loss is the
// heads' weighted sum, each head's gradient flows from its own layer, the
// logits sit side by side, and what cannot be built is refused by name.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/model.h"
#include "models/random.h"
#include "models/registry.h"

namespace pstrain {
namespace {

constexpr char kThreeHeads[] = R"(
name: three_heads
input: [3]
heads:
  - {name: clicked, kind: binary, input: click_logit}
  - {name: delay, kind: regression, input: delay_out, loss: huber, huber_delta: 0.5, weight: 0.25}
  - {name: segment, kind: softmax, classes: 3, input: segment_logits, label: seg}
layers:
  - dense: {units: 5, activation: tanh, name: shared}
  - dense: {units: 1, name: click_logit}
  - dense: {input: shared, units: 1, name: delay_out}
  - dense: {input: shared, units: 3, name: segment_logits}
)";

struct HeadsBatch {
  std::vector<float> x, labels;  // labels [n, 3]: clicked, delay, segment
};

HeadsBatch MakeHeadsBatch(int n, uint64_t seed) {
  SplitMix64 rng(seed);
  HeadsBatch b;
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) b.x.push_back(rng.Uniform() * 2 - 1);
    b.labels.push_back(static_cast<float>(rng.Next() % 2));
    b.labels.push_back(rng.Uniform() * 4 - 2);
    b.labels.push_back(static_cast<float>(rng.Next() % 3));
  }
  return b;
}

std::unique_ptr<Model> BuildHeads(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Model>> model = BuildModelFromSpecText(text, "heads.yaml");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

TEST(MultiHeadModelTest, HeadsSitSideBySideWithTheirLabelsAndLosses) {
  std::unique_ptr<Model> model = BuildHeads(kThreeHeads);
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(model->multi_head());
  ASSERT_EQ(model->heads().size(), 3u);
  EXPECT_EQ(model->num_logits(), 5);
  EXPECT_EQ(model->num_labels(), 3);
  EXPECT_EQ(model->head_offset(0), 0);
  EXPECT_EQ(model->head_offset(1), 1);
  EXPECT_EQ(model->head_offset(2), 2);
  EXPECT_EQ(model->heads()[0].label, "clicked");
  EXPECT_EQ(model->heads()[2].label, "seg");
  EXPECT_EQ(model->heads()[1].regression.loss, RegressionLoss::kHuber);
  EXPECT_EQ(model->heads()[1].weight, 0.25f);
  // The first head's, for what reads one head.
  EXPECT_EQ(model->head(), Head::kBinary);

  constexpr int kBatch = 16;
  const HeadsBatch b = MakeHeadsBatch(kBatch, 5);
  std::vector<float> params(model->num_params());
  model->InitializeVariables(3, params.data(), nullptr);
  const LossResult total =
      model->Evaluate(params.data(), nullptr, b.x.data(), b.labels.data(), kBatch);
  ASSERT_EQ(model->head_losses().size(), 3u);
  const Tensor logits = model->logits();
  ASSERT_EQ(logits.size(), kBatch * 5);
  // Each head's loss alone, from its slice of the logits and its labels.
  double weighted = 0;
  for (size_t h = 0; h < 3; ++h) {
    const ModelHead& head = model->heads()[h];
    const int k = head.num_logits();
    Tensor z({kBatch, k});
    std::vector<float> y(kBatch);
    for (int i = 0; i < kBatch; ++i) {
      for (int j = 0; j < k; ++j)
        z.data()[i * k + j] = logits.data()[i * 5 + model->head_offset(h) + j];
      y[i] = b.labels[i * 3 + h];
    }
    const LossResult alone = head.kind == Head::kBinary ? SigmoidCrossEntropy(z, y.data(), nullptr)
                             : head.kind == Head::kRegression
                                 ? RegressionLossOf(z, y.data(), head.regression, nullptr)
                                 : SoftmaxCrossEntropy(z, y.data(), nullptr);
    EXPECT_NEAR(model->head_losses()[h].loss_sum, alone.loss_sum, 1e-9) << head.name;
    EXPECT_EQ(model->head_losses()[h].correct, alone.correct) << head.name;
    weighted += head.weight * alone.loss_sum;
  }
  EXPECT_NEAR(total.loss_sum, weighted, 1e-6 * std::abs(weighted));
  EXPECT_EQ(total.correct, model->head_losses()[0].correct);
  // Infer gives the same logits, side by side.
  const Tensor& inferred = model->Infer(params.data(), nullptr, b.x.data(), kBatch);
  for (int64_t k = 0; k < inferred.size(); ++k) EXPECT_EQ(inferred.data()[k], logits.data()[k]);
}

// The gradient of the mean weighted loss, against central differences of
// Evaluate's loss, for every parameter (the shared layer's take all three
// heads' gradients).
TEST(MultiHeadModelTest, TrainStepGradientIsTheWeightedSumsNumericGradient) {
  std::unique_ptr<Model> model = BuildHeads(kThreeHeads);
  ASSERT_NE(model, nullptr);
  constexpr int kBatch = 8;
  const HeadsBatch b = MakeHeadsBatch(kBatch, 11);
  std::vector<float> params(model->num_params()), grads(model->num_params());
  model->InitializeVariables(7, params.data(), nullptr);
  model->TrainStep(params.data(), nullptr, b.x.data(), b.labels.data(), kBatch, 1, grads.data(),
                   nullptr);
  auto loss = [&](std::vector<float>& p) {
    return model->Evaluate(p.data(), nullptr, b.x.data(), b.labels.data(), kBatch).loss_sum /
           kBatch;
  };
  double worst = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    const float saved = params[k];
    const float eps = 1e-3f;
    params[k] = saved + eps;
    const double up = loss(params);
    params[k] = saved - eps;
    const double down = loss(params);
    params[k] = saved;
    const double numeric = (up - down) / (2 * eps);
    const double error = std::abs(numeric - grads[k]) / std::max(1e-2, std::abs(numeric));
    worst = std::max(worst, error);
    EXPECT_LT(error, 2e-2) << "parameter " << k << ": analytic " << grads[k] << ", numeric "
                           << numeric;
  }
  std::printf("multi-head gradient: %zu parameters, worst relative error %.3g\n", params.size(),
              worst);
}

// A head's weight scales its share of every gradient: doubling the
// regression head's weight changes only what it contributes.
TEST(MultiHeadModelTest, AHeadsWeightScalesItsGradient) {
  std::string heavier = kThreeHeads;
  heavier.replace(heavier.find("weight: 0.25"), 12, "weight: 0.5");
  std::unique_ptr<Model> a = BuildHeads(kThreeHeads), b2 = BuildHeads(heavier);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b2, nullptr);
  constexpr int kBatch = 8;
  const HeadsBatch b = MakeHeadsBatch(kBatch, 13);
  std::vector<float> params(a->num_params()), ga(params.size()), gb(params.size());
  a->InitializeVariables(2, params.data(), nullptr);
  a->TrainStep(params.data(), nullptr, b.x.data(), b.labels.data(), kBatch, 1, ga.data(), nullptr);
  b2->TrainStep(params.data(), nullptr, b.x.data(), b.labels.data(), kBatch, 1, gb.data(), nullptr);
  // delay_out's variables take only the regression head's gradient: doubled.
  for (const VariableInfo& v : a->variables()) {
    for (int64_t k = v.offset; k < v.offset + v.size; ++k) {
      if (v.name.rfind("delay_out/", 0) == 0) {
        EXPECT_NEAR(gb[k], 2 * ga[k], 1e-6) << v.name;
      } else if (v.name.rfind("shared/", 0) != 0) {
        EXPECT_EQ(gb[k], ga[k]) << v.name;
      }
    }
  }
}

TEST(MultiHeadModelTest, WhatCannotBeBuiltIsRefusedByName) {
  struct Case {
    std::string heads, layers, expected;
  };
  const std::string layers =
      "  - dense: {units: 4, name: shared}\n"
      "  - dense: {units: 1, name: a}\n"
      "  - dense: {input: shared, units: 2, name: b}\n";
  const std::vector<Case> cases = {
      {"  - {name: x, kind: binary, input: a}\n  - {name: y, kind: regression, input: b}\n", layers,
       "head y (regression, line 4) takes layer b, which gives [2]"},
      {"  - {name: x, kind: binary, input: a}\n  - {name: y, kind: binary, input: a}\n", layers,
       "takes the output of layer a, as head x does"},
      {"  - {name: x, kind: binary, input: a}\n  - {name: y, kind: binary, input: shared}\n",
       layers, "the output of the last layer, b (line 8), is no head's input"},
      {"  - {name: x, kind: binary, input: a}\n", layers, "heads is for a model of two heads"},
      {"  - {name: x, kind: binary, input: nope}\n  - {name: y, kind: softmax, classes: 2, "
       "input: b}\n",
       layers, "takes input: \"nope\", which is no layer's name"},
      {"  - {name: x, kind: binary, input: a}\n  - {name: x, kind: regression, input: b}\n", layers,
       "head x is named twice"},
      {"  - {name: x, kind: binary, input: a, label: z}\n  - {name: y, kind: softmax, classes: "
       "2, input: b, label: z}\n",
       layers, "is trained on label z, as head x is"},
      {"  - {name: x, kind: softmax, input: a}\n", layers, "a softmax head needs classes"},
      {"  - {name: x, kind: binary, input: a, loss: mae}\n", layers, "loss is a regression head's"},
      {"  - {name: x, kind: logistic, input: a}\n", layers, "heads[0].kind = \"logistic\""},
      {"  - {name: 1x, kind: binary, input: a}\n", layers, "a head's name is letters"},
      {"  - {name: x, kind: binary, input: a, weight: 0}\n", layers, "a number > 0"},
      {"  - {name: x, kind: binary, input: a, colour: red}\n", layers,
       "unknown key heads[0].colour"},
  };
  for (const Case& c : cases) {
    const std::string text = "input: [3]\nheads:\n" + c.heads + "layers:\n" + c.layers;
    absl::StatusOr<std::unique_ptr<Model>> model = BuildModelFromSpecText(text, "heads.yaml");
    ASSERT_FALSE(model.ok()) << text;
    EXPECT_NE(model.status().message().find(c.expected), std::string::npos)
        << model.status() << "\nexpected: " << c.expected;
  }
  // head: (and classes, loss) with heads: is one too many.
  absl::StatusOr<std::unique_ptr<Model>> both = BuildModelFromSpecText(
      "input: [3]\nhead: binary\nheads:\n  - {name: x, kind: binary, input: a}\n"
      "  - {name: y, kind: binary, input: b}\nlayers:\n"
      "  - dense: {units: 1, name: a}\n  - dense: {input: input, units: 1, name: b}\n",
      "heads.yaml");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("head is a single head's; with heads: each head says"),
            std::string::npos)
      << both.status();
}

TEST(MultiHeadModelTest, TheSpecRoundTripsThroughItsYaml) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(kThreeHeads, "heads.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string yaml = ModelSpecToYaml(*spec);
  absl::StatusOr<ModelSpec> again = ParseModelSpec(yaml, "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << yaml;
  EXPECT_TRUE(SameModelSpec(*spec, *again)) << yaml;
  EXPECT_EQ(again->heads.size(), 3u);
  EXPECT_EQ(again->heads[1].huber_delta, 0.5f);
  EXPECT_EQ(again->heads[2].label, "seg");
}

}  // namespace
}  // namespace pstrain
