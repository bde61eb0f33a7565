#include "serving/model_server.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "serving/request_reader.h"

namespace pstrain {
namespace {

// Messages echo what the client sent (a path, a value), which may be any
// bytes: what is not UTF-8 is replaced, never thrown on.
std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpAnswer Error(int status, const std::string& message) {
  return {status, Dump(nlohmann::json({{"error", message}}))};
}

HttpAnswer Ok(const nlohmann::json& body) { return {200, Dump(body)}; }

nlohmann::json Dim(int64_t size) { return {{"size", std::to_string(size)}, {"name", ""}}; }

// A multi-task model's signature outputs: one per head, by its name (a
// binary head's probability, a regression head's value: [-1]; a softmax
// head's probabilities [-1, classes]).
nlohmann::json HeadOutputs(const std::vector<ModelHead>& heads) {
  nlohmann::json outputs = nlohmann::json::object();
  for (const ModelHead& h : heads) {
    nlohmann::json dims = nlohmann::json::array({Dim(-1)});
    if (h.kind == Head::kSoftmax) dims.push_back(Dim(h.num_classes));
    outputs[h.name] = {{"dtype", "DT_FLOAT"},
                       {"tensor_shape", {{"dim", dims}, {"unknown_rank", false}}},
                       {"name", h.name}};
  }
  return outputs;
}

// The parsed parts of /v1/models/<name>[/versions/<v>][/metadata][:predict].
struct ParsedRoute {
  std::string name, version;
  bool metadata = false, predict = false;
};

bool ParseRoute(absl::string_view path, ParsedRoute* route) {
  if (!absl::ConsumePrefix(&path, "/v1/models/")) return false;
  route->predict = absl::ConsumeSuffix(&path, ":predict");
  route->metadata = absl::ConsumeSuffix(&path, "/metadata");
  std::vector<std::string> parts = absl::StrSplit(path, '/');
  if (parts.size() == 1 && !parts[0].empty()) {
    route->name = parts[0];
    return true;
  }
  if (parts.size() == 3 && !parts[0].empty() && parts[1] == "versions" && !parts[2].empty()) {
    route->name = parts[0];
    route->version = parts[2];
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelServer>> ModelServer::Create(Env* env,
                                                                 ModelServerOptions options) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<int64_t> versions,
                           ListExportVersions(env, options.model_base_path));
  if (versions.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no model versions in ", options.model_base_path,
        " (numbered directories holding model.json); the chief writes them to <job_dir>/export "
        "at the end of training, or run: pstrain-export <job_dir>"));
  }
  auto server = std::unique_ptr<ModelServer>(new ModelServer(env, std::move(options)));
  const std::string dir =
      JoinPath(server->options_.model_base_path, std::to_string(versions.back()));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Predictor> predictor, Predictor::Load(env, dir));
  absl::MutexLock lock(&server->mu_);
  server->predictor_ = std::move(predictor);
  server->version_ = versions.back();
  return server;
}

ModelServer::ModelServer(Env* env, ModelServerOptions options)
    : env_(env), options_(std::move(options)) {
  batcher_ = std::thread([this] { BatchLoop(); });
}

ModelServer::~ModelServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  batcher_.join();
}

int64_t ModelServer::version() {
  absl::MutexLock lock(&mu_);
  return version_;
}

std::pair<int64_t, int64_t> ModelServer::batch_stats() {
  absl::MutexLock lock(&mu_);
  return {batches_, batched_instances_};
}

bool ModelServer::PollOnce() {
  absl::StatusOr<std::vector<int64_t>> versions =
      ListExportVersions(env_, options_.model_base_path);
  if (!versions.ok()) {
    LOG(WARNING) << "cannot list " << options_.model_base_path << ": " << versions.status();
    return false;
  }
  const int64_t current = version();
  if (versions->empty() || versions->back() <= current) return false;
  // One that could not be loaded is tried again only once a newer one
  // comes.
  if (versions->back() == failed_version_) return false;
  if (ApplyDeltas(*versions)) return true;
  const std::string dir = JoinPath(options_.model_base_path, std::to_string(versions->back()));
  absl::StatusOr<std::unique_ptr<Predictor>> loaded = Predictor::Load(env_, dir);
  if (!loaded.ok()) {
    LOG(WARNING) << "version " << versions->back() << " cannot be loaded; still serving "
                 << version() << " (tried again when a newer version comes): " << loaded.status();
    failed_version_ = versions->back();
    return false;
  }
  absl::MutexLock lock(&mu_);
  predictor_ = std::move(*loaded);
  version_ = versions->back();
  LOG(INFO) << "serving model " << options_.model_name << " version " << version_
            << " (global step " << predictor_->exported().global_step << ")";
  return true;
}

