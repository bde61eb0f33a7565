#include "worker/replica.h"

#include "common/cluster_trace.h"
#include "common/status_macros.h"
#include "data/tabular_examples.h"
#include "data/tfrecord_dataset.h"
#include "worker/model_input.h"

namespace pstrain {

int ReplicaId(const JobConfig& job, const TaskSpec& task) {
  const int chief = job.training.chief_trains ? 1 : 0;
  if (task.job_name == "chief") return job.training.chief_trains ? 0 : -1;
  if (task.job_name == "worker") return chief + task.task_index;
  return -1;
}

ReplicaSpec ReplicaSpecOf(const JobConfig& job, int replica) {
  const TrainingSpec& t = job.training;
  ReplicaSpec spec;
  spec.replica = replica;
  spec.num_replicas = NumTrainingReplicas(job);
  spec.sync = t.update == UpdateMode::kSync;
  spec.batch_size = t.batch_size;
  spec.seed = t.seed;
  spec.use_distortion_for_training = t.use_distortion_for_training;
  spec.train_steps = t.train_steps;
  spec.log_every_n_steps = t.log_every_n_steps;
  return spec;
}

absl::StatusOr<Dataset> LoadModelData(Env* env, const Model& model, const std::string& data_dir,
                                      Split split) {
  // TFRecord files for a tabular model are tf.train.Examples of the features
  // the model names (data/tabular_examples.h); anything else is found by format.
  const bool tabular_examples =
      model.input_shape().size() == 1 && !FindExampleFiles(env, data_dir, split).empty();
  PSTRAIN_ASSIGN_OR_RETURN(Dataset data,
                           tabular_examples
                               ? LoadTabularExamples(env, data_dir, split, TabularFeaturesOf(model))
                               : LoadDataset(env, data_dir, split));
  PSTRAIN_RETURN_IF_ERROR(CheckModelInput(model, data, data_dir));
  return data;
}

absl::StatusOr<std::unique_ptr<BatchIterator>> StartReplicaBatches(const Dataset* train,
                                                                   const Model& model,
                                                                   const ReplicaSpec& spec,
                                                                   int64_t global_step) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchIterator> batches,
                           BatchIterator::Create(train, spec.batch_size, spec.replica,
                                                 spec.num_replicas, /*shuffle=*/true, spec.seed));
  if (model.has_sparse()) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<int> columns,
                             SelectSparseFeatures(*train, model.sparse_features(), "the data"));
    batches->SetSparseFeatures(std::move(columns));
  }
  batches->Skip(spec.sync ? global_step : global_step / spec.num_replicas);
  batches->SetAugmentation(TrainingAugmentation(model, spec.use_distortion_for_training));
  batches->StartPrefetch();
  return batches;
}

TrainerOptions ReplicaTrainerOptions(const ReplicaSpec& spec) {
  TrainerOptions options;
  options.train_steps = spec.train_steps;
  options.log_every_n_steps = spec.log_every_n_steps;
  options.seed = spec.seed + static_cast<uint64_t>(spec.replica) * 7919;
  return options;
}

void RecordPsClockOffsets(ParameterServers* servers, TraceRecorder* trace, int samples) {
  if (trace == nullptr) return;
  std::vector<std::vector<ClockSample>> per_ps(static_cast<size_t>(servers->size()));
  for (int i = 0; i < samples; ++i) {
    const int64_t sent = TraceRecorder::NowMicros();
    absl::StatusOr<std::vector<PsStatus>> statuses = servers->Statuses();
    const int64_t received = TraceRecorder::NowMicros();
    if (!statuses.ok() || statuses->size() != per_ps.size()) return;
    for (size_t p = 0; p < per_ps.size(); ++p) {
      const int64_t middle = sent + (received - sent) / 2;
      per_ps[p].push_back({(*statuses)[p].unix_micros - middle, received - sent});
    }
  }
  std::vector<int64_t> offsets;
  for (const auto& s : per_ps) offsets.push_back(BestSample(s).offset_us);
  trace->SetOtherData("ps_clock_offsets_us", offsets);
}

}  // namespace pstrain
