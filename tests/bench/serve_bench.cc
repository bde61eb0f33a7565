// pstrain-serve-bench: what serving an export costs. Prints
//   compute batch=B: p50 X ms per call, Y instances/s        (Predictor, in process)
//   rest batch=B clients=C: R req/s, I instances/s, p50 X ms, p99 Y ms
// the second through a real pstrain-serve process on loopback, driven by C
// client threads (cpp-httplib clients, keep-alive), each sending requests of
// B instances for --seconds. The model is --model_dir's export, or mnist_cnn
// with its initial values exported to a temporary dir.
//
// --stalled=N: each REST run is run again beside N stalled uploads
// (connections that sent a :predict request's headers and a few bytes of its
// body, then nothing, open for the whole run), printed as
//   rest-stalled batch=B clients=C stalled=N: R req/s, I instances/s, p50 X ms, p99 Y ms
// (compare_serving.sh reads only the "rest batch=" lines).
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "export/export.h"
#include "gflags/gflags.h"
#include "serving/predictor.h"
#include "serving/request_reader.h"

// After every Eigen header: httplib.h brings <resolv.h>, whose `_res` macro
// breaks Eigen's parameter names.
#include "httplib.h"

DEFINE_string(serve_bin, "", "pstrain-serve (default: beside this binary).");
DEFINE_string(model_dir, "", "An export dir (default: mnist_cnn's initial values).");
DEFINE_string(runs, "1x1,1x8,32x1,32x8", "REST runs: <batch>x<clients>, comma-separated.");
DEFINE_double(seconds, 5, "Seconds per REST run (and at most per in-process batch size).");
DEFINE_string(compute_batches, "1,32", "Batch sizes of the in-process runs, comma-separated.");
DEFINE_int32(port, 18501, "Port for pstrain-serve on 127.0.0.1.");
DEFINE_int32(stalled, 0,
             "Also run each REST run beside this many stalled uploads (0: only without).");

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

std::string ExportDir() {
  if (!FLAGS_model_dir.empty()) return FLAGS_model_dir;
  const std::string dir = absl::StrCat("/tmp/pstrain-serve-bench-", getpid());
  std::unique_ptr<pstrain::Model> model =
      *pstrain::BuildModel("mnist_cnn", pstrain::ModelOptions());
  std::vector<float> params(model->num_params()), state(model->num_state());
  model->InitializeVariables(1, params.data(), state.data());
  absl::StatusOr<std::string> written = pstrain::WriteExport(
      pstrain::Env::Default(), dir, *model, pstrain::ModelOptions(), 0, "", params, state);
  if (!written.ok()) {
    std::fprintf(stderr, "cannot export: %s\n", written.status().ToString().c_str());
    std::exit(1);
  }
  return dir;
}

