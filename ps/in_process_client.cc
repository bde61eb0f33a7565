#include "ps/in_process_client.h"

#include <algorithm>

#include "common/status_macros.h"
#include "ps_protocol/shard_layout.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<InProcessClient>> InProcessClient::Create(
    const Model& model, const OptimizerConfig& config, float state_decay, uint64_t seed,
    const SparseTableRules& rules) {
  std::vector<float> params(model.num_params()), state(model.num_state());
  model.InitializeVariables(seed, params.data(), state.data());
  return Create(model, config, state_decay, params, state, rules);
}

absl::StatusOr<std::unique_ptr<InProcessClient>> InProcessClient::Create(
    const Model& model, const OptimizerConfig& config, float state_decay,
    absl::Span<const float> params, absl::Span<const float> state, const SparseTableRules& rules) {
  ShardOptions options;
  options.end = model.num_params();
  options.segments = SegmentsForRange(model, 0, model.num_params());
  options.num_state = model.num_state();
  options.state_decay = state_decay;
  options.state_decays = StateDecays(model, state_decay);
  options.optimizer = config;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ParameterShard> shard, ParameterShard::Create(options));
  PSTRAIN_RETURN_IF_ERROR(shard->Initialize(params, state, 0));
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<EmbeddingTable>> tables,
                           CreateModelTables(model, rules));
  return std::unique_ptr<InProcessClient>(
      new InProcessClient(model, std::move(shard), std::move(tables), rules.ttl_steps));
}

absl::StatusOr<ParameterView> InProcessClient::Pull() {
  ParameterView view;
  view.params = shard_->params_unlocked();
  view.state = shard_->state_unlocked();
  view.global_step = shard_->GetStats().global_step;
  if (!tables_.empty()) view.rows = this;
  return view;
}

absl::Status InProcessClient::PullRows(SparseStep* step) {
  PSTRAIN_RETURN_IF_ERROR(LookupRows(tables_, model_, step));
  sparse_ = step;
  return absl::OkStatus();
}

absl::Status InProcessClient::ReadRows(SparseStep* step) {
  return LookupRows(tables_, model_, step);
}

absl::StatusOr<PushOutcome> InProcessClient::Push(int64_t step, const float* grads,
                                                  const float* batch_stats) {
  absl::Status status;
  PushOutcome outcome;
  // Async: the shard answers before Push returns.
  shard_->Push(/*replica=*/0, step, absl::Span<const float>(grads, shard_->size()),
               absl::Span<const float>(batch_stats, shard_->options().num_state),
               [&](absl::Status s, PushResult r) {
                 status = std::move(s);
                 outcome.global_step = r.global_step;
                 outcome.job_done = r.job_done;
               });
  PSTRAIN_RETURN_IF_ERROR(status);
  if (sparse_ != nullptr) {
    for (size_t t = 0; t < tables_.size(); ++t) {
      const TableStep& table = sparse_->tables[t];
      PSTRAIN_RETURN_IF_ERROR(tables_[t]->ApplyGradients(table.ids, table.grads, step));
    }
    sparse_ = nullptr;
  }
  if (ttl_steps_ > 0 && outcome.global_step % std::max<int64_t>(1, ttl_steps_ / 10) == 0) {
    for (const auto& table : tables_) table->Evict(outcome.global_step);
  }
  return outcome;
}

}  // namespace pstrain
