// Layers over sequences (issue 42): dense on [L, d], sequence_pool,
// multi_head_attention and the sequence embedding, against numeric
// gradients; masks: padding changes no output and no gradient.

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/attention.h"
#include "models/dense.h"
#include "models/din_attention.h"
#include "models/embedding.h"
#include "models/random.h"
#include "models/registry.h"
#include "models/sequence_pool.h"
#include "testing/gradient_check.h"

namespace pstrain {
namespace {

GradientCheckOptions Checks(std::vector<std::vector<int32_t>> lengths = {}) {
  GradientCheckOptions options;
  options.epsilon = 1e-2f;
  options.tolerance = 2e-2f;
  options.lengths = std::move(lengths);
  return options;
}

TEST(SequenceDenseTest, ActsOnEachPositionAndMatchesNumericGradients) {
  DenseOptions o;
  o.units = 3;  // no fused ReLU: a kink within epsilon would fail the check
  Dense dense("dense", o);
  EXPECT_TRUE(CheckGradients(&dense, {2, 5, 4}, Checks()));
  EXPECT_EQ(dense.Build({5, 4}).value(), (Shape{5, 3}));
  EXPECT_EQ(dense.ForwardMultiplyAdds(), 5 * 4 * 3);
  EXPECT_FALSE(dense.Build({2, 5, 4}).ok());  // images: flatten first
}

TEST(SequenceDenseTest, OnAnEmptyInputItGivesItsBias) {
  DenseOptions o;
  o.units = 2;
  Dense dense("dense", o);
  ASSERT_EQ(dense.Build({0}).value(), (Shape{2}));
  const std::vector<float> params = {0.5f, -1.5f};  // a [0, 2] kernel, then the bias
  dense.BindOffsets({0, 0});
  Tensor in({3, 0}), out;
  ForwardArgs args;
  args.params = params.data();
  dense.Forward(in, &out, args);
  ASSERT_EQ(out.shape(), (Shape{3, 2}));
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_EQ(out[b * 2], 0.5f);
    EXPECT_EQ(out[b * 2 + 1], -1.5f);
  }
}

TEST(SequenceDenseTest, APositionGivesWhatThatRowAloneGives) {
  DenseOptions o;
  o.units = 2;
  Dense seq("seq", o), flat("flat", o);
  ASSERT_TRUE(seq.Build({3, 4}).ok());
  ASSERT_TRUE(flat.Build({4}).ok());
  LayerVariables vars = BindRandomVariables(&seq, 5);
  flat.BindOffsets({0, 8});
  Tensor x({2, 3, 4}), rows({6, 4}), y, z;
  for (int64_t i = 0; i < x.size(); ++i) x[i] = rows[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  ForwardArgs args;
  args.params = vars.params.data();
  seq.Forward(x, &y, args);
  flat.Forward(rows, &z, args);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 2}));
  for (int64_t i = 0; i < z.size(); ++i) EXPECT_FLOAT_EQ(y[i], z[i]);
}

TEST(SequencePoolTest, EveryModeMatchesNumericGradientsWithAMask) {
  for (SequencePoolMode mode : {SequencePoolMode::kMean, SequencePoolMode::kMax,
                                SequencePoolMode::kSum, SequencePoolMode::kLast}) {
    SequencePool pool("pool", mode);
    EXPECT_TRUE(CheckGradients(&pool, {3, 5, 4}, Checks({{5, 2, 0}}))) << static_cast<int>(mode);
    SequencePool unmasked("pool", mode);
    EXPECT_TRUE(CheckGradients(&unmasked, {2, 4, 3}, Checks())) << static_cast<int>(mode);
  }
}

