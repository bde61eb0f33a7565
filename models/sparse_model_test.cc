// Models with sparse layers: embedding, linear, dot_interaction and the
// binary head, checked against numeric gradients of the loss with respect to
// the rows and the dense parameters.

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "models/dense.h"
#include "models/dot_interaction.h"
#include "models/embedding.h"
#include "models/loss.h"
#include "models/merge.h"
#include "models/model.h"
#include "models/random.h"

namespace pstrain {
namespace {

SparseFeatureColumn Column(std::string name, SparseValueKind kind,
                           const std::vector<std::vector<int64_t>>& examples) {
  SparseFeatureColumn c;
  c.name = std::move(name);
  c.kind = kind;
  for (const auto& values : examples) {
    for (int64_t v : values) c.values.push_back(static_cast<uint64_t>(v));
    c.offsets.push_back(static_cast<int64_t>(c.values.size()));
  }
  return c;
}

// Wide & Deep in miniature: input [3]; embeddings of a (dynamic, mean) and b
// (8 buckets, sqrtn); concat with the input; dense 5 relu; dense 1; plus a
// linear part over a and b; binary head.
std::unique_ptr<Model> WideAndDeep() {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Embedding>(
      "emb_a", EmbeddingOptions{"a", 4, 0, Combiner::kMean, {TableInitializer::kUniform, 0.5f}}));
  layers.push_back(std::make_unique<Embedding>(
      "emb_b", EmbeddingOptions{"b", 4, 8, Combiner::kSqrtn, {TableInitializer::kUniform, 0.5f}}));
  layers.push_back(std::make_unique<Concat>("concat"));
  DenseOptions hidden;
  hidden.units = 5;
  hidden.activation = Activation::kRelu;
  layers.push_back(std::make_unique<Dense>("dense", hidden));
  DenseOptions logit;
  logit.units = 1;
  layers.push_back(std::make_unique<Dense>("dense_1", logit));
  layers.push_back(std::make_unique<Linear>("wide", LinearOptions{{"a", "b"}, 0, true}));
  layers.push_back(std::make_unique<Add>("add"));
  std::vector<std::vector<int>> inputs = {{0}, {0}, {0, 1, 2}, {3}, {4}, {0}, {5, 6}};
  auto model = Model::Create("wd", {3}, 2, std::move(layers), std::move(inputs), Head::kBinary);
  EXPECT_TRUE(model.ok()) << model.status();
  return std::move(*model);
}

// DLRM in miniature: bottom dense 4 over input [3]; embeddings of a and b,
// dim 4; dot interaction; dense 1.
std::unique_ptr<Model> Dlrm() {
  std::vector<std::unique_ptr<Layer>> layers;
  DenseOptions bottom;
  bottom.units = 4;
  layers.push_back(std::make_unique<Dense>("bottom", bottom));
  layers.push_back(std::make_unique<Embedding>(
      "emb_a", EmbeddingOptions{"a", 4, 0, Combiner::kSum, {TableInitializer::kUniform, 0.5f}}));
  layers.push_back(std::make_unique<Embedding>(
      "emb_b", EmbeddingOptions{"b", 4, 0, Combiner::kMean, {TableInitializer::kUniform, 0.5f}}));
  layers.push_back(std::make_unique<DotInteraction>("interact"));
  DenseOptions top;
  top.units = 1;
  layers.push_back(std::make_unique<Dense>("top", top));
  std::vector<std::vector<int>> inputs = {{0}, {0}, {0}, {1, 2, 3}, {4}};
  auto model = Model::Create("dlrm", {3}, 2, std::move(layers), std::move(inputs), Head::kBinary);
  EXPECT_TRUE(model.ok()) << model.status();
  return std::move(*model);
}

SparseBatch Batch() {
  SparseBatch batch;
  // Example 2 has no a; ids repeat within and across examples.
  batch.features.push_back(Column("a", SparseValueKind::kIds, {{5, 9}, {9}, {}, {1000000, 5, 5}}));
  batch.features.push_back(Column("b", SparseValueKind::kIds, {{0}, {7, 3}, {3}, {1}}));
  return batch;
}

// Loss (batch mean) and gradients match central differences, for every row
// value and every dense parameter.
void CheckModelGradients(Model* model, double tolerance) {
  const int64_t batch = 4;
  SparseStep step;
  ASSERT_TRUE(model->PrepareSparse(Batch(), batch, &step).ok());
  SplitMix64 rng(7);
  for (size_t t = 0; t < step.tables.size(); ++t) {
    step.tables[t].rows.resize(step.tables[t].ids.size() * model->sparse_tables()[t].dim);
    for (float& v : step.tables[t].rows) v = rng.Uniform() - 0.5f;
  }
  std::vector<float> params(model->num_params()), grads(model->num_params());
  model->InitializeVariables(3, params.data(), nullptr);
  for (float& p : params) p += 0.2f * (rng.Uniform() - 0.5f);
  std::vector<float> inputs(batch * 3);
  for (float& x : inputs) x = rng.Uniform() - 0.5f;
  const int32_t labels[] = {1, 0, 0, 1};
  model->TrainStep(params.data(), nullptr, inputs.data(), labels, batch, 1, grads.data(), nullptr,
                   nullptr, &step);
  auto loss = [&]() {
    return model->Evaluate(params.data(), nullptr, inputs.data(), labels, batch, &step).loss_sum /
           batch;
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
    EXPECT_NEAR(analytic, numeric, tolerance * std::max(1.0, std::abs(numeric))) << what;
  };
  int checked_rows = 0;
  for (size_t t = 0; t < step.tables.size(); ++t) {
    TableStep& table = step.tables[t];
    ASSERT_EQ(table.grads.size(), table.rows.size());
    for (size_t k = 0; k < table.rows.size(); ++k, ++checked_rows) {
      check(&table.rows[k], table.grads[k],
            model->sparse_tables()[t].name + " value " + std::to_string(k));
    }
  }
  EXPECT_GT(checked_rows, 10);
  for (size_t k = 0; k < params.size(); ++k) {
    check(&params[k], grads[k], "param " + std::to_string(k));
  }
}

TEST(SparseModelTest, TablesAndFeaturesAsDeclared) {
  auto model = WideAndDeep();
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->head(), Head::kBinary);
  EXPECT_EQ(model->num_logits(), 1);
  EXPECT_EQ(model->sparse_features(), (std::vector<std::string>{"a", "b"}));
  const auto& tables = model->sparse_tables();
  ASSERT_EQ(tables.size(), 4u);
  EXPECT_EQ(tables[0].name, "emb_a/embeddings");
  EXPECT_EQ(tables[0].dim, 4);
  EXPECT_EQ(tables[0].buckets, 0);
  EXPECT_EQ(tables[1].name, "emb_b/embeddings");
  EXPECT_EQ(tables[1].buckets, 8);
  EXPECT_EQ(tables[2].name, "wide/a");
  EXPECT_EQ(tables[2].dim, 1);
  EXPECT_EQ(tables[2].feature, 0);
  EXPECT_EQ(tables[3].name, "wide/b");
  EXPECT_EQ(tables[3].feature, 1);
  EXPECT_EQ(model->variables().back().name, "wide/bias");
}

