#include "models/cifar10_resnet.h"

#include "absl/strings/str_cat.h"
#include "common/float_text.h"
#include "models/batch_norm.h"
#include "models/conv2d.h"
#include "models/dense.h"
#include "models/global_avg_pool.h"
#include "models/relu.h"
#include "models/residual_block.h"

namespace pstrain {
absl::StatusOr<std::unique_ptr<Model>> BuildCifar10ResNet(const ResNetOptions& options) {
  if (options.num_layers < 8 || (options.num_layers - 2) % 6 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cifar10_resnet: num_layers must be 6n + 2 (20, 32, 44, 56, 110), got ",
                     options.num_layers));
  }
  if (!(options.batch_norm_epsilon > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cifar10_resnet: batch_norm_epsilon must be positive, got ", options.batch_norm_epsilon));
  }
  const int blocks = (options.num_layers - 2) / 6;
  std::vector<std::unique_ptr<Layer>> layers;
  Conv2DOptions stem;
  stem.filters = 16;
  stem.kernel_size = 3;
  stem.padding = Padding::kSame;
  stem.use_bias = false;
  layers.push_back(std::make_unique<Conv2D>("conv2d", stem));
  layers.push_back(std::make_unique<BatchNorm>("batch_normalization", options.batch_norm_epsilon,
                                               /*relu=*/true));
  const int filters[] = {16, 32, 64};
  const int strides[] = {1, 2, 2};
  for (int stage = 0; stage < 3; ++stage) {
    for (int b = 0; b < blocks; ++b) {
      layers.push_back(std::make_unique<ResidualBlock>(
          absl::StrCat("stage", stage + 1, "/block", b), filters[stage],
          b == 0 ? strides[stage] : 1, options.batch_norm_epsilon));
    }
  }
  layers.push_back(std::make_unique<GlobalAvgPool>("global_average_pooling"));
  DenseOptions logits;
  logits.units = 10;
  layers.push_back(std::make_unique<Dense>("dense", logits));
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create("cifar10_resnet", {32, 32, 3}, 10, std::move(layers));
  if (model.ok()) {
    InputPreprocessing input;
    input.crop_padding = 4;
    input.random_flip = true;
    input.per_image_standardization = true;
    (*model)->set_input_preprocessing(input);
  }
  return model;
}

std::string Cifar10ResNetSpecYaml(int num_layers, double batch_norm_epsilon,
                                  double batch_norm_decay) {
  const float epsilon = static_cast<float>(batch_norm_epsilon);
  const float decay = static_cast<float>(batch_norm_decay);
  if (num_layers < 8 || (num_layers - 2) % 6 != 0 || !(epsilon > 0 && epsilon <= 1) ||
      !(decay >= 0 && decay < 1)) {
    return "";
  }
  const int blocks = (num_layers - 2) / 6;
  const std::string eps = ShortestFloatText(epsilon);
  const std::string momentum = ShortestFloatText(decay);
  // A 3x3 convolution as the estimator's: no bias, tf.layers' default kernel
  // initializer, fixed padding when strided.
  const auto conv = [](const std::string& name, int filters, int stride) {
    return absl::StrCat("  - conv2d: {name: ", name, ", filters: ", filters, ", kernel: 3",
                        stride > 1 ? absl::StrCat(", strides: ", stride, ", padding: fixed")
                                   : std::string(", padding: same"),
                        ", use_bias: false, kernel_initializer: glorot_uniform}\n");
  };
  const auto batch_norm = [&](const std::string& name, bool relu) {
    return absl::StrCat("  - batch_norm: {name: ", name, ", epsilon: ", eps,
                        relu ? ", relu: true" : "", ", momentum: ", momentum, "}\n");
  };
  std::string out = absl::StrCat(
      "name: cifar10_resnet\n"
      "input: [32, 32, 3]\n"
      "classes: 10\n"
      "preprocessing: {crop_padding: 4, random_flip: true, per_image_standardization: true}\n"
      "layers:\n",
      conv("conv2d", 16, 1), batch_norm("batch_normalization", true));
  std::string previous = "batch_normalization";  // the last block's output
  int channels = 16;
  const int filters[] = {16, 32, 64};
  const int strides[] = {1, 2, 2};
  for (int stage = 0; stage < 3; ++stage) {
    for (int b = 0; b < blocks; ++b) {
      const std::string block = absl::StrCat("stage", stage + 1, "/block", b);
      const int stride = b == 0 ? strides[stage] : 1;
      const bool identity = stride == 1 && channels == filters[stage];
      absl::StrAppend(&out, "  # ", block,
                      identity ? ""
                               : absl::StrCat(": stride ", stride, ", ", channels, " -> ",
                                              filters[stage], " filters"),
                      "\n");
      absl::StrAppend(&out, conv(block + "/conv1", filters[stage], stride),
                      batch_norm(block + "/bn1", true), conv(block + "/conv2", filters[stage], 1),
                      batch_norm(block + "/bn2", false));
      if (identity) {
        absl::StrAppend(&out, "  - add: {name: ", block, "/add, inputs: [", previous, "]}\n");
      } else {
        absl::StrAppend(&out, "  - average_pool: {name: ", block,
                        "/shortcut_pool, input: ", previous, ", pool: ", stride,
                        ", strides: ", stride, "}\n", "  - pad_channels: {name: ", block,
                        "/shortcut, filters: ", filters[stage], "}\n", "  - add: {name: ", block,
                        "/add, inputs: [", block, "/bn2]}\n");
      }
      absl::StrAppend(&out, "  - relu: {name: ", block, "/relu}\n");
      previous = block + "/relu";
      channels = filters[stage];
    }
  }
  absl::StrAppend(&out,
                  "  - global_average_pool: {name: global_average_pooling}\n"
                  "  - dense: {name: dense, units: 10}\n");
  return out;
}

}  // namespace pstrain
