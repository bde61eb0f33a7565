// pstrain-serve: TensorFlow Serving's REST API for a pstrain export.
//   pstrain-serve --model_base_path=<job_dir>/export [--model_name=default] [--port=8501]
// Serves the newest version under the base path and picks up newer ones as
// they appear (every --file_system_poll_wait_seconds); batches concurrent
// requests (--max_batch_size instances, waiting --batch_timeout_micros for
// more). SIGTERM or SIGINT: stops accepting, finishes what is in flight,
// exits 0. See serving/model_server.h for the endpoints.
#include <signal.h>

#include <atomic>
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
#include "serving/model_server.h"

// After every Eigen header: httplib.h brings <resolv.h>, whose `_res` macro
// breaks Eigen's parameter names.
#include "httplib.h"

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

namespace {

volatile sig_atomic_t stop_signal = 0;
void OnSignal(int signal) { stop_signal = signal; }

// Every request goes to `server`. Bodies are read here whatever their
// Content-Type (curl -d sends application/x-www-form-urlencoded, which
// httplib would parse as a form and refuse over 8 KiB), up to
// --max_request_bytes.
void Route(pstrain::ModelServer* server, httplib::Server* http) {
  // Small answers go out at once (no Nagle delay behind the client's ACK).
  http->set_tcp_nodelay(true);
  auto answer = [server](const httplib::Request& req, const std::string& body,
                         httplib::Response& res) {
    pstrain::HttpAnswer a = server->Handle(req.method, req.path, body);
    res.status = a.status;
    res.set_content(a.body, "application/json");
  };
  http->Get(".*", [answer](const httplib::Request& req, httplib::Response& res) {
    answer(req, "", res);
  });
  auto with_body = [answer](const httplib::Request& req, httplib::Response& res,
                            const httplib::ContentReader& reader) {
    std::string body;
    bool too_big = false;
    reader([&](const char* data, size_t n) {
      too_big = body.size() + n > static_cast<size_t>(FLAGS_max_request_bytes);
      if (!too_big) body.append(data, n);
      return !too_big;
    });
    if (too_big) {
      res.status = 413;
      res.set_content(absl::StrCat("{\"error\": \"the request body is over --max_request_bytes (",
                                   FLAGS_max_request_bytes, ")\"}"),
                      "application/json");
      return;
    }
    answer(req, body, res);
  };
  http->Post(".*", with_body);
  http->Put(".*", with_body);
  http->Delete(".*", with_body);
  // httplib's own refusals (a request it cannot read) get TensorFlow
  // Serving's error form too.
  http->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    res.set_content(absl::StrCat("{\"error\": \"HTTP ", res.status, "\"}"), "application/json");
  });
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
  httplib::Server http;
  Route(server->get(), &http);
  if (!http.bind_to_port(FLAGS_host.c_str(), port)) {
    LOG(ERROR) << "pstrain-serve: cannot listen on " << FLAGS_host << ":" << port
               << " (in use? choose another with --port)";
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
    http.stop();
  });
  LOG(INFO) << "serving model " << FLAGS_model_name << " version " << (*server)->version()
            << " from " << FLAGS_model_base_path << " at http://" << FLAGS_host << ":" << port
            << "/v1/models/" << FLAGS_model_name << " (TensorFlow Serving's REST API)";
  http.listen_after_bind();
  watcher.join();
  LOG(INFO) << "stopped";
  return 0;
}