TEST(SequencePoolTest, PoolsOnlyTheValidPositions) {
  Tensor x({2, 3, 2});
  const float values[] = {1, 10, 2, 20, 99, 99, 4, -1, -5, 7, 3, 0};
  std::copy(values, values + 12, x.data());
  const std::vector<int32_t> lengths = {2, 3};
  ForwardArgs args;
  args.lengths = {lengths.data()};
  auto pool = [&](SequencePoolMode mode) {
    SequencePool layer("pool", mode);
    EXPECT_TRUE(layer.Build({3, 2}).ok());
    Tensor y;
    layer.Forward(x, &y, args);
    return std::vector<float>(y.data(), y.data() + y.size());
  };
  const std::vector<float> mean = pool(SequencePoolMode::kMean);
  const std::vector<float> want = {1.5f, 15, 2.0f / 3, 2};
  for (int j = 0; j < 4; ++j) EXPECT_FLOAT_EQ(mean[j], want[j]);
  EXPECT_EQ(pool(SequencePoolMode::kMax), (std::vector<float>{2, 20, 4, 7}));
  EXPECT_EQ(pool(SequencePoolMode::kSum), (std::vector<float>{3, 30, 2, 6}));
  EXPECT_EQ(pool(SequencePoolMode::kLast), (std::vector<float>{2, 20, 3, 0}));
  SequencePool image("pool", SequencePoolMode::kMean);
  EXPECT_FALSE(image.Build({4, 4, 3}).ok());
}

MultiHeadAttentionOptions Attention(int heads, int key_dim, bool causal = false) {
  MultiHeadAttentionOptions o;
  o.heads = heads;
  o.key_dim = key_dim;
  o.causal = causal;
  return o;
}

TEST(MultiHeadAttentionTest, SelfAttentionMatchesNumericGradients) {
  MultiHeadAttention attention("mha", Attention(2, 3));
  EXPECT_TRUE(CheckGradients(&attention, {2, 4, 5}, Checks()));
  MultiHeadAttention masked("mha", Attention(2, 3));
  EXPECT_TRUE(CheckGradients(&masked, {3, 4, 5}, Checks({{4, 1, 0}})));
  MultiHeadAttention causal("mha", Attention(3, 2, /*causal=*/true));
  EXPECT_TRUE(CheckGradients(&causal, {2, 5, 4}, Checks({{5, 3}})));
  MultiHeadAttentionOptions values = Attention(2, 3);
  values.value_dim = 4;
  MultiHeadAttention wide_values("mha", values);
  EXPECT_TRUE(CheckGradients(&wide_values, {2, 3, 5}, Checks({{2, 3}})));
}

TEST(MultiHeadAttentionTest, DropoutMatchesNumericGradientsForItsDraw) {
  MultiHeadAttentionOptions o = Attention(2, 3);
  o.dropout = 0.3f;
  MultiHeadAttention attention("mha", o);
  EXPECT_TRUE(CheckGradients(&attention, {2, 4, 5}, Checks({{4, 3}})));
}

TEST(MultiHeadAttentionTest, TargetAttentionMatchesNumericGradients) {
  // A candidate [d] against a history [L, d'], and a query sequence.
  MultiHeadAttention candidate("mha", Attention(2, 3));
  EXPECT_TRUE(CheckInputsGradients(&candidate, {{3, 6, 4}, {3, 5}}, Checks({{6, 2, 0}, {}})));
  MultiHeadAttention queries("mha", Attention(1, 4));
  EXPECT_TRUE(CheckInputsGradients(&queries, {{2, 5, 3}, {2, 2, 6}}, Checks({{5, 4}, {2, 1}})));
}

TEST(MultiHeadAttentionTest, RefusesWhatItCannotTake) {
  MultiHeadAttention a("mha", Attention(2, 3));
  EXPECT_FALSE(a.BuildInputs({{5}}).ok());                // not a sequence
  EXPECT_FALSE(a.BuildInputs({{4, 5}, {2, 2, 2}}).ok());  // query rank 3
  MultiHeadAttention causal("mha", Attention(2, 3, true));
  EXPECT_FALSE(causal.BuildInputs({{4, 5}, {3, 5}}).ok());  // lengths differ
  MultiHeadAttention none("mha", Attention(0, 3));
  EXPECT_FALSE(none.BuildInputs({{4, 5}}).ok());
}

