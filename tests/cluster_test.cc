// Jobs of real pstrain processes on loopback: a cluster learns in sync and
// async mode, bf16 on the wire learns as well as float32, a worker killed in sync mode does not
// hang the job, the launcher reports a dead process and leaves nothing behind, and bad configs fail
// at start with a message naming the key.
#include <signal.h>

#include <algorithm>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/record_reader.h"
#include "gtest/gtest.h"
#include "proto/event.pb.h"
#include "testing/job_dir_checks.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::Background;
using testing_util::FindProcesses;
using testing_util::FreePort;
using testing_util::LoopbackAddresses;
using testing_util::ProcessResult;
using testing_util::ReadAll;
using testing_util::RunProcess;
using testing_util::StartProcess;
using testing_util::WaitForLoggedStep;
using testing_util::WaitForText;
using testing_util::WaitProcess;

const std::string kBin = PSTRAIN_BIN_DIR;

class ClusterTest : public testing_util::ClusterTestBase {
 protected:
  ClusterTest() : ClusterTestBase("cluster") {}

  // Writes a config and returns its path.
  std::string WriteConfig(int ps, int workers, const std::string& update,
                          const std::string& extra = "", int log_every = 10) {
    return WriteClusterConfig(
        {.ps = ps,
         .workers = workers,
         .training = absl::StrCat(
             "  data_dir: ", data_, "\n  job_dir: ", job_dir(), "\n  update: ", update,
             "\n  batch_size: 20\n  train_steps: 40\n  eval_steps: 20\n  log_every_n_steps: ",
             log_every, "\n  sync_timeout: 3\n  startup_timeout: 60\n  threads: 1\n", extra)});
  }
};

double FinalAccuracy(const std::string& output, int step) {
  std::smatch m;
  const std::regex line(absl::StrCat("Saving dict for global step ", step,
                                     ": accuracy = ([0-9.]+), global_step = ", step));
  if (!std::regex_search(output, m, line)) return -1;
  return std::stod(m[1]);
}

// (tag, step) of every summary value in the one event file in `dir`.
std::vector<std::pair<std::string, int64_t>> SummaryValues(const std::string& dir) {
  std::vector<std::pair<std::string, int64_t>> values;
  absl::StatusOr<std::vector<std::string>> names = Env::Default()->ListDir(dir);
  std::vector<std::string> files;
  for (const std::string& n : names.ok() ? *names : std::vector<std::string>{}) {
    if (n.rfind("events.out.tfevents.", 0) == 0) files.push_back(n);
  }
  EXPECT_EQ(files.size(), 1u) << dir;
  if (files.size() != 1) return values;
  const std::string contents = *Env::Default()->ReadFile(JoinPath(dir, files[0]));
  RecordReader reader(contents, files[0]);
  while (true) {
    absl::StatusOr<std::string_view> record = reader.ReadRecord();
    if (!record.ok()) {
      EXPECT_TRUE(absl::IsOutOfRange(record.status())) << record.status();
      break;
    }
    tensorboard::Event event;
    EXPECT_TRUE(event.ParseFromArray(record->data(), static_cast<int>(record->size())));
    for (const auto& v : event.summary().value()) values.emplace_back(v.tag(), event.step());
  }
  return values;
}

