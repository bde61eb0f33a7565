#include "models/mnist_cnn.h"

#include "models/conv2d.h"
#include "models/dense.h"
#include "models/dropout.h"
#include "models/flatten.h"
#include "models/max_pool2d.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<Model>> BuildMnistCnn(const ModelOptions& options) {
  std::vector<std::unique_ptr<Layer>> layers;
  Conv2DOptions conv1;
  conv1.filters = 32;
  conv1.kernel_size = 5;
  conv1.padding = Padding::kSame;
  conv1.activation = Activation::kRelu;
  layers.push_back(std::make_unique<Conv2D>("conv2d", conv1));
  layers.push_back(std::make_unique<MaxPool2D>("max_pooling2d", 2, 2));
  Conv2DOptions conv2 = conv1;
  conv2.filters = 64;
  layers.push_back(std::make_unique<Conv2D>("conv2d_1", conv2));
  layers.push_back(std::make_unique<MaxPool2D>("max_pooling2d_1", 2, 2));
  layers.push_back(std::make_unique<Flatten>("flatten"));
  DenseOptions dense;
  dense.units = 1024;
  dense.activation = Activation::kRelu;
  layers.push_back(std::make_unique<Dense>("dense", dense));
  layers.push_back(std::make_unique<Dropout>("dropout", options.dropout_rate));
  DenseOptions logits;
  logits.units = 10;
  layers.push_back(std::make_unique<Dense>("dense_1", logits));
  return Model::Create("mnist_cnn", {28, 28, 1}, 10, std::move(layers));
}

}  // namespace pstrain