// BST's sync cluster job reached a different AUC from run to run (issue
// 52): the backward pass summed a row of its scratch with Eigen, whose
// packets start at the first aligned float, on heap memory aligned to 16
// bytes only, so where malloc put it changed the gradient's last bits. Each
// pass here finds the scratch at another address (the freed one is held).
TEST(MultiHeadAttentionTest, BackwardGivesTheSameBitsWhereverItsScratchLands) {
  MultiHeadAttention attention("mha", Attention(1, 4));
  constexpr int64_t kLen = 12;  // a 12 x 12 block: 576 bytes, 37 of malloc's 16-byte units
  ASSERT_TRUE(attention.Build({kLen, 6}).ok());
  LayerVariables vars = BindRandomVariables(&attention, 3);
  Tensor x({2, kLen, 6}), y, dy, dx;
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  ForwardArgs forward;
  forward.training = true;
  forward.params = vars.params.data();
  attention.Forward(x, &y, forward);
  dy.Resize(y.shape());
  for (int64_t i = 0; i < dy.size(); ++i) dy[i] = std::cos(0.91f * static_cast<float>(i));
  std::vector<float> first_grads, first_dx;
  std::vector<std::vector<float>> held;  // what the heap handed out last
  for (int pass = 0; pass < 16; ++pass) {
    // Takes the block of the size of the layer's scratch that the last pass
    // freed, so that this pass's scratch is another.
    held.emplace_back(kLen * kLen);
    std::vector<float> grads(vars.params.size(), 0.0f);
    BackwardArgs backward;
    backward.params = vars.params.data();
    backward.grads = grads.data();
    attention.Backward(x, y, dy, &dx, backward);
    const std::vector<float> din(dx.data(), dx.data() + dx.size());
    if (pass == 0) {
      first_grads = grads;
      first_dx = din;
    } else {
      // Bit for bit: a float compare would let -0 equal 0, not a changed last bit.
      ASSERT_EQ(0, std::memcmp(grads.data(), first_grads.data(), grads.size() * sizeof(float)))
          << "pass " << pass;
      ASSERT_EQ(0, std::memcmp(din.data(), first_dx.data(), din.size() * sizeof(float)))
          << "pass " << pass;
    }
  }
}

TEST(MultiHeadAttentionTest, OneKeyGivesItsValueAndNoKeyGivesTheBias) {
  MultiHeadAttention attention("mha", Attention(1, 2));
  ASSERT_TRUE(attention.Build({3, 2}).ok());
  LayerVariables vars = BindRandomVariables(&attention, 9);
  Tensor x({2, 3, 2}), y;
  for (int64_t i = 0; i < x.size(); ++i) x[i] = 0.3f * static_cast<float>(i) - 1.0f;
  const std::vector<int32_t> lengths = {1, 0};
  ForwardArgs args;
  args.params = vars.params.data();
  args.lengths = {lengths.data()};
  attention.Forward(x, &y, args);
  // Example 0 sees only key 0: every query gets value 0 through the output
  // projection; example 1 sees none: the output bias.
  const std::vector<VariableSpec> v = attention.Variables();
  const float* wv = vars.params.data() + 2 * 2 + 2 + 2 * 2 + 2;  // after query and key
  const float* bv = wv + 4;
  const float* wo = bv + 2;
  const float* bo = wo + 4;
  float value[2];
  for (int j = 0; j < 2; ++j) value[j] = x[0] * wv[j] + x[1] * wv[2 + j] + bv[j];
  for (int q = 0; q < 3; ++q) {
    for (int j = 0; j < 2; ++j) {
      EXPECT_NEAR(y[q * 2 + j], value[0] * wo[j] + value[1] * wo[2 + j] + bo[j], 1e-5);
      EXPECT_NEAR(y[6 + q * 2 + j], bo[j], 1e-6);
    }
  }
}

TEST(DinAttentionTest, MatchesNumericGradientsWithAMask) {
  for (bool fused_relu : {false, true}) {
    DinAttentionOptions o;
    o.units = 5;
    if (fused_relu) {
      o.fused = Activation::kRelu;
      o.has_activation = false;
    }
    DinAttention din("din", o);
    GradientCheckOptions checks = Checks({{4, 1, 0}, {}});
    if (fused_relu) checks.epsilon = 1e-3f;  // a ReLU's kink within epsilon fails the check
    EXPECT_TRUE(CheckInputsGradients(&din, {{3, 4, 3}, {3, 3}}, checks)) << fused_relu;
  }
}

