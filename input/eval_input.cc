#include "input/eval_input.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/stream/file_pattern.h"
#include "input/job_input.h"
#include "input/model_input.h"
#include "input/replica_spec.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<EvalInput>> EvalInput::Open(Env* env, const TrainingSpec& t,
                                                           const Model& model) {
  std::unique_ptr<EvalInput> input(new EvalInput(env, t.eval_batch_size));
  if (t.eval_files.empty()) {
    absl::StatusOr<Dataset> test = LoadModelData(env, model, t.data_dir, Split::kTest);
    if (!test.ok() && !t.train_files.empty()) {
      // A job that streams its training input may not have meant data_dir.
      return absl::Status(
          test.status().code(),
          absl::StrCat("the evaluation reads data_dir's test split, as training.eval_files is not "
                       "set: ",
                       test.status().message(),
                       "; or give training.eval_files, the files to evaluate on"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(input->data_, std::move(test));
    return input;
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files,
                           ExpandFilePatterns(env, t.eval_files, "training.eval_files"));
  ReplicaSpec one;
  one.batch_size = t.eval_batch_size;
  PSTRAIN_ASSIGN_OR_RETURN(
      ExampleStreamOptions o,
      StreamOptionsOf(env, t, model, one, std::move(files), "training.eval_files"));
  o.shuffle_buffer = 0;
  o.shuffle_files = false;  // in name order: the same examples every evaluation
  o.num_epochs = 1;
  // The first batch, checked against the model now rather than at the first
  // evaluation.
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ExampleStream> stream, ExampleStream::Create(env, o));
  Dataset first;
  absl::Status s = stream->Next(&first);
  if (absl::IsOutOfRange(s) || (s.ok() && first.size() == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("training.eval_files (", t.eval_files, ") hold no examples"));
  }
  PSTRAIN_RETURN_IF_ERROR(s);
  PSTRAIN_RETURN_IF_ERROR(CheckModelInput(model, first, t.eval_files));
  input->stream_ = std::move(o);
  return input;
}

absl::Status EvalInput::ForEachPart(const std::function<absl::Status(const Dataset&)>& part) const {
  if (!stream_.has_value()) return part(data_);
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ExampleStream> stream,
                           ExampleStream::Create(env_, *stream_));
  Dataset batch;
  while (true) {
    absl::Status s = stream->Next(&batch);
    if (absl::IsOutOfRange(s)) return absl::OkStatus();
    PSTRAIN_RETURN_IF_ERROR(s);
    PSTRAIN_RETURN_IF_ERROR(part(batch));
  }
}

std::string EvalInput::Describe() const {
  if (!stream_.has_value()) return absl::StrCat(data_.size(), " test examples in memory");
  return absl::StrCat("the examples of ", stream_->files.size(), " eval files, streamed");
}

}  // namespace pstrain
