#ifndef PSTRAIN_SERVING_MODEL_SERVER_H_
#define PSTRAIN_SERVING_MODEL_SERVER_H_

// TensorFlow Serving's REST API over pstrain exports, free of any HTTP
// library (serve_main.cc adapts it to cpp-httplib):
//   POST /v1/models/<name>[/versions/<v>]:predict
//        {"instances": [...]}            -> {"predictions": [{"classes": k,
//                                             "probabilities": [...]}, ...],
//                                             "model_version": "<v>"}
//        {"inputs": [...] | {"image": [...]}} -> {"outputs": {"classes": [...],
//                                             "probabilities": [[...], ...]}}
//   GET  /v1/models/<name>[/versions/<v>]   -> model_version_status
//   GET  /v1/models/<name>[/versions/<v>]/metadata -> the signature
//   GET  /healthz                            -> {"status": "ok", ...}
// Errors are 4xx with {"error": "..."} saying what is wrong. A newer version
// under the base path is picked up by PollOnce() without a restart; requests
// in flight finish on the version they started with. Concurrent predict
// requests are batched (up to max_batch instances, waiting at most
// batch_timeout for more).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "serving/predictor.h"
#include "serving/request_reader.h"

namespace pstrain {

struct ModelServerOptions {
  std::string model_name = "default";
  std::string model_base_path;  // the export dir: numbered versions
  int max_batch = 32;           // instances per forward pass
  absl::Duration batch_timeout = absl::Milliseconds(1);
  int64_t max_instances = 4096;  // per request
};

struct HttpAnswer {
  int status = 200;
  std::string body;  // JSON
};

class ModelServer {
 public:
  // Loads the newest version under the base path. NotFound (saying how to
  // export one) if there is none.
  static absl::StatusOr<std::unique_ptr<ModelServer>> Create(Env* env, ModelServerOptions options);
  ~ModelServer();

  // Any method, path and body: a 4xx with {"error": ...} saying what is
  // wrong for anything it cannot answer; 500 only for a fault of the server.
  // Thread-safe.
  HttpAnswer Handle(const std::string& method, const std::string& path, const std::string& body);

  // Loads a newer version if one appeared; true if it did. A version that
  // cannot be loaded is logged and skipped (the current one keeps serving).
  // A click model's deltas of the version served are applied to it in place
  // (each between two requests); a full version is loaded beside it and
  // swapped in, requests in flight finishing on the old one.
  bool PollOnce();
  int64_t version();
  // Deltas applied in place so far.
  int64_t deltas_applied() {
    absl::MutexLock lock(&mu_);
    return deltas_applied_;
  }
  // Forward passes the batcher ran, and the instances in them.
  std::pair<int64_t, int64_t> batch_stats();

 private:
  ModelServer(Env* env, ModelServerOptions options);

  struct Job {
    std::shared_ptr<Predictor> predictor;
    const float* images;
    int64_t n;
    std::promise<std::vector<Prediction>> done;
  };

  // Applies the deltas after the version served, in order, when each is a
  // delta of the one before; true if it reached the newest of `versions`.
  bool ApplyDeltas(const std::vector<int64_t>& versions);
  HttpAnswer Route(const std::string& method, const std::string& path, const std::string& body);
  HttpAnswer Predict(const std::string& version, const std::string& body);
  // A click model's request (serving/click_request.h), answered on the
  // caller's thread.
  // `asked`: the version the request named ("" for any).
  HttpAnswer PredictClicks(Predictor& predictor, const std::string& body, const std::string& asked);
  HttpAnswer Status(const std::string& version);
  HttpAnswer Metadata(const std::string& version);
  // The predictor for `version` ("" for the newest), or a 404 answer.
  std::shared_ptr<Predictor> Current(const std::string& version, HttpAnswer* error);
  std::vector<Prediction> RunBatched(std::shared_ptr<Predictor> predictor, const float* images,
                                     int64_t n);
  void BatchLoop();

  Env* const env_;
  const ModelServerOptions options_;
  absl::Mutex mu_;
  std::shared_ptr<Predictor> predictor_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t deltas_applied_ ABSL_GUARDED_BY(mu_) = 0;
  // The newest version when it could not be loaded (PollOnce's thread).
  int64_t failed_version_ = 0;
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t batches_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t batched_instances_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reading_ ABSL_GUARDED_BY(mu_) = 0;  // requests being read, not yet queued
  std::thread batcher_;
};

}  // namespace pstrain

#endif  // PSTRAIN_SERVING_MODEL_SERVER_H_
