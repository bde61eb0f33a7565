// Each optimizer of an embedding table against its update rule written out
// by hand, over 3 pushes.

#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "ps/embedding_table.h"

namespace pstrain {
namespace {

constexpr int kDim = 3;
// Gradients of rows 7 and 9 at steps 1..3 (row 9 is pushed at step 3 only).
const float kGrads[3][kDim] = {{0.5f, -0.2f, 0.01f}, {0.3f, -0.4f, -0.02f}, {-0.1f, 0.6f, 0.005f}};
const float kGrad9[kDim] = {1.0f, -2.0f, 0.25f};

std::unique_ptr<EmbeddingTable> MakeTable(EmbeddingOptimizerOptions optimizer,
                                          EmbeddingInitializerType init) {
  EmbeddingTableOptions options;
  options.name = "wide/weights";
  options.dim = kDim;
  options.initializer.type = init;
  options.initializer.scale = 0.3f;
  options.initializer.seed = 42;
  options.optimizer = optimizer;
  auto table = EmbeddingTable::Create(options);
  EXPECT_TRUE(table.ok()) << table.status();
  return std::move(table).value();
}

std::vector<float> Get(const EmbeddingTable& table, int64_t id) {
  std::vector<float> row(table.dim());
  EXPECT_TRUE(table.Lookup({id}, absl::MakeSpan(row)).ok());
  return row;
}

void Push(EmbeddingTable& table, std::vector<int64_t> ids, std::vector<float> grads, int64_t step) {
  absl::Status status = table.ApplyGradients(ids, grads, step);
  ASSERT_TRUE(status.ok()) << status;
}

// Pushes row 7 at steps 1..3 and row 9 with it at step 3.
void PushAll(EmbeddingTable& table) {
  for (int s = 0; s < 3; ++s) {
    std::vector<int64_t> ids = {7};
    std::vector<float> grads(kGrads[s], kGrads[s] + kDim);
    if (s == 2) {
      ids.push_back(9);
      grads.insert(grads.end(), kGrad9, kGrad9 + kDim);
    }
    Push(table, ids, grads, s + 1);
  }
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 + 1e-5 * std::fabs(want[i])) << "element " << i;
  }
}

TEST(EmbeddingOptimizersTest, AdagradMatchesHandComputedRule) {
  EmbeddingOptimizerOptions opt;
  opt.type = EmbeddingOptimizerType::kAdagrad;
  opt.learning_rate = 0.1f;
  opt.initial_accumulator_value = 0.1f;
  auto table = MakeTable(opt, EmbeddingInitializerType::kUniform);
  const std::vector<float> init = Get(*table, 7);
  PushAll(*table);
  std::vector<double> w(init.begin(), init.end()), acc(kDim, 0.1);
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i < kDim; ++i) {
      acc[i] += double{kGrads[s][i]} * kGrads[s][i];
      w[i] -= 0.1 * kGrads[s][i] / std::sqrt(acc[i]);
    }
  }
  ExpectNear(Get(*table, 7), w);
  EXPECT_TRUE(table
                  ->ForEachRow([&](int64_t id, absl::Span<const float>,
                                   absl::Span<const float> slots, int64_t last_step, int64_t) {
                    if (id == 7) {
                      EXPECT_EQ(last_step, 0);  // a table without eviction keeps none
                      for (int i = 0; i < kDim; ++i) EXPECT_NEAR(slots[i], acc[i], 1e-6);
                    }
                    return absl::OkStatus();
                  })
                  .ok());
}

// One FTRL-Proximal step on (w from z and n) per the paper's Algorithm 1.
struct FtrlRef {
  double alpha, beta, l1, l2;
  std::vector<double> z = std::vector<double>(kDim, 0.0), n = std::vector<double>(kDim, 0.0);
  double W(int i) const {
    if (std::fabs(z[i]) <= l1) return 0.0;
    const double sgn = z[i] < 0 ? -1.0 : 1.0;
    return -(z[i] - sgn * l1) / ((beta + std::sqrt(n[i])) / alpha + l2);
  }
  void Step(const float* g) {
    for (int i = 0; i < kDim; ++i) {
      const double sigma = (std::sqrt(n[i] + double{g[i]} * g[i]) - std::sqrt(n[i])) / alpha;
      z[i] += g[i] - sigma * W(i);
      n[i] += double{g[i]} * g[i];
    }
  }
  std::vector<double> Weights() const { return {W(0), W(1), W(2)}; }
};

