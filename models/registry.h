#ifndef PSTRAIN_MODELS_REGISTRY_H_
#define PSTRAIN_MODELS_REGISTRY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "config/model_spec.h"
#include "models/model.h"
#include "models/spec_builder.h"

namespace pstrain {

// Options shared by the model builders; each uses what applies to it.
struct ModelOptions {
  float dropout_rate = 0.4f;  // mnist_cnn
  int num_layers = 44;        // cifar10_resnet: 6n + 2
  float batch_norm_epsilon = 1e-5f;
  // The job's batch_norm_decay: < 0 (not set) gives each model its own,
  // cifar10_resnet's 0.997 (written into its spec) and Keras' 0.99 for a
  // spec's batch_norm without momentum; >= 0 is the decay of every batch
  // norm that does not set its own.
  double batch_norm_decay = -1;
};

// The built-in models are model specs (config/model_spec.h): the files in
// models/specs/, compiled into the binaries; cifar10_resnet's at any 6n + 2
// depth is written out from a template. This table is the one place that
// names them.

// The spec text of the built-in `name` with `options` (cifar10_resnet's
// num_layers and batch_norm_epsilon). InvalidArgument for an unknown name,
// listing the known ones.
absl::StatusOr<std::string> BuiltinModelSpec(const std::string& name, const ModelOptions& options);

// Reads a spec's text and builds it (models/spec_builder.h); the model keeps
// the spec (Model::spec_yaml). `source` begins every message.
absl::StatusOr<std::unique_ptr<Model>> BuildModelFromSpecText(std::string_view yaml,
                                                              std::string_view source,
                                                              const SpecBuildOptions& options = {});

// The same for a spec already read; InvalidArgument also for a model with no
// variable to train.
absl::StatusOr<std::unique_ptr<Model>> BuildSpecModel(const ModelSpec& spec,
                                                      std::string_view source,
                                                      const SpecBuildOptions& options = {});

// The spec build options of a job's batch_norm_decay (ModelOptions'): a
// decay the job sets is every batch norm's without its own momentum.
SpecBuildOptions SpecBuildOptionsOf(double batch_norm_decay);

// Builds the built-in `name` ("mnist_cnn") from its spec. InvalidArgument for
// an unknown name, listing the known ones.
absl::StatusOr<std::unique_ptr<Model>> BuildModel(const std::string& name,
                                                  const ModelOptions& options);

// Names BuildModel accepts.
std::vector<std::string> ModelNames();

// What a registered model trains with unless the job says otherwise; the one
// place model-specific defaults live. An unknown model gets the generic ones.

// The optimizer: adam for mnist_cnn (as the MNIST tutorials), momentum for
// cifar10_resnet (as the CIFAR-10 estimator).
std::string DefaultOptimizer(const std::string& model);

// The learning-rate schedule ("step:multiplier,...", "" for a constant rate)
// for `batch_size` x `replicas` examples per global step. cifar10_resnet:
// the CIFAR-10 estimator's, x0.1, x0.01, x0.002 at epochs 82, 123, 300 of
// 45000 / (batch_size x replicas) batches.
std::string DefaultLearningRateSchedule(const std::string& model, int batch_size, int replicas);

// InvalidArgument naming the setting ("training.num_layers = 21: ...") when
// `options` do not fit `model` (cifar10_resnet needs 6n + 2 layers).
absl::Status CheckModelOptions(const std::string& model, const ModelOptions& options);

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_REGISTRY_H_
