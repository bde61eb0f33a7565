// pstrain-swap-bench: pstrain-serve answering a click model while new
// versions land (online training's exports). Wide & Deep
// (examples/models/wide_and_deep.yaml) with --rows rows in each of its
// tables is exported to a temporary dir and served by a real pstrain-serve
// process on loopback (polling every second); --clients client threads
// (cpp-httplib, keep-alive) send requests of --batch instances
//   steady: for --seconds, no new version;
//   swaps:  while --swaps versions land one every --swap_secs (every
//           --full_every-th a full version, the others deltas changing
//           --delta_rows rows per table), and a second after the last.
// Prints each phase's requests, errors, p50 and p99, the swaps' p99 over the
// steady one, how many versions were served (the answers' model_version) and
// whether every one was a version written.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "export/export.h"
#include "gflags/gflags.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"

// After every Eigen header: httplib.h brings <resolv.h>, whose `_res` macro
// breaks Eigen's parameter names.
#include "httplib.h"

DEFINE_string(serve_bin, "", "pstrain-serve (default: beside this binary).");
DEFINE_string(spec, "",
              "The model spec (default: examples/models/wide_and_deep.yaml "
              "beside the build dir).");
DEFINE_int64(rows, 100000, "Rows in each table of every full version.");
DEFINE_int64(delta_rows, 5000, "Rows per table a delta changes.");
DEFINE_int32(clients, 16, "Client threads.");
DEFINE_int32(batch, 8, "Instances per request.");
DEFINE_double(seconds, 10, "Seconds of the steady phase.");
DEFINE_int32(swaps, 12, "Versions that land in the swaps phase.");
DEFINE_double(swap_secs, 1.5, "Seconds between two of them.");
DEFINE_int32(full_every, 3, "Every this many versions, a full one; deltas between.");
DEFINE_int32(port, 18511, "Port for pstrain-serve on 127.0.0.1.");

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

std::string Beside(const std::string& name) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n > 0 ? n : 0] = '\0';
  return std::string(self).substr(0, std::string(self).find_last_of('/')) + "/" + name;
}

// The model's values: dense ones and every table's rows.
struct Values {
  std::unique_ptr<pstrain::Model> model;
  std::vector<float> params, state;
  std::vector<pstrain::TrainedTableRows> tables;
};

// One phase's latencies and the versions its answers named.
struct Phase {
  std::vector<double> ms;
  std::set<std::string> versions;
  int errors = 0;
};