TEST_F(ClusterTest, SyncTwoPsTwoWorkersLearns) {
  const std::string config =
      WriteConfig(2, 2, "sync", "  save_summary_steps: 10\n  histogram_steps: 20\n");
  ProcessResult r = RunProcess({kBin + "/pstrain-launch", "--config=" + config}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("job succeeded: all 5 processes exited 0"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("[worker:1] "), std::string::npos);
  EXPECT_NE(r.output.find("(sync, 3 of 3 replicas per step)"), std::string::npos) << r.output;
  EXPECT_GT(FinalAccuracy(r.output, 40), 0.8) << r.output;  // chance is 0.25
  EXPECT_GT(FinalAccuracy(r.output, 20), 0.0) << "no evaluation at eval_steps\n" << r.output;
  // The evaluations are in an event file under eval/, as TensorBoard reads them.
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"accuracy", 20}, {"loss", 20}, {"accuracy", 40}, {"loss", 40}};
  EXPECT_EQ(SummaryValues(JoinPath(job_dir(), "eval")), expected);
  // Training scalars at least every 10 steps, at increasing steps, and the
  // variables' histograms.
  std::map<std::string, std::vector<int64_t>> steps;
  for (const auto& [tag, step] : SummaryValues(job_dir())) steps[tag].push_back(step);
  for (const char* tag : {"loss", "learning_rate", "global_step/sec", "examples/sec"}) {
    ASSERT_GE(steps[tag].size(), 2u) << tag;
    EXPECT_TRUE(std::is_sorted(steps[tag].begin(), steps[tag].end())) << tag;
    EXPECT_GE(steps[tag].front(), 10) << tag;
  }
  EXPECT_FALSE(steps["dense/kernel"].empty());
  EXPECT_FALSE(steps["conv2d/bias"].empty());
  // The last step's scalars and histograms are written when the job ends.
  EXPECT_EQ(steps["loss"].back(), 40);
  EXPECT_EQ(steps["dense/kernel"].back(), 40);
  // Three input images at the start, the hyperparameters, the successful end.
  for (const char* tag : {"input_images/image/0", "input_images/image/1", "input_images/image/2",
                          "_hparams_/session_start_info", "_hparams_/session_end_info"}) {
    EXPECT_EQ(steps[tag].size(), 1u) << tag;
  }
  EXPECT_EQ(steps["input_images/image/0"], std::vector<int64_t>{0});
  // pstrain-events verifies every record and decodes the images and hparams.
  ProcessResult events = RunProcess({kBin + "/pstrain-events", job_dir()}, 60);
  ASSERT_EQ(events.exit_code, 0) << events.output;
  EXPECT_TRUE(std::regex_search(
      events.output, std::regex(R"(input_images/image/2 +image +1 points.*28x28x1 PNG)")))
      << events.output;
  EXPECT_TRUE(std::regex_search(
      events.output, std::regex(R"(_hparams_/session_start_info +hparams .*batch_size=20 .*)"
                                R"(model=mnist_cnn .*num_ps=2 num_replicas=3 .*update=sync)")))
      << events.output;
  EXPECT_NE(events.output.find("STATUS_SUCCESS"), std::string::npos) << events.output;
  // The GRAPHS tab: mnist_cnn as a TF graph, its variables on the ps that hold them.
  EXPECT_GT(testutil::ExpectJobGraph(Env::Default(), job_dir()), 10);
}

