#include "tests/test_cluster_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "security/job_credentials.h"
#include "testing/data_test_util.h"

namespace pstrain {
namespace testing_util {

bool WriteQuadrantData(const std::string& dir, const std::string& prefix, int n, unsigned seed) {
  std::vector<uint8_t> pixels(static_cast<size_t>(n) * 784, 0), labels(n);
  uint64_t x = seed;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int q = static_cast<int>((x >> 33) % 4);
    labels[i] = static_cast<uint8_t>(q);
    for (int r = 0; r < 14; ++r) {
      for (int c = 0; c < 14; ++c) {
        pixels[static_cast<size_t>(i) * 784 + (r + (q / 2) * 14) * 28 + c + (q % 2) * 14] =
            static_cast<uint8_t>(128 + ((x >> ((r + c) % 32)) & 127));
      }
    }
  }
  Env* env = Env::Default();
  return env->CreateDirs(dir).ok() &&
         env->WriteFileAtomic(JoinPath(dir, prefix + "-images-idx3-ubyte"),
                              testutil::IdxImages(n, 28, 28, pixels))
             .ok() &&
         env->WriteFileAtomic(JoinPath(dir, prefix + "-labels-idx1-ubyte.gz"),
                              testutil::Gzip(testutil::IdxLabels(labels)))
             .ok();
}

bool WriteCifarQuadrantData(const std::string& dir, int per_batch, int test) {
  Env* env = Env::Default();
  if (!env->CreateDirs(dir).ok()) return false;
  uint64_t x = 12345;
  for (int f = 0; f < 6; ++f) {
    const int n = f < 5 ? per_batch : test;
    std::string file;
    for (int i = 0; i < n; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const int q = static_cast<int>((x >> 33) % 4);
      file.push_back(static_cast<char>(q));
      for (int c = 0; c < 3; ++c) {  // CHW
        for (int r = 0; r < 32; ++r) {
          for (int col = 0; col < 32; ++col) {
            // Top or bottom half (q / 2) bright in red or in blue (q % 2):
            // a label that random crops and left-right flips keep.
            const bool bright = r / 16 == q / 2 && c == 2 * (q % 2);
            const int noise = static_cast<int>((x >> ((r * 3 + col + c) % 40)) & 31);
            file.push_back(static_cast<char>(bright ? 160 + noise : 40 + noise));
          }
        }
      }
    }
    const std::string name =
        f < 5 ? absl::StrCat("data_batch_", f + 1, ".bin") : std::string("test_batch.bin");
    if (!env->WriteFileAtomic(JoinPath(dir, name), file).ok()) return false;
  }
  return true;
}

namespace {

// An ephemeral loopback port the kernel hands out now (closed again), or -1.
int EphemeralPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace

std::pair<int, std::string> Curl(const std::string& method, const std::string& url,
                                 const std::string& body_file) {
  std::vector<std::string> args = {"/usr/bin/curl",  "-sS", "-X", method, "-w",
                                   "\n%{http_code}", url};
  if (!body_file.empty()) {
    args.insert(args.end(),
                {"-H", "Content-Type: application/json", "--data-binary", "@" + body_file});
  }
  ProcessResult r = RunProcess(args, 60);
  const size_t nl = r.output.find_last_of('\n');
  int status = 0;
  if (nl == std::string::npos || !absl::SimpleAtoi(r.output.substr(nl + 1), &status)) {
    return {0, r.output};
  }
  return {status, r.output.substr(0, nl)};
}

int FreePort() {
  // A port once closed may be handed out again at once: never give one twice
  // in a process, or two tasks of one cluster could get the same address (CI
  // saw ps[0] and worker[0] on one port).
  static absl::Mutex mu(absl::kConstInit);
  static std::set<int>* given = new std::set<int>;  // guarded by mu
  absl::MutexLock lock(&mu);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = EphemeralPort();
    if (port > 0 && given->insert(port).second) return port;
  }
  return -1;
}

std::string LoopbackAddresses(int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) {
    s += (i ? ", \"127.0.0.1:" : "\"127.0.0.1:") + std::to_string(FreePort()) + "\"";
  }
  return s + "]";
}

std::string MakeTempDir(const std::string& name) {
  // mkdtemp: a directory no earlier run left behind (pids repeat on a fresh
  // machine, and a job dir holding another run's COMPLETED ends a job at once).
  std::string templ = JoinPath(::testing::TempDir(), "pstrain_" + name + "_XXXXXX");
  EXPECT_NE(::mkdtemp(templ.data()), nullptr) << templ << ": " << std::strerror(errno);
  return templ;
}

namespace {

std::string JobCredentialsDir(const std::string& dir) {
  const std::string certs = JoinPath(dir, "certs");
  if (!Env::Default()->FileExists(JoinPath(certs, "job.token"))) {
    const absl::Status s =
        MakeJobCredentials(certs, {"chief-0", "worker-0", "worker-1", "worker-2", "worker-3",
                                   "ps-0", "ps-1", "ps-2", "ps-3", "client"});
    EXPECT_TRUE(s.ok()) << s;
  }
  return certs;
}

}  // namespace

