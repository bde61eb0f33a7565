// The multi-task layers, mmoe and slice: numeric gradients of the input and
// of every variable, the forward pass against a direct computation, their
// refusals, and a spec of both built and run.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "config/model_spec.h"
#include "gtest/gtest.h"
#include "models/mmoe.h"
#include "models/model_summary.h"
#include "models/random.h"
#include "models/registry.h"
#include "models/slice.h"
#include "testing/gradient_check.h"

namespace pstrain {
namespace {

MmoeOptions Options(int experts, int tasks, std::vector<int> units) {
  MmoeOptions o;
  o.experts = experts;
  o.tasks = tasks;
  o.units = std::move(units);
  return o;
}

// The mixture computed directly, in double, from the variables in the
// layer's order: per expert its layers (kernel, bias) with ReLUs, then per
// task its gate's kernel and bias.
std::vector<double> DirectMmoe(const Tensor& in, const std::vector<float>& params,
                               const MmoeOptions& o) {
  const int64_t batch = in.dim(0), d = in.dim(1);
  const int64_t u = o.units.back();
  std::vector<double> out(batch * o.tasks * u, 0.0);
  for (int64_t n = 0; n < batch; ++n) {
    const float* p = params.data();
    std::vector<std::vector<double>> experts;
    for (int e = 0; e < o.experts; ++e) {
      std::vector<double> h(in.data() + n * d, in.data() + (n + 1) * d);
      for (int units : o.units) {
        const int64_t from = static_cast<int64_t>(h.size());
        const float* kernel = p;
        const float* bias = p + from * units;
        p = bias + units;
        std::vector<double> next(units);
        for (int j = 0; j < units; ++j) {
          double z = bias[j];
          for (int64_t i = 0; i < from; ++i) z += h[i] * kernel[i * units + j];
          next[j] = std::max(z, 0.0);
        }
        h = std::move(next);
      }
      experts.push_back(std::move(h));
    }
    for (int t = 0; t < o.tasks; ++t) {
      const float* kernel = p;
      const float* bias = p + d * o.experts;
      p = bias + o.experts;
      std::vector<double> z(o.experts);
      double most = -1e300, sum = 0;
      for (int e = 0; e < o.experts; ++e) {
        z[e] = bias[e];
        for (int64_t i = 0; i < d; ++i) z[e] += in[n * d + i] * kernel[i * o.experts + e];
        most = std::max(most, z[e]);
      }
      for (double& v : z) sum += v = std::exp(v - most);
      for (int e = 0; e < o.experts; ++e) {
        for (int64_t j = 0; j < u; ++j) {
          out[(n * o.tasks + t) * u + j] += z[e] / sum * experts[e][j];
        }
      }
    }
  }
  return out;
}

// The last case is large enough for the GEMMs to be split over the pool.
TEST(MmoeTest, ForwardIsTheGateWeightedSumOfTheExperts) {
  struct Case {
    MmoeOptions o;
    int64_t batch, d;
  };
  for (const Case& c :
       {Case{Options(3, 2, {6, 4}), 5, 7}, Case{Options(1, 1, {3}), 5, 7},
        Case{Options(4, 3, {5, 3, 2}), 5, 7}, Case{Options(2, 2, {96, 64}), 600, 40}}) {
    const MmoeOptions& o = c.o;
    Mmoe mmoe("mmoe", o);
    ASSERT_TRUE(mmoe.Build({c.d}).ok());
    LayerVariables vars = BindRandomVariables(&mmoe, 3);
    Tensor in({c.batch, c.d}), out;
    SplitMix64 rng(4);
    for (int64_t i = 0; i < in.size(); ++i) in[i] = 2.0f * rng.Uniform() - 1.0f;
    ForwardArgs args;
    args.params = vars.params.data();
    mmoe.Forward(in, &out, args);
    const std::vector<double> want = DirectMmoe(in, vars.params, o);
    ASSERT_EQ(out.shape(), (Shape{c.batch, o.tasks * o.units.back()}));
    for (int64_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-5) << i;
  }
}

TEST(MmoeTest, VariablesAreNamedPerExpertLayerAndGate) {
  Mmoe mmoe("mmoe", Options(2, 2, {6, 4}));
  ASSERT_TRUE(mmoe.Build({8}).ok());
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const VariableSpec& v : mmoe.Variables()) {
    names.push_back(v.name);
    shapes.push_back(v.shape);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"expert0/kernel0", "expert0/bias0", "expert0/kernel1",
                                             "expert0/bias1", "expert1/kernel0", "expert1/bias0",
                                             "expert1/kernel1", "expert1/bias1", "gate0/kernel",
                                             "gate0/bias", "gate1/kernel", "gate1/bias"}));
  EXPECT_EQ(shapes[0], (Shape{8, 6}));
  EXPECT_EQ(shapes[2], (Shape{6, 4}));
  EXPECT_EQ(shapes[8], (Shape{8, 2}));
  EXPECT_EQ(shapes[9], (Shape{2}));
  EXPECT_EQ(mmoe.ForwardMultiplyAdds(), 2 * (8 * 6 + 6 * 4) + 2 * 8 * 2 + 2 * 2 * 4);
}