// The CIFAR-10 ResNet (its smallest depth) from TFRecord files made by
// pstrain-data out of CIFAR-10 binary batches, with cifar10_main.py's flags.
TEST_F(ClusterTest, Cifar10ResNetFromConvertedTfRecordsLearns) {
  const std::string binary = JoinPath(dir_, "cifar-bin");
  const std::string records = JoinPath(dir_, "cifar-tfrecords");
  ASSERT_TRUE(testing_util::WriteCifarQuadrantData(binary, 48, 64));
  ProcessResult convert = RunProcess({kBin + "/pstrain-data", "convert", binary, records}, 60);
  ASSERT_EQ(convert.exit_code, 0) << convert.output;
  EXPECT_NE(convert.output.find("train.tfrecords: 192 examples"), std::string::npos)
      << convert.output;
  const std::string yaml = absl::StrCat(
      "cluster:\n  chief: ", LoopbackAddresses(1), "\n  worker: ", LoopbackAddresses(1),
      "\n  ps: ", LoopbackAddresses(1),
      "\ntraining:\n  sync_timeout: 10\n  startup_timeout: 60\n"
      "  threads: 1\n  log_every_n_steps: 5\n  eval_steps: 0\n  weight_decay_exclusions: \"\"\n");
  const std::string config = JoinPath(dir_, "cifar.yaml");
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(config, yaml).ok());
  ProcessResult r = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--model=cifar10_resnet", "--num-layers=8",
       "--data-dir=" + records, "--job-dir=" + JoinPath(dir_, "cifar-job"), "--num-gpus=0",
       "--train-steps=60", "--train-batch-size=16", "--eval-batch-size=32", "--momentum=0.9",
       "--weight-decay=0.0002", "--learning-rate=0.02", "--batch-norm-decay=0.9",
       "--batch-norm-epsilon=0.00001", "--sync"},
      600);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(sync, 2 of 2 replicas per step)"), std::string::npos) << r.output;
  // Training loss (per-replica log lines) falls from the first window to the last.
  std::vector<double> losses;
  const std::regex line(R"(\[chief:0\].*step = \d+, loss = ([0-9.]+))");
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), line), end; it != end; ++it) {
    losses.push_back(std::stod((*it)[1]));
  }
  ASSERT_GE(losses.size(), 4u) << r.output;
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << r.output;
  // Evaluated with the moving statistics the ps kept: better than chance (0.25).
  EXPECT_GT(FinalAccuracy(r.output, 60), 0.6) << r.output;
  // The GRAPHS tab: every block's layers and variables.
  EXPECT_GT(testutil::ExpectJobGraph(Env::Default(), JoinPath(dir_, "cifar-job")), 40);
  // The tutorial's GPU flags are refused with what to do instead.
  ProcessResult gpus = RunProcess({kBin + "/pstrain-launch", "--config=" + config,
                                   "--job-dir=" + JoinPath(dir_, "gpu-job"), "--num-gpus=1"},
                                  60);
  EXPECT_EQ(gpus.exit_code, 2) << gpus.output;
  EXPECT_NE(gpus.output.find("--num-gpus=1: pstrain trains on CPUs; pass --num-gpus=0"),
            std::string::npos)
      << gpus.output;
  ProcessResult layers = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--job-dir=" + JoinPath(dir_, "bad-job"),
       "--model=cifar10_resnet", "--num-layers=21", "--train-steps=9"},
      60);
  EXPECT_EQ(layers.exit_code, 2) << layers.output;
  EXPECT_NE(layers.output.find("training.num_layers = 21"), std::string::npos) << layers.output;
}

TEST_F(ClusterTest, AsyncTwoPsTwoWorkersLearns) {
  const std::string config = WriteConfig(2, 2, "async");
  // Flags override the file, with TensorFlow's hyphen spellings too.
  ProcessResult r = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--train-steps=60", "--eval_steps=0"}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GT(FinalAccuracy(r.output, 60), 0.8) << r.output;
}

