#include "worker/replica.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_trace.h"
#include "common/status_macros.h"
#include "data/criteo_format.h"
#include "data/file_pattern.h"
#include "data/tabular_examples.h"
#include "data/tfrecord_dataset.h"
#include "glog/logging.h"
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

absl::StatusOr<ExampleStreamOptions> StreamOptionsOf(const TrainingSpec& t, const Model& model,
                                                     const ReplicaSpec& spec,
                                                     std::vector<std::string> files,
                                                     std::string_view key) {
  if (model.input_shape().size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(absl::string_view(key.data(), key.size()),
                     " streams tabular examples (click logs), but model ", model.name(),
                     " takes images; give its data in data_dir"));
  }
  ExampleStreamOptions o;
  const bool criteo = std::all_of(files.begin(), files.end(), [](const std::string& f) {
    return absl::EndsWith(f, ".tsv") || absl::EndsWith(f, ".tsv.gz");
  });
  o.files = std::move(files);
  o.format = criteo ? ExampleFormat::kCriteoTsv : ExampleFormat::kTfExamples;
  PSTRAIN_ASSIGN_OR_RETURN(o.compression, ParseCompression(t.input_compression));
  o.features = TabularFeaturesOf(model);
  if (criteo && o.features.num_dense != kCriteoNumDense) {
    return absl::InvalidArgumentError(absl::StrCat("the input files are Criteo TSV (",
                                                   kCriteoNumDense, " dense features), but model ",
                                                   model.name(), " takes ", o.features.num_dense));
  }
  o.replica = spec.replica;
  o.num_replicas = spec.num_replicas;
  o.batch_size = spec.batch_size;
  o.shuffle_buffer = t.shuffle_buffer;
  o.seed = spec.seed;
  return o;
}

absl::StatusOr<Dataset> LoadEvalData(Env* env, const TrainingSpec& t, const Model& model) {
  if (t.eval_files.empty()) return LoadModelData(env, model, t.data_dir, Split::kTest);
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files,
                           ExpandFilePatterns(env, t.eval_files, "training.eval_files"));
  ReplicaSpec one;
  one.batch_size = 4096;
  PSTRAIN_ASSIGN_OR_RETURN(ExampleStreamOptions o,
                           StreamOptionsOf(t, model, one, std::move(files), "training.eval_files"));
  o.shuffle_buffer = 0;
  o.num_epochs = 1;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ExampleStream> stream, ExampleStream::Create(env, o));
  Dataset all, batch;
  while (true) {
    absl::Status s = stream->Next(&batch);
    if (absl::IsOutOfRange(s)) break;
    PSTRAIN_RETURN_IF_ERROR(s);
    if (all.labels.empty())
      all = Dataset{batch};
    else {
      all.labels.insert(all.labels.end(), batch.labels.begin(), batch.labels.end());
      all.dense.insert(all.dense.end(), batch.dense.begin(), batch.dense.end());
      for (size_t c = 0; c < all.sparse.size(); ++c) {
        if (all.sparse[c].values.empty()) all.sparse[c].kind = batch.sparse[c].kind;
        for (int64_t i = 0; i < batch.size(); ++i) all.sparse[c].AppendExample(batch.sparse[c], i);
      }
    }
  }
  if (all.size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("training.eval_files (", t.eval_files, ") hold no examples"));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckModelInput(model, all, t.eval_files));
  return all;
}

absl::StatusOr<std::unique_ptr<ReplicaInput>> ReplicaInput::Open(Env* env, const TrainingSpec& t,
                                                                 const Model& model,
                                                                 const ReplicaSpec& spec) {
  std::unique_ptr<ReplicaInput> input(new ReplicaInput(env, model, spec));
  if (t.train_files.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(input->train_, LoadModelData(env, model, t.data_dir, Split::kTrain));
    return input;
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> files,
                           ExpandFilePatterns(env, t.train_files, "training.train_files"));
  PSTRAIN_ASSIGN_OR_RETURN(
      input->options_, StreamOptionsOf(t, model, spec, std::move(files), "training.train_files"));
  const std::string dir = JoinPath(t.job_dir, "input");
  PSTRAIN_RETURN_IF_ERROR(env->CreateDirs(dir));
  input->log_ = std::make_unique<InputPositionLog>(
      env, JoinPath(dir, absl::StrCat("replica-", spec.replica, ".txt")),
      StreamFingerprint(input->options_));
  std::string note;
  PSTRAIN_RETURN_IF_ERROR(input->log_->Load(&note));
  if (!note.empty()) LOG(WARNING) << note;
  return input;
}

absl::StatusOr<std::unique_ptr<BatchSource>> ReplicaInput::Start(int64_t global_step) {
  if (!streamed()) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchIterator> batches,
                             StartReplicaBatches(&train_, model_, spec_, global_step));
    return std::unique_ptr<BatchSource>(std::move(batches));
  }
  const int64_t first = spec_.sync ? global_step : global_step / spec_.num_replicas;
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<StreamedBatches> batches,
      StreamedBatches::Start(env_, options_, model_.sparse_features(), first, log_.get()));
  return std::unique_ptr<BatchSource>(std::move(batches));
}

std::string ReplicaInput::Describe() const {
  if (!streamed()) {
    return absl::StrCat("reads about ", train_.size() / spec_.num_replicas, " of ", train_.size(),
                        " training examples");
  }
  const size_t files = options_.files.size();
  const size_t replicas = static_cast<size_t>(spec_.num_replicas);
  return files >= replicas
             ? absl::StrCat("streams ",
                            files / replicas + (spec_.replica < static_cast<int>(files % replicas)),
                            " of ", files, " training files")
             : absl::StrCat("streams every ", replicas, "th record of ", files,
                            " training files (fewer files than replicas)");
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