// Every input element and every variable checked (max_checks covers them).
TEST(MmoeTest, GradientsMatchNumeric) {
  double most = 0;
  for (const MmoeOptions& o :
       {Options(3, 2, {6, 4}), Options(1, 1, {3}), Options(4, 3, {5, 3, 2})}) {
    Mmoe mmoe("mmoe", o);
    GradientCheckOptions checks;
    checks.epsilon = 1e-3f;  // a ReLU's kink within epsilon fails the check
    checks.max_checks = 1000;
    double error = 0;
    checks.max_error = &error;
    EXPECT_TRUE(CheckGradients(&mmoe, {4, 5}, checks)) << o.experts << " experts";
    most = std::max(most, error);
  }
  std::printf("mmoe: largest relative gradient error against numeric %.2e\n", most);
}

TEST(MmoeTest, RefusesWhatItCannotTake) {
  const auto message = [](const MmoeOptions& o, const Shape& input) {
    Mmoe mmoe("tasks", o);
    absl::StatusOr<Shape> built = mmoe.Build(input);
    EXPECT_TRUE(absl::IsInvalidArgument(built.status())) << built.status();
    return std::string(built.status().message());
  };
  EXPECT_NE(message(Options(0, 2, {4}), {8}).find("tasks: mmoe needs experts >= 1 (got 0)"),
            std::string::npos);
  EXPECT_NE(message(Options(2, 0, {4}), {8}).find("tasks >= 1 (got 0)"), std::string::npos);
  EXPECT_NE(message(Options(2, 2, {}), {8}).find("units"), std::string::npos);
  EXPECT_NE(message(Options(2, 2, {4, 0}), {8}).find("units"), std::string::npos);
  EXPECT_NE(message(Options(2, 2, {4}), {3, 8}).find("takes a flat input [d]"), std::string::npos);
}

TEST(SliceTest, TakesItsRangeAndGradientsMatchNumeric) {
  Slice slice("t1", 2, 3);
  ASSERT_TRUE(slice.Build({6}).ok());
  Tensor in({2, 6}), out;
  for (int64_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  slice.Forward(in, &out, {});
  ASSERT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(std::vector<float>(out.data(), out.data() + 6),
            (std::vector<float>{2, 3, 4, 8, 9, 10}));
  Tensor dout({2, 3}), din;
  for (int64_t i = 0; i < dout.size(); ++i) dout[i] = 1.0f + static_cast<float>(i);
  slice.Backward(in, out, dout, &din, {});
  EXPECT_EQ(std::vector<float>(din.data(), din.data() + 12),
            (std::vector<float>{0, 0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 0}));

  double most = 0, error = 0;
  GradientCheckOptions checks;
  checks.max_error = &error;
  for (const auto& [begin, size] : {std::pair{0, 7}, {0, 1}, {3, 4}, {6, 1}}) {
    Slice s("slice", begin, size);
    EXPECT_TRUE(CheckGradients(&s, {3, 7}, checks)) << begin << " " << size;
    most = std::max(most, error);
  }
  std::printf("slice: largest relative gradient error against numeric %.2e\n", most);
}

TEST(SliceTest, RefusesARangeOutsideItsInput) {
  for (const auto& [begin, size] : {std::pair{5, 4}, {8, 1}, {-1, 2}, {0, 0}}) {
    Slice slice("t0", begin, size);
    absl::StatusOr<Shape> built = slice.Build({8});
    ASSERT_TRUE(absl::IsInvalidArgument(built.status())) << begin << " " << size;
    EXPECT_NE(built.status().message().find("t0: slice's begin"), std::string::npos)
        << built.status();
    EXPECT_NE(built.status().message().find("input's [0, 8)"), std::string::npos) << built.status();
  }
  Slice slice("t0", 0, 2);
  EXPECT_FALSE(slice.Build({2, 4}).ok());
}

// Two towers over an mmoe, each taking its task's part, joined.
const char kMultitaskSpec[] = R"(input: [8]
head: binary
layers:
  - mmoe: {name: mmoe, experts: 3, tasks: 2, units: [6, 4]}
  - slice: {name: t0, input: mmoe, begin: 0, size: 4}
  - dense: {units: 3, activation: relu, name: tower0}
  - slice: {name: t1, input: mmoe, begin: 4, size: 4}
  - dense: {units: 3, activation: relu, name: tower1}
  - concat: {input: tower0, inputs: [tower1]}
  - dense: {units: 1, name: out}
)";