std::string JobCredentialsYaml(const std::string& dir) {
  const std::string certs = JobCredentialsDir(dir);
  return absl::StrCat("\n  tls_dir: ", certs, "\n  token_file: ", JoinPath(certs, "job.token"));
}

std::vector<std::string> JobCredentialsFlags(const std::string& dir) {
  const std::string certs = JobCredentialsDir(dir);
  return {"--tls_dir=" + certs, "--token_file=" + JoinPath(certs, "job.token")};
}

ProcessResult RunProcess(const std::vector<std::string>& args, int timeout_secs) {
  std::string command = "timeout --kill-after=5 " + std::to_string(timeout_secs);
  for (const std::string& a : args) command += " '" + a + "'";
  command += " 2>&1";
  ProcessResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

Background StartProcess(const std::vector<std::string>& args, const std::string& log_path) {
  Background b;
  b.log_path = log_path;
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  b.pid = ::fork();
  if (b.pid == 0) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return b;
}

int WaitProcess(Background* process, int timeout_secs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_secs);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    pid_t r = ::waitpid(process->pid, &status, WNOHANG);
    if (r == process->pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(process->pid, SIGKILL);
  ::waitpid(process->pid, &status, 0);
  return -1;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool WaitForText(const std::string& path, const std::string& text, int timeout_secs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_secs);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ReadAll(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

bool WaitForLoggedStep(const std::string& path, int64_t step, int timeout_secs) {
  const std::regex line(R"(step = ([0-9]+), loss)");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_secs);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = ReadAll(path);
    for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end; ++it) {
      if (std::stoll((*it)[1]) >= step) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::vector<pid_t> FindProcesses(const std::vector<std::string>& parts) {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::string cmdline = ReadAll("/proc/" + std::string(e->d_name) + "/cmdline");
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    // Zombies have an empty command line.
    bool all = !cmdline.empty();
    for (const std::string& p : parts) all = all && cmdline.find(p) != std::string::npos;
    if (all) pids.push_back(pid);
  }
  ::closedir(proc);
  return pids;
}

bool WriteRecordingGcloud(const std::string& path, const std::string& log) {
  return Env::Default()
             ->WriteFileAtomic(path, "#!/bin/sh\necho \"gcloud $*\" >> " + log + "\n")
             .ok() &&
         ::chmod(path.c_str(), 0755) == 0;
}

ClusterTestBase::ClusterTestBase(std::string name) : name_(std::move(name)) {}

void ClusterTestBase::SetUp() {
  dir_ = MakeTempDir(name_);
  data_ = JoinPath(dir_, "data");
  ASSERT_TRUE(WriteQuadrantData(data_, "train", 800, 1));
  ASSERT_TRUE(WriteQuadrantData(data_, "t10k", 200, 2));
}

void ClusterTestBase::TearDown() {
  // SetUp skipped (or failed) before making the dir: every command line
  // contains "", so there is nothing to look for.
  if (dir_.empty()) return;
  // Nothing of this test may outlive it.
  EXPECT_TRUE(FindProcesses({dir_}).empty()) << "processes left behind";
  for (pid_t pid : FindProcesses({dir_})) ::kill(pid, SIGKILL);
  // Nor its files (a job dir, the data, logs: hundreds of MB for the
  // simulated hosts), pass or fail. PSTRAIN_KEEP_TEST_DIRS=1 keeps them.
  const char* keep = std::getenv("PSTRAIN_KEEP_TEST_DIRS");
  if (keep != nullptr && std::string(keep) == "1") {
    std::cerr << "kept " << dir_ << "\n";
    return;
  }
  for (int attempt = 0; attempt < 50; ++attempt) {
    std::error_code error;
    std::filesystem::remove_all(dir_, error);
    if (!error && !std::filesystem::exists(dir_)) return;
    // A killed process may still be closing its files.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << "could not remove " << dir_;
}

std::string ClusterTestBase::job_dir() const { return JoinPath(dir_, "job"); }

std::string ClusterTestBase::WriteClusterConfig(const LoopbackConfig& config) {
  std::string yaml = absl::StrCat(
      "cluster:\n  chief: ", LoopbackAddresses(1),
      "\n  worker: ", LoopbackAddresses(config.workers),
      "\n  ps: ", config.ps_addresses.empty() ? LoopbackAddresses(config.ps) : config.ps_addresses,
      "\ntraining:\n  model: mnist_cnn\n", config.training);
  // JobCredentialsYaml's keys each start with "\n".
  if (config.credentials) absl::StrAppend(&yaml, JobCredentialsYaml(dir_).substr(1), "\n");
  const std::string path = JoinPath(dir_, config.file);
  EXPECT_TRUE(Env::Default()->WriteFileAtomic(path, yaml).ok()) << path;
  return path;
}

}  // namespace testing_util
}  // namespace pstrain