TEST(EmbeddingOptimizersTest, FtrlMatchesAlgorithm1AndL1ZeroesSmallWeights) {
  EmbeddingOptimizerOptions opt;
  opt.type = EmbeddingOptimizerType::kFtrl;
  opt.alpha = 0.1f;
  opt.beta = 1.0f;
  opt.l1 = 0.05f;
  opt.l2 = 0.01f;
  auto table = MakeTable(opt, EmbeddingInitializerType::kZeros);
  PushAll(*table);
  FtrlRef ref{0.1, 1.0, 0.05, 0.01};
  for (int s = 0; s < 3; ++s) ref.Step(kGrads[s]);
  const std::vector<float> w = Get(*table, 7);
  ExpectNear(w, ref.Weights());
  // Coordinate 2's gradients sum to about -0.005: |z| <= l1, so L1 makes its
  // weight exactly 0, while coordinates 0 and 1 are not.
  EXPECT_EQ(w[2], 0.0f);
  EXPECT_NE(w[0], 0.0f);
  EXPECT_NE(w[1], 0.0f);
  // Row 9 was pushed once.
  FtrlRef ref9{0.1, 1.0, 0.05, 0.01};
  ref9.Step(kGrad9);
  ExpectNear(Get(*table, 9), ref9.Weights());
  // Slots are z then n.
  EXPECT_TRUE(table
                  ->ForEachRow([&](int64_t id, absl::Span<const float> weights,
                                   absl::Span<const float> slots, int64_t, int64_t) {
                    if (id == 7) {
                      EXPECT_EQ(weights[2], 0.0f);
                      for (int i = 0; i < kDim; ++i) {
                        EXPECT_NEAR(slots[i], ref.z[i], 1e-6);
                        EXPECT_NEAR(slots[kDim + i], ref.n[i], 1e-6);
                      }
                    }
                    return absl::OkStatus();
                  })
                  .ok());
}

TEST(EmbeddingOptimizersTest, FtrlKeepsANonZeroInitialValueUntilAGradientMovesIt) {
  EmbeddingOptimizerOptions opt;
  opt.type = EmbeddingOptimizerType::kFtrl;
  opt.l1 = 0.05f;
  auto table = MakeTable(opt, EmbeddingInitializerType::kUniform);
  const std::vector<float> init = Get(*table, 3);
  Push(*table, {3}, std::vector<float>(kDim, 0.0f), 1);  // creates the row, g = 0
  ASSERT_EQ(table->size(), 1);
  const std::vector<float> after = Get(*table, 3);
  for (int i = 0; i < kDim; ++i) EXPECT_NEAR(after[i], init[i], 1e-6f * (1 + std::fabs(init[i])));
}

TEST(EmbeddingOptimizersTest, LazyAdamCorrectsBiasByEachRowsOwnStepCount) {
  EmbeddingOptimizerOptions opt;
  opt.type = EmbeddingOptimizerType::kAdam;
  opt.learning_rate = 0.01f;
  opt.beta1 = 0.9f;
  opt.beta2 = 0.999f;
  opt.epsilon = 1e-8f;
  auto table = MakeTable(opt, EmbeddingInitializerType::kTruncatedNormal);
  const std::vector<float> init7 = Get(*table, 7);
  const std::vector<float> init9 = Get(*table, 9);
  PushAll(*table);
  auto adam = [](std::vector<float> init, std::vector<const float*> grads) {
    std::vector<double> w(init.begin(), init.end()), m(kDim, 0.0), v(kDim, 0.0);
    const double b1 = 0.9, b2 = 0.999;
    int t = 0;
    for (const float* g : grads) {
      ++t;
      const double lr_t = 0.01 * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
      for (int i = 0; i < kDim; ++i) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + 1e-8);
      }
    }
    return w;
  };
  ExpectNear(Get(*table, 7), adam(init7, {kGrads[0], kGrads[1], kGrads[2]}));
  // Row 9's only update is its first: corrected as t = 1, not as the table's 3.
  ExpectNear(Get(*table, 9), adam(init9, {kGrad9}));
  EXPECT_TRUE(table
                  ->ForEachRow([&](int64_t id, absl::Span<const float>,
                                   absl::Span<const float> slots, int64_t, int64_t) {
                    EXPECT_EQ(slots.size(), 2u * kDim + 1);
                    EXPECT_EQ(slots.back(), id == 7 ? 3.0f : 1.0f);
                    return absl::OkStatus();
                  })
                  .ok());
}

TEST(EmbeddingOptimizersTest, BadHyperparametersAreRefusedWithTheirName) {
  EmbeddingTableOptions options;
  options.name = "t";
  options.dim = 4;
  options.optimizer.type = EmbeddingOptimizerType::kAdagrad;
  options.optimizer.initial_accumulator_value = 0.0f;
  absl::Status status = EmbeddingTable::Create(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("initial_accumulator_value"), std::string::npos) << status;
  options.optimizer.type = EmbeddingOptimizerType::kFtrl;
  options.optimizer.beta = 0.0f;
  status = EmbeddingTable::Create(options).status();
  EXPECT_NE(status.message().find("beta"), std::string::npos) << status;
  options.optimizer.type = EmbeddingOptimizerType::kAdam;
  options.optimizer.beta2 = 1.0f;
  status = EmbeddingTable::Create(options).status();
  EXPECT_NE(status.message().find("beta2"), std::string::npos) << status;
  options.optimizer = {};
  options.initializer.type = EmbeddingInitializerType::kUniform;
  options.initializer.scale = -1.0f;
  status = EmbeddingTable::Create(options).status();
  EXPECT_NE(status.message().find("scale"), std::string::npos) << status;
  options.initializer = {};
  options.dim = 0;
  EXPECT_FALSE(EmbeddingTable::Create(options).ok());
}

}  // namespace
}  // namespace pstrain