TEST(DinAttentionTest, WeighsTheValidItemsByTheirScores) {
  DinAttentionOptions o;
  o.units = 2;
  o.has_activation = false;  // a linear unit: scores easy to compute by hand
  DinAttention din("din", o);
  ASSERT_TRUE(din.BuildInputs({{3, 1}, {1}}).ok());
  // hidden: 4 -> 2 (kernel 8, bias 2), score: 2 -> 1 (kernel 2, bias 1).
  std::vector<float> params = {1, 0, 0, 0, 0, 0, 0, 1, 0.5f, 0, 1, 2, 0.25f};
  din.BindOffsets({0, 8, 10, 12});
  Tensor history({1, 3, 1}), candidate({1, 1}), out;
  history[0] = 2;
  history[1] = 3;
  history[2] = 100;  // padding
  candidate[0] = 4;
  const std::vector<int32_t> lengths = {2};
  ForwardArgs args;
  args.params = params.data();
  args.lengths = {lengths.data(), nullptr};
  din.ForwardInputs({&history, &candidate}, &out, args);
  // z = [h, c, h - c, h c]; hidden = [h + 0.5, h c]; score = hidden0 + 2 hidden1 + 0.25.
  auto score = [](float h) { return (h + 0.5f) + 2 * (h * 4) + 0.25f; };
  EXPECT_FLOAT_EQ(out[0], score(2) * 2 + score(3) * 3);
  EXPECT_FALSE(din.BuildInputs({{3, 2}, {3}}).ok());  // dims differ
  EXPECT_FALSE(din.BuildInputs({{3, 2}}).ok());       // no candidate
}

SparseFeatureColumn Column(std::string name, const std::vector<std::vector<int64_t>>& examples) {
  SparseFeatureColumn c;
  c.name = std::move(name);
  c.kind = SparseValueKind::kIds;
  for (const auto& values : examples) {
    for (int64_t v : values) c.values.push_back(static_cast<uint64_t>(v));
    c.offsets.push_back(static_cast<int64_t>(c.values.size()));
  }
  return c;
}

// A history of items and a candidate: a BST-like tower (self-attention,
// layer norm, dense on each position, pooled) next to the candidate's
// embedding and DIN-style target attention, then an MLP.
std::string SequenceSpec(int max_length, const std::string& positions) {
  return "input: [2]\nhead: binary\nlayers:\n"
         "  - embedding: {feature: hist, dim: 4, dynamic: true, name: hist, sequence: "
         "{max_length: " +
         std::to_string(max_length) + ", positions: " + positions +
         "}}\n"
         "  - multi_head_attention: {heads: 2, key_dim: 2, name: self}\n"
         "  - add: {inputs: [hist], name: res}\n"
         "  - layer_norm: {name: ln}\n"
         "  - dense: {units: 4, activation: gelu, name: ffn}\n"
         "  - sequence_pool: {mode: mean, name: pooled}\n"
         "  - embedding: {feature: cand, dim: 4, dynamic: true, name: cand}\n"
         "  - multi_head_attention: {input: hist, query: cand, heads: 1, key_dim: 4, name: "
         "target}\n"
         "  - sequence_pool: {input: ln, mode: max, name: maxed}\n"
         "  - concat: {input: input, inputs: [pooled, target, cand, maxed]}\n"
         "  - dense: {units: 5, activation: relu}\n"
         "  - dense: {units: 1}\n";
}

SparseBatch SequenceBatch() {
  SparseBatch batch;
  // Histories of 3, 1, 0 and 7 items (the last longer than 5 keeps its last 5).
  batch.features.push_back(Column("hist", {{4, 9, 4}, {7}, {}, {1, 2, 3, 4, 5, 6, 7}}));
  batch.features.push_back(Column("cand", {{9}, {3}, {4}, {2}}));
  return batch;
}

