#include "ps/model_tables.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<SparseTableRules> SparseTableRulesOf(const TrainingSpec& t) {
  SparseTableRules rules;
  if (t.embedding_optimizer == "adagrad") {
    rules.optimizer.type = EmbeddingOptimizerType::kAdagrad;
  } else if (t.embedding_optimizer == "ftrl") {
    rules.optimizer.type = EmbeddingOptimizerType::kFtrl;
  } else if (t.embedding_optimizer == "adam") {
    rules.optimizer.type = EmbeddingOptimizerType::kAdam;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("training.embedding_optimizer = \"",
                                                   t.embedding_optimizer,
                                                   "\": use adagrad, ftrl or adam"));
  }
  rules.optimizer.learning_rate = static_cast<float>(t.embedding_learning_rate);
  rules.optimizer.alpha = static_cast<float>(t.embedding_learning_rate);
  rules.optimizer.l1 = static_cast<float>(t.embedding_l1);
  rules.optimizer.l2 = static_cast<float>(t.embedding_l2);
  PSTRAIN_RETURN_IF_ERROR(ValidateEmbeddingOptimizer("every table", rules.optimizer));
  rules.ttl_steps = t.embedding_ttl_steps;
  rules.min_count = t.embedding_min_count;
  rules.seed = t.seed;
  return rules;
}

EmbeddingTableOptions TableOptions(const SparseTableInfo& info, const SparseTableRules& rules) {
  EmbeddingTableOptions options;
  options.name = info.name;
  options.dim = info.dim;
  options.buckets = info.buckets;
  switch (info.initializer.kind) {
    case TableInitializer::kZeros:
      options.initializer.type = EmbeddingInitializerType::kZeros;
      break;
    case TableInitializer::kUniform:
      options.initializer.type = EmbeddingInitializerType::kUniform;
      break;
    case TableInitializer::kTruncatedNormal:
      options.initializer.type = EmbeddingInitializerType::kTruncatedNormal;
      break;
  }
  options.initializer.scale = info.initializer.scale;
  options.initializer.seed = rules.seed;
  options.optimizer = rules.optimizer;
  options.min_count = rules.min_count;
  options.ttl_steps = rules.ttl_steps;
  return options;
}

absl::StatusOr<std::vector<std::unique_ptr<EmbeddingTable>>> CreateModelTables(
    const Model& model, const SparseTableRules& rules) {
  std::vector<std::unique_ptr<EmbeddingTable>> tables;
  for (const SparseTableInfo& info : model.sparse_tables()) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingTable> table,
                             EmbeddingTable::Create(TableOptions(info, rules)));
    tables.push_back(std::move(table));
  }
  return tables;
}

absl::Status LookupRows(const std::vector<std::unique_ptr<EmbeddingTable>>& tables,
                        const Model& model, SparseStep* step) {
  for (size_t t = 0; t < tables.size(); ++t) {
    TableStep& table = step->tables[t];
    table.rows.resize(table.ids.size() * model.sparse_tables()[t].dim);
    PSTRAIN_RETURN_IF_ERROR(tables[t]->Lookup(table.ids, absl::MakeSpan(table.rows)));
  }
  return absl::OkStatus();
}

}  // namespace pstrain
