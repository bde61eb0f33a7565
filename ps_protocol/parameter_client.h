#ifndef PSTRAIN_PS_PROTOCOL_PARAMETER_CLIENT_H_
#define PSTRAIN_PS_PROTOCOL_PARAMETER_CLIENT_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/sparse_input.h"

namespace pstrain {

// Reads the current rows of a model's embedding tables without training on
// them (evaluation, prediction): fills step->tables[t].rows (ids.size() x
// dim each) for the ids Model::PrepareSparse chose.
class RowReader {
 public:
  virtual ~RowReader() = default;
  virtual absl::Status ReadRows(SparseStep* step) = 0;
};

// The current parameters as the training loop sees them.
struct ParameterView {
  const float* params = nullptr;  // The model's flat trainable vector.
  const float* state = nullptr;   // The model's flat state vector.
  int64_t global_step = 0;
  bool job_done = false;  // The job reached its last step or is shutting down.
  // Where the rows of the model's embedding tables are read; null for a
  // model without any.
  RowReader* rows = nullptr;
  // Set when `params` may still be arriving (a client that returned the
  // last push before all of its answers, so the next forward pass can start
  // on the first layers): returns once params[0, end) hold their values.
  // `state` is always complete.
  std::function<void(int64_t end)> await_params;

  // Waits for params[0, end) (every value by default) if they may still be
  // arriving; call before reading them outside a training step.
  void AwaitParams(int64_t end = std::numeric_limits<int64_t>::max()) const {
    if (await_params) await_params(end);
  }
};

// What a push learned.
struct PushOutcome {
  int64_t global_step = 0;  // After the update.
  bool stale = false;       // The gradients were dropped as too old (sync).
  bool job_done = false;
  // Nothing was sent: the parameters this step was computed from did not
  // all arrive as one step's (the previous push's last answers found the job
  // rolled back, or done). Pull again and compute the step anew.
  bool discarded = false;
};

// What a client sent and received so far, for the logs.
struct ClientTraffic {
  // Steps whose round trip was measured (the pushes that returned).
  int64_t steps = 0;
  // Bytes sent and received in parameter and gradient payloads.
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  // Answers that left out a chunk's parameters because the client held
  // them already.
  int64_t unchanged_answers = 0;
  // "p50 X ms, p90 Y ms, p99 Z ms over N steps" of the round-trip time not
  // hidden behind computation.
  std::string latency_summary;
  // Embedding rows: their ids and gradients sent, rows received.
  int64_t row_bytes_sent = 0;
  int64_t row_bytes_received = 0;
  int64_t rows_pulled = 0;
  int64_t rows_pushed = 0;
};

// How the training loop reaches the parameters: in the same process (a local
// trainer) or on parameter servers. The loop pulls, computes, and pushes; it
// never sees where the values live. Not thread-safe: one loop per client.
class ParameterClient {
 public:
  virtual ~ParameterClient() = default;

  // Fetches the current parameters. The view stays valid until the next call
  // on this client.
  virtual absl::StatusOr<ParameterView> Pull() = 0;

  // Like Pull, for the training loop's next step: may return before every
  // value has arrived (the last push's answers still on the wire), with
  // view.await_params set; the step's forward pass waits for each layer's.
  virtual absl::StatusOr<ParameterView> PullOverlapped() { return Pull(); }

  // Like Pull, for a sync replica that (re)joins the job at `step`: where
  // the job is one step past it in places (this replica was killed after
  // pushing some chunks or rows of the step and not the others), the values
  // are those the step was computed from, so the replica computes its
  // gradients anew exactly as before it was killed.
  virtual absl::StatusOr<ParameterView> PullAt(int64_t /*step*/) { return Pull(); }

  // Models with sparse layers: fills step->tables[t].rows with the current
  // rows of the ids Model::PrepareSparse chose for this step's batch, and
  // remembers `step`: the next Push also sends the gradients the backward
  // pass writes into it (tables[t].grads), so `step` must live until then.
  virtual absl::Status PullRows(SparseStep* /*step*/) {
    return absl::UnimplementedError("this parameter client holds no embedding tables");
  }

  // Announces the buffers the next Push will send, before the backward pass
  // fills them, so a client may send parts early (GradientsReady).
  virtual void StartPush(int64_t /*step*/, const float* /*grads*/, const float* /*batch_stats*/) {}

  // The gradients at flat offsets >= `from` are final (the backward pass
  // goes from the last layer to the first); the batch statistics are final
  // once the backward pass has begun.
  virtual void GradientsReady(int64_t /*from*/) {}

  // Sends the gradients (and batch statistics) computed from the parameters
  // of the last Pull (whose global step was `step`); the same buffers as
  // StartPush, if it was called.
  virtual absl::StatusOr<PushOutcome> Push(int64_t step, const float* grads,
                                           const float* batch_stats) = 0;

  // The mean loss of a batch of `examples` this loop trained on, for the
  // chief's summaries (a client may send it with a later push).
  virtual void ReportProgress(double /*loss*/, int64_t /*examples*/) {}

  // What this client sent and received (nothing for one in this process).
  virtual ClientTraffic traffic() const { return {}; }
};

}  // namespace pstrain

#endif  // PSTRAIN_PS_PROTOCOL_PARAMETER_CLIENT_H_