TEST(SparseModelTest, PrepareDedupsIdsPerTable) {
  auto model = WideAndDeep();
  SparseStep step;
  ASSERT_TRUE(model->PrepareSparse(Batch(), 4, &step).ok());
  EXPECT_EQ(step.tables[0].ids, (std::vector<int64_t>{5, 9, 1000000}));
  EXPECT_EQ(step.tables[0].slots, (std::vector<int32_t>{0, 1, 1, 2, 0, 0}));
  EXPECT_EQ(step.tables[1].ids, (std::vector<int64_t>{0, 7, 3, 1}));
  EXPECT_EQ(step.tables[2].ids, step.tables[0].ids);
  EXPECT_EQ(step.offsets[0], (std::vector<int64_t>{0, 2, 3, 3, 6}));
}

TEST(SparseModelTest, TokensHashIntoBuckets) {
  auto model = WideAndDeep();
  SparseBatch batch = Batch();
  batch.features[1].kind = SparseValueKind::kTokens;
  batch.features[1].values = {~uint64_t{0}, 17, 8, 3, 12};
  batch.features[0].kind = SparseValueKind::kTokens;
  batch.features[0].values[0] = ~uint64_t{0};
  SparseStep step;
  ASSERT_TRUE(model->PrepareSparse(batch, 4, &step).ok());
  // 2^64 - 1 mod 8 = 7; 17 mod 8 = 1; 8 mod 8 = 0.
  EXPECT_EQ(step.tables[1].ids, (std::vector<int64_t>{7, 1, 0, 3, 4}));
  // A dynamic table keeps a fingerprint's low 63 bits.
  EXPECT_EQ(step.tables[0].ids[0], std::numeric_limits<int64_t>::max());
}

TEST(SparseModelTest, BadIdsAreRefusedNamingFeatureAndExample) {
  auto model = WideAndDeep();
  SparseStep step;
  SparseBatch negative = Batch();
  negative.features[0].values[3] = static_cast<uint64_t>(int64_t{-4});
  absl::Status s = model->PrepareSparse(negative, 4, &step);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("feature a, example 3"), std::string::npos) << s;
  EXPECT_NE(s.message().find("-4 is negative"), std::string::npos) << s;

  SparseBatch out_of_range = Batch();
  out_of_range.features[1].values[1] = 8;
  s = model->PrepareSparse(out_of_range, 4, &step);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("feature b, example 1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("out of range for table emb_b/embeddings of 8 buckets"),
            std::string::npos)
      << s;

  SparseBatch many = Batch();
  many.features[0] = Column("a", SparseValueKind::kIds,
                            {{1}, std::vector<int64_t>(kMaxValuesPerExample + 1, 3), {}, {}});
  s = model->PrepareSparse(many, 4, &step);
  EXPECT_NE(s.message().find("example 1 of the batch has 65537 values"), std::string::npos) << s;

  SparseBatch swapped = Batch();
  std::swap(swapped.features[0], swapped.features[1]);
  EXPECT_TRUE(absl::IsInvalidArgument(model->PrepareSparse(swapped, 4, &step)));
  EXPECT_TRUE(absl::IsInvalidArgument(model->PrepareSparse(Batch(), 3, &step)));
}

