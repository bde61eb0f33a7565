// The tutorials' own workflows with real processes on loopback: train a job
// further with a larger --train-steps, fail fast (every role, every startup
// failure) instead of hanging, and the MNIST seed trainer's and Cloud ML
// Engine's command lines as they are.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/env.h"
#include "common/record_reader.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "proto/event.pb.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::FreePort;
using testing_util::ProcessResult;
using testing_util::RunProcess;

const std::string kBin = PSTRAIN_BIN_DIR;

// Every (tag -> steps) of the scalar summaries in the event files of `dir`
// (one file per run of the job), in file order.
std::map<std::string, std::vector<int64_t>> ScalarSteps(const std::string& dir) {
  std::map<std::string, std::vector<int64_t>> steps;
  absl::StatusOr<std::vector<std::string>> names = Env::Default()->ListDir(dir);
  std::vector<std::string> files;
  for (const std::string& n : names.ok() ? *names : std::vector<std::string>{}) {
    if (n.rfind("events.out.tfevents.", 0) == 0) files.push_back(n);
  }
  std::sort(files.begin(), files.end());  // the name starts with the time
  for (const std::string& file : files) {
    const std::string contents = *Env::Default()->ReadFile(JoinPath(dir, file));
    RecordReader reader(contents, file);
    while (true) {
      absl::StatusOr<std::string_view> record = reader.ReadRecord();
      if (!record.ok()) break;
      tensorboard::Event event;
      EXPECT_TRUE(event.ParseFromArray(record->data(), static_cast<int>(record->size())));
      for (const auto& v : event.summary().value()) {
        if (v.value_case() == tensorboard::Summary::Value::kSimpleValue) {
          steps[v.tag()].push_back(event.step());
        }
      }
    }
  }
  return steps;
}

class WorkflowTest : public testing_util::ClusterTestBase {
 protected:
  WorkflowTest() : ClusterTestBase("workflow") {}

  // 1 ps, a chief that trains and 1 worker; `extra` training keys.
  std::string WriteConfig(const std::string& extra = "", const std::string& ps = "") {
    return WriteClusterConfig(
        {.ps_addresses = ps,
         .training =
             absl::StrCat("  data_dir: ", data_, "\n  job_dir: ", job_dir(),
                          "\n  update: sync\n  batch_size: 20\n  train_steps: 10\n  eval_steps: 50",
                          "\n  save_summary_steps: 20\n  log_every_n_steps: 10\n  sync_timeout: 5",
                          "\n  threads: 1\n", extra),
         .file = absl::StrCat("cluster-", ++configs_, ".yaml")});
  }

  int configs_ = 0;
};

