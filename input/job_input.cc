#include "input/job_input.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "data/formats/criteo_format.h"
#include "data/formats/example_format.h"
#include "data/formats/tabular_examples.h"
#include "data/formats/tfrecord_dataset.h"
#include "data/stream/file_list.h"
#include "data/stream/file_pattern.h"
#include "data/stream/input_redeal.h"
#include "glog/logging.h"
#include "input/model_input.h"

namespace pstrain {

absl::StatusOr<Dataset> LoadModelData(Env* env, const Model& model, const std::string& data_dir,
                                      Split split) {
  // TFRecord files for a tabular model are tf.train.Examples of the features
  // the model names (data/formats/tabular_examples.h); anything else is found by format.
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

absl::StatusOr<ExampleStreamOptions> StreamOptionsOf(Env* env, const TrainingSpec& t,
                                                     const Model& model, const ReplicaSpec& spec,
                                                     std::vector<std::string> files,
                                                     std::string_view key) {
  if (model.input_shape().size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(absl::string_view(key.data(), key.size()),
                     " streams tabular examples (click logs), but model ", model.name(),
                     " takes images; give its data in data_dir"));
  }
  ExampleStreamOptions o;
  // Each file's format by its name, the eval files' by theirs. An online job
  // with no file listed yet goes by the names its pattern gives (the stream
  // checks every file listed later against the format).
  const std::vector<std::string> named =
      files.empty() ? absl::StrSplit(t.train_files, ',', absl::SkipEmpty()) : files;
  PSTRAIN_ASSIGN_OR_RETURN(o.format, ExampleFormatOfFiles(named, key));
  const bool criteo = o.format == ExampleFormat::kCriteoTsv;
  const bool csv = o.format == ExampleFormat::kCsv;
  const std::string first = files.empty() ? std::string() : files[0];
  o.files = std::move(files);
  PSTRAIN_ASSIGN_OR_RETURN(o.compression, ParseCompression(t.input_compression));
  o.features = TabularFeaturesOf(model);
  if (csv) {
    if (t.csv_schema.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(absl::string_view(key.data(), key.size()), " are CSV files (", first,
                       "): give training.csv_schema, a YAML file that names the label, numeric and "
                       "categorical columns (docs/data-formats.md)"));
    }
    absl::StatusOr<CsvSchema> schema = LoadCsvSchema(env, t.csv_schema);
    if (!schema.ok()) {
      return absl::Status(schema.status().code(),
                          absl::StrCat("training.csv_schema: ", schema.status().message()));
    }
    o.csv = *std::move(schema);
    std::vector<std::string> head_labels;
    for (const ModelHead& head : model.heads()) head_labels.push_back(head.label);
    if (model.multi_head() ? o.csv->labels != head_labels : o.csv->labels.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "training.csv_schema (", t.csv_schema, ") reads label",
          o.csv->labels.size() == 1 ? " " : "s ", absl::StrJoin(o.csv->labels, ", "),
          ", but model ", model.name(),
          model.multi_head()
              ? absl::StrCat("'s heads are trained on ", absl::StrJoin(head_labels, ", "),
                             ": give csv.labels those columns, in that order")
              : " has one head: give csv.label one column"));
    }
    if (static_cast<int64_t>(o.csv->numeric.size()) != o.features.num_dense) {
      return absl::InvalidArgumentError(
          absl::StrCat("training.csv_schema (", t.csv_schema, ") has ", o.csv->numeric.size(),
                       " numeric columns, the dense features of each example, but model ",
                       model.name(), " takes ", o.features.num_dense));
    }
  }
  if (criteo && model.multi_head()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the input files are Criteo TSV (one label), but model ", model.name(),
                     " has ", model.heads().size(), " heads; give its labels in CSV or Examples"));
  }
  if (criteo && o.features.num_dense != kCriteoNumDense) {
    return absl::InvalidArgumentError(absl::StrCat("the input files are Criteo TSV (",
                                                   kCriteoNumDense, " dense features), but model ",
                                                   model.name(), " takes ", o.features.num_dense));
  }
  o.replica = spec.replica;
  o.num_replicas = spec.num_replicas;
  o.batch_size = spec.batch_size;
  o.shuffle_buffer = t.shuffle_buffer;
  o.shuffle_files = t.shuffle_files;
  o.cycle_length = t.cycle_length > 0 ? t.cycle_length
                   : t.follow         ? kFollowCycleLength
                                      : kDefaultCycleLength;
  o.num_epochs = t.num_epochs;
  o.max_bad_records = t.max_bad_records;
  o.seed = spec.seed;
  return o;
}