TEST(MultitaskModelTest, ASpecOfMmoeAndSlicesBuildsInfersAndTrains) {
  // The brief's spec: one task's part taken.
  auto simple = BuildModelFromSpecText(R"(input: [8]
head: binary
layers:
  - mmoe: {name: mmoe, experts: 3, tasks: 2, units: [6, 4]}
  - slice: {name: t0, input: mmoe, begin: 0, size: 4}
  - dense: {name: out, units: 1}
)",
                                       "mmoe.yaml");
  ASSERT_TRUE(simple.ok()) << simple.status();
  EXPECT_EQ((*simple)->num_params(), 3 * (8 * 6 + 6 + 6 * 4 + 4) + 2 * (8 * 3 + 3) + 4 + 1);

  auto model = BuildModelFromSpecText(kMultitaskSpec, "multitask.yaml");
  ASSERT_TRUE(model.ok()) << model.status();
  Model& m = **model;
  std::vector<std::string> names;
  for (const VariableInfo& v : m.variables()) names.push_back(v.name);
  EXPECT_EQ(names.front(), "mmoe/expert0/kernel0");
  EXPECT_NE(std::find(names.begin(), names.end(), "mmoe/gate1/bias"), names.end());
  std::vector<float> params(m.num_params()), grads(m.num_params());
  m.InitializeVariables(3, params.data(), nullptr);
  SplitMix64 rng(5);
  for (float& p : params) p += 0.2f * (rng.Uniform() - 0.5f);  // biases off zero
  std::vector<float> inputs(4 * 8);
  for (float& x : inputs) x = 2.0f * rng.Uniform() - 1.0f;
  const Tensor& logits = m.Infer(params.data(), nullptr, inputs.data(), 4);
  ASSERT_EQ(logits.shape(), (Shape{4, 1}));
  for (int64_t i = 0; i < logits.size(); ++i) EXPECT_TRUE(std::isfinite(logits[i]));

  // The model's gradients of every variable against numeric ones.
  const float labels[] = {1, 0, 0, 1};
  m.TrainStep(params.data(), nullptr, inputs.data(), labels, 4, 1, grads.data(), nullptr, nullptr);
  auto loss = [&]() {
    return m.Evaluate(params.data(), nullptr, inputs.data(), labels, 4).loss_sum / 4;
  };
  double most = 0;
  for (const VariableInfo& v : m.variables()) {
    for (int64_t k = 0; k < v.size; ++k) {
      float& value = params[v.offset + k];
      const float eps = 1e-3f, saved = value;
      value = saved + eps;
      const double up = loss();
      value = saved - eps;
      const double down = loss();
      value = saved;
      const double numeric = (up - down) / (2 * eps);
      const double analytic = grads[v.offset + k];
      const double error = std::abs(analytic - numeric) / std::max(1.0, std::abs(numeric));
      most = std::max(most, error);
      EXPECT_LE(error, 2e-3) << v.name << " " << k << ": analytic " << analytic << " numeric "
                             << numeric;
    }
  }
  std::printf("multitask model: largest gradient error against numeric %.2e\n", most);
}

TEST(MultitaskModelTest, TheSummaryListsEachLayerWithItsShapeAndParameters) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(kMultitaskSpec, "multitask.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<ModelSummary> summary = SummarizeModelSpec(*spec, "multitask.yaml");
  ASSERT_TRUE(summary.ok()) << summary.status();
  const LayerSummary& mmoe = summary->layers[0];
  EXPECT_EQ(mmoe.type, "mmoe");
  EXPECT_EQ(mmoe.output_shape, (Shape{8}));
  EXPECT_EQ(mmoe.trainable, 3 * (8 * 6 + 6 + 6 * 4 + 4) + 2 * (8 * 3 + 3));
  const LayerSummary& t1 = summary->layers[3];
  EXPECT_EQ(t1.type, "slice");
  EXPECT_EQ(t1.output_shape, (Shape{4}));
  EXPECT_EQ(t1.inputs, std::vector<std::string>{"mmoe"});
  EXPECT_EQ(t1.trainable, 0);
  EXPECT_NE(FormatModelSummary(*summary).find("t1 (slice)"), std::string::npos);
}

TEST(MultitaskModelTest, ARangeOutsideTheMmoesOutputIsRefusedNamingTheLayer) {
  std::string spec = kMultitaskSpec;
  spec.replace(spec.find("begin: 4, size: 4"), 17, "begin: 6, size: 4");
  auto model = BuildModelFromSpecText(spec, "multitask.yaml");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("layer t1 (slice, line 7) cannot take its input [8]: "
                                          "t1: slice's begin (6) and size (4)"),
            std::string::npos)
      << model.status();
}

}  // namespace
}  // namespace pstrain
