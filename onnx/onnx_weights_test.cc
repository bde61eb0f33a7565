#include "onnx/onnx_weights.h"

#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "config/model_spec.h"
#include "gtest/gtest.h"
#include "models/registry.h"
#include "onnx/onnx_export.h"

namespace pstrain {
namespace {

constexpr char kSpec[] = R"(name: small
input: [4, 4, 1]
classes: 2
layers:
  - conv2d: {filters: 2, kernel: 3, padding: same, name: c}
  - batch_norm: {name: bn}
  - flatten
  - dense: {units: 2, name: d}
)";

std::unique_ptr<Model> Build(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Model>> model = BuildModelFromSpecText(text, "net.yaml");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

class OnnxWeightsTest : public ::testing::Test {
 protected:
  // Writes `spec`'s model with values drawn from `seed` (and moving
  // statistics made non-trivial) as /nets/net.onnx, returning the values.
  void WriteOnnx(uint64_t seed) {
    std::unique_ptr<Model> model = Build(kSpec);
    ASSERT_NE(model, nullptr);
    params_.resize(model->num_params());
    state_.resize(model->num_state());
    model->InitializeVariables(seed, params_.data(), state_.data());
    for (size_t i = 0; i < state_.size(); ++i) state_[i] += 0.25f * (i + 1);
    absl::StatusOr<std::string> onnx = ModelToOnnx(*model, params_, state_);
    ASSERT_TRUE(onnx.ok()) << onnx.status();
    ASSERT_TRUE(env_.WriteFileAtomic("/nets/net.onnx", *onnx).ok());
  }
  // `text` with the spec's weights at /nets/net.onnx.
  static std::string WithWeights(std::string text) {
    return text.insert(text.find("layers:"), "weights: /nets/net.onnx\n");
  }

  MemEnv env_;
  std::vector<float> params_, state_;
};

TEST_F(OnnxWeightsTest, TheFilesValuesReplaceTheDrawnOnes) {
  WriteOnnx(/*seed=*/5);
  std::unique_ptr<Model> model = Build(WithWeights(kSpec));
  ASSERT_NE(model, nullptr);
  std::vector<float> params(model->num_params()), state(model->num_state());
  ASSERT_TRUE(
      InitializeModelVariables(&env_, *model, /*seed=*/9, params.data(), state.data()).ok());
  EXPECT_EQ(params, params_);
  EXPECT_EQ(state, state_);
  // Without weights, the seed's values.
  std::unique_ptr<Model> plain = Build(kSpec);
  std::vector<float> drawn(plain->num_params()), drawn_state(plain->num_state());
  ASSERT_TRUE(InitializeModelVariables(&env_, *plain, 9, drawn.data(), drawn_state.data()).ok());
  EXPECT_NE(drawn, params_);
}

TEST_F(OnnxWeightsTest, ANewHeadIsDrawnAndTheRestComesFromTheFile) {
  WriteOnnx(5);
  std::string text = kSpec;
  text.replace(text.find("name: d}"), 8, "name: new_head}");
  std::unique_ptr<Model> model = Build(WithWeights(text));
  ASSERT_NE(model, nullptr);
  std::vector<float> params(model->num_params()), state(model->num_state());
  ASSERT_TRUE(InitializeModelVariables(&env_, *model, 9, params.data(), state.data()).ok());
  std::vector<float> drawn(model->num_params()), drawn_state(model->num_state());
  model->InitializeVariables(9, drawn.data(), drawn_state.data());
  for (const VariableInfo& v : model->variables()) {
    const bool from_file = v.name.rfind("new_head/", 0) != 0;
    const std::vector<float>& expected =
        from_file ? (v.trainable ? params_ : state_) : (v.trainable ? drawn : drawn_state);
    const std::vector<float>& got = v.trainable ? params : state;
    for (int64_t i = 0; i < v.size; ++i) {
      ASSERT_EQ(got[v.offset + i], expected[v.offset + i]) << v.name << "[" << i << "]";
    }
  }
}

TEST_F(OnnxWeightsTest, MismatchesAndForeignFilesAreNamed) {
  WriteOnnx(5);
  std::string wider = kSpec;
  wider.replace(wider.find("filters: 2"), 10, "filters: 3");
  std::unique_ptr<Model> model = Build(WithWeights(wider));
  ASSERT_NE(model, nullptr);
  std::vector<float> params(model->num_params()), state(model->num_state());
  absl::Status s = InitializeModelVariables(&env_, *model, 9, params.data(), state.data());
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("/nets/net.onnx: c/kernel is [3, 3, 1, 2] in the file but "
                             "[3, 3, 1, 3] in the model"),
            std::string::npos)
      << s;

  std::string renamed = kSpec;
  for (const char* from : {"name: c}", "name: bn}", "name: d}"}) {
    renamed.replace(renamed.find(from), std::string(from).size(),
                    std::string(from).insert(6, "other_"));
  }
  model = Build(WithWeights(renamed));
  ASSERT_NE(model, nullptr);
  s = InitializeModelVariables(&env_, *model, 9, params.data(), state.data());
  EXPECT_NE(s.message().find("holds none of the"), std::string::npos) << s;

  // A missing file keeps the read's code and says what to do.
  ASSERT_TRUE(env_.DeleteFile("/nets/net.onnx").ok());
  model = Build(WithWeights(kSpec));
  s = InitializeModelVariables(&env_, *model, 9, params.data(), state.data());
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find("onnx_weights: ignore"), std::string::npos) << s;

  // Bytes that are not ONNX.
  ASSERT_TRUE(env_.WriteFileAtomic("/nets/net.onnx", "not onnx").ok());
  s = InitializeModelVariables(&env_, *model, 9, params.data(), state.data());
  EXPECT_TRUE(absl::IsInvalidArgument(s) || absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("/nets/net.onnx"), std::string::npos) << s;
}

}  // namespace
}  // namespace pstrain
