#ifndef PSTRAIN_INPUT_EVAL_INPUT_H_
#define PSTRAIN_INPUT_EVAL_INPUT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "config/cluster_config.h"
#include "data/dataset.h"
#include "data/stream/example_stream.h"
#include "models/model.h"

namespace pstrain {

// The chief's evaluation data: data_dir's test split in memory, or
// eval_files streamed anew (in file order) at every evaluation, so that no
// more than a batch of them is held. worker/evaluation.h evaluates a model
// on it.
class EvalInput {
 public:
  // Reads the test split (checked against `model`), or lists eval_files and
  // reads their first batch to check it: NotFound naming
  // training.eval_files and the pattern that matches nothing,
  // InvalidArgument for files that hold no example or not the model's.
  static absl::StatusOr<std::unique_ptr<EvalInput>> Open(Env* env, const TrainingSpec& t,
                                                         const Model& model);

  // Calls `part` with every example, a part at a time: the test split at
  // once, or the eval files' batches in file order (read anew at each
  // call). Stops at the first error, `part`'s or the stream's (which names
  // the file and where).
  absl::Status ForEachPart(const std::function<absl::Status(const Dataset&)>& part) const;

  // The job's eval_batch_size.
  int batch_size() const { return batch_size_; }

  // What the chief evaluates on, for its log.
  std::string Describe() const;

 private:
  EvalInput(Env* env, int batch_size) : env_(env), batch_size_(batch_size) {}

  Env* const env_;
  const int batch_size_;
  Dataset data_;                                // in memory
  std::optional<ExampleStreamOptions> stream_;  // eval_files
};

}  // namespace pstrain

#endif  // PSTRAIN_INPUT_EVAL_INPUT_H_
