// Jobs of real pstrain processes on loopback for profiling and the update
// options of issue 15: --trace_steps writes every task's Chrome trace and a
// merged cluster view; bounded staleness (update: ssp) holds a fast worker
// back while a slow one is stopped; top-k compression trains while sending
// a fraction of the bytes.
#include <signal.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using Json = nlohmann::json;
using testing_util::Background;
using testing_util::FindProcesses;
using testing_util::ProcessResult;
using testing_util::ReadAll;
using testing_util::RunProcess;
using testing_util::StartProcess;
using testing_util::WaitForText;
using testing_util::WaitProcess;

const std::string kBin = PSTRAIN_BIN_DIR;

class ProfileClusterTest : public testing_util::ClusterTestBase {
 protected:
  ProfileClusterTest() : ClusterTestBase("profile") {}

  std::string WriteConfig(int ps, int workers, const std::string& training) {
    return WriteClusterConfig(
        {.ps = ps,
         .workers = workers,
         .training = absl::StrCat("  data_dir: ", data_, "\n  job_dir: ", job_dir(),
                                  "\n  batch_size: 20\n  eval_steps: 0\n  log_every_n_steps: 10",
                                  "\n  startup_timeout: 60\n  threads: 1\n", training)});
  }
};

double FinalAccuracy(const std::string& output) {
  std::smatch m;
  const std::regex line("Saving dict for global step [0-9]+: accuracy = ([0-9.]+)");
  std::string::const_iterator from = output.begin();
  double last = -1;
  while (std::regex_search(from, output.end(), m, line)) {
    last = std::stod(m[1]);
    from = m[0].second;
  }
  return last;
}

Json ReadJson(const std::string& path) {
  absl::StatusOr<std::string> text = Env::Default()->ReadFile(path);
  EXPECT_TRUE(text.ok()) << path << ": " << text.status();
  return Json::parse(text.ok() ? *text : "{}", nullptr, /*allow_exceptions=*/false);
}