struct StepResult {
  std::vector<float> logits;
  std::vector<float> row_grads;                     // every table's, in id order of the step
  std::map<std::string, std::vector<float>> grads;  // per variable
};

// One training step of `model` on SequenceBatch() with fixed rows and
// `params` (by variable name; positions rows beyond a model's length are
// dropped, missing ones zero).
StepResult Step(Model* model, const std::map<std::string, std::vector<float>>& values) {
  const int64_t batch = 4;
  SparseStep step;
  absl::Status prepared = model->PrepareSparse(SequenceBatch(), batch, &step);
  EXPECT_TRUE(prepared.ok()) << prepared;
  for (size_t t = 0; t < step.tables.size(); ++t) {
    const int64_t dim = model->sparse_tables()[t].dim;
    step.tables[t].rows.resize(step.tables[t].ids.size() * dim);
    for (size_t r = 0; r < step.tables[t].ids.size(); ++r) {
      SplitMix64 rng(static_cast<uint64_t>(step.tables[t].ids[r]) * 31 + t);
      for (int64_t j = 0; j < dim; ++j) step.tables[t].rows[r * dim + j] = rng.Uniform() - 0.5f;
    }
  }
  std::vector<float> params(model->num_params()), grads(model->num_params());
  for (const VariableInfo& v : model->variables()) {
    const std::vector<float>& given = values.at(v.name);
    for (int64_t k = 0; k < v.size; ++k) {
      params[v.offset + k] = k < static_cast<int64_t>(given.size()) ? given[k] : 0.0f;
    }
  }
  const float inputs[] = {0.5f, -1, 0.25f, 2, -0.5f, 0, 1, 1};
  const float labels[] = {1, 0, 0, 1};
  model->TrainStep(params.data(), nullptr, inputs, labels, batch, 1, grads.data(), nullptr, nullptr,
                   &step);
  StepResult run;
  run.logits.assign(model->logits().data(), model->logits().data() + batch);
  for (const TableStep& t : step.tables) {
    run.row_grads.insert(run.row_grads.end(), t.grads.begin(), t.grads.end());
  }
  for (const VariableInfo& v : model->variables()) {
    run.grads[v.name].assign(grads.begin() + v.offset, grads.begin() + v.offset + v.size);
  }
  return run;
}

// Values for every variable of the longest model, by name.
std::map<std::string, std::vector<float>> Values(const Model& model) {
  std::vector<float> params(model.num_params());
  model.InitializeVariables(11, params.data(), nullptr);
  SplitMix64 rng(5);
  std::map<std::string, std::vector<float>> values;
  for (const VariableInfo& v : model.variables()) {
    std::vector<float>& out = values[v.name];
    for (int64_t k = 0; k < v.size; ++k) {
      out.push_back(params[v.offset + k] + 0.2f * (rng.Uniform() - 0.5f));
    }
  }
  return values;
}

TEST(SequenceModelTest, PaddingChangesNoOutputAndNoGradient) {
  for (const std::string positions : {"none", "from_start", "from_end"}) {
    SCOPED_TRACE(positions);
    auto longest = BuildModelFromSpecText(SequenceSpec(12, positions), "seq12");
    ASSERT_TRUE(longest.ok()) << longest.status();
    const auto values = Values(**longest);
    const StepResult padded = Step(longest->get(), values);
    // With max_length 8 every history fits as it does with 12: only the
    // padding differs.
    auto shorter = BuildModelFromSpecText(SequenceSpec(8, positions), "seq8");
    ASSERT_TRUE(shorter.ok()) << shorter.status();
    const StepResult less = Step(shorter->get(), values);
    for (size_t i = 0; i < less.logits.size(); ++i) {
      EXPECT_NEAR(less.logits[i], padded.logits[i], 1e-6) << "example " << i;
    }
    ASSERT_EQ(less.row_grads.size(), padded.row_grads.size());
    for (size_t i = 0; i < less.row_grads.size(); ++i) {
      EXPECT_NEAR(less.row_grads[i], padded.row_grads[i], 1e-6) << "row value " << i;
    }
    for (const auto& [name, grad] : less.grads) {
      const std::vector<float>& other = padded.grads.at(name);
      for (size_t k = 0; k < grad.size(); ++k) {
        EXPECT_NEAR(grad[k], other[k], 1e-6) << name << " " << k;
      }
      // Position rows no example reaches get nothing.
      for (size_t k = grad.size(); k < other.size(); ++k) EXPECT_EQ(other[k], 0.0f) << name;
    }
  }
}