void Compute(pstrain::Predictor* predictor, int batch) {
  std::vector<float> images(batch * predictor->example_size());
  std::mt19937 rng(1);
  for (float& x : images) x = static_cast<float>(rng() % 256) / 255;
  for (int i = 0; i < std::clamp(2560 / batch, 2, 20); ++i)
    predictor->Predict(images.data(), batch);
  std::vector<double> ms;
  const auto begin = Clock::now();
  // 300 calls, or as many as --seconds holds (at least 5).
  for (int i = 0;
       i < 300 && (i < 5 || Clock::now() - begin < std::chrono::duration<double>(FLAGS_seconds));
       ++i) {
    const auto start = Clock::now();
    predictor->Predict(images.data(), batch);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  const double p50 = Percentile(ms, 0.5);
  std::printf("compute batch=%d: p50 %.3f ms per call, %.1f instances/s\n", batch, p50,
              batch * 1000.0 / p50);
  std::fflush(stdout);
}

// Stalled uploads: connections to the server that sent the headers of a
// 1 MB :predict body and a few bytes of it, then nothing. Their fds, closed
// by the destructor.
class StalledUploads {
 public:
  explicit StalledUploads(int n) {
    const std::string head =
        "POST /v1/models/default:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
        "{\"instances\": [[0.5, ";
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(FLAGS_port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < n; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
          send(fd, head.data(), head.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(head.size())) {
        std::fprintf(stderr, "stalled upload %d of %d: %s\n", i, n, std::strerror(errno));
        if (fd >= 0) close(fd);
        continue;
      }
      fds_.push_back(fd);
    }
    // Time for the server to take them in before the clients start.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ~StalledUploads() {
    for (int fd : fds_) close(fd);
  }
  int size() const { return static_cast<int>(fds_.size()); }
  // How many the server answered or closed (a timeout, a refusal).
  int Answered() const {
    int n = 0;
    for (int fd : fds_) {
      pollfd p{fd, POLLIN, 0};
      n += poll(&p, 1, 0) > 0;
    }
    return n;
  }

 private:
  std::vector<int> fds_;
};

// Enough file descriptors for `n` stalled uploads here and in the server
// (which inherits the limit): the soft limit raised to the hard one if needed.
bool RaiseFileLimit(int n) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  const rlim_t need = static_cast<rlim_t>(n) + 256;
  if (limit.rlim_cur >= need) return true;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < need) {
    std::fprintf(stderr, "--stalled=%d needs %llu file descriptors; the hard limit is %llu\n", n,
                 static_cast<unsigned long long>(need),
                 static_cast<unsigned long long>(limit.rlim_max));
    return false;
  }
  limit.rlim_cur = limit.rlim_max;
  return setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

