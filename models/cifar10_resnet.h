#ifndef PSTRAIN_MODELS_CIFAR10_RESNET_H_
#define PSTRAIN_MODELS_CIFAR10_RESNET_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/model.h"

namespace pstrain {

struct ResNetOptions {
  int num_layers = 44;  // 6n + 2: 20, 32, 44, 56, 110
  float batch_norm_epsilon = 1e-5f;
};

// The CIFAR-10 ResNet of He et al. (2015) as TensorFlow's CIFAR-10 estimator
// example builds it: a 3x3 conv of 16 filters, batch norm, ReLU; three stages
// of n residual blocks (16, 32, 64 filters; the second and third start with
// stride 2); global average pooling; dense 10. Takes 32x32x3 images.
// InvalidArgument unless num_layers is 6n + 2 with n >= 1.
absl::StatusOr<std::unique_ptr<Model>> BuildCifar10ResNet(const ResNetOptions& options);

// The same network as a model spec (config/model_spec.h), every layer written
// out: the text that BuildModelFromSpec (models/spec_builder.h) builds into a
// model with the same variables (names, shapes, order, initializers), the same
// input preprocessing and the same layers (each block's conv2d, batch_norm,
// conv2d, batch_norm, shortcut, add, relu fused back into one ResidualBlock),
// so the same loss and gradients. The shortcut of a block that widens is an
// average_pool and a pad_channels; strided convolutions have padding: fixed.
// Its batch norms' momentum is `batch_norm_decay` (the estimator's 0.997 by
// default), written out: a spec's batch_norm without one takes Keras' 0.99.
// models/specs/cifar10_resnet.yaml is Cifar10ResNetSpecYaml(20, 1e-5).
// Empty unless num_layers is 6n + 2 with n >= 1, batch_norm_epsilon is in
// (0, 1] and batch_norm_decay in [0, 1) (what the spec accepts).
std::string Cifar10ResNetSpecYaml(int num_layers, double batch_norm_epsilon,
                                  double batch_norm_decay = 0.997);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_CIFAR10_RESNET_H_