// The CIFAR-10 tutorial's sequence (there 100 then 200): --train-steps=40,
// then the same command with --train-steps=80 goes on from step 40 (TensorFlow's max_steps is a
// global target); the same command again does nothing.
TEST_F(WorkflowTest, ALargerTrainStepsTrainsAFinishedJobFurther) {
  const std::string config = WriteConfig();
  // Evaluations every 20 steps, summaries every 10.
  const std::string yaml = *Env::Default()->ReadFile(config);
  ASSERT_TRUE(Env::Default()
                  ->WriteFileAtomic(
                      config, absl::StrReplaceAll(
                                  yaml, {{"eval_steps: 50", "eval_steps: 20"},
                                         {"save_summary_steps: 20", "save_summary_steps: 10"}}))
                  .ok());
  ProcessResult r =
      RunProcess({kBin + "/pstrain-launch", "--config=" + config, "--train-steps=40"}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Saving dict for global step 40:"), std::string::npos) << r.output;
  ASSERT_EQ(CompletionMarkerStep(*ReadCompletionMarker(Env::Default(), job_dir())), 40);

  r = RunProcess({kBin + "/pstrain-launch", "--config=" + config, "--train-steps=80"}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("finished at global step 40; training on from its last checkpoint to "
                          "train_steps 80"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("training resumes at step 41"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Saving dict for global step 60:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Saving dict for global step 80:"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step = 10,"), std::string::npos) << "trained from 0 again\n" << r.output;
  EXPECT_EQ(CompletionMarkerStep(*ReadCompletionMarker(Env::Default(), job_dir())), 80);

  // TensorBoard's step axis: every scalar's steps rise, none repeated, and
  // the second run's pick up after the first's.
  for (const std::string& run : {job_dir(), JoinPath(job_dir(), "eval")}) {
    const std::map<std::string, std::vector<int64_t>> steps = ScalarSteps(run);
    ASSERT_FALSE(steps.empty()) << run;
    for (const auto& [tag, series] : steps) {
      for (size_t i = 1; i < series.size(); ++i) {
        EXPECT_LT(series[i - 1], series[i]) << run << " " << tag << " repeats or goes back";
      }
      EXPECT_EQ(series.back(), 80) << run << " " << tag;
    }
    if (run == job_dir()) {
      EXPECT_GE(steps.at("loss").size(), 8u);  // every 10 steps
    }
  }
  EXPECT_EQ(ScalarSteps(JoinPath(job_dir(), "eval")).at("accuracy"),
            (std::vector<int64_t>{20, 40, 60, 80}));

  // The same target again (a recreated preemptible VM): nothing to do.
  r = RunProcess({kBin + "/pstrain-launch", "--config=" + config, "--train-steps=80"}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("already finished"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step = "), std::string::npos) << r.output;
}

// One role started alone with a startup failure: it must say why and exit
// non-zero within 2 s, not hang.
struct StartupFailure {
  std::string role;     // chief, worker, ps
  std::string failure;  // for messages
  std::vector<std::string> flags;
  std::string expect;  // in its output
};

TEST_F(WorkflowTest, EveryRoleFailsFastWithItsErrorOnBadStartup) {
  // Damaged copies of the data: a truncated image file, and images of another
  // shape (MNIST's 28x28x1 for cifar10_resnet's 32x32x3).
  const std::string truncated = JoinPath(dir_, "truncated");
  ASSERT_TRUE(testing_util::WriteQuadrantData(truncated, "train", 100, 3));
  ASSERT_TRUE(testing_util::WriteQuadrantData(truncated, "t10k", 100, 4));
  for (const char* file : {"train-images-idx3-ubyte", "t10k-images-idx3-ubyte"}) {
    std::string bytes = *Env::Default()->ReadFile(JoinPath(truncated, file));
    bytes.resize(bytes.size() - 1000);
    ASSERT_TRUE(Env::Default()->WriteFileAtomic(JoinPath(truncated, file), bytes).ok());
  }
  // A port someone else holds.
  const int busy_port = FreePort();
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(busy_port));
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(holder, 1), 0);

  const std::string config = WriteConfig("  startup_timeout: 0.5\n");
  const std::string busy_config = WriteConfig("", absl::StrCat("[\"127.0.0.1:", busy_port, "\"]"));
  const std::string missing = JoinPath(dir_, "no-such-data");
  std::vector<StartupFailure> cases;
  for (const std::string role : {"chief", "worker"}) {
    cases.push_back({role, "missing data dir", {"--data_dir=" + missing}, missing});
    cases.push_back({role, "truncated idx file", {"--data_dir=" + truncated}, "truncated"});
    cases.push_back({role,
                     "wrong-shape data",
                     {"--model=cifar10_resnet", "--num_layers=8"},
                     "takes 32x32x3 images"});
    // No ps answers (nothing listens on the ps address): the role waits
    // startup_timeout (0.5 s here) and gives up.
    cases.push_back({role, "unreachable peers", {}, "gave up waiting"});
  }
  cases.push_back({"ps", "port in use", {"--config=" + busy_config}, "cannot listen on"});
  for (const StartupFailure& c : cases) {
    SCOPED_TRACE(c.role + ": " + c.failure);
    std::vector<std::string> args = {kBin + "/pstrain-" + c.role, "--config=" + config,
                                     "--job_name=" + c.role};
    for (const std::string& flag : c.flags) {
      if (flag.rfind("--config=", 0) == 0) {
        args[1] = flag;
      } else {
        args.push_back(flag);
      }
    }
    const absl::Time start = absl::Now();
    ProcessResult r = RunProcess(args, 60);
    const absl::Duration took = absl::Now() - start;
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.exit_code, -1) << "killed or timed out\n" << r.output;
    EXPECT_LT(took, absl::Seconds(2)) << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("failed: "), std::string::npos) << r.output;
  }
  ::close(holder);
}

