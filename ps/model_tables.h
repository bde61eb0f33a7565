#ifndef PSTRAIN_PS_MODEL_TABLES_H_
#define PSTRAIN_PS_MODEL_TABLES_H_

// The embedding tables of a model (Model::sparse_tables()) as EmbeddingTables
// with the job's per-row training rules.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/cluster_config.h"
#include "models/model.h"
#include "models/sparse_input.h"
#include "ps/embedding_table.h"

namespace pstrain {

// How every table of a job trains (training.embedding_* of the job).
struct SparseTableRules {
  EmbeddingOptimizerOptions optimizer;
  int64_t ttl_steps = 0;
  int64_t min_count = 0;
  uint64_t seed = 0;  // with the table's name and the id, a row's starting value
};

// The rules of a job's training section: embedding_optimizer (adagrad, ftrl,
// adam), embedding_learning_rate (Adagrad's and Adam's rate, FTRL's alpha),
// embedding_l1 and embedding_l2 (FTRL), embedding_ttl_steps,
// embedding_min_count, and the job's seed. InvalidArgument for values the
// tables cannot take (ValidateJobConfig catches them first).
absl::StatusOr<SparseTableRules> SparseTableRulesOf(const TrainingSpec& training);

// Options of the table `info` under `rules`.
EmbeddingTableOptions TableOptions(const SparseTableInfo& info, const SparseTableRules& rules);

// One table per model.sparse_tables(), in that order. InvalidArgument naming
// the table for rules it cannot take.
absl::StatusOr<std::vector<std::unique_ptr<EmbeddingTable>>> CreateModelTables(
    const Model& model, const SparseTableRules& rules);

// Looks up the rows of `step` in `tables` (one per model table).
absl::Status LookupRows(const std::vector<std::unique_ptr<EmbeddingTable>>& tables,
                        const Model& model, SparseStep* step);

}  // namespace pstrain

#endif  // PSTRAIN_PS_MODEL_TABLES_H_
