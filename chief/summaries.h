#ifndef PSTRAIN_CHIEF_SUMMARIES_H_
#define PSTRAIN_CHIEF_SUMMARIES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cluster_config.h"
#include "io/event_writer.h"
#include "models/model.h"
#include "ps/learning_rate.h"
#include "worker/ps_client.h"

namespace pstrain {

// The chief's TensorBoard training summaries, in <job_dir>/events.out.tfevents.*:
// every save_summary_steps global steps `loss` (the mean of the batch losses
// the replicas reported since the last one), `learning_rate`,
// `global_step/sec` and `examples/sec`; every histogram_steps a histogram of
// every variable (pulled from the ps). Fed with the Status answers the
// chief polls anyway.
class TrainingSummaries {
 public:
  // `client` is its own (it pulls the parameters for histograms); `model`
  // must outlive it.
  static absl::StatusOr<std::unique_ptr<TrainingSummaries>> Create(Env* env, const JobConfig& job,
                                                                   const Model* model,
                                                                   std::unique_ptr<PsClient> client,
                                                                   int64_t start_step);

  // Every ps's Status, in ps order. Writes what is due.
  absl::Status Observe(const std::vector<StatusResponse>& statuses);

 private:
  TrainingSummaries(const JobConfig& job, const Model* model, std::unique_ptr<PsClient> client,
                    std::unique_ptr<EventWriter> events, LearningRateSchedule learning_rate,
                    int64_t start_step);
  absl::Status WriteHistograms();

  const TrainingSpec spec_;
  const Model* const model_;
  std::unique_ptr<PsClient> client_;
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
};

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_SUMMARIES_H_
