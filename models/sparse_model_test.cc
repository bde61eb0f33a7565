// Models with sparse layers: embedding, linear, dot_interaction and the
// binary head, checked against numeric gradients of the loss with respect to
// the rows and the dense parameters.

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "data/feature_hash.h"
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
void CheckModelGradients(Model* model, double tolerance, const SparseBatch& data = Batch()) {
  const int64_t batch = 4;
  SparseStep step;
  absl::Status prepared = model->PrepareSparse(data, batch, &step);
  ASSERT_TRUE(prepared.ok()) << prepared;
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
  const float labels[] = {1, 0, 0, 1};
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
  // Every table is read: a table the passes ignored would pass the check
  // above with zero gradients.
  for (size_t t = 0; t < step.tables.size(); ++t) {
    bool nonzero = false;
    for (float g : step.tables[t].grads) nonzero = nonzero || g != 0.0f;
    EXPECT_TRUE(nonzero) << model->sparse_tables()[t].name;
  }
}

// A linear layer over a and b with crosses [a, b] and [b, c] (c read by no
// other layer), added to a dense layer over the input; binary head.
std::unique_ptr<Model> CrossedLinear(int64_t buckets) {
  std::vector<std::unique_ptr<Layer>> layers;
  DenseOptions logit;
  logit.units = 1;
  layers.push_back(std::make_unique<Dense>("deep", logit));
  layers.push_back(std::make_unique<Linear>(
      "wide", LinearOptions{{"a", "b"}, buckets, true, {{"a", "b"}, {"b", "c"}}}));
  layers.push_back(std::make_unique<Add>("add"));
  auto model =
      Model::Create("crossed", {3}, 2, std::move(layers), {{0}, {0}, {1, 2}}, Head::kBinary);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

// Batch() and a third feature c.
SparseBatch CrossedBatch() {
  SparseBatch batch = Batch();
  batch.features.push_back(Column("c", SparseValueKind::kTokens, {{11}, {12, 13}, {14}, {11}}));
  return batch;
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
  const float labels[] = {1, 0};
  const LossResult r = (*model)->TrainStep(params.data(), nullptr, nullptr, labels, 2, 1,
                                           grads.data(), nullptr, nullptr, &step);
  EXPECT_TRUE(std::isfinite(r.loss_sum));
  EXPECT_EQ(step.tables[0].grads.size(), 6u);
}

TEST(SparseModelTest, WideAndDeepGradientsMatchNumeric) {
  auto model = WideAndDeep();
  CheckModelGradients(model.get(), 2e-2);
}

TEST(SparseModelTest, CrossesAreTablesOfTheirOwnOverTheInputFeatures) {
  auto model = CrossedLinear(0);
  ASSERT_NE(model, nullptr);
  // c is read only by a cross, and is still a column the batch carries.
  EXPECT_EQ(model->sparse_features(), (std::vector<std::string>{"a", "b", "c"}));
  const auto& tables = model->sparse_tables();
  ASSERT_EQ(tables.size(), 4u);
  EXPECT_EQ(tables[0].name, "wide/a");
  EXPECT_TRUE(tables[0].cross.empty());
  EXPECT_EQ(tables[2].name, "wide/a_X_b");
  EXPECT_EQ(tables[2].cross, (std::vector<int>{0, 1}));
  EXPECT_EQ(tables[2].feature, 0);
  EXPECT_EQ(tables[2].dim, 1);
  EXPECT_EQ(tables[2].initializer.kind, TableInitializer::kZeros);
  EXPECT_EQ(tables[3].name, "wide/b_X_c");
  EXPECT_EQ(tables[3].cross, (std::vector<int>{1, 2}));
  EXPECT_EQ(tables[3].feature, 1);
}

TEST(SparseModelTest, CrossedLinearGradientsMatchNumeric) {
  for (int64_t buckets : {0, 5}) {
    auto model = CrossedLinear(buckets);
    ASSERT_NE(model, nullptr);
    SparseBatch batch = CrossedBatch();
    if (buckets > 0) {  // ids within the buckets
      batch.features[0] = Column("a", SparseValueKind::kIds, {{1, 4}, {4}, {}, {0, 1, 1}});
      batch.features[1].values = {0, 2, 3, 3, 1};
    }
    SCOPED_TRACE(buckets);
    CheckModelGradients(model.get(), 2e-2, batch);
  }
}

// The values of a cross are the Cartesian product of the example's values
// of its features, each its combination's CrossFingerprint.
TEST(SparseModelTest, ACrossesValuesAreTheProductOfItsFeaturesValues) {
  auto model = CrossedLinear(0);
  ASSERT_NE(model, nullptr);
  SparseBatch batch;
  // Example 0: a has 2 values and b 3; example 1 has no b; example 2 has
  // a pair of example 0; example 3 has no a.
  batch.features.push_back(Column("a", SparseValueKind::kIds, {{1, 2}, {1}, {2}, {}}));
  batch.features.push_back(Column("b", SparseValueKind::kTokens, {{7, 8, 9}, {}, {8}, {7}}));
  batch.features.push_back(Column("c", SparseValueKind::kIds, {{3}, {3}, {3}, {3}}));
  SparseStep step;
  ASSERT_TRUE(model->PrepareSparse(batch, 4, &step).ok());
  const TableStep& ab = step.tables[2];
  EXPECT_EQ(ab.offsets, (std::vector<int64_t>{0, 6, 6, 7, 7}));
  ASSERT_EQ(ab.ids.size(), 6u);
  EXPECT_EQ(ab.slots, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 4}));
  // The last feature varies fastest: (1, 7), (1, 8), (1, 9), (2, 7), ...
  constexpr uint64_t kLow63 = (uint64_t{1} << 63) - 1;
  const uint64_t pair[] = {2, 8};
  EXPECT_EQ(ab.ids[4], static_cast<int64_t>(CrossFingerprint(pair, 2) & kLow63));
  const uint64_t first[] = {1, 7};
  EXPECT_EQ(ab.ids[0], static_cast<int64_t>(CrossFingerprint(first, 2) & kLow63));
  // Plain tables and their offsets are as they were.
  EXPECT_TRUE(step.tables[0].offsets.empty());
  EXPECT_EQ(step.tables[0].ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(step.offsets[1], (std::vector<int64_t>{0, 3, 3, 4, 5}));
  // [b, c]: 3 + 0 + 1 + 1 values.
  EXPECT_EQ(step.tables[3].offsets, (std::vector<int64_t>{0, 3, 3, 4, 5}));

  // A bucketed layer takes the fingerprint modulo its buckets.
  auto bucketed = CrossedLinear(1000);
  ASSERT_NE(bucketed, nullptr);
  ASSERT_TRUE(bucketed->PrepareSparse(batch, 4, &step).ok());
  EXPECT_EQ(step.tables[2].ids[4], static_cast<int64_t>(CrossFingerprint(pair, 2) % 1000));
  EXPECT_EQ(step.tables[2].offsets, (std::vector<int64_t>{0, 6, 6, 7, 7}));

  // The linear layer sums the cross's weights: example 0's six rows.
  std::vector<float> params(model->num_params(), 0.0f);
  ASSERT_TRUE(model->PrepareSparse(batch, 4, &step).ok());
  for (size_t t = 0; t < step.tables.size(); ++t)
    step.tables[t].rows.assign(step.tables[t].ids.size(), 0.0f);
  for (size_t k = 0; k < step.tables[2].rows.size(); ++k) step.tables[2].rows[k] = 1.0f + k;
  std::vector<float> inputs(4 * 3, 0.0f);
  const Tensor& logits = model->Infer(params.data(), nullptr, inputs.data(), 4, &step);
  EXPECT_FLOAT_EQ(logits[0], 1 + 2 + 3 + 4 + 5 + 6);
  EXPECT_FLOAT_EQ(logits[1], 0);
  EXPECT_FLOAT_EQ(logits[2], 5);
  EXPECT_FLOAT_EQ(logits[3], 0);
}

