#ifndef PSTRAIN_PS_IN_PROCESS_CLIENT_H_
#define PSTRAIN_PS_IN_PROCESS_CLIENT_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/model.h"
#include "ps/model_tables.h"
#include "ps/parameter_shard.h"
#include "ps_protocol/parameter_client.h"

namespace pstrain {

// Parameters and optimizer in the trainer's own process, like an Estimator
// run without TF_CONFIG: one async ParameterShard (the ps logic) over the whole
// model, with this trainer its only replica. Pull returns
// a view of the slice itself (no copy); Push applies the update at once.
//
// A model's embedding tables are EmbeddingTables here too, trained by
// `rules`: PullRows looks the rows up, Push applies their gradients at once
// and, with a TTL, evicts stale rows every max(1, ttl / 10) steps.
class InProcessClient : public ParameterClient, public RowReader {
 public:
  // Initializes the model's variables from `seed`.
  static absl::StatusOr<std::unique_ptr<InProcessClient>> Create(
      const Model& model, const OptimizerConfig& config, float state_decay, uint64_t seed,
      const SparseTableRules& rules = {});
  // Starts from `params` (num_params()) and `state` (num_state()).
  static absl::StatusOr<std::unique_ptr<InProcessClient>> Create(
      const Model& model, const OptimizerConfig& config, float state_decay,
      absl::Span<const float> params, absl::Span<const float> state,
      const SparseTableRules& rules = {});

  absl::StatusOr<ParameterView> Pull() override;
  absl::Status PullRows(SparseStep* step) override;
  absl::StatusOr<PushOutcome> Push(int64_t step, const float* grads,
                                   const float* batch_stats) override;
  absl::Status ReadRows(SparseStep* step) override;

  // The tables, one per model table (for tests and inspection).
  const std::vector<std::unique_ptr<EmbeddingTable>>& tables() const { return tables_; }

 private:
  InProcessClient(const Model& model, std::unique_ptr<ParameterShard> shard,
                  std::vector<std::unique_ptr<EmbeddingTable>> tables, int64_t ttl_steps)
      : model_(model),
        shard_(std::move(shard)),
        tables_(std::move(tables)),
        ttl_steps_(ttl_steps) {}

  const Model& model_;
  std::unique_ptr<ParameterShard> shard_;
  std::vector<std::unique_ptr<EmbeddingTable>> tables_;
  const int64_t ttl_steps_;
  SparseStep* sparse_ = nullptr;  // the last PullRows', pushed with the next Push
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_IN_PROCESS_CLIENT_H_
