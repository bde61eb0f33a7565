#ifndef PSTRAIN_PS_IN_PROCESS_CLIENT_H_
#define PSTRAIN_PS_IN_PROCESS_CLIENT_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/model.h"
#include "ps/parameter_shard.h"
#include "ps_protocol/parameter_client.h"

namespace pstrain {

// Parameters and optimizer in the trainer's own process, like an Estimator
// run without TF_CONFIG: one async ParameterShard (the ps logic) over the whole
// model, with this trainer its only replica. Pull returns
// a view of the slice itself (no copy); Push applies the update at once.
class InProcessClient : public ParameterClient {
 public:
  // Initializes the model's variables from `seed`.
  static absl::StatusOr<std::unique_ptr<InProcessClient>> Create(const Model& model,
                                                                 const OptimizerConfig& config,
                                                                 float state_decay, uint64_t seed);
  // Starts from `params` (num_params()) and `state` (num_state()).
  static absl::StatusOr<std::unique_ptr<InProcessClient>> Create(const Model& model,
                                                                 const OptimizerConfig& config,
                                                                 float state_decay,
                                                                 absl::Span<const float> params,
                                                                 absl::Span<const float> state);

  absl::StatusOr<ParameterView> Pull() override;
  absl::StatusOr<PushOutcome> Push(int64_t step, const float* grads,
                                   const float* batch_stats) override;

 private:
  explicit InProcessClient(std::unique_ptr<ParameterShard> shard) : shard_(std::move(shard)) {}

  std::unique_ptr<ParameterShard> shard_;
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_IN_PROCESS_CLIENT_H_
