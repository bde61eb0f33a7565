#include "models/model_summary.h"

#include <string>

#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ModelSpec Spec(const std::string& text) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec(text, "net.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ModelSpec();
}

// TensorFlow's MNIST CNN: the counts Keras prints for the same layers.
TEST(ModelSummaryTest, ShapesAndCountsOfTheMnistCnn) {
  const std::string path = std::string(PSTRAIN_SOURCE_DIR) + "/models/specs/mnist_cnn.yaml";
  const ModelSpec spec = Spec(Env::Default()->ReadFile(path).value_or(""));
  absl::StatusOr<ModelSummary> s = SummarizeModelSpec(spec, "mnist_cnn.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->layers.size(), 8u);
  EXPECT_EQ(s->layers[0].type, "conv2d");
  EXPECT_EQ(s->layers[0].output_shape, (Shape{28, 28, 32}));
  EXPECT_EQ(s->layers[0].trainable, 5 * 5 * 1 * 32 + 32);
  EXPECT_THAT(s->layers[0].inputs, ElementsAre("input"));
  EXPECT_EQ(s->layers[1].output_shape, (Shape{14, 14, 32}));
  EXPECT_EQ(s->layers[1].trainable, 0);
  EXPECT_THAT(s->layers[1].inputs, ElementsAre(s->layers[0].name));
  EXPECT_EQ(s->layers[2].trainable, 5 * 5 * 32 * 64 + 64);
  EXPECT_EQ(s->layers[4].output_shape, (Shape{7 * 7 * 64}));
  EXPECT_EQ(s->layers[5].trainable, 7 * 7 * 64 * 1024 + 1024);
  EXPECT_EQ(s->layers[7].output_shape, (Shape{10}));
  EXPECT_EQ(s->trainable, 3274634);  // Keras' "Total params" for this network
  EXPECT_EQ(s->non_trainable, 0);
  const std::string table = FormatModelSummary(*s);
  EXPECT_THAT(table, HasSubstr("Model: \"mnist_cnn\""));
  EXPECT_THAT(table, HasSubstr("(None, 28, 28, 32)"));
  EXPECT_THAT(table, HasSubstr("Total params: 3,274,634"));
  EXPECT_THAT(table, HasSubstr("832"));
}

TEST(ModelSummaryTest, BatchNormStateIsNonTrainable) {
  const ModelSpec spec = Spec(R"(
input: [4]
classes: 2
layers:
  - dense: {units: 3}
  - batch_norm: {name: bn}
  - dense: {units: 2}
)");
  absl::StatusOr<ModelSummary> s = SummarizeModelSpec(spec, "net.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->layers[1].trainable, 6);      // gamma, beta
  EXPECT_EQ(s->layers[1].non_trainable, 6);  // the moving mean and variance
  EXPECT_EQ(s->non_trainable, 6);
  EXPECT_THAT(FormatModelSummary(*s), HasSubstr("Non-trainable params: 6"));
}

// DIN: sequences, a shared table at both readers (counted once), dynamic.
TEST(ModelSummaryTest, SequencesAndSharedTables) {
  const std::string path = std::string(PSTRAIN_SOURCE_DIR) + "/examples/models/din.yaml";
  const ModelSpec spec = Spec(Env::Default()->ReadFile(path).value_or(""));
  absl::StatusOr<ModelSummary> s = SummarizeModelSpec(spec, "din.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->binary);
  EXPECT_THAT(s->sparse_features, ElementsAre("hist_cat", "cand_cat"));
  const LayerSummary& hist = s->layers[0];
  EXPECT_EQ(hist.output_shape, (Shape{30, 8}));
  EXPECT_EQ(hist.trainable, 30 * 8);  // the positions
  ASSERT_EQ(hist.tables.size(), 1u);
  EXPECT_EQ(hist.tables[0].name, "categories");
  EXPECT_EQ(hist.tables[0].feature, "hist_cat");
  EXPECT_TRUE(hist.tables[0].shared);
  EXPECT_EQ(hist.tables[0].buckets, 0);
  ASSERT_EQ(s->layers[1].tables.size(), 1u);
  EXPECT_EQ(s->layers[1].tables[0].feature, "cand_cat");
  EXPECT_EQ(s->dynamic_tables, 1);
  const LayerSummary& interest = s->layers[2];
  EXPECT_EQ(interest.type, "din_attention");
  EXPECT_EQ(interest.output_shape, (Shape{8}));
  EXPECT_EQ(interest.trainable, 4 * 8 * 36 + 36 + 36 + 1);
  EXPECT_THAT(interest.inputs, ElementsAre("hist", "cand"));
  const std::string table = FormatModelSummary(*s);
  EXPECT_THAT(table, HasSubstr("hist (embedding)"));
  EXPECT_THAT(table, HasSubstr("(None, 30, 8)"));
  EXPECT_THAT(table, HasSubstr("table categories (shared): dynamic rows x 8 by hist_cat"));
  EXPECT_THAT(table, HasSubstr("1 dynamic table(s)"));
}

// Names may hold '/' (as resnet specs' "stage1/block0/conv1"); a layer with
// an activation of its own is built as two; `trainable: false` is frozen.
TEST(ModelSummaryTest, NamesWithSlashesActivationsAndFrozenLayers) {
  const ModelSpec spec = Spec(R"(
input: [4]
classes: 3
layers:
  - dense: {units: 8, activation: sigmoid, name: enc, trainable: false}
  - dense: {units: 3, name: enc/out}
)");
  absl::StatusOr<ModelSummary> s = SummarizeModelSpec(spec, "net.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->layers.size(), 2u);
  EXPECT_EQ(s->layers[0].output_shape, (Shape{8}));
  EXPECT_EQ(s->layers[0].trainable, 0);
  EXPECT_EQ(s->layers[0].non_trainable, 4 * 8 + 8);
  EXPECT_EQ(s->layers[1].output_shape, (Shape{3}));
  EXPECT_EQ(s->layers[1].trainable, 8 * 3 + 3);
  EXPECT_EQ(s->trainable + s->non_trainable, 40 + 27);
}

// A linear layer's tables, one per feature and per cross.
TEST(ModelSummaryTest, LinearTablesAndCrosses) {
  const ModelSpec spec = Spec(R"(
input: [0]
head: binary
layers:
  - linear: {features: [a, b], crosses: [[a, b]], buckets: 10, name: wide}
)");
  absl::StatusOr<ModelSummary> s = SummarizeModelSpec(spec, "net.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  const LayerSummary& wide = s->layers[0];
  ASSERT_EQ(wide.tables.size(), 3u);
  EXPECT_EQ(wide.tables[0].name, "wide/a");
  EXPECT_EQ(wide.tables[1].feature, "b");
  EXPECT_EQ(wide.tables[2].feature, "a_X_b");
  EXPECT_EQ(wide.trainable, 1);  // the bias
  EXPECT_EQ(s->table_values, 30);
}

TEST(ModelSummaryTest, BucketedTablesAreCounted) {
  const ModelSpec spec = Spec(R"(
input: [2]
head: binary
layers:
  - embedding: {feature: a, dim: 4, buckets: 100, name: emb}
  - concat: {input: input, inputs: [emb]}
  - dense: {units: 1}
)");
  absl::StatusOr<ModelSummary> s = SummarizeModelSpec(spec, "net.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->table_values, 400);
  EXPECT_EQ(s->layers[1].output_shape, (Shape{6}));
  EXPECT_THAT(FormatModelSummary(*s), HasSubstr("table emb/embeddings: 100 rows x 4 by a"));
}

// The errors the roles give: the spec's name and the layer.
TEST(ModelSummaryTest, AShapeThatDoesNotFitSaysWhere) {
  const ModelSpec spec = Spec(R"(
input: [28, 28, 1]
classes: 10
layers:
  - dense: {units: 10}
)");
  absl::StatusOr<ModelSummary> s = SummarizeModelSpec(spec, "net.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("net.yaml"));
}

}  // namespace
}  // namespace pstrain