absl::StatusOr<std::unique_ptr<ReplicaInput>> ReplicaInput::Open(Env* env, const TrainingSpec& t,
                                                                 const Model& model,
                                                                 const ReplicaSpec& spec) {
  std::unique_ptr<ReplicaInput> input(new ReplicaInput(env, model, spec));
  if (t.train_files.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(input->train_, LoadModelData(env, model, t.data_dir, Split::kTrain));
    return input;
  }
  std::vector<std::string> files;
  if (t.follow) {
    // The chief's list of the files found so far (data/stream/file_list.h).
    PSTRAIN_ASSIGN_OR_RETURN(files, ReadFileList(env, FileListPath(t.job_dir)));
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(files, ExpandFilePatterns(env, t.train_files, "training.train_files"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(input->options_, StreamOptionsOf(env, t, model, spec, std::move(files),
                                                            "training.train_files"));
  input->options_.log_opens = true;
  if (t.follow) {
    input->options_.follow_list = FileListPath(t.job_dir);
    input->options_.poll_secs = t.poll_secs;
    input->options_.num_epochs = 0;
  }
  input->dir_ = JoinPath(t.job_dir, "input");
  PSTRAIN_RETURN_IF_ERROR(env->CreateDirs(input->dir_));
  // A job re-dealt to this many replicas reads its deal's pieces first.
  PSTRAIN_ASSIGN_OR_RETURN(std::optional<InputDeal> deal,
                           LoadDeal(env, input->dir_, input->options_));
  if (deal.has_value()) input->options_.redeal = deal->ShareOf(spec.replica, spec.sync);
  PSTRAIN_RETURN_IF_ERROR(input->OpenLog());
  return input;
}

absl::Status ReplicaInput::OpenLog() {
  log_ = std::make_unique<InputPositionLog>(env_, PositionLogPath(dir_, spec_.replica),
                                            StreamFingerprint(options_), /*every=*/50, /*keep=*/200,
                                            PositionLogAbout(options_));
  std::string note;
  PSTRAIN_RETURN_IF_ERROR(log_->Load(&note));
  if (!note.empty()) LOG(WARNING) << note;
  return absl::OkStatus();
}

absl::Status ReplicaInput::Redeal(int64_t global_step) {
  ExampleStreamOptions plain = options_;
  plain.redeal.reset();
  // A deal at or before this step (a later replica reads past the batches
  // since) is this run's: another replica made it, and may have begun
  // overwriting the logs it was planned from.
  const auto fits = [&](const std::optional<InputDeal>& d) {
    return d.has_value() && d->step <= global_step;
  };
  PSTRAIN_ASSIGN_OR_RETURN(std::optional<InputDeal> deal, LoadDeal(env_, dir_, plain));
  if (!fits(deal)) {
    std::string why_not;
    PSTRAIN_ASSIGN_OR_RETURN(deal, PlanDeal(env_, dir_, plain, global_step, spec_.sync, &why_not));
    if (!deal.has_value() && why_not.empty()) return absl::OkStatus();  // nothing to deal
    if (!deal.has_value()) {
      PSTRAIN_ASSIGN_OR_RETURN(deal, LoadDeal(env_, dir_, plain));
      if (!fits(deal)) {
        LOG(WARNING) << "input: the job ran with another number of replicas, and its unread "
                        "input is not dealt anew ("
                     << why_not << "): each replica reads its share as if the job had had "
                     << spec_.num_replicas << " from the start";
        return ForgetDeal(env_, dir_, spec_.num_replicas);
      }
    } else {
      PSTRAIN_RETURN_IF_ERROR(SaveDeal(env_, dir_, *deal));
    }
  }
  options_.redeal = deal->ShareOf(spec_.replica, spec_.sync);
  int64_t begun = 0;
  for (const FilePiece& p : options_.redeal->pieces) begun += p.offset > 0;
  LOG(INFO) << "input: the job ran with " << deal->from_replicas << " replicas and has "
            << deal->replicas << " now: what they had not read at step " << global_step << " ("
            << deal->pieces.size() << " files or rests of files, to complete epoch "
            << deal->epoch + 1 << ") is dealt anew; replica " << spec_.replica << " reads "
            << options_.redeal->pieces.size() << " of them (" << begun
            << " begun), then its share of the files as one of " << deal->replicas << "; up to "
            << deal->read_again
            << " examples trained before are read again (the shuffle windows being handed out)";
  PSTRAIN_RETURN_IF_ERROR(OpenLog());
  // The log says at once that this run reads the deal: a restart before
  // its 50th batch must not take the run before's logs for the latest.
  InputPosition start;
  start.epoch = options_.redeal->epoch;
  return log_->Record(options_.redeal->first_batch, start, /*always=*/true);
}

absl::StatusOr<std::unique_ptr<BatchSource>> ReplicaInput::Start(int64_t global_step) {
  if (!streamed()) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<BatchIterator> batches,
                             StartReplicaBatches(&train_, model_, spec_, global_step));
    return std::unique_ptr<BatchSource>(std::move(batches));
  }
  const int64_t first = spec_.sync ? global_step : global_step / spec_.num_replicas;
  if (options_.redeal.has_value() && first < options_.redeal->first_batch) {
    // Rolled back to before the deal: the deal is not for this step.
    LOG(WARNING) << "input: step " << global_step << " is before the step the input was dealt "
                 << "anew at; replica " << spec_.replica << " reads its share from the start";
    options_.redeal.reset();
    PSTRAIN_RETURN_IF_ERROR(ForgetDeal(env_, dir_, spec_.num_replicas));
    PSTRAIN_RETURN_IF_ERROR(OpenLog());
  }
  if (global_step > 0 && !options_.redeal.has_value() && !log_->Find(first).has_value() &&
      options_.follow_list.empty()) {
    // No position of its own: the run before may have had another number
    // of replicas.
    PSTRAIN_RETURN_IF_ERROR(Redeal(global_step));
  }
  PSTRAIN_ASSIGN_OR_RETURN(
      std::unique_ptr<StreamedBatches> batches,
      StreamedBatches::Start(env_, options_, model_.sparse_features(), first, log_.get()));
  std::vector<int> classes;
  for (const ModelHead& head : model_.heads()) classes.push_back(head.num_classes);
  batches->set_label_classes(std::move(classes));
  return std::unique_ptr<BatchSource>(std::move(batches));
}

std::string ReplicaInput::Describe() const {
  if (!streamed()) {
    return absl::StrCat("reads about ", train_.size() / spec_.num_replicas, " of ", train_.size(),
                        " training examples");
  }
  const size_t files = options_.files.size();
  const size_t replicas = static_cast<size_t>(spec_.num_replicas);
  if (!options_.follow_list.empty()) {
    return absl::StrCat("follows the training files (", files, " listed so far in ",
                        options_.follow_list, "; file i goes to replica i % ", replicas, ")");
  }
  return files >= replicas
             ? absl::StrCat("streams ",
                            files / replicas + (spec_.replica < static_cast<int>(files % replicas)),
                            " of ", files, " training files")
             : absl::StrCat("streams one record in ", replicas, " of the ", files, " training file",
                            files == 1 ? "" : "s", " (fewer files than replicas)");
}

}  // namespace pstrain