// The traced steps hold two checkpoints (steps 11 and 22), so one is traced
// however late the chief's checkpointer thread gets to it: with steps 10 to
// 12 only, a loaded machine saved step 11's checkpoint after step 12 and the
// test failed (4 of 5 runs beside a build, before and after issue 39's work).
TEST_F(ProfileClusterTest, TraceStepsWriteEveryTasksTraceAndAClusterViewOnOneClock) {
  const std::string config = WriteConfig(
      2, 1,
      "  update: sync\n  train_steps: 30\n  checkpoint_steps: 11\n  trace_steps: \"10:25\"\n");
  ProcessResult r = RunProcess({kBin + "/pstrain-launch", "--config=" + config}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string run = JoinPath(job_dir(), "plugins/profile/steps_10_25");
  std::map<std::string, std::set<std::string>> names;  // file -> event names
  for (const char* file : {"chief-0", "worker-0", "ps-0", "ps-1"}) {
    const Json trace = ReadJson(JoinPath(run, absl::StrCat(file, ".trace.json")));
    ASSERT_TRUE(trace.contains("traceEvents")) << file << "\n" << r.output;
    for (const Json& e : trace["traceEvents"]) {
      if (e["ph"] != "X") continue;
      names[file].insert(e["name"].get<std::string>());
      const int64_t step = e["args"]["step"].get<int64_t>();
      EXPECT_GE(step, 10) << file << " " << e.dump();
      EXPECT_LE(step, 25) << file << " " << e.dump();
    }
    if (std::string(file).rfind("ps", 0) == 0) continue;
    // Clients measured the ps clocks: one machine, so within 50 ms.
    const Json& offsets = trace["otherData"]["ps_clock_offsets_us"];
    ASSERT_EQ(offsets.size(), 2u) << file;
    for (const Json& o : offsets) EXPECT_LT(std::abs(o.get<int64_t>()), 50'000) << file;
  }
  for (const char* file : {"chief-0", "worker-0"}) {
    for (const char* name : {"train step", "forward conv2d", "backward conv2d", "forward dense_1",
                             "wait for push answers", "PushPull", "encode chunk 0"}) {
      EXPECT_TRUE(names[file].count(name)) << file << " has no \"" << name << "\"";
    }
  }
  EXPECT_TRUE(names["chief-0"].count("ps save shards"));
  EXPECT_TRUE(names["chief-0"].count("write checkpoint index"));
  for (const char* file : {"ps-0", "ps-1"}) {
    EXPECT_TRUE(names[file].count("apply")) << file;
    EXPECT_TRUE(names[file].count("copy chunk for checkpoint")) << file;
    EXPECT_TRUE(names[file].count("save shard file")) << file;
  }
  const Json merged = ReadJson(JoinPath(run, "cluster.trace.json"));
  std::set<int> pids;
  std::set<std::string> processes;
  for (const Json& e : merged["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["name"] == "process_name") processes.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_EQ(pids.size(), 4u);
  EXPECT_EQ(processes, (std::set<std::string>{"chief:0", "worker:0", "ps:0", "ps:1"}));
  EXPECT_NE(r.output.find("cluster trace (every task on ps 0's clock) written to"),
            std::string::npos)
      << r.output;
}

TEST_F(ProfileClusterTest, SspHoldsTheFastReplicasWhileASlowOneIsStopped) {
  const std::string config =
      WriteConfig(1, 2, "  update: ssp\n  staleness: 2\n  train_steps: 120\n  sync_timeout: 30\n");
  Background launch =
      StartProcess({kBin + "/pstrain-launch", "--config=" + config}, JoinPath(dir_, "launch.log"));
  const std::string log = JoinPath(dir_, "launch.log");
  ASSERT_TRUE(WaitForText(log, "[worker:1] ", 60)) << ReadAll(log);
  ASSERT_TRUE(WaitForText(log, "step = ", 60)) << ReadAll(log);
  // Worker 1 stops for 3 s (less than sync_timeout: it is slow, not gone).
  std::vector<pid_t> worker1 = FindProcesses({dir_, "pstrain-worker", "--task_index=1"});
  ASSERT_EQ(worker1.size(), 1u) << ReadAll(log);
  ASSERT_EQ(::kill(worker1[0], SIGSTOP), 0);
  absl::SleepFor(absl::Seconds(3));
  ASSERT_EQ(::kill(worker1[0], SIGCONT), 0);
  ASSERT_EQ(WaitProcess(&launch, 300), 0) << ReadAll(log);
  const std::string output = ReadAll(log);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(output, m, std::regex("([0-9]+) pushes waited for slower")))
      << output;
  EXPECT_GT(std::stoi(m[1]), 0) << output;
  EXPECT_NE(output.find("(ssp, staleness 2)"), std::string::npos) << output;
  EXPECT_GT(FinalAccuracy(output), 0.8) << output;  // chance is 0.25
}

TEST_F(ProfileClusterTest, TopKCompressionLearnsWithAFractionOfTheBytes) {
  const std::string config = WriteConfig(
      1, 1, "  update: sync\n  train_steps: 80\n  compression: topk\n  compression_ratio: 0.05\n");
  ProcessResult r = RunProcess({kBin + "/pstrain-launch", "--config=" + config}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GT(FinalAccuracy(r.output), 0.8) << r.output;
  // mnist_cnn's gradients are 4 bytes per parameter dense; top-k 5% sends
  // 8 bytes (offset and value) for 1 in 20.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("bytes per step: ([0-9]+) sent")))
      << r.output;
  const std::smatch params_match = [&] {
    std::smatch p;
    std::regex_search(r.output, p, std::regex("parameters \\[0, ([0-9]+)\\)"));
    return p;
  }();
  ASSERT_FALSE(params_match.empty()) << r.output;
  const double dense = 4.0 * std::stod(params_match[1]);
  EXPECT_LT(std::stod(m[1]), 0.15 * dense) << r.output;
}

}  // namespace
}  // namespace pstrain