TEST(SparseModelTest, TooManyCombinationsAreRefusedNamingCrossAndExample) {
  auto model = CrossedLinear(0);
  ASSERT_NE(model, nullptr);
  SparseBatch batch = CrossedBatch();
  // 300 x 300 = 90000 > 65536 combinations in example 1; each feature alone
  // is within its cap.
  std::vector<int64_t> many(300);
  for (int i = 0; i < 300; ++i) many[i] = i;
  batch.features[0] = Column("a", SparseValueKind::kIds, {{1}, many, {}, {}});
  batch.features[1] = Column("b", SparseValueKind::kIds, {{1}, many, {}, {}});
  SparseStep step;
  absl::Status s = model->PrepareSparse(batch, 4, &step);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("cross [a, b] (table wide/a_X_b): example 1 of the batch has 300 x "
                             "300 combinations of values, more than the 65536"),
            std::string::npos)
      << s;
  std::vector<const SparseFeatureColumn*> columns;
  for (const SparseFeatureColumn& c : batch.features) columns.push_back(&c);
  s = model->CheckSparseColumns(columns, "/data");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("cross [a, b] (table wide/a_X_b): example 1 of /data has 300 x 300"),
            std::string::npos)
      << s;
  // 256 x 256 is the cap itself.
  many.resize(256);
  batch.features[0] = Column("a", SparseValueKind::kIds, {{1}, many, {}, {}});
  batch.features[1] = Column("b", SparseValueKind::kIds, {{1}, many, {}, {}});
  ASSERT_TRUE(model->PrepareSparse(batch, 4, &step).ok());
  EXPECT_EQ(step.tables[2].offsets[2] - step.tables[2].offsets[1], 65536);
  EXPECT_TRUE(model->CheckSparseColumns(columns, "/data").ok());
}

TEST(SparseModelTest, ALinearRefusesCrossesThatAreNotCrosses) {
  const std::vector<std::vector<std::vector<std::string>>> bad = {
      {{"a"}}, {{"a", "a"}}, {{"a", "b"}, {"b", "a"}}, {{"a_X_b", "c"}, {"a", "b_X_c"}}};
  for (const auto& crosses : bad) {
    std::vector<std::unique_ptr<Layer>> layers;
    layers.push_back(std::make_unique<Linear>("wide", LinearOptions{{"a"}, 0, true, crosses}));
    auto model = Model::Create("m", {3}, 2, std::move(layers), {{0}}, Head::kBinary);
    EXPECT_TRUE(absl::IsInvalidArgument(model.status())) << crosses.size();
    EXPECT_NE(model.status().message().find("wide: cross ["), std::string::npos) << model.status();
  }
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
  const float labels[] = {1, 0, 0};
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
