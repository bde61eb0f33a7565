#include "tests/bench/distributed_bench.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "config/cluster_config.h"
#include "launch/supervisor.h"
#include "models/model_options.h"
#include "models/registry.h"
#include "ps_protocol/shard_layout.h"
#include "role/model_source.h"
#include "rpc/job_clients.h"
#include "security/job_credentials.h"

namespace pstrain {
namespace {

// A loopback port nobody listens on right now.
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// CPU seconds (user + system) process `pid` has used so far; -1 if gone.
double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command (which may hold spaces) in parentheses: state
  // is the 3rd field, utime the 14th, stime the 15th.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
  if (fields.size() < 13) return -1;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return (std::atof(fields[11].c_str()) + std::atof(fields[12].c_str())) / ticks;
}

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "distributed bench: %s: %s\n", what.c_str(),
               std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int RunDistributedBench(const DistributedBenchOptions& o) {
  const std::filesystem::path bin = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  char dir_template[] = "/tmp/pstrain-bench-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) return Fail("mkdtemp", absl::InternalError("failed"));
  const std::string dir = dir_template;

  JobConfig job;
  job.cluster.chief = {absl::StrCat("127.0.0.1:", FreePort())};
  for (int i = 0; i < o.num_workers; ++i) {
    job.cluster.worker.push_back(absl::StrCat("127.0.0.1:", FreePort()));
  }
  for (int i = 0; i < o.num_ps; ++i)
    job.cluster.ps.push_back(absl::StrCat("127.0.0.1:", FreePort()));
  TrainingSpec& t = job.training;
  t.model = o.model;
  if (!o.data_dir.empty()) t.data_dir = o.data_dir;
  t.job_dir = JoinPath(dir, "job");
  t.chief_trains = false;
  auto mode = ParseUpdateMode(o.update);
  if (!mode.ok()) return Fail("--update", mode.status());
  t.update = *mode;
  t.batch_size = o.batch_size;
  t.train_steps = o.warmup + o.steps;
  t.log_every_n_steps = 0;
  t.threads = o.threads_per_process;
  t.eval_steps = 0;
  t.wire_format = o.wire_format;
  t.insecure = !o.tls;
  t.ps_replication = o.ps_replication;
  // A spec file (wide_and_deep.yaml) is read into the job, as a role reads it.
  if (absl::Status s = LoadModelSpecFile(Env::Default(), &t); !s.ok()) return Fail("--model", s);
  if (o.tls) {
    t.tls_dir = JoinPath(dir, "certs");
    t.token_file = JoinPath(t.tls_dir, "job.token");
    if (absl::Status s = MakeJobCredentials(t.tls_dir, CredentialNames(job.cluster)); !s.ok()) {
      return Fail("credentials", s);
    }
  }
  if (absl::Status s = ValidateJobConfig(job); !s.ok()) return Fail("config", s);
  absl::StatusOr<WireSecurity> wire = LoadWireSecurity(Env::Default(), t, {"chief", 0});
  if (!wire.ok()) return Fail("credentials", wire.status());
  job.wire = *wire;
  const std::string config_path = JoinPath(dir, "cluster.yaml");
  if (absl::Status s = Env::Default()->WriteFileAtomic(config_path, JobConfigToYaml(job));
      !s.ok()) {
    return Fail("writing the config", s);
  }

  std::vector<ProcessSpec> specs;
  for (int i = 0; i < o.num_ps; ++i) {
    specs.push_back({absl::StrCat("ps:", i),
                     {(bin / "pstrain-ps").string(), "--config=" + config_path, "--job_name=ps",
                      absl::StrCat("--task_index=", i)},
                     {}});
  }
  for (int i = 0; i < o.num_workers; ++i) {
    specs.push_back({absl::StrCat("worker:", i),
                     {(bin / "pstrain-worker").string(), "--config=" + config_path,
                      "--job_name=worker", absl::StrCat("--task_index=", i)},
                     {}});
  }
  std::mutex lines_mu;
  std::vector<std::string> report;  // Worker summary lines.
  SupervisorOptions sup_options;
  sup_options.sink = [&](std::string_view line) {
    if (line.find("PushPull time") != std::string_view::npos ||
        line.find("failed") != std::string_view::npos ||
        line.find("[launcher]") != std::string_view::npos) {
      std::lock_guard<std::mutex> lock(lines_mu);
      report.emplace_back(line);
    }
  };
  auto supervisor = Supervisor::Start(std::move(specs), sup_options);
  if (!supervisor.ok()) return Fail("starting the processes", supervisor.status());

  auto model = BuildJobModel(t);  // a built-in, or a spec file (wide_and_deep.yaml)
  if (!model.ok()) return Fail("model", model.status());
  const ShardLayout layout = ComputeShardLayout(**model, o.num_ps);
  auto client = MakeParameterServers(job, layout);
  if (!client.ok()) return Fail("client", client.status());
  if (absl::Status s = (*client)->WaitReady(absl::Seconds(60), false, nullptr); !s.ok()) {
    return Fail("waiting for the ps", s);
  }
  std::vector<float> params((*model)->num_params()), state((*model)->num_state());
  (*model)->InitializeVariables(1, params.data(), state.data());
  if (absl::Status s = (*client)->Initialize(t.model, params.data(), state.data(), 0); !s.ok()) {
    return Fail("initializing", s);
  }

  int64_t s0 = -1, s1 = -1;
  absl::Time t0, t1;
  // Where the cycles of the timed steps go: each process's CPU seconds.
  const std::vector<pid_t> pids = (*supervisor)->pids();
  std::vector<double> cpu0(pids.size()), cpu1(pids.size());
  const absl::Time give_up = absl::Now() + absl::Minutes(30);
  while (absl::Now() < give_up) {
    auto statuses = (*client)->Statuses();
    if (!statuses.ok()) return Fail("following the step", statuses.status());
    const int64_t step = (*statuses)[0].global_step;
    if (s0 < 0 && step >= o.warmup) {
      s0 = step;
      t0 = absl::Now();
      for (size_t i = 0; i < pids.size(); ++i) cpu0[i] = CpuSeconds(pids[i]);
    }
    if (step >= t.train_steps) {
      s1 = step;
      t1 = absl::Now();
      for (size_t i = 0; i < pids.size(); ++i) cpu1[i] = CpuSeconds(pids[i]);
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  // Each ps's peak resident memory (VmHWM), before they exit.
  std::vector<std::string> memory;
  for (int i = 0; i < o.num_ps && i < static_cast<int>(pids.size()); ++i) {
    std::ifstream status(absl::StrCat("/proc/", pids[i], "/status"));
    std::string line;
    long long kb = -1;
    while (std::getline(status, line)) {
      if (line.rfind("VmHWM:", 0) == 0) kb = std::atoll(line.c_str() + 6);
    }
    if (kb < 0) continue;
    memory.push_back(absl::StrCat("ps ", i, " ", kb / 1024, " MiB"));
  }
  (void)(*client)->Shutdown("benchmark over");
  JobResult result = (*supervisor)->Wait("ps:0", absl::Seconds(20));
  for (const std::string& line : report) std::printf("%s\n", line.c_str());
  if (s1 < 0 || !result.ok) {
    std::fprintf(stderr, "distributed bench: the job did not finish cleanly: %s\n",
                 result.summary.c_str());
    return 1;
  }
  std::filesystem::remove_all(dir);
  const double secs = absl::ToDoubleSeconds(t1 - t0);
  const int examples_per_step = o.batch_size * (t.update == UpdateMode::kSync ? o.num_workers : 1);
  const double value_bytes = o.wire_format == "bf16" ? 2.0 : 4.0;
  const double bytes_per_step = 2.0 * layout.num_params * value_bytes * o.num_workers /
                                (t.update == UpdateMode::kSync ? 1 : o.num_workers);
  std::printf(
      "%s, %s on the wire, %d ps, %d workers x %d thread(s), batch %d, %lld timed global steps in "
      "%.2f s\n",
      o.update.c_str(), o.wire_format.c_str(), o.num_ps, o.num_workers, o.threads_per_process,
      o.batch_size, static_cast<long long>(s1 - s0), secs);
  std::printf("payload bytes per global step (both ways, all workers): %.1f MB\n",
              bytes_per_step / 1e6);
  std::printf("ps_replication %d; ps peak resident memory: %s\n", o.ps_replication,
              absl::StrJoin(memory, ", ").c_str());
  std::vector<std::string> cpu;
  double cpu_total = 0;
  for (size_t i = 0; i < pids.size(); ++i) {
    const bool ps = static_cast<int>(i) < o.num_ps;
    const double used = cpu1[i] - cpu0[i];
    cpu_total += used;
    cpu.push_back(absl::StrFormat("%s %d %.2f", ps ? "ps" : "worker",
                                  ps ? static_cast<int>(i) : static_cast<int>(i) - o.num_ps, used));
  }
  std::printf("CPU seconds in the timed steps (of %.2f s x %ld cores): %s; all %.2f\n", secs,
              ::sysconf(_SC_NPROCESSORS_ONLN), absl::StrJoin(cpu, ", ").c_str(), cpu_total);
  std::printf("global steps/sec: %.2f\n", (s1 - s0) / secs);
  std::printf("train examples/sec: %.1f\n", (s1 - s0) * examples_per_step / secs);
  return 0;
}

}  // namespace pstrain