// bfloat16 on the wire (gradients and the parameters pushed back) against
// float32, on Fashion-MNIST with the same seeds: what the wire format costs
// in final accuracy (docs/training.md). A small dense network keeps it quick;
// the wire carries its values as it carries any model's.
TEST_F(ClusterTest, Bf16OnTheWireLearnsAsWellAsFloat32OnTheSameSeeds) {
  const std::string fashion = "/usr/share/datasets/fashion-mnist";
  if (!Env::Default()->FileExists(JoinPath(fashion, "train-images-idx3-ubyte.gz"))) {
    GTEST_SKIP() << "\n*** SKIPPED: Fashion-MNIST is not in " << fashion
                 << " (Debian package dataset-fashion-mnist, which deploy/install-deps.sh "
                    "installs) ***";
  }
  const std::string spec = JoinPath(dir_, "mlp.yaml");
  ASSERT_TRUE(Env::Default()
                  ->WriteFileAtomic(spec,
                                    "name: mlp\ninput: [28, 28, 1]\nclasses: 10\nlayers:\n"
                                    "  - flatten\n  - dense: {units: 128, activation: relu}\n"
                                    "  - dense: {units: 10}\n")
                  .ok());
  const std::string config = WriteConfig(1, 1, "sync");
  std::map<std::string, double> accuracy, bytes_sent;
  const std::regex sent_line("worker 0 PushPull time .*bytes per step: ([0-9]+) sent");
  for (const std::string wire : {"float32", "bf16"}) {
    ProcessResult r = RunProcess(
        {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec, "--data_dir=" + fashion,
         "--job_dir=" + JoinPath(dir_, "job-" + wire), "--wire_format=" + wire, "--batch_size=50",
         "--train_steps=400", "--eval_steps=0", "--log_every_n_steps=100", "--optimizer=adam",
         "--learning_rate=0.001"},
        300);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    accuracy[wire] = FinalAccuracy(r.output, 400);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, sent_line)) << r.output;
    bytes_sent[wire] = std::stod(m[1]);
    std::cerr << "wire_format " << wire << ": accuracy " << accuracy[wire] << ", "
              << bytes_sent[wire] << " bytes sent per step\n";
  }
  // bf16 did travel: half the bytes (the 101,770 parameters' gradients).
  EXPECT_NEAR(bytes_sent["bf16"] / bytes_sent["float32"], 0.5, 0.02);
  EXPECT_GT(accuracy["float32"], 0.78);  // 400 steps of 2 x 50: about 0.83 here
  EXPECT_NEAR(accuracy["bf16"], accuracy["float32"], 0.01);
}

// A frozen layer's chunks never change: after the first answer the ps
// leaves their parameters out of the PushPull answers, and the replica,
// which holds them, trains on as before. (1.02M frozen values: one chunk of
// its own, the rest of them with the trainable layers in a second.)
TEST_F(ClusterTest, AFrozenLayersChunkIsNotSentBackEveryStep) {
  const std::string spec = JoinPath(dir_, "frozen.yaml");
  ASSERT_TRUE(Env::Default()
                  ->WriteFileAtomic(spec,
                                    "name: frozen\ninput: [28, 28, 1]\nclasses: 4\nlayers:\n"
                                    "  - flatten\n"
                                    "  - dense: {units: 1300, activation: relu, trainable: false}\n"
                                    "  - dense: {units: 64, activation: relu}\n"
                                    "  - dense: {units: 4}\n")
                  .ok());
  const std::string config = WriteConfig(1, 1, "sync");
  ProcessResult r = RunProcess({kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec,
                                "--train_steps=30", "--eval_steps=0", "--log_every_n_steps=10"},
                               300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m,
                                std::regex("worker 0 ([0-9]+) chunk answers left out parameters")))
      << r.output;
  // Worker 0's 30 steps: the frozen chunk's first answer carries its values
  // (the client holds none after its pull), the others do not.
  EXPECT_GE(std::stoi(m[1]), 25) << r.output;
  // So it receives far less than it sends (its gradients of every chunk).
  ASSERT_TRUE(std::regex_search(
      r.output, m,
      std::regex("worker 0 PushPull time .*bytes per step: ([0-9]+) sent, ([0-9]+) "
                 "received")))
      << r.output;
  EXPECT_LT(std::stod(m[2]), std::stod(m[1]) / 3) << r.output;
  EXPECT_GT(FinalAccuracy(r.output, 30), 0.5) << r.output;  // chance is 0.25
}

