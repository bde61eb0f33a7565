#ifndef PSTRAIN_CHIEF_SUMMARIES_H_
#define PSTRAIN_CHIEF_SUMMARIES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "config/cluster_config.h"
#include "data/dataset.h"
#include "io/event_writer.h"
#include "models/model.h"
#include "proto/event.pb.h"
#include "ps/learning_rate.h"
#include "ps_protocol/parameter_servers.h"
#include "ps_protocol/ps_status.h"

namespace pstrain {

// The chief's TensorBoard training summaries, in <job_dir>/events.out.tfevents.*:
// the run's hyperparameters (TensorBoard's hparams plugin) when it starts;
// every save_summary_steps global steps `loss` (the mean of the batch losses
// the replicas reported since the last one), `learning_rate`,
// `global_step/sec` and `examples/sec`; every histogram_steps a histogram of
// every variable (pulled from the ps); a few input images; at the end the
// last step's scalars and histograms and how the run ended. Fed with the
// Status answers the chief polls anyway. Thread-safe.
// The hyperparameters shown in TensorBoard's HPARAMS tab: the training
// fields that shape the result (model, optimizer and its settings, batch size,
// steps, update mode, seed, wire format) and the numbers of ps and workers.
google::protobuf::Map<std::string, google::protobuf::Value> RunHParams(const JobConfig& job);

class TrainingSummaries {
 public:
  // `servers` is its own (it reads the parameters for histograms); `model`
  // must outlive it. Writes the session start (hyperparameters).
  static absl::StatusOr<std::unique_ptr<TrainingSummaries>> Create(
      Env* env, const JobConfig& job, const Model* model, std::unique_ptr<ParameterServers> servers,
      int64_t start_step);

  // Every ps's Status, in ps order. Writes what is due.
  absl::Status Observe(const std::vector<PsStatus>& statuses);

  // The first `count` examples of `data` as PNG images tagged
  // "<name>/image/<i>" (as TF1's tf.summary.image with max_outputs = count).
  absl::Status WriteInputImages(const Dataset& data, const std::string& name, int count,
                                int64_t step);

  // The job reached train_steps: scalars and histograms of the last step if
  // not written yet, the session end (success), a flush. Logs what writing
  // summaries cost over the run.
  absl::Status Finish(const std::vector<PsStatus>& statuses);

  // Time spent writing summaries so far (pulls for histograms included).
  absl::Duration cost() const;

 private:
  TrainingSummaries(const JobConfig& job, const Model* model,
                    std::unique_ptr<ParameterServers> servers, std::unique_ptr<EventWriter> events,
                    LearningRateSchedule learning_rate, int64_t start_step);
  absl::Status ObserveLocked(const std::vector<PsStatus>& statuses, bool final)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteHistogramsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  const TrainingSpec spec_;
  const Model* const model_;
  std::unique_ptr<ParameterServers> servers_;
  std::unique_ptr<EventWriter> events_;
  const LearningRateSchedule learning_rate_;
  int64_t next_scalars_;
  int64_t next_histograms_;
  // The last observation summaries were written from (or the baseline).
  bool have_baseline_ = false;
  int64_t last_step_ = 0;
  absl::Time last_time_;
  double last_loss_sum_ = 0;
  int64_t last_batches_ = 0;
  int64_t last_examples_ = 0;
  int64_t last_histogram_step_ = -1;
  absl::Duration cost_ ABSL_GUARDED_BY(mu_);
  const absl::Time started_ = absl::Now();
};

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_SUMMARIES_H_
