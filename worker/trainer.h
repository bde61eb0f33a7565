#ifndef PSTRAIN_WORKER_TRAINER_H_
#define PSTRAIN_WORKER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/trace.h"
#include "data/batch_source.h"
#include "data/batcher.h"
#include "data/dataset.h"
#include "models/model.h"
#include "ps_protocol/parameter_client.h"
#include "worker/progressive_validation.h"

namespace pstrain {

// A streamed input's figures over one progress window (TrainerOptions'
// on_input).
struct InputRates {
  InputProgress progress;
  double examples_per_sec = 0;  // handed out by the stream
  double mb_per_sec = 0;        // read from its files (compressed), 1e6 bytes
  double wait_ms_per_step = 0;  // the loop's wait for its next batch
};

// "input: epoch 1 of 2, file 3 of 8, 41%, 62.3 MB/s, 12000 examples/sec,
// 0.4 ms waited per step".
std::string FormatInputRates(const InputRates& rates);

struct TrainerOptions {
  int64_t train_steps = 0;          // Stop once the global step reaches this.
  int64_t log_every_n_steps = 100;  // One progress line per this many steps; 0 for none.
  uint64_t seed = 0;                // Dropout randomness, mixed with the step.
  // Called with every new set of parameters the loop pulls (e.g. the chief's
  // periodic evaluation); a failure stops the loop.
  std::function<absl::Status(const ParameterView&)> on_pull;
  // Asked before every step; true ends the loop there (a stop request).
  std::function<bool()> should_stop;
  // Following new files and none yet: asked at most once a second while the
  // replica waits for them; true ends the loop (the job ended without this
  // replica: the others reached train_steps, or the ps are shutting down).
  std::function<bool()> job_over;
  // The batches a replica reads from `global_step` on, as one started there
  // reads them. Called when a pull finds the job rolled back to a checkpoint
  // (its step behind the last one), so a sync job replays the steps it
  // lost with the same data. Empty: the loop reads on.
  std::function<absl::StatusOr<std::unique_ptr<BatchSource>>(int64_t global_step)> rewind;
  // Sync: the global step the batches were started at (-1: unknown). A
  // first pull at another step (the job moved on while the replica started)
  // starts them again there by `rewind`, so that every step trains on the
  // batch of its number.
  int64_t batches_from_step = -1;
  // Streamed input (a source with progress()): at every progress line its
  // rates go to `on_input` (TensorBoard's input/*), and a line
  // (FormatInputRates) is logged, at most every `input_log_secs`.
  std::function<void(int64_t global_step, const InputRates&)> on_input;
  double input_log_secs = 30;
  // --trace_steps: the loop sets the recorder's step and records its phases
  // (input, forward and backward per layer, waiting for the push, pull).
  TraceRecorder* trace = nullptr;
  // Progressive validation (worker/progressive_validation.h): every
  // batch's logits before its update are added, and at every progress line
  // its metrics are logged and go to `on_progressive` (TensorBoard's
  // progressive/*). Must outlive the trainer.
  ProgressiveValidation* progressive = nullptr;
  std::function<void(int64_t global_step, const ProgressiveMetrics&)> on_progressive;
};

// The worker's loop: pull, compute gradients on the next batch, push. Logs
// "step = S, loss = L, examples/sec = X, global_step/sec = G" every
// log_every_n_steps. `model`, `client` and `batches` must outlive the trainer.
class Trainer {
 public:
  Trainer(Model* model, ParameterClient* client, BatchSource* batches,
          const TrainerOptions& options);

  // Trains until the global step reaches options.train_steps or the client
  // reports the job done; returns the final global step. Stops at the first
  // failed pull or push, or batch read; at the end of the input (a source
  // with no more examples) returns the global step reached, with
  // input_ended() true.
  absl::StatusOr<int64_t> Run();

  // Mean loss of the steps since the last progress line (or of the whole run
  // if none was logged), for callers that report it.
  double last_loss() const { return last_loss_; }
  // Pushes the parameter servers dropped as stale (sync mode).
  int64_t stale_pushes() const { return stale_pushes_; }
  bool input_ended() const { return input_ended_; }
  // The wall time between consecutive steps of the last Run (input, compute
  // and the wait for the ps alike): "steps took: median 12.1 ms, slowest
  // 2104.3 ms (to global step 21) over 60 steps". The slowest less the median
  // is the longest this replica stood idle (a failover, a slow ps).
  std::string StepTimeSummary() const;

 private:
  Model* const model_;
  ParameterClient* const client_;
  BatchSource* batches_;
  std::unique_ptr<BatchSource> rewound_;  // batches_ after a rewind
  const TrainerOptions options_;
  double last_loss_ = 0.0;
  int64_t stale_pushes_ = 0;
  bool input_ended_ = false;
  // StepTimeSummary's: the steps' times in buckets 1% apart (bounded memory
  // however long the run), the count, and the slowest.
  std::vector<int64_t> step_buckets_;
  int64_t steps_timed_ = 0;
  double slowest_millis_ = 0;
  int64_t slowest_to_step_ = 0;

  std::vector<float> images_;
  std::vector<float> labels_;
  std::vector<float> grads_;
  std::vector<float> batch_stats_;
  // Models with sparse layers: the batch's sparse features and its rows.
  SparseBatch sparse_batch_;
  SparseStep sparse_step_;
};

}  // namespace pstrain

#endif  // PSTRAIN_WORKER_TRAINER_H_