TEST(SequenceModelTest, AHistoryKeepsItsLastValuesInOrder) {
  EmbeddingOptions o;
  o.feature = "hist";
  o.dim = 1;
  o.max_length = 3;
  o.positions = Positions::kFromEnd;
  Embedding embedding("hist", o);
  ASSERT_TRUE(embedding.Build({0}).ok());
  embedding.BindOffsets({0});
  embedding.BindSparse({0}, {0});
  SparseStep step;
  step.examples = 2;
  step.offsets = {{0, 5, 6}};
  TableStep table;
  table.ids = {10, 20, 30, 40, 50};
  table.slots = {0, 1, 2, 3, 4, 1};
  table.rows = {1, 2, 3, 4, 5};
  step.tables = {table};
  const float positions[] = {100, 200, 300};  // 0: the most recent
  ForwardArgs args;
  args.params = positions;
  args.sparse = &step;
  Tensor in({2, 0}), out;
  embedding.Forward(in, &out, args);
  ASSERT_EQ(out.shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(std::vector<float>(out.data(), out.data() + 6),
            (std::vector<float>{303, 204, 105, 102, 0, 0}));
  EXPECT_EQ(*embedding.MadeLengths(), (std::vector<int32_t>{3, 1}));
}

// A training step's gradients of every row and variable against central
// differences of the loss, on SequenceBatch().
void CheckSequenceModelGradients(Model* m) {
  const int64_t batch = 4;
  SparseStep step;
  ASSERT_TRUE(m->PrepareSparse(SequenceBatch(), batch, &step).ok());
  SplitMix64 rng(3);
  for (size_t t = 0; t < step.tables.size(); ++t) {
    step.tables[t].rows.resize(step.tables[t].ids.size() * m->sparse_tables()[t].dim);
    for (float& v : step.tables[t].rows) v = rng.Uniform() - 0.5f;
  }
  std::vector<float> params(m->num_params()), grads(m->num_params());
  m->InitializeVariables(3, params.data(), nullptr);
  for (float& p : params) p += 0.2f * (rng.Uniform() - 0.5f);
  const float inputs[] = {0.5f, -1, 0.25f, 2, -0.5f, 0, 1, 1};
  const float labels[] = {1, 0, 0, 1};
  m->TrainStep(params.data(), nullptr, inputs, labels, batch, 1, grads.data(), nullptr, nullptr,
               &step);
  auto loss = [&]() {
    return m->Evaluate(params.data(), nullptr, inputs, labels, batch, &step).loss_sum / batch;
  };
  auto check = [&](float* value, float analytic, const std::string& what) {
    const float eps = 1e-2f;
    const float saved = *value;
    *value = saved + eps;
    const double up = loss();
    *value = saved - eps;
    const double down = loss();
    *value = saved;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(analytic, numeric, 2e-3 * std::max(1.0, std::abs(numeric))) << what;
  };
  for (size_t t = 0; t < step.tables.size(); ++t) {
    for (size_t k = 0; k < step.tables[t].rows.size(); ++k) {
      check(&step.tables[t].rows[k], step.tables[t].grads[k],
            m->sparse_tables()[t].name + " " + std::to_string(k));
    }
  }
  for (const VariableInfo& v : m->variables()) {
    for (int64_t k = 0; k < v.size; ++k) {
      check(&params[v.offset + k], grads[v.offset + k], v.name + " " + std::to_string(k));
    }
  }
}

TEST(SequenceModelTest, GradientsMatchNumeric) {
  auto model = BuildModelFromSpecText(SequenceSpec(5, "from_end"), "seq5");
  ASSERT_TRUE(model.ok()) << model.status();
  CheckSequenceModelGradients(model->get());
}

// DIN in miniature: a history and a candidate reading one item table.
const char kDinSpec[] =
    "input: [2]\nhead: binary\nlayers:\n"
    "  - embedding: {feature: hist, dim: 3, dynamic: true, table: items, sequence: {max_length: "
    "5, positions: none}, name: hist}\n"
    "  - embedding: {feature: cand, dim: 3, dynamic: true, table: items, name: cand}\n"
    "  - din_attention: {input: hist, query: cand, units: 4, name: interest}\n"
    "  - sequence_pool: {input: hist, mode: sum, name: pooled}\n"
    "  - concat: {input: input, inputs: [interest, cand, pooled]}\n"
    "  - dense: {units: 4, activation: gelu}\n"
    "  - dense: {units: 1}\n";

TEST(SequenceModelTest, AHistoryAndACandidateShareOneTable) {
  auto model = BuildModelFromSpecText(kDinSpec, "din");
  ASSERT_TRUE(model.ok()) << model.status();
  const Model& m = **model;
  ASSERT_EQ(m.sparse_tables().size(), 1u);
  EXPECT_EQ(m.sparse_tables()[0].name, "items");
  EXPECT_EQ(m.sparse_features(), (std::vector<std::string>{"hist", "cand"}));
  EXPECT_EQ(m.sparse_tables()[0].shared_features, std::vector<int>{1});
  SparseStep step;
  ASSERT_TRUE(m.PrepareSparse(SequenceBatch(), 4, &step).ok());
  // One row per distinct item of either feature: 4 9 7 1 2 3 5 6 (hist), then none new.
  EXPECT_EQ(step.tables[0].ids, (std::vector<int64_t>{4, 9, 7, 1, 2, 3, 5, 6}));
  EXPECT_EQ(step.FirstSlot(0, 1), 11);     // the candidates' slots follow hist's 11 values
  EXPECT_EQ(step.tables[0].slots[11], 1);  // cand 9 is row 1

  // Declared otherwise by the second layer: refused, naming both.
  std::string other = kDinSpec;
  other.replace(other.find("dim: 3, dynamic: true, table: items, name: cand"), 7, "dim: 4,");
  auto refused = BuildModelFromSpecText(other, "din");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "layer cand (embedding, line 5) shares table items with layer hist (line 4) but "
                "declares it otherwise"),
            std::string::npos)
      << refused.status();
}