bool ModelServer::ApplyDeltas(const std::vector<int64_t>& versions) {
  std::shared_ptr<Predictor> predictor;
  {
    absl::MutexLock lock(&mu_);
    predictor = predictor_;
  }
  if (!predictor->is_click_model()) return false;
  // The versions after the one served, each a delta of the one before.
  auto next = std::upper_bound(versions.begin(), versions.end(), predictor->version());
  for (; next != versions.end(); ++next) {
    const int64_t from = predictor->version();
    const std::string dir = JoinPath(options_.model_base_path, std::to_string(*next));
    absl::StatusOr<int64_t> base = ExportDeltaOf(env_, dir);
    if (!base.ok() || *base != from) return false;  // a full version: loaded whole
    absl::StatusOr<ExportedModel> delta = ReadExportFiles(env_, dir);
    absl::Status applied = delta.ok() ? predictor->ApplyDelta(*delta) : delta.status();
    if (!applied.ok()) {
      LOG(WARNING) << "the delta " << dir << " cannot be applied to version " << from
                   << "; loading the newest version whole: " << applied;
      return false;
    }
    int64_t rows = 0;
    for (const TrainedTableRows& t : delta->tables) rows += static_cast<int64_t>(t.ids.size());
    absl::MutexLock lock(&mu_);
    version_ = *next;
    ++deltas_applied_;
    LOG(INFO) << "serving model " << options_.model_name << " version " << version_
              << " (global step " << predictor->global_step() << "; a delta of version " << from
              << ", " << rows << " rows applied in place)";
  }
  return true;
}

std::shared_ptr<Predictor> ModelServer::Current(const std::string& version, HttpAnswer* error) {
  absl::MutexLock lock(&mu_);
  int64_t v = 0;
  if (!version.empty() && (!absl::SimpleAtoi(version, &v) || v != version_)) {
    *error = Error(404, absl::StrCat("version ", version, " of model ", options_.model_name,
                                     " is not available; it serves version ", version_));
    return nullptr;
  }
  return predictor_;
}

HttpAnswer ModelServer::Handle(const std::string& method, const std::string& path,
                               const std::string& body) {
  // Every refusal of a request is a 4xx made below; an exception here is a
  // fault of the server (a bug, or out of memory), so it is a 500 and logged.
  try {
    return Route(method, path, body);
  } catch (const std::exception& e) {
    LOG(ERROR) << method << " " << path << ": " << e.what();
    return Error(500, absl::StrCat("internal error: ", e.what()));
  }
}

HttpAnswer ModelServer::Route(const std::string& method, const std::string& path,
                              const std::string& body) {
  if (path == "/healthz") {
    if (method != "GET") return Error(405, "use GET for /healthz");
    return Ok({{"status", "ok"}, {"model", options_.model_name}, {"version", version()}});
  }
  ParsedRoute route;
  if (!ParseRoute(path, &route)) {
    return Error(404, absl::StrCat("no such endpoint: ", path, " (try /v1/models/",
                                   options_.model_name, ":predict)"));
  }
  if (route.name != options_.model_name) {
    return Error(404, absl::StrCat("Servable not found for request: model ", route.name,
                                   "; this server serves model ", options_.model_name));
  }
  if (route.predict) {
    if (method != "POST" || route.metadata) return Error(405, "use POST for :predict");
    return Predict(route.version, body);
  }
  if (method != "GET") return Error(405, absl::StrCat("use GET for ", path));
  return route.metadata ? Metadata(route.version) : Status(route.version);
}