void Rest(int batch, int clients, const std::string& body_instance, int stalled) {
  std::unique_ptr<StalledUploads> uploads;
  if (stalled > 0) uploads = std::make_unique<StalledUploads>(stalled);
  std::string body = "{\"instances\": [";
  for (int i = 0; i < batch; ++i) absl::StrAppend(&body, i ? "," : "", body_instance);
  body += "]}";
  std::vector<std::vector<double>> latencies(clients);
  std::atomic<int> errors{0};
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(FLAGS_seconds * 1000));
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", FLAGS_port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      while (Clock::now() < deadline) {
        const auto t0 = Clock::now();
        httplib::Result r = client.Post("/v1/models/default:predict", body, "application/json");
        if (!r || r->status != 200) {
          ++errors;
          continue;
        }
        latencies[c].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  const std::string label = uploads == nullptr
                                ? absl::StrCat("rest batch=", batch, " clients=", clients)
                                : absl::StrCat("rest-stalled batch=", batch, " clients=", clients,
                                               " stalled=", uploads->size());
  std::string notes;
  if (errors > 0) absl::StrAppend(&notes, " (", errors.load(), " errors)");
  if (uploads != nullptr && uploads->Answered() > 0) {
    absl::StrAppend(&notes, " (", uploads->Answered(), " of ", uploads->size(),
                    " stalled uploads answered or closed during the run)");
  }
  std::printf("%s: %.1f req/s, %.1f instances/s, p50 %.3f ms, p99 %.3f ms%s\n", label.c_str(),
              all.size() / secs, all.size() * batch / secs, Percentile(all, 0.5),
              Percentile(all, 0.99), notes.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_stalled < 0 || (FLAGS_stalled > 0 && !RaiseFileLimit(FLAGS_stalled))) return 1;
  const std::string dir = ExportDir();
  absl::StatusOr<std::unique_ptr<pstrain::Predictor>> predictor =
      pstrain::Predictor::Load(pstrain::Env::Default(), dir);
  if (!predictor.ok()) {
    std::fprintf(stderr, "%s\n", predictor.status().ToString().c_str());
    return 1;
  }
  for (absl::string_view batch : absl::StrSplit(FLAGS_compute_batches, ',')) {
    int b = 0;
    if (!absl::SimpleAtoi(batch, &b) || b < 1) {
      std::fprintf(stderr, "--compute_batches: %s is no batch size\n", std::string(batch).c_str());
      return 2;
    }
    Compute(predictor->get(), b);
  }

  std::string serve = FLAGS_serve_bin;
  if (serve.empty()) {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    serve = std::string(self).substr(0, std::string(self).find_last_of('/')) + "/pstrain-serve";
  }
  std::vector<std::string> args = {serve, "--model_base_path=" + dir, "--host=127.0.0.1",
                                   absl::StrCat("--port=", FLAGS_port), "--minloglevel=1"};
  if (FLAGS_stalled > 0) {
    // The stalled uploads stay stalled for the whole bench and within the
    // connection limit.
    args.insert(args.end(), {"--body_timeout_ms=86400000",
                             absl::StrCat("--max_connections=", FLAGS_stalled + 1024)});
  }
  std::vector<char*> argv_c;
  for (std::string& a : args) argv_c.push_back(a.data());
  argv_c.push_back(nullptr);
  pid_t pid;
  if (posix_spawn(&pid, serve.c_str(), nullptr, nullptr, argv_c.data(), environ) != 0) {
    std::fprintf(stderr, "cannot start %s\n", serve.c_str());
    return 1;
  }
  httplib::Client probe("127.0.0.1", FLAGS_port);
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    httplib::Result r = probe.Get("/healthz");
    up = r && r->status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!up) {
    std::fprintf(stderr, "pstrain-serve did not come up on port %d\n", FLAGS_port);
    kill(pid, SIGKILL);
    return 1;
  }
  std::string instance = "[";
  std::mt19937 rng(2);
  for (int64_t i = 0; i < (*predictor)->example_size(); ++i) {
    absl::StrAppend(&instance, i ? "," : "", static_cast<float>(rng() % 256) / 255);
  }
  instance += "]";
  // What a batch-32 request body costs to read, in process (nlohmann-json
  // parse, then the instances checked and copied into the input).
  {
    std::string body = "{\"instances\": [";
    for (int i = 0; i < 32; ++i) absl::StrAppend(&body, i ? "," : "", instance);
    body += "]}";
    std::vector<float> images(32 * (*predictor)->example_size());
    std::vector<double> parse_ms, check_ms, plain_ms;
    for (int rep = 0; rep < 50; ++rep) {
      const auto t0 = Clock::now();
      nlohmann::json request = nlohmann::json::parse(body);
      const auto t1 = Clock::now();
      for (int i = 0; i < 32; ++i) {
        (void)pstrain::ParseInstance(request["instances"][i], (*predictor)->exported().input_shape,
                                     images.data() + i * (*predictor)->example_size());
      }
      parse_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      check_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t1).count());
      const auto t2 = Clock::now();
      pstrain::PlainRequest plain;
      if (!pstrain::ReadPlainRequest(body, (*predictor)->exported().input_shape, 32, &plain)) {
        std::fprintf(stderr, "the plain reader did not take the benchmark's body\n");
        return 1;
      }
      plain_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t2).count());
    }
    std::printf(
        "json batch=32 (%zu bytes): parse p50 %.3f ms, instances p50 %.3f ms; "
        "one-pass reader p50 %.3f ms\n",
        body.size(), Percentile(parse_ms, 0.5), Percentile(check_ms, 0.5),
        Percentile(plain_ms, 0.5));
    std::fflush(stdout);
  }
  for (absl::string_view run : absl::StrSplit(FLAGS_runs, ',', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(run, 'x');
    Rest(std::stoi(parts[0]), std::stoi(parts[1]), instance, 0);
    if (FLAGS_stalled > 0) Rest(std::stoi(parts[0]), std::stoi(parts[1]), instance, FLAGS_stalled);
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  if (FLAGS_model_dir.empty()) std::filesystem::remove_all(dir);
  return 0;
}
