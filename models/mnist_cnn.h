#ifndef PSTRAIN_MODELS_MNIST_CNN_H_
#define PSTRAIN_MODELS_MNIST_CNN_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/model.h"
#include "models/registry.h"

namespace pstrain {

// The CNN of TensorFlow's MNIST tutorials and of Cloud ML Engine's distributed
// MNIST example, for 28x28x1 images and 10 classes:
//   conv 5x5x32 same + ReLU -> max pool 2 -> conv 5x5x64 same + ReLU ->
//   max pool 2 -> dense 1024 + ReLU -> dropout -> dense 10.
// Variable names follow tf.layers' defaults ("conv2d/kernel", "dense_1/bias").
absl::StatusOr<std::unique_ptr<Model>> BuildMnistCnn(const ModelOptions& options);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_MNIST_CNN_H_