HttpAnswer ModelServer::Status(const std::string& version) {
  HttpAnswer error;
  if (Current(version, &error) == nullptr) return error;
  return Ok({{"model_version_status",
              {{{"version", std::to_string(this->version())},
                {"state", "AVAILABLE"},
                {"status", {{"error_code", "OK"}, {"error_message", ""}}}}}}});
}

HttpAnswer ModelServer::Metadata(const std::string& version) {
  HttpAnswer error;
  std::shared_ptr<Predictor> p = Current(version, &error);
  if (p == nullptr) return error;
  const ExportedModel& e = p->exported();
  nlohmann::json input_dims = nlohmann::json::array({Dim(-1)});
  for (int64_t d : e.input_shape) input_dims.push_back(Dim(d));
  nlohmann::json inputs = {{"image",
                            {{"dtype", "DT_FLOAT"},
                             {"tensor_shape", {{"dim", input_dims}, {"unknown_rank", false}}},
                             {"name", "image"}}}};
  if (p->is_click_model()) {
    // "dense" [-1, n] and each feature's values, ids or strings.
    inputs = nlohmann::json::object();
    if (p->click_inputs().num_dense > 0) {
      inputs["dense"] = {
          {"dtype", "DT_FLOAT"},
          {"tensor_shape",
           {{"dim", {Dim(-1), Dim(p->click_inputs().num_dense)}}, {"unknown_rank", false}}},
          {"name", "dense"}};
    }
    for (const std::string& f : p->click_inputs().features) {
      inputs[f] = {{"dtype", "DT_INT64"},
                   {"tensor_shape", {{"dim", {Dim(-1), Dim(-1)}}, {"unknown_rank", false}}},
                   {"name", f}};
    }
  }
  nlohmann::json outputs =
      !p->heads().empty() ? HeadOutputs(p->heads())
      : p->is_regression()
          ? nlohmann::json{{"predictions",
                            {{"dtype", "DT_FLOAT"},
                             {"tensor_shape", {{"dim", {Dim(-1)}}, {"unknown_rank", false}}},
                             {"name", "predictions"}}}}
          : nlohmann::json{{"classes",
                            {{"dtype", "DT_INT64"},
                             {"tensor_shape", {{"dim", {Dim(-1)}}, {"unknown_rank", false}}},
                             {"name", "classes"}}},
                           {"probabilities",
                            {{"dtype", "DT_FLOAT"},
                             {"tensor_shape",
                              {{"dim", {Dim(-1), Dim(e.num_classes)}}, {"unknown_rank", false}}},
                             {"name", "probabilities"}}}};
  const nlohmann::json signature = {
      {"inputs", inputs}, {"outputs", outputs}, {"method_name", "tensorflow/serving/predict"}};
  return Ok({{"model_spec",
              {{"name", options_.model_name},
               {"signature_name", ""},
               {"version", std::to_string(p->version())}}},
             {"metadata",
              {{"signature_def", {{"signature_def", {{"serving_default", signature}}}}},
               {"pstrain",
                {{"model", e.model},
                 {"global_step", p->global_step()},
                 {"input_scaling", "pixel / 255, in [0, 1]"},
                 {"per_image_standardization", e.per_image_standardization}}}}}});
}

HttpAnswer ModelServer::Predict(const std::string& version, const std::string& body) {
  HttpAnswer error;
  std::shared_ptr<Predictor> predictor = Current(version, &error);
  if (predictor == nullptr) return error;
  // Counted from here to the batcher's queue: the batcher waits for more
  // instances only while other requests are this far.
  {
    absl::MutexLock lock(&mu_);
    ++reading_;
  }
  if (predictor->is_click_model()) return PredictClicks(*predictor, body, version);
  PlainRequest request;
  absl::Status read =
      ReadPredictRequest(body, predictor->exported().input_shape, options_.max_instances, &request);
  if (!read.ok()) {
    absl::MutexLock lock(&mu_);
    --reading_;
    return Error(absl::IsResourceExhausted(read) ? 413 : 400, std::string(read.message()));
  }
  const std::string served = std::to_string(predictor->version());
  std::vector<Prediction> predictions =
      RunBatched(std::move(predictor), request.images.data(), request.n);
  if (request.row) {
    nlohmann::json out = nlohmann::json::array();
    for (const Prediction& p : predictions) out.push_back(PredictionJson(p));
    return Ok({{"predictions", out}, {"model_version", served}});
  }
  return Ok({{"outputs", PredictionColumns(predictions)}, {"model_version", served}});
}