Phase Drive(const std::string& body, const std::atomic<bool>& stop) {
  std::vector<Phase> per(FLAGS_clients);
  std::vector<std::thread> threads;
  for (int c = 0; c < FLAGS_clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", FLAGS_port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      while (!stop) {
        const auto t0 = Clock::now();
        httplib::Result r = client.Post("/v1/models/ctr:predict", body, "application/json");
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (!r || r->status != 200) {
          ++per[c].errors;
          continue;
        }
        per[c].ms.push_back(ms);
        per[c].versions.insert(
            nlohmann::json::parse(r->body, nullptr, false).value("model_version", "none"));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  Phase all;
  for (const Phase& p : per) {
    all.ms.insert(all.ms.end(), p.ms.begin(), p.ms.end());
    all.versions.insert(p.versions.begin(), p.versions.end());
    all.errors += p.errors;
  }
  return all;
}

void Print(const char* name, const Phase& p, double secs) {
  std::printf("%s: %zu requests (%.0f/s), %d errors, p50 %.3f ms, p99 %.3f ms\n", name, p.ms.size(),
              p.ms.size() / secs, p.errors, Percentile(p.ms, 0.5), Percentile(p.ms, 0.99));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  pstrain::Env* env = pstrain::Env::Default();
  const std::string spec_path =
      FLAGS_spec.empty() ? Beside("../../examples/models/wide_and_deep.yaml") : FLAGS_spec;
  absl::StatusOr<std::string> spec = env->ReadFile(spec_path);
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    return 1;
  }
  Values v;
  absl::StatusOr<std::unique_ptr<pstrain::Model>> model =
      pstrain::BuildModelFromSpecText(*spec, spec_path);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  v.model = std::move(*model);
  v.params.resize(v.model->num_params());
  v.state.resize(v.model->num_state());
  v.model->InitializeVariables(1, v.params.data(), v.state.data());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> weight(-0.1f, 0.1f);
  for (const pstrain::SparseTableInfo& info : v.model->sparse_tables()) {
    pstrain::TrainedTableRows rows;
    for (int64_t id = 0; id < FLAGS_rows; ++id) {
      rows.ids.push_back(id);
      for (int64_t j = 0; j < info.dim; ++j) rows.weights.push_back(weight(rng));
    }
    v.tables.push_back(std::move(rows));
  }
  const std::string base = absl::StrCat("/tmp/pstrain-swap-bench-", getpid());
  std::set<std::string> written;
  const auto full = [&]() {
    absl::StatusOr<std::string> dir = pstrain::WriteExport(
        env, base, *v.model, pstrain::ModelOptions(), 0, "", v.params, v.state, v.tables);
    if (!dir.ok()) {
      std::fprintf(stderr, "%s\n", dir.status().ToString().c_str());
      std::exit(1);
    }
    written.insert(dir->substr(dir->rfind('/') + 1));
  };
  full();

  const std::string serve = FLAGS_serve_bin.empty() ? Beside("pstrain-serve") : FLAGS_serve_bin;
  std::vector<std::string> args = {serve,
                                   "--model_base_path=" + base,
                                   "--model_name=ctr",
                                   "--host=127.0.0.1",
                                   absl::StrCat("--port=", FLAGS_port),
                                   "--file_system_poll_wait_seconds=1",
                                   "--minloglevel=1"};
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
  for (int i = 0; i < 600 && !up; ++i) {
    httplib::Result r = probe.Get("/healthz");
    up = r && r->status == 200;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!up) {
    std::fprintf(stderr, "pstrain-serve did not come up on port %d\n", FLAGS_port);
    kill(pid, SIGKILL);
    return 1;
  }
  // Requests of --batch instances of random ids (most of them rows the
  // tables hold) and dense values.
  nlohmann::json instances = nlohmann::json::array();
  for (int i = 0; i < FLAGS_batch; ++i) {
    nlohmann::json instance;
    std::vector<float> dense(v.model->input_shape()[0]);
    for (float& x : dense) x = weight(rng) * 10;
    instance["dense"] = dense;
    for (const std::string& f : v.model->sparse_features()) {
      instance[f] = {static_cast<int64_t>(rng() % (FLAGS_rows + FLAGS_rows / 10))};
    }
    instances.push_back(instance);
  }
  const std::string body = nlohmann::json({{"instances", instances}}).dump();
  std::printf("Wide & Deep, %lld rows per table (%zu tables), %d clients, %d instances a request\n",
              static_cast<long long>(FLAGS_rows), v.tables.size(), FLAGS_clients, FLAGS_batch);

  std::atomic<bool> stop{false};
  auto start = Clock::now();
  std::thread timer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(FLAGS_seconds * 1000)));
    stop = true;
  });
  const Phase steady = Drive(body, stop);
  timer.join();
  Print("steady", steady, std::chrono::duration<double>(Clock::now() - start).count());

  stop = false;
  int deltas = 0;
  start = Clock::now();
  std::thread writer([&] {
    for (int k = 1; k <= FLAGS_swaps; ++k) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(static_cast<int>(FLAGS_swap_secs * 1000)));
      for (float& p : v.params) p *= 0.999f;
      std::vector<pstrain::TrainedTableRows> changed(v.tables.size());
      for (size_t t = 0; t < v.tables.size(); ++t) {
        const int64_t dim = v.model->sparse_tables()[t].dim;
        for (int64_t r = 0; r < FLAGS_delta_rows; ++r) {
          const int64_t row = static_cast<int64_t>(rng() % FLAGS_rows);
          if (!changed[t].ids.empty() && changed[t].ids.back() == row) continue;
          for (int64_t j = 0; j < dim; ++j) v.tables[t].weights[row * dim + j] = weight(rng);
          changed[t].ids.push_back(row);
          changed[t].weights.insert(changed[t].weights.end(),
                                    v.tables[t].weights.begin() + row * dim,
                                    v.tables[t].weights.begin() + (row + 1) * dim);
        }
        // Each id once.
        std::map<int64_t, size_t> last;
        for (size_t i = 0; i < changed[t].ids.size(); ++i) last[changed[t].ids[i]] = i;
        pstrain::TrainedTableRows unique;
        for (const auto& [id, i] : last) {
          unique.ids.push_back(id);
          unique.weights.insert(unique.weights.end(), changed[t].weights.begin() + i * dim,
                                changed[t].weights.begin() + (i + 1) * dim);
        }
        changed[t] = std::move(unique);
      }
      if (k % FLAGS_full_every == 0) {
        full();
        continue;
      }
      absl::StatusOr<std::vector<int64_t>> versions = pstrain::ListExportVersions(env, base);
      pstrain::ExportOnnxFile no_onnx;
      no_onnx.missing_reason = "a delta";
      absl::StatusOr<std::string> dir =
          pstrain::WriteExportVersion(env, base, *v.model, pstrain::ModelOptions(), k, "", v.params,
                                      v.state, changed, no_onnx, versions->back());
      if (!dir.ok()) {
        std::fprintf(stderr, "%s\n", dir.status().ToString().c_str());
        std::exit(1);
      }
      written.insert(dir->substr(dir->rfind('/') + 1));
      ++deltas;
    }
    // The last one picked up.
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    stop = true;
  });
  const Phase swaps = Drive(body, stop);
  writer.join();
  Print("swaps", swaps, std::chrono::duration<double>(Clock::now() - start).count());
  int unknown = 0;
  for (const std::string& version : swaps.versions) unknown += written.count(version) == 0;
  std::printf(
      "%d versions landed (%d deltas of %lld rows per table, %d full); answers named %zu "
      "versions, %d of them not written; p99 during swaps / steady p99 = %.2f\n",
      FLAGS_swaps, deltas, static_cast<long long>(FLAGS_delta_rows), FLAGS_swaps - deltas,
      swaps.versions.size(), unknown, Percentile(swaps.ms, 0.99) / Percentile(steady.ms, 0.99));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  std::filesystem::remove_all(base);
  return steady.errors + swaps.errors + unknown > 0 ? 1 : 0;
}