TEST(SequenceModelTest, DinGradientsMatchNumeric) {
  auto model = BuildModelFromSpecText(kDinSpec, "din");
  ASSERT_TRUE(model.ok()) << model.status();
  CheckSequenceModelGradients(model->get());
}

TEST(SequenceModelTest, BatchNormCannotTakeAPaddedSequence) {
  const std::string spec =
      "input: [0]\nhead: binary\nlayers:\n"
      "  - embedding: {feature: a, dim: 4, dynamic: true, sequence: {max_length: 5}, name: a}\n"
      "  - batch_norm\n"
      "  - sequence_pool\n"
      "  - dense: {units: 1}\n";
  auto model = BuildModelFromSpecText(spec, "bn");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("cannot take the padded sequence of a; use layer_norm"),
            std::string::npos)
      << model.status();
}

TEST(SequenceModelTest, SequencesOfDifferentMasksDoNotMix) {
  const std::string spec =
      "input: [0]\nhead: binary\nlayers:\n"
      "  - embedding: {feature: a, dim: 4, dynamic: true, sequence: {max_length: 5}, name: a}\n"
      "  - embedding: {feature: b, dim: 4, dynamic: true, sequence: {max_length: 5}, name: b}\n"
      "  - add: {input: a, inputs: [b]}\n"
      "  - sequence_pool\n"
      "  - dense: {units: 1}\n";
  auto model = BuildModelFromSpecText(spec, "mixed");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("padded differently"), std::string::npos)
      << model.status();
}

}  // namespace
}  // namespace pstrain
