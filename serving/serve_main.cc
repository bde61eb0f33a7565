// pstrain-serve: TensorFlow Serving's REST API for a pstrain export.
//   pstrain-serve --model_base_path=<job_dir>/export [--model_name=default] [--port=8501]
// Serves the newest version under the base path and picks up newer ones as
// they appear (every --file_system_poll_wait_seconds); batches concurrent
// requests (--max_batch_size instances, waiting --batch_timeout_micros for
// more). Slow or stalled clients cost a connection, never a handler thread
// (serving/http_server.h; the limits below). SIGTERM or SIGINT: stops
// accepting, finishes what is in flight, exits 0. See serving/model_server.h
// for the endpoints.
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cloud/gcs_env.h"
#include "common/flags.h"
#include "common/version.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "serving/http_server.h"
#include "serving/model_server.h"

DEFINE_string(model_base_path, "", "The export dir: numbered version directories (required).");
DEFINE_string(model_name, "default", "The name in /v1/models/<name>.");
DEFINE_string(host, "0.0.0.0", "Address to listen on.");
DEFINE_int32(port, 8501, "REST port (TensorFlow Serving's --rest_api_port).");
DEFINE_int32(rest_api_port, 0, "Same as --port when set (TensorFlow Serving's name).");
DEFINE_int32(max_batch_size, 32, "Instances per forward pass when batching requests.");
DEFINE_int64(batch_timeout_micros, 1000, "How long a batch waits for more requests.");
DEFINE_int32(file_system_poll_wait_seconds, 1, "How often to look for a new version (0: never).");
DEFINE_int64(max_request_bytes, 64 << 20, "Larger request bodies get 413.");
DEFINE_int64(max_instances, 4096, "More instances in one request get 413.");
DEFINE_int32(rest_api_num_threads, 0,
             "Threads running requests (TensorFlow Serving's name); 0: 4 per core, at least 4. "
             "Connections are read and written by one more thread whatever their number.");
DEFINE_int32(max_connections, 1024,
             "Open connections at most; one more is answered 503 and closed.");
DEFINE_int32(header_timeout_ms, 10000,
             "A request's line and headers must arrive within this (from the connection's "
             "start, or from the first byte of a later request on it); else 408 and close.");
DEFINE_int32(body_timeout_ms, 60000,
             "A request's body must arrive within this after its headers; else 408 and close.");
DEFINE_int32(keep_alive_timeout_ms, 5000, "An idle keep-alive connection closes after this.");
DEFINE_int32(keep_alive_max_requests, 1000, "Requests per connection; then it closes.");
DEFINE_int32(write_timeout_ms, 10000,
             "A response the client has not taken within this: the connection closes.");

namespace {

volatile sig_atomic_t stop_signal = 0;
void OnSignal(int signal) { stop_signal = signal; }

// The limits from the flags; an error naming the flag for a value that cannot work.
absl::StatusOr<pstrain::HttpServerOptions> ServerOptions() {
  const std::pair<const char*, int> positive[] = {
      {"max_connections", FLAGS_max_connections},
      {"header_timeout_ms", FLAGS_header_timeout_ms},
      {"body_timeout_ms", FLAGS_body_timeout_ms},
      {"keep_alive_timeout_ms", FLAGS_keep_alive_timeout_ms},
      {"keep_alive_max_requests", FLAGS_keep_alive_max_requests},
      {"write_timeout_ms", FLAGS_write_timeout_ms}};
  for (const auto& [name, value] : positive) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, "=", value, " must be at least 1"));
    }
  }
  if (FLAGS_rest_api_num_threads < 0 || FLAGS_max_request_bytes < 1) {
    return absl::InvalidArgumentError(
        "--rest_api_num_threads must be 0 (automatic) or more, --max_request_bytes at least 1");
  }
  pstrain::HttpServerOptions o;
  o.num_threads = FLAGS_rest_api_num_threads > 0
                      ? FLAGS_rest_api_num_threads
                      : std::max(4, 4 * static_cast<int>(std::thread::hardware_concurrency()));
  o.max_connections = FLAGS_max_connections;
  o.header_timeout = absl::Milliseconds(FLAGS_header_timeout_ms);
  o.body_timeout = absl::Milliseconds(FLAGS_body_timeout_ms);
  o.keep_alive_timeout = absl::Milliseconds(FLAGS_keep_alive_timeout_ms);
  o.keep_alive_max_requests = FLAGS_keep_alive_max_requests;
  o.write_timeout = absl::Milliseconds(FLAGS_write_timeout_ms);
  o.limits.max_body_bytes = FLAGS_max_request_bytes;
  return o;
}