TEST(SparseModelTest, WholeColumnsAreCheckedWhenLoaded) {
  auto model = WideAndDeep();
  SparseBatch data = Batch();
  std::vector<const SparseFeatureColumn*> columns = {&data.features[0], &data.features[1]};
  EXPECT_TRUE(model->CheckSparseColumns(columns, "/data").ok());
  data.features[1].values[4] = 8;  // example 3 of b, beyond its 8 buckets
  absl::Status s = model->CheckSparseColumns(columns, "/data");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("feature b, example 3 of /data: id 8 is out of range"),
            std::string::npos)
      << s;
  EXPECT_TRUE(absl::IsInvalidArgument(model->CheckSparseColumns({columns[0]}, "/data")));
}

// Sparse features alone: the dense input is empty ([0]) and may be joined
// to the embeddings by a concat.
TEST(SparseModelTest, AModelWithAnEmptyDenseInputTrains) {
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Embedding>(
      "emb", EmbeddingOptions{"a", 3, 0, Combiner::kSum, {TableInitializer::kUniform, 0.5f}}));
  layers.push_back(std::make_unique<Concat>("concat"));
  DenseOptions logit;
  logit.units = 1;
  layers.push_back(std::make_unique<Dense>("dense", logit));
  auto model =
      Model::Create("sparse_only", {0}, 2, std::move(layers), {{0}, {0, 1}, {2}}, Head::kBinary);
  ASSERT_TRUE(model.ok()) << model.status();
  SparseBatch batch;
  batch.features.push_back(Column("a", SparseValueKind::kIds, {{1, 2}, {2}}));
  SparseStep step;
  ASSERT_TRUE((*model)->PrepareSparse(batch, 2, &step).ok());
  step.tables[0].rows.assign(step.tables[0].ids.size() * 3, 0.25f);
  std::vector<float> params((*model)->num_params()), grads((*model)->num_params());
  (*model)->InitializeVariables(1, params.data(), nullptr);
  const int32_t labels[] = {1, 0};
  const LossResult r = (*model)->TrainStep(params.data(), nullptr, nullptr, labels, 2, 1,
                                           grads.data(), nullptr, nullptr, &step);
  EXPECT_TRUE(std::isfinite(r.loss_sum));
  EXPECT_EQ(step.tables[0].grads.size(), 6u);
}

TEST(SparseModelTest, WideAndDeepGradientsMatchNumeric) {
  auto model = WideAndDeep();
  CheckModelGradients(model.get(), 2e-2);
}

TEST(SparseModelTest, DlrmGradientsMatchNumeric) {
  auto model = Dlrm();
  ASSERT_EQ(model->sparse_tables().size(), 2u);
  CheckModelGradients(model.get(), 2e-2);
}

TEST(SparseModelTest, DotInteractionInDlrmOrder) {
  DotInteraction layer("interact");
  auto shape = layer.BuildMerge({{2}, {2}, {2}});
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(*shape, (Shape{5}));
  Tensor x0({1, 2}), x1({1, 2}), x2({1, 2}), out;
  x0[0] = 1, x0[1] = 2, x1[0] = 3, x1[1] = 4, x2[0] = 5, x2[1] = 6;
  layer.ForwardMerge({&x0, &x1, &x2}, &out);
  // [x0, x1.x0, x2.x0, x2.x1]
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], 2);
  EXPECT_EQ(out[2], 11);
  EXPECT_EQ(out[3], 17);
  EXPECT_EQ(out[4], 39);
  EXPECT_FALSE(layer.BuildMerge({{2}, {3}}).ok());
}

TEST(SparseModelTest, SigmoidCrossEntropyIsStable) {
  Tensor logits({3, 1});
  logits[0] = 0.0f, logits[1] = 100.0f, logits[2] = -100.0f;
  const int32_t labels[] = {1, 0, 0};
  Tensor d;
  LossResult r = SigmoidCrossEntropy(logits, labels, &d);
  EXPECT_NEAR(r.loss_sum, std::log(2.0) + 100.0, 1e-9);
  EXPECT_EQ(r.correct, 1);  // -100 for label 0; 0 is not > 0 for label 1
  EXPECT_NEAR(d[0], -0.5 / 3, 1e-7);
  EXPECT_NEAR(d[1], 1.0 / 3, 1e-7);
  EXPECT_NEAR(d[2], 0.0, 1e-7);
}

}  // namespace
}  // namespace pstrain