HttpAnswer ModelServer::PredictClicks(Predictor& predictor, const std::string& body,
                                      const std::string& asked) {
  // Not batched with other requests: each runs its own forward pass.
  {
    absl::MutexLock lock(&mu_);
    --reading_;
  }
  ClickRequest request;
  if (absl::Status read =
          ReadClickRequest(body, predictor.click_inputs(), options_.max_instances, &request);
      !read.ok()) {
    return Error(absl::IsResourceExhausted(read) ? 413 : 400, std::string(read.message()));
  }
  int64_t version = 0;
  absl::StatusOr<std::vector<Prediction>> predictions = predictor.PredictClicks(request, &version);
  if (!predictions.ok()) return Error(400, std::string(predictions.status().message()));
  if (!asked.empty() && asked != std::to_string(version)) {
    // A delta moved the model on while the request waited: not the version
    // asked for.
    return Error(404, absl::StrCat("version ", asked, " of model ", options_.model_name,
                                   " is not available; it serves version ", version));
  }
  if (request.row) {
    nlohmann::json out = nlohmann::json::array();
    for (const Prediction& p : *predictions) out.push_back(PredictionJson(p));
    return Ok({{"predictions", out}, {"model_version", std::to_string(version)}});
  }
  return Ok(
      {{"outputs", PredictionColumns(*predictions)}, {"model_version", std::to_string(version)}});
}

std::vector<Prediction> ModelServer::RunBatched(std::shared_ptr<Predictor> predictor,
                                                const float* images, int64_t n) {
  Job job{std::move(predictor), images, n, {}};
  std::future<std::vector<Prediction>> result = job.done.get_future();
  {
    absl::MutexLock lock(&mu_);
    --reading_;
    if (n < options_.max_batch) queue_.push_back(&job);
  }
  if (n >= options_.max_batch) return job.predictor->Predict(images, n);  // a batch of its own
  return result.get();
}

void ModelServer::BatchLoop() {
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
  auto full = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int64_t total = 0;
    for (const Job* job : queue_) total += job->n;
    // No other request on its way to the queue: waiting would only delay this one.
    return stopping_ || total >= options_.max_batch || reading_ == 0;
  };
  while (true) {
    std::vector<Job*> jobs;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, nothing left
      mu_.AwaitWithTimeout(absl::Condition(&full), options_.batch_timeout);
      int64_t total = 0;
      const Predictor* first = queue_.front()->predictor.get();
      while (!queue_.empty() && queue_.front()->predictor.get() == first &&
             (jobs.empty() || total + queue_.front()->n <= options_.max_batch)) {
        total += queue_.front()->n;
        jobs.push_back(queue_.front());
        queue_.pop_front();
      }
      ++batches_;
      batched_instances_ += total;
    }
    int64_t total = 0;
    for (const Job* job : jobs) total += job->n;
    const int64_t size = jobs[0]->predictor->example_size();
    std::vector<float> images(total * size);
    int64_t at = 0;
    for (const Job* job : jobs) {
      std::copy(job->images, job->images + job->n * size, images.begin() + at * size);
      at += job->n;
    }
    std::vector<Prediction> predictions = jobs[0]->predictor->Predict(images.data(), total);
    at = 0;
    for (Job* job : jobs) {
      // The caller returns (and its Job goes) as soon as the value is set:
      // read everything first and set it through a promise of our own.
      std::vector<Prediction> mine(predictions.begin() + at, predictions.begin() + at + job->n);
      at += job->n;
      std::promise<std::vector<Prediction>> done = std::move(job->done);
      done.set_value(std::move(mine));
    }
  }
}

}  // namespace pstrain