// Each connection is a descriptor: the soft limit goes up to the hard one,
// and a --max_connections the limit cannot hold is said at the start.
void RaiseDescriptorLimit(int max_connections) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur != RLIM_INFINITY &&
      limit.rlim_cur < static_cast<rlim_t>(max_connections) * 2 + 64) {
    LOG(WARNING) << "--max_connections=" << max_connections << " but the process may open "
                 << limit.rlim_cur << " descriptors (`ulimit -n`): connections beyond it wait "
                 << "in the kernel's backlog";
  }
}

// HEAD is GET without the body (the server drops it).
pstrain::HttpServerResponse Answer(pstrain::ModelServer* server,
                                   const pstrain::HttpServerRequest& req) {
  const std::string& method = req.method == "HEAD" ? std::string("GET") : req.method;
  pstrain::HttpAnswer a = server->Handle(method, req.path, req.body);
  return {a.status, std::move(a.body), "application/json"};
}

}  // namespace

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-serve")) return 0;
  gflags::SetUsageMessage("pstrain-serve --model_base_path=<job_dir>/export [--port=8501]");
  pstrain::NormalizeFlagSpellings(argc, argv);
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  const int port = FLAGS_rest_api_port > 0 ? FLAGS_rest_api_port : FLAGS_port;
  if (argc != 1 || FLAGS_model_base_path.empty() || FLAGS_max_batch_size < 1) {
    std::fprintf(stderr, "usage: pstrain-serve --model_base_path=<job_dir>/export [--port=8501]\n");
    return 2;
  }
  pstrain::ModelServerOptions options;
  options.model_name = FLAGS_model_name;
  options.model_base_path = FLAGS_model_base_path;
  options.max_batch = FLAGS_max_batch_size;
  options.batch_timeout = absl::Microseconds(FLAGS_batch_timeout_micros);
  options.max_instances = FLAGS_max_instances;
  absl::StatusOr<std::unique_ptr<pstrain::ModelServer>> server =
      pstrain::ModelServer::Create(pstrain::ProcessEnv(), options);
  if (!server.ok()) {
    LOG(ERROR) << "pstrain-serve: " << server.status();
    return 1;
  }
  absl::StatusOr<pstrain::HttpServerOptions> http_options = ServerOptions();
  if (!http_options.ok()) {
    LOG(ERROR) << "pstrain-serve: " << http_options.status().message();
    return 2;
  }
  RaiseDescriptorLimit(http_options->max_connections);
  pstrain::ModelServer* model_server = server->get();
  absl::StatusOr<std::unique_ptr<pstrain::HttpServer>> http = pstrain::HttpServer::Create(
      FLAGS_host, port, *http_options,
      [model_server](const pstrain::HttpServerRequest& req) { return Answer(model_server, req); });
  if (!http.ok()) {
    LOG(ERROR) << "pstrain-serve: " << http.status().message();
    return 1;
  }
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  std::thread watcher([&] {
    auto next_poll = std::chrono::steady_clock::now();
    while (stop_signal == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (FLAGS_file_system_poll_wait_seconds > 0 &&
          std::chrono::steady_clock::now() >= next_poll) {
        (*server)->PollOnce();
        next_poll = std::chrono::steady_clock::now() +
                    std::chrono::seconds(FLAGS_file_system_poll_wait_seconds);
      }
    }
    LOG(INFO) << "signal " << stop_signal << ": stopping (finishing requests in flight)";
    (*http)->Stop();
  });
  LOG(INFO) << "serving model " << FLAGS_model_name << " version " << (*server)->version()
            << " from " << FLAGS_model_base_path << " at http://" << FLAGS_host << ":"
            << (*http)->port() << "/v1/models/" << FLAGS_model_name
            << " (TensorFlow Serving's REST API; " << http_options->num_threads
            << " request threads, at most " << http_options->max_connections << " connections)";
  (*http)->Run();
  watcher.join();
  LOG(INFO) << "stopped";
  return 0;
}