TEST_F(ClusterTest, TfConfigWorksLikeTheYaml) {
  // Each role from TF_CONFIG, training settings from flags: the Cloud ML
  // Engine way.
  const std::string chief = absl::StrCat("127.0.0.1:", FreePort());
  const std::string ps = absl::StrCat("127.0.0.1:", FreePort());
  const std::string worker = absl::StrCat("127.0.0.1:", FreePort());
  const std::string cluster = absl::StrCat(R"({"chief": [")", chief, R"("], "worker": [")", worker,
                                           R"("], "ps": [")", ps, R"("]})");
  auto tf_config = [&](const std::string& type) {
    return absl::StrCat(R"({"cluster": )", cluster, R"(, "task": {"type": ")", type,
                        R"(", "index": 0}})");
  };
  std::vector<std::string> flags = {"--data-dir=" + data_, "--job-dir=" + dir_ + "/tfjob",
                                    "--train-steps=30",    "--batch_size=20",
                                    "--update=sync",       "--threads=1",
                                    "--eval_steps=0"};
  for (const std::string& f : testing_util::JobCredentialsFlags(dir_)) flags.push_back(f);
  std::vector<Background> procs;
  const std::vector<std::pair<std::string, std::string>> roles = {
      {"ps", "pstrain-ps"}, {"worker", "pstrain-worker"}, {"chief", "pstrain-chief"}};
  for (const auto& [type, binary] : roles) {
    std::vector<std::string> args = {"/usr/bin/env", "TF_CONFIG=" + tf_config(type),
                                     kBin + "/" + binary};
    args.insert(args.end(), flags.begin(), flags.end());
    procs.push_back(StartProcess(args, JoinPath(dir_, type + ".log")));
  }
  EXPECT_EQ(WaitProcess(&procs[2], 180), 0) << ReadAll(procs[2].log_path);
  EXPECT_EQ(WaitProcess(&procs[1], 30), 0) << ReadAll(procs[1].log_path);
  EXPECT_EQ(WaitProcess(&procs[0], 30), 0) << ReadAll(procs[0].log_path);
  EXPECT_GT(FinalAccuracy(ReadAll(procs[2].log_path), 30), 0.5) << ReadAll(procs[2].log_path);
}

TEST_F(ClusterTest, SigkilledWorkerDoesNotHangASyncJob) {
  const std::string config = WriteConfig(1, 2, "sync", "", 5);
  auto start = [&](const std::string& binary, const std::string& job, int index) {
    return StartProcess({kBin + "/" + binary, "--config=" + config, "--job_name=" + job,
                         absl::StrCat("--task_index=", index)},
                        JoinPath(dir_, absl::StrCat(job, index, ".log")));
  };
  Background ps = start("pstrain-ps", "ps", 0);
  Background chief = start("pstrain-chief", "chief", 0);
  Background w0 = start("pstrain-worker", "worker", 0);
  Background w1 = start("pstrain-worker", "worker", 1);
  ASSERT_TRUE(WaitForText(w1.log_path, "step = 10,", 120)) << ReadAll(w1.log_path);
  ASSERT_EQ(::kill(w1.pid, SIGKILL), 0);
  EXPECT_EQ(WaitProcess(&w1, 10), -1);
  // The job finishes: steps time out once, then go on without the dead worker.
  EXPECT_EQ(WaitProcess(&chief, 180), 0) << ReadAll(chief.log_path);
  EXPECT_EQ(WaitProcess(&w0, 30), 0) << ReadAll(w0.log_path);
  EXPECT_EQ(WaitProcess(&ps, 30), 0) << ReadAll(ps.log_path);
  const std::string ps_log = ReadAll(ps.log_path);
  EXPECT_NE(ps_log.find("Missing replicas (treated as gone until they push again): 2"),
            std::string::npos)
      << ps_log;
  EXPECT_GT(FinalAccuracy(ReadAll(chief.log_path), 40), 0.5);
}

