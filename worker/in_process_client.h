#ifndef PSTRAIN_WORKER_IN_PROCESS_CLIENT_H_
#define PSTRAIN_WORKER_IN_PROCESS_CLIENT_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"
#include "ps/parameter_slice.h"
#include "worker/parameter_client.h"

namespace pstrain {

// Optimizer segments for a model's whole trainable vector: one per variable.
std::vector<Segment> ModelSegments(const Model& model);

// Parameters and optimizer in the trainer's own process, like an Estimator
// run without TF_CONFIG: one ParameterSlice over the whole model. Pull returns
// a view of the slice itself (no copy); Push applies the update at once.
class InProcessClient : public ParameterClient {
 public:
  // Initializes the model's variables from `seed`.
  static absl::StatusOr<std::unique_ptr<InProcessClient>> Create(const Model& model,
                                                                 const OptimizerConfig& config,
                                                                 float state_decay, uint64_t seed);

  absl::StatusOr<ParameterView> Pull() override;
  absl::StatusOr<PushOutcome> Push(int64_t step, const float* grads,
                                   const float* batch_stats) override;

  const ParameterSlice& slice() const { return *slice_; }

 private:
  explicit InProcessClient(std::unique_ptr<ParameterSlice> slice) : slice_(std::move(slice)) {}

  std::unique_ptr<ParameterSlice> slice_;
};

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_IN_PROCESS_CLIENT_H_
