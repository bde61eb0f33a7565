#ifndef PSTRAIN_TESTS_TEST_CLUSTER_UTIL_H_
#define PSTRAIN_TESTS_TEST_CLUSTER_UTIL_H_

// Helpers for tests that start real pstrain processes on loopback.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace testing_util {

// Writes MNIST-format idx files ("<prefix>-images-idx3-ubyte" raw and
// "<prefix>-labels-idx1-ubyte.gz") of `n` 28x28 images whose label (0..3) is
// the quadrant that is bright: learnable in a few dozen steps.
bool WriteQuadrantData(const std::string& dir, const std::string& prefix, int n, unsigned seed);

// CIFAR-10 binary batches (data_batch_1..5.bin of `per_batch` examples,
// test_batch.bin of `test` examples) of 32x32x3 images whose label (0..3)
// says which half (top, bottom) is bright in which colour (red, blue), in
// `dir`.
bool WriteCifarQuadrantData(const std::string& dir, int per_batch, int test);

// A loopback port that nobody listens on right now.
int FreePort();

// curl METHOD URL [BODY_FILE]: {status, body} ({0, curl's output} if it got
// no answer).
std::pair<int, std::string> Curl(const std::string& method, const std::string& url,
                                 const std::string& body_file = "");

// A YAML list of `n` loopback addresses with free ports:
// ["127.0.0.1:P1", "127.0.0.1:P2"].
std::string LoopbackAddresses(int n);

// A fresh directory under the test temp dir.
std::string MakeTempDir(const std::string& name);

// Makes the credentials of a job (pstrain-certs': a CA, certificates for
// chief-0, worker-0..3, ps-0..3 and client, a token) in `dir`/certs unless
// they are there, and returns the training keys that give them to every task
// ("\n  tls_dir: ...\n  token_file: ..."), to append to a YAML training
// section. Tests run their jobs with mutual TLS, as users do.
std::string JobCredentialsYaml(const std::string& dir);
// The same as command-line flags.
std::vector<std::string> JobCredentialsFlags(const std::string& dir);

struct ProcessResult {
  int exit_code = -1;  // -1 if killed by a signal or timed out
  std::string output;  // stdout and stderr
};

// Runs `args` to completion (at most `timeout_secs`), capturing its output.
ProcessResult RunProcess(const std::vector<std::string>& args, int timeout_secs);

// A process started in the background with its output going to `log_path`.
struct Background {
  pid_t pid = -1;
  std::string log_path;
};
Background StartProcess(const std::vector<std::string>& args, const std::string& log_path);
// Waits up to `timeout_secs` for it to exit; its exit code, or -1 (killed,
// or still running: then it is SIGKILLed).
int WaitProcess(Background* process, int timeout_secs);
// Polls `path` until it contains `text` (true) or `timeout_secs` pass.
bool WaitForText(const std::string& path, const std::string& text, int timeout_secs);

// Waits until the file at `path` holds a progress line ("step = N, loss")
// with N >= `step`. For async jobs, whose replicas log the global step their
// push reached, which may skip any one number.
bool WaitForLoggedStep(const std::string& path, int64_t step, int timeout_secs);
std::string ReadAll(const std::string& path);

// Writes an executable script `path` that appends "gcloud ARGS..." (its
// arguments after the word gcloud) to `log` and exits 0: a gcloud that
// records what it is asked to do. False if it cannot be written.
bool WriteRecordingGcloud(const std::string& path, const std::string& log);

// Pids of live processes whose command line contains every one of `parts`.
std::vector<pid_t> FindProcesses(const std::vector<std::string>& parts);

// A job config on loopback, for ClusterTestBase::WriteClusterConfig. (Every
// member has an initializer: designated initializers may leave any out
// without -Wmissing-field-initializers.)
struct LoopbackConfig {
  int ps = 1;
  int workers = 1;                    // and one chief
  std::string ps_addresses{};         // a YAML list, instead of `ps` free ports
  std::string training{};             // keys after model: mnist_cnn, "  key: value\n" each
  bool credentials = true;            // the job's TLS credentials and token
  std::string file = "cluster.yaml";  // in the test's dir
};

// The fixture of tests that start real pstrain processes: SetUp makes a
// fresh temp dir `dir_` and, in `data_` (`dir_`/data), quadrant data (800
// training examples of seed 1, 200 test examples of seed 2); TearDown fails
// the test if a process whose command line names `dir_` outlives it, and
// SIGKILLs them. A fixture with more to set up overrides SetUp and calls
// ClusterTestBase::SetUp first (or later, after a GTEST_SKIP check: with no
// `dir_`, TearDown does nothing).
class ClusterTestBase : public ::testing::Test {
 protected:
  // `name` is in the temp dir's name.
  explicit ClusterTestBase(std::string name);

  void SetUp() override;
  void TearDown() override;

  // `dir_`/job: the job dir tests usually give their jobs.
  std::string job_dir() const;

  // Writes `config` to `dir_`/`config.file` and returns its path:
  //   cluster:
  //     chief: ["127.0.0.1:P"]
  //     worker: [`config.workers` addresses]
  //     ps: [`config.ps` addresses, or `config.ps_addresses`]
  //   training:
  //     model: mnist_cnn
  //   `config.training`
  //     tls_dir: ...      (the job's credentials, JobCredentialsYaml, unless
  //     token_file: ...    `config.credentials` is false)
  // Every address is on loopback with a port nobody listens on.
  std::string WriteClusterConfig(const LoopbackConfig& config);

  std::string dir_, data_;

 private:
  std::string name_;
};

}  // namespace testing_util
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_TEST_CLUSTER_UTIL_H_
