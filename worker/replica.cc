#include "worker/replica.h"

#include "absl/strings/str_cat.h"
#include "common/cluster_trace.h"
#include "glog/logging.h"
#include "input/job_input.h"
#include "io/event_writer.h"

namespace pstrain {

std::function<void(int64_t, const InputRates&)> InputSummaries(Env* env, const std::string& job_dir,
                                                               int replica) {
  const std::string dir = JoinPath(job_dir, absl::StrCat("input/replica-", replica));
  absl::StatusOr<std::unique_ptr<EventWriter>> created =
      EventWriter::Create(env, dir, absl::Seconds(30));
  if (!created.ok()) {
    LOG(WARNING) << "no input summaries: " << created.status();
    return nullptr;
  }
  std::shared_ptr<EventWriter> events = *std::move(created);
  return [events](int64_t step, const InputRates& r) {
    const double epoch = static_cast<double>(r.progress.epoch) + r.progress.fraction;
    absl::Status s = events->WriteScalar("input/examples_per_sec", step, r.examples_per_sec);
    if (s.ok()) s = events->WriteScalar("input/MB_per_sec", step, r.mb_per_sec);
    if (s.ok()) s = events->WriteScalar("input/wait_ms_per_step", step, r.wait_ms_per_step);
    if (s.ok()) s = events->WriteScalar("input/epoch", step, static_cast<float>(epoch));
    if (s.ok()) {
      s = events->WriteScalar("input/bad_records", step,
                              static_cast<float>(r.progress.bad_records));
    }
    if (!s.ok()) {
      LOG_EVERY_N(WARNING, 100) << "cannot write input summaries: " << s;
    }
  };
}

std::unique_ptr<ProgressiveValidation> ProgressiveValidationOf(const TrainingSpec& t,
                                                               const Model& model) {
  if (!t.progressive_validation) return nullptr;
  if (model.multi_head()) {
    // Its window keeps one logit and label per example.
    LOG(WARNING) << "progressive_validation is for models of one head; model " << model.name()
                 << " has " << model.heads().size() << ": its periodic evaluations report each";
    return nullptr;
  }
  return std::make_unique<ProgressiveValidation>(
      t.progressive_window, model.head() == Head::kRegression ? 0 : model.num_logits());
}

std::function<void(int64_t, const ProgressiveMetrics&)> ProgressiveSummaries(
    Env* env, const std::string& job_dir, int replica) {
  const std::string dir = JoinPath(job_dir, absl::StrCat("progressive/replica-", replica));
  absl::StatusOr<std::unique_ptr<EventWriter>> created =
      EventWriter::Create(env, dir, absl::Seconds(30));
  if (!created.ok()) {
    LOG(WARNING) << "no progressive validation summaries: " << created.status();
    return nullptr;
  }
  std::shared_ptr<EventWriter> events = *std::move(created);
  return [events](int64_t step, const ProgressiveMetrics& m) {
    absl::Status s = events->WriteScalar("progressive/loss", step, static_cast<float>(m.loss));
    if (s.ok() && m.mae.has_value()) {
      s = events->WriteScalar("progressive/mae", step, static_cast<float>(*m.mae));
    } else if (s.ok()) {
      s = events->WriteScalar("progressive/accuracy", step, static_cast<float>(m.accuracy));
    }
    if (s.ok() && m.auc.has_value()) {
      s = events->WriteScalar("progressive/auc", step, static_cast<float>(*m.auc));
    }
    if (!s.ok()) {
      LOG_EVERY_N(WARNING, 100) << "cannot write progressive summaries: " << s;
    }
  };
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