// A bad model spec stops the launcher and every role at start, naming the
// file and the line, with no process left and nothing written to the job dir.
TEST_F(WorkflowTest, ABadModelSpecStopsEveryRoleAtStartWritingNothing) {
  struct BadSpec {
    std::string what, text;
    std::vector<std::string> expect;
  };
  const std::string head = "name: bad\ninput: [28, 28, 1]\nclasses: 10\nlayers:\n";
  const std::vector<BadSpec> specs = {
      {"unknown type",
       head + "  - flaten\n  - dense: {units: 10}\n",
       {"unknown layer type flaten (did you mean flatten?)", "line 5"}},
      {"shapes that do not fit",
       head + "  - conv2d: {filters: 4, kernel: 3}\n"
              "  - dense: {units: 10}\n",
       {"layer dense (dense, line 6) cannot take its input [26, 26, 4]"}},
      {"unknown input",
       head + "  - flatten\n  - dense: {units: 10, input: nope}\n",
       {"nope", "line 6"}},
      {"syntax error", head + "  - dense: {units: 10\n", {"line"}},
      {"zero size", head + "  - flatten\n  - dense: {units: 0}\n", {"units must be in [1, "}},
  };
  const std::string config = WriteConfig();
  for (size_t i = 0; i < specs.size(); ++i) {
    const BadSpec& b = specs[i];
    SCOPED_TRACE(b.what);
    const std::string spec = JoinPath(dir_, absl::StrCat("bad-", i, ".yaml"));
    ASSERT_TRUE(Env::Default()->WriteFileAtomic(spec, b.text).ok());
    const std::string job = JoinPath(dir_, absl::StrCat("bad-job-", i));
    ProcessResult launched = RunProcess(
        {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec, "--job_dir=" + job},
        60);
    EXPECT_EQ(launched.exit_code, 2) << launched.output;
    EXPECT_NE(launched.output.find(spec), std::string::npos) << launched.output;
    for (const std::string& part : b.expect) {
      EXPECT_NE(launched.output.find(part), std::string::npos) << part << "\n" << launched.output;
    }
    EXPECT_EQ(launched.output.find("started"), std::string::npos) << launched.output;
    for (const std::string role : {"ps", "chief", "worker"}) {
      ProcessResult r = RunProcess({kBin + "/pstrain-" + role, "--config=" + config,
                                    "--job_name=" + role, "--model=" + spec, "--job_dir=" + job},
                                   60);
      EXPECT_NE(r.exit_code, 0) << role << "\n" << r.output;
      EXPECT_NE(r.exit_code, -1) << role << " was killed or timed out\n" << r.output;
      for (const std::string& part : b.expect) {
        EXPECT_NE(r.output.find(part), std::string::npos) << role << ": " << part << "\n"
                                                          << r.output;
      }
    }
    EXPECT_FALSE(Env::Default()->FileExists(job)) << job;
  }
}

TEST_F(WorkflowTest, ALauncherJobWithBadDataEndsAtOnceWithTheChiefsError) {
  const std::string missing = JoinPath(dir_, "no-such-data");
  const absl::Time start = absl::Now();
  ProcessResult r = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + WriteConfig(), "--data_dir=" + missing}, 60);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_LT(took, absl::Seconds(5)) << r.output;
  EXPECT_EQ(r.output.find("SIGKILL"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[chief:0]"), std::string::npos) << r.output;
  // The chief's own error line, not only the launcher's summary.
  bool chief_error = false;
  for (size_t at = r.output.find("[chief:0]"); at != std::string::npos;
       at = r.output.find("[chief:0]", at + 1)) {
    const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    chief_error = chief_error || (line.find("failed") != std::string::npos &&
                                  line.find(missing) != std::string::npos);
  }
  EXPECT_TRUE(chief_error) << r.output;
}

// Seed 001's trainer names the job dir --output_dir, next to --data_dir and
// --train_steps.
TEST_F(WorkflowTest, Seed001FlagsWork) {
  const std::string out = JoinPath(dir_, "output");
  ProcessResult r = RunProcess({kBin + "/pstrain-launch", "--config=" + WriteConfig(),
                                "--output_dir=" + out, "--data_dir=" + data_, "--train_steps=20"},
                               300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Env::Default()->FileExists(CompletionMarkerPath(out))) << r.output;
  EXPECT_FALSE(Env::Default()->FileExists(CompletionMarkerPath(job_dir())));

  // In one process (no cluster), too.
  const std::string local = JoinPath(dir_, "local");
  r = RunProcess({kBin + "/pstrain-worker", "--output_dir=" + local, "--data_dir=" + data_,
                  "--train_steps=10", "--batch_size=20"},
                 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Saving dict for global step 10"), std::string::npos) << r.output;

  // Two different dirs is a mistake worth stopping for.
  r = RunProcess({kBin + "/pstrain-launch", "--config=" + WriteConfig(), "--output_dir=" + out,
                  "--job_dir=" + local},
                 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("name different job dirs"), std::string::npos) << r.output;
}

// A job config written for Cloud ML Engine's STANDARD_1 tier runs as it is.
TEST_F(WorkflowTest, AStandard1TrainingInputConfigRuns) {
  const std::string yaml = absl::StrCat(
      "trainingInput:\n  scaleTier: STANDARD_1\n  region: us-central1\n  jobDir: ", job_dir(),
      "\n  args: [\"--data-dir=", data_,
      "\", \"--train-steps=20\", \"--batch-size=20\", \"--eval-steps=0\", \"--threads=1\"]\n");
  const std::string path = JoinPath(dir_, "standard1.yaml");
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(path, yaml).ok());
  ProcessResult r = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + path, absl::StrCat("--base_port=", FreePort())},
      300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[ps:0]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[worker:0]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Saving dict for global step 20"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace pstrain