TEST_F(ClusterTest, AFailingChiefEndsTheJobInsteadOfLeavingThePsRunning) {
  const std::string config = WriteConfig(1, 1, "sync");
  Background ps = StartProcess({kBin + "/pstrain-ps", "--config=" + config, "--job_name=ps"},
                               JoinPath(dir_, "ps.log"));
  // The chief cannot read its test set: it fails, and says so, and the ps
  // it already reached is told to stop.
  Background chief = StartProcess({kBin + "/pstrain-chief", "--config=" + config,
                                   "--job_name=chief", "--data_dir=" + dir_ + "/no-data-here"},
                                  JoinPath(dir_, "chief.log"));
  EXPECT_EQ(WaitProcess(&chief, 120), 1) << ReadAll(chief.log_path);
  EXPECT_NE(ReadAll(chief.log_path).find("no-data-here"), std::string::npos);
  EXPECT_EQ(WaitProcess(&ps, 120), 0) << ReadAll(ps.log_path);
  EXPECT_NE(ReadAll(ps.log_path).find("the chief failed"), std::string::npos)
      << ReadAll(ps.log_path);
}

// Without restarts (--max_restarts=0), the first death ends the job. (With
// them, tests/faults/ kills and stops tasks of launched jobs.)
TEST_F(ClusterTest, LauncherReportsADeadProcessAndStopsTheRest) {
  const std::string config = WriteConfig(1, 2, "async", "", 2);
  const std::string log = JoinPath(dir_, "launch.log");
  Background launcher = StartProcess({kBin + "/pstrain-launch", "--config=" + config,
                                      "--train_steps=100000", "--stop_grace=5", "--max_restarts=0"},
                                     log);
  ASSERT_TRUE(WaitForText(log, "[worker:1] ", 120)) << ReadAll(log);
  // Async: each replica logs the global step its push reached, which may
  // skip any one number.
  ASSERT_TRUE(WaitForLoggedStep(log, 4, 120)) << ReadAll(log);
  std::vector<pid_t> workers = FindProcesses({"pstrain-worker", "--task_index=1", dir_});
  ASSERT_EQ(workers.size(), 1u) << ReadAll(log);
  ASSERT_EQ(::kill(workers[0], SIGKILL), 0);
  EXPECT_EQ(WaitProcess(&launcher, 60), 1) << ReadAll(log);
  const std::string out = ReadAll(log);
  EXPECT_NE(out.find("worker:1 was killed by signal 9 (SIGKILL)"), std::string::npos) << out;
  EXPECT_NE(out.find("job failed"), std::string::npos) << out;
}

TEST_F(ClusterTest, BadConfigsFailAtStartNamingTheKey) {
  struct Case {
    std::string extra;
    std::string expect;
  };
  const Case cases[] = {
      {"  learning_rat: 0.1\n", "learning_rat"},
      {"  replicas_to_aggregate: 5\n", "replicas_to_aggregate"},
      {"  batch_size: many\n", "batch_size"},
  };
  for (const Case& c : cases) {
    const std::string config = WriteConfig(1, 1, "sync", c.extra);
    ProcessResult r = RunProcess({kBin + "/pstrain-launch", "--config=" + config}, 60);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << r.output;
  }
  const std::string dup = JoinPath(dir_, "dup.yaml");
  ASSERT_TRUE(Env::Default()
                  ->WriteFileAtomic(dup, absl::StrCat("cluster:\n  chief: [\"127.0.0.1:5000\"]\n"
                                                      "  worker: [\"127.0.0.1:5000\"]\n"
                                                      "  ps: [\"127.0.0.1:5001\"]\n"
                                                      "training:\n  job_dir: ",
                                                      dir_, "\n  train_steps: 5\n"))
                  .ok());
  ProcessResult r = RunProcess({kBin + "/pstrain-launch", "--config=" + dup}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("127.0.0.1:5000"), std::string::npos) << r.output;
  // A task index outside a valid cluster is named with the range the cluster has. (This once
  // ran against the duplicate-address config and looked for "3" anywhere in the output, which
  // the log line's timestamp or pid could supply.)
  const std::string valid = WriteConfig(1, 1, "sync", "");
  r = RunProcess({kBin + "/pstrain-ps", "--config=" + valid, "--job_name=ps", "--task_index=3"},
                 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("task ps:3 is not in the cluster"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("task_index 0..0"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace pstrain
