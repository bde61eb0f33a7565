#include "worker/in_process_client.h"

#include "common/status_macros.h"

namespace pstrain {

std::vector<Segment> ModelSegments(const Model& model) {
  std::vector<Segment> segments;
  for (const VariableInfo& v : model.variables()) {
    if (v.trainable) segments.push_back({v.name, v.offset, v.offset + v.size});
  }
  return segments;
}

absl::StatusOr<std::unique_ptr<InProcessClient>> InProcessClient::Create(
    const Model& model, const OptimizerConfig& config, float state_decay, uint64_t seed) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterSlice> slice,
                           ParameterSlice::Create(config, ModelSegments(model), model.num_params(),
                                                  model.num_state(), state_decay));
  std::vector<float> params(model.num_params()), state(model.num_state());
  model.InitializeVariables(seed, params.data(), state.data());
  PSTRAIN_RETURN_IF_ERROR(slice->Initialize(params, state, 0));
  return std::unique_ptr<InProcessClient>(new InProcessClient(std::move(slice)));
}

absl::StatusOr<ParameterView> InProcessClient::Pull() {
  ParameterView view;
  view.params = slice_->params_unlocked();
  view.state = slice_->state_unlocked();
  view.global_step = slice_->global_step();
  return view;
}

absl::StatusOr<PushOutcome> InProcessClient::Push(int64_t, const float* grads,
                                                  const float* batch_stats) {
  PushOutcome outcome;
  PSTRAIN_ASSIGN_OR_RETURN(outcome.global_step, slice_->Apply(grads, batch_stats));
  return outcome;
}

}  // namespace pstrain
