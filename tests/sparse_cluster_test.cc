// Embedding tables on real parameter servers (issue 28): Wide & Deep on
// synthetic click data with a planted logistic model, trained by a sync
// cluster of 2 ps and 2 workers started by pstrain-launch, reaches the
// planted model's AUC on held-out examples.

#include <signal.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "data/binary_metrics.h"
#include "data/formats/criteo.h"
#include "data/formats/criteo_format.h"
#include "data/synthetic/synthetic_ctr.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/data_test_util.h"
#include "testing/job_dir_checks.h"
#include "tests/ctr_cluster_util.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::Background;
using testing_util::FindProcesses;
using testing_util::LoopbackConfig;
using testing_util::ProcessResult;
using testing_util::ReadAll;
using testing_util::RunProcess;
using testing_util::StartProcess;
using testing_util::WaitForLoggedStep;
using testing_util::WaitForText;
using testing_util::WaitProcess;

const std::string kBin = PSTRAIN_BIN_DIR;
constexpr int kFields = testing_util::kCtrFields;
using testing_util::CtrClusterTest;
using testing_util::DataConfig;
using testing_util::Eval;
using testing_util::LastEval;

class SparseClusterTest : public CtrClusterTest {
 protected:
  SparseClusterTest() : CtrClusterTest("sparse_cluster", PSTRAIN_BIN_DIR) {}
};

// Per ps, the rows and checksum it logged for `what` ("saved", at the
// checkpoint of `file_part`, or "restored").
struct RowsLog {
  int64_t rows = 0;
  uint64_t checksum = 0;  // summed over the ps that logged
  int ps = 0;
};
RowsLog SumRowsLines(const std::string& output, const std::string& pattern) {
  RowsLog log;
  const std::regex line(pattern);
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    log.rows += std::stoll((*it)[1]);
    log.checksum += std::stoull((*it)[2], nullptr, 16);
    ++log.ps;
  }
  return log;
}

TEST_F(SparseClusterTest, WideAndDeepOnTwoPsReachesThePlantedAucAndRestoresExactlyOnThreePs) {
  const std::string two = WriteClusterConfig(
      LoopbackConfig{.ps = 2, .workers = 2, .training = "  update: sync\n  chief_trains: false\n"});
  ProcessResult train = Train(two, 2000);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const Eval trained = LastEval(train.output);
  EXPECT_EQ(trained.step, 2000) << train.output;
  std::printf(
      "Wide & Deep, 2 ps x 2 workers, sync, 2000 steps of 2 x 100: AUC %.4f (planted "
      "%.4f), log loss %.4f (planted %.4f)\n",
      trained.auc, planted_.auc, trained.loss, planted_.log_loss);
  // Sync with every replica's batch and a fixed seed: 0.8304 and log loss
  // 0.4741 to the last digit in each run here (planted 0.8360, 0.4643), so
  // the bounds (0.0044 and 0.0102 away) only cover another CPU's rounding.
  EXPECT_GT(trained.auc, planted_.auc - 0.01) << train.output;
  EXPECT_LT(trained.loss, planted_.log_loss + 0.02);
  const RowsLog saved = SumRowsLines(
      train.output,
      R"(saved ([0-9]+) embedding rows at step [0-9]+ to model\.ckpt-2000\.rows-[01]-of-2 \(rows checksum ([0-9a-f]+)\))");
  ASSERT_EQ(saved.ps, 2) << train.output;
  EXPECT_GT(saved.rows, 1600);  // 8 fields x 100 ids, x 2 tables each, and pairs of C1 x C2
  // TensorBoard's PR CURVES tab: a curve at each evaluation, beside the AUC.
  ProcessResult events = RunProcess({kBin + "/pstrain-events", job_dir()}, 60);
  ASSERT_EQ(events.exit_code, 0) << events.output;
  size_t evaluations = 0;
  for (size_t at = train.output.find("Saving dict for global step"); at != std::string::npos;
       at = train.output.find("Saving dict for global step", at + 1)) {
    ++evaluations;
  }
  ASSERT_GT(evaluations, 0u);
  EXPECT_TRUE(std::regex_search(events.output,
                                std::regex(absl::StrCat(R"(\n  pr_curve +pr_curve +)", evaluations,
                                                        R"( points, steps [0-9]+\.\.2000)"))))
      << events.output;
  EXPECT_TRUE(std::regex_search(events.output,
                                std::regex(absl::StrCat(R"(\n  auc +scalar +)", evaluations))))
      << events.output;
  // The same read through the protos, as TensorBoard reads them: a curve
  // per evaluation; the graph, its variables split over the 2 ps; a
  // projector tensor per table with rows (integer ids: no raw values).
  EXPECT_EQ(testutil::CountPrCurves(Env::Default(), job_dir()), static_cast<int64_t>(evaluations));
  EXPECT_GT(testutil::ExpectJobGraph(Env::Default(), job_dir()), 10);
  EXPECT_EQ(testutil::ExpectJobProjector(Env::Default(), job_dir(), 10000), 0);

  // The same job on 3 ps: every ps reads both rows files and keeps its rows.
  const std::string three =
      WriteClusterConfig(LoopbackConfig{.ps = 3,
                                        .workers = 2,
                                        .training = "  update: sync\n  chief_trains: false\n",
                                        .file = "cluster3.yaml"});
  ProcessResult resumed = Train(three, 2100);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const RowsLog restored = SumRowsLines(
      resumed.output,
      R"(restored ([0-9]+) embedding rows of 2 rows files \(rows checksum ([0-9a-f]+)\))");
  ASSERT_EQ(restored.ps, 3) << resumed.output;
  EXPECT_EQ(restored.rows, saved.rows);
  EXPECT_EQ(restored.checksum, saved.checksum);
  std::printf(
      "restart on 3 ps: %lld rows restored of %lld saved by 2 ps, checksums %016llx and "
      "%016llx\n",
      static_cast<long long>(restored.rows), static_cast<long long>(saved.rows),
      static_cast<unsigned long long>(restored.checksum),
      static_cast<unsigned long long>(saved.checksum));
  // pstrain-ckpt reads and checks every rows file and shows rows per table.
  ProcessResult ckpt = RunProcess({kBin + "/pstrain-ckpt", job_dir()}, 60);
  ASSERT_EQ(ckpt.exit_code, 0) << ckpt.output;
  EXPECT_NE(ckpt.output.find("embedding tables (adagrad):"), std::string::npos) << ckpt.output;
  EXPECT_NE(ckpt.output.find("emb_C1/embeddings  dim 4, dynamic: 100 rows, L2 norm"),
            std::string::npos)
      << ckpt.output;
  EXPECT_NE(ckpt.output.find("checksums: 3 rows files OK"), std::string::npos) << ckpt.output;
  // The restarted chief's events file has the graph too, once; the
  // projector's rows come from the newest checkpoint, which 3 ps wrote, the
  // rows' pushes restored and counted on; pstrain-ckpt writes the same for
  // any checkpoint.
  EXPECT_GT(testutil::ExpectJobGraph(Env::Default(), job_dir()), 10);
  EXPECT_EQ(testutil::ExpectJobProjector(Env::Default(), job_dir(), 10000), 0);
  const std::string projector = dir_ + "/projector";
  ProcessResult rows = RunProcess(
      {kBin + "/pstrain-ckpt", job_dir(), "--projector_dir=" + projector, "--projector_rows=30"},
      60);
  ASSERT_EQ(rows.exit_code, 0) << rows.output;
  EXPECT_TRUE(
      std::regex_search(rows.output, std::regex(R"(global step 2100: .*projector_config\.pbtxt)")))
      << rows.output;
  EXPECT_NE(rows.output.find("emb_C1/embeddings: 30 of 100 rows"), std::string::npos)
      << rows.output;
  EXPECT_TRUE(Env::Default()->FileExists(projector + "/projector/2100/emb_C1_embeddings.tsv"));

  const Eval resumed_eval = LastEval(resumed.output);
  EXPECT_EQ(resumed_eval.step, 2100);
  EXPECT_GT(resumed_eval.auc, planted_.auc - 0.01) << resumed.output;

  // The chief exported the model with its rows: pstrain-predict on the test
  // set's lines as JSON instances (dense as training transforms it, the
  // categorical fields as their hex strings) gives the AUC the evaluation did.
  absl::StatusOr<CriteoBatch> test = ReadCriteoFile(Env::Default(), ctr_ + "/test.tsv");
  ASSERT_TRUE(test.ok()) << test.status();
  std::string instances;
  for (int64_t i = 0; i < test->size(); ++i) {
    absl::StrAppend(&instances, testing_util::CtrInstance(*test, i).dump(), "\n");
  }
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(dir_ + "/instances.json", instances).ok());
  ProcessResult predict =
      RunProcess({kBin + "/pstrain-predict", "--model_dir=" + job_dir(),
                  "--json_instances=" + dir_ + "/instances.json", "--format=json"},
                 120);
  ASSERT_EQ(predict.exit_code, 0) << predict.output.substr(0, 2000);
  // The JSON is the last line (glog writes to stderr before it).
  const size_t json_at = predict.output.rfind("{\"predictions\"");
  ASSERT_NE(json_at, std::string::npos) << predict.output.substr(0, 2000);
  const std::string json_line = predict.output.substr(json_at);
  const nlohmann::json predictions = nlohmann::json::parse(json_line)["predictions"];
  ASSERT_EQ(static_cast<int64_t>(predictions.size()), test->size());
  std::vector<double> scores;
  for (const nlohmann::json& p : predictions) scores.push_back(p["logistic"][0].get<double>());
  const double served_auc = *BinaryAuc(scores, test->labels);
  std::printf("pstrain-predict on the export, %lld test lines: AUC %.4f (evaluation %.4f)\n",
              static_cast<long long>(test->size()), served_auc, resumed_eval.auc);
  EXPECT_NEAR(served_auc, resumed_eval.auc, 1e-3);
}

// glog's time of day of the first line after `from` that matches `pattern`
// (seconds since midnight; -1 if none).
double LoggedTime(const std::string& log, const std::string& pattern, size_t from,
                  size_t* at = nullptr) {
  const std::regex line("[IWE][0-9]{8} ([0-9]{2}):([0-9]{2}):([0-9.]+) [^\\n]*" + pattern);
  std::smatch m;
  const std::string rest = log.substr(std::min(from, log.size()));
  if (!std::regex_search(rest, m, line)) return -1;
  if (at != nullptr) *at = from + m.position(0) + m.length(0);
  return std::stoi(m[1]) * 3600 + std::stoi(m[2]) * 60 + std::stod(m[3]);
}

// A SIGKILLed ps in a sync Wide & Deep job: the launcher restarts it, the
// chief rolls the job back to its last checkpoint, and the workers train on
// within seconds of the restore (the rows follow the dense chunks' step
// rule, so no pull waits out the 30 s sync_timeout).
TEST_F(SparseClusterTest, AfterAKilledPsIsRestoredTheWorkersTrainOnWithinSeconds) {
  const std::string config = WriteClusterConfig(
      LoopbackConfig{.ps = 2,
                     .workers = 2,
                     .training = "  update: sync\n  chief_trains: false\n  checkpoint_steps: 100\n"
                                 "  sync_timeout: 30\n"});
  const std::string log = dir_ + "/launch.log";
  Background launch = StartProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
       "--job_dir=" + job_dir(), "--train_steps=1200", "--eval_steps=0", "--log_every_n_steps=10",
       "--batch_size=100", "--learning_rate=0.003", "--embedding_learning_rate=0.1",
       "--eval_batch_size=1000"},
      log);
  ASSERT_TRUE(WaitForLoggedStep(log, 250, 180)) << ReadAll(log);
  const std::vector<pid_t> ps1 = FindProcesses({"pstrain-ps", "--task_index=1", dir_});
  ASSERT_EQ(ps1.size(), 1u);
  ASSERT_EQ(::kill(ps1[0], SIGKILL), 0);
  ASSERT_TRUE(WaitForText(log, "rolled back from global step", 120)) << ReadAll(log);
  ASSERT_EQ(WaitProcess(&launch, 300), 0) << ReadAll(log);
  const std::string out = ReadAll(log);
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(out, m, std::regex("rolled back from global step ([0-9]+) to ([0-9]+)")))
      << out;
  const int64_t from = std::stoll(m[1]), to = std::stoll(m[2]);
  size_t after = 0;
  const double rolled_back = LoggedTime(out, "rolled back from global step", 0, &after);
  ASSERT_GE(rolled_back, 0) << out;
  // The first step after the rollback a worker logged: one past `to` (lines
  // of steps up to it may still come after the rollback's line). With a
  // checkpoint just before the kill, `from` may be `to` + 1, which no line
  // logs (every 10 steps): the next step past it is the one.
  double next_step = -1;
  while (next_step < 0) {
    size_t line_end = 0;
    const double t = LoggedTime(out, "step = [0-9]+, loss", after, &line_end);
    ASSERT_GE(t, 0) << "no step logged after the rollback\n" << out;
    const size_t step_at = out.rfind("step = ", line_end);
    const int64_t step = std::stoll(out.substr(step_at + 7));
    if (step > to) next_step = t;
    after = line_end;
  }
  const double idle = next_step - rolled_back;
  std::printf("the workers trained on %.2f s after the rollback\n", idle);
  EXPECT_LT(idle, 5.0) << out;
  EXPECT_GT(LastEval(out).auc, planted_.auc - 0.02) << out;
}

// Streamed input (issue 40): the replicas stream their shares of 6 gzip'd
// Criteo shards (2 each) instead of reading data_dir into memory. Worker 1,
// killed mid-run and restarted by the launcher, goes on from the batch of
// the step it rejoins at: every position its stream records after the
// restart is the one an uninterrupted run records for that batch.
TEST_F(SparseClusterTest, StreamedShardsResumeExactlyAfterAKilledWorker) {
  absl::StatusOr<SyntheticCtr> data = SyntheticCtr::Create(DataConfig());
  ASSERT_TRUE(data.ok()) << data.status();
  Env* env = Env::Default();
  const std::string shards = dir_ + "/shards";
  ASSERT_TRUE(env->CreateDirs(shards).ok());
  for (int i = 0; i < 6; ++i) {
    const std::string plain = absl::StrCat(shards, "/day_", i, ".tsv");
    ASSERT_TRUE(data->WriteTsv(env, plain, 8000, 100 + i).ok());
    absl::StatusOr<std::string> text = env->ReadFile(plain);
    ASSERT_TRUE(text.ok());
    ASSERT_TRUE(env->WriteFileAtomic(plain + ".gz", testutil::Gzip(*text)).ok());
    ASSERT_TRUE(env->DeleteFile(plain).ok());
  }
  const std::string config = WriteClusterConfig(
      LoopbackConfig{.ps = 1,
                     .workers = 2,
                     .training = "  update: sync\n  checkpoint_steps: 100\n  sync_timeout: 30\n"
                                 "  shuffle_buffer: 500\n"});
  const auto args = [&](const std::string& job) {
    return std::vector<std::string>{kBin + "/pstrain-launch",
                                    "--config=" + config,
                                    "--model=" + spec_,
                                    "--data_dir=" + ctr_,
                                    "--train_files=" + shards + "/day_*.tsv.gz",
                                    "--job_dir=" + job,
                                    "--train_steps=400",
                                    "--eval_steps=0",
                                    "--log_every_n_steps=10",
                                    "--batch_size=100",
                                    "--learning_rate=0.003",
                                    "--embedding_learning_rate=0.1",
                                    "--eval_batch_size=1000"};
  };
  const std::string uninterrupted = dir_ + "/job_a", resumed = dir_ + "/job_b";
  ProcessResult a = RunProcess(args(uninterrupted), 600);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("streams 2 of 6 training files"), std::string::npos) << a.output;
  const Eval eval = LastEval(a.output);
  std::printf("streamed: AUC %.4f at step %lld (planted %.4f)\n", eval.auc,
              static_cast<long long>(eval.step), planted_.auc);
  // 0.8160 and 0.8161 in two runs side by side here (the shuffle buffer
  // fills as the reader thread runs): 0.03 over the bound.
  EXPECT_GT(eval.auc, planted_.auc - 0.05) << a.output;

  const std::string log = dir_ + "/launch_b.log";
  Background launch = StartProcess(args(resumed), log);
  ASSERT_TRUE(WaitForLoggedStep(log, 130, 180)) << ReadAll(log);
  const std::vector<pid_t> worker1 = FindProcesses({"pstrain-worker", "--task_index=1", resumed});
  ASSERT_EQ(worker1.size(), 1u) << ReadAll(log);
  ASSERT_EQ(::kill(worker1[0], SIGKILL), 0);
  ASSERT_EQ(WaitProcess(&launch, 300), 0) << ReadAll(log);
  const std::string out = ReadAll(log);
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(out, m, std::regex("worker 1 input starts at its batch ([1-9][0-9]*)")))
      << out;
  const int64_t rejoined = std::stoll(m[1]);
  // Worker 1 is replica 2 (the chief trains as replica 0).
  const auto positions = [&](const std::string& job) {
    std::map<int64_t, std::string> by_batch;
    absl::StatusOr<std::string> text = env->ReadFile(job + "/input/replica-2.txt");
    EXPECT_TRUE(text.ok()) << text.status();
    if (!text.ok()) return by_batch;
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      const size_t space = line.find(' ');
      int64_t batch = 0;
      if (space != absl::string_view::npos && absl::SimpleAtoi(line.substr(0, space), &batch)) {
        by_batch[batch] = std::string(line.substr(space + 1));
      }
    }
    return by_batch;
  };
  const std::map<int64_t, std::string> want = positions(uninterrupted);
  const std::map<int64_t, std::string> got = positions(resumed);
  int compared = 0;
  for (const auto& [batch, position] : got) {
    if (batch <= rejoined) continue;
    ASSERT_EQ(want.count(batch), 1u) << "batch " << batch;
    EXPECT_EQ(position, want.at(batch)) << "batch " << batch;
    ++compared;
  }
  std::printf(
      "worker 1 rejoined at batch %lld; %d positions after it match the uninterrupted run\n",
      static_cast<long long>(rejoined), compared);
  EXPECT_GE(compared, 2) << out;
  // And the same batches at the same steps: a replica that numbered its
  // batches anew after the restart would end with fewer.
  EXPECT_EQ(got, want);
}

// Every replica's loss at every global step it logged ("[worker:1] ...
// step = 17, loss = 0.6931, ..."), the last line of each: (task, step) ->
// loss as printed.
std::map<std::pair<std::string, int64_t>, std::string> StepLosses(const std::string& output) {
  std::map<std::pair<std::string, int64_t>, std::string> losses;
  const std::regex line("\\[(worker:[0-9]+|chief:0)\\][^\n]*\\] step = ([0-9]+), loss = ([0-9.]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    losses[{(*it)[1], std::stoll((*it)[2])}] = (*it)[3];
  }
  return losses;
}

// Exact resume (issue 40): a sync job of 2 replicas (their gradients' sum
// does not depend on which arrives first) streaming gzip'd shards, killed
// mid-epoch (SIGKILL of worker 1; of the ps, which rolls the job back to its
// last checkpoint) and resumed by the launcher, logs at every global step the
// very losses of an uninterrupted run.
TEST_F(SparseClusterTest, AResumedStreamedJobTrainsOnTheSameLossesAtEveryStep) {
  absl::StatusOr<SyntheticCtr> data = SyntheticCtr::Create(DataConfig());
  ASSERT_TRUE(data.ok()) << data.status();
  Env* env = Env::Default();
  const std::string shards = dir_ + "/loss_shards";
  ASSERT_TRUE(env->CreateDirs(shards).ok());
  for (int i = 0; i < 4; ++i) {
    const std::string plain = absl::StrCat(shards, "/part-", i, ".tsv");
    ASSERT_TRUE(data->WriteTsv(env, plain, 6000, 400 + i).ok());
    absl::StatusOr<std::string> text = env->ReadFile(plain);
    ASSERT_TRUE(text.ok());
    ASSERT_TRUE(env->WriteFileAtomic(plain + ".gz", testutil::Gzip(*text)).ok());
    ASSERT_TRUE(env->DeleteFile(plain).ok());
  }
  const std::string config = WriteClusterConfig(
      LoopbackConfig{.ps = 1,
                     .workers = 2,
                     .training = "  update: sync\n  chief_trains: false\n  checkpoint_steps: 50\n"
                                 "  sync_timeout: 60\n  shuffle_buffer: 700\n"});
  const auto args = [&](const std::string& job) {
    return std::vector<std::string>{kBin + "/pstrain-launch",
                                    "--config=" + config,
                                    "--model=" + spec_,
                                    "--data_dir=" + ctr_,
                                    "--train_files=" + shards + "/part-*.tsv.gz",
                                    "--job_dir=" + job,
                                    "--train_steps=1200",
                                    "--eval_steps=0",
                                    "--log_every_n_steps=1",
                                    "--batch_size=50",
                                    "--learning_rate=0.003",
                                    "--embedding_learning_rate=0.1",
                                    "--eval_batch_size=1000"};
  };
  ProcessResult a = RunProcess(args(dir_ + "/uninterrupted"), 600);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto want = StepLosses(a.output);
  ASSERT_EQ(want.size(), 2400u) << a.output;  // 2 workers x 1200 steps
  for (const std::string role : {"worker:1", "ps:0"}) {
    SCOPED_TRACE(role);
    const std::string job = dir_ + "/killed_" + role.substr(0, role.find(':'));
    const std::string log = job + ".log";
    Background launch = StartProcess(args(job), log);
    // (The job trains some 700 steps a second: 1200 steps leave time to
    // find the process while it is still training.)
    ASSERT_TRUE(WaitForLoggedStep(log, 130, 180)) << ReadAll(log);
    const std::string binary = role == "ps:0" ? "pstrain-ps" : "pstrain-worker";
    const std::vector<pid_t> pids =
        FindProcesses({binary, role == "ps:0" ? "--task_index=0" : "--task_index=1", job});
    ASSERT_EQ(pids.size(), 1u) << ReadAll(log);
    ASSERT_EQ(::kill(pids[0], SIGKILL), 0);
    ASSERT_EQ(WaitProcess(&launch, 300), 0) << ReadAll(log);
    const std::string out = ReadAll(log);
    if (role == "ps:0") {
      EXPECT_NE(out.find("rolled back"), std::string::npos) << out;
    } else {
      EXPECT_NE(out.find("worker 1 input starts at its batch"), std::string::npos) << out;
    }
    const auto got = StepLosses(out);
    // A killed worker may not log the step it finished as it died.
    int differ = 0, missing = 0;
    for (const auto& [key, loss] : want) {
      const auto it = got.find(key);
      if (it == got.end()) {
        ++missing;
      } else if (it->second != loss && ++differ <= 5) {
        ADD_FAILURE() << key.first << " step " << key.second << ": loss " << it->second
                      << ", uninterrupted " << loss;
      }
    }
    std::printf(
        "killed %s: %zu of %zu per-step losses equal the uninterrupted run's, %d not logged%s\n",
        role.c_str(), want.size() - differ - missing, want.size(), missing,
        out.find("rejoins in the middle of global step") != std::string::npos
            ? " (it rejoined in the middle of a step it had pushed in part)"
            : "");
    EXPECT_EQ(differ, 0) << out;
    EXPECT_LE(missing, role == "ps:0" ? 0 : 1) << out;
  }
}

// num_epochs without train_steps (issue 40): the replicas' shares differ
// (5000, 4000 and 3000 examples), so they end at different steps; a replica
// whose input ended leaves the sync steps to the others, and once every
// replica's has, the chief saves, evaluates, exports and marks the job
// complete at the step the longest share ends at (2 epochs of 5000 examples
// in batches of 100: step 100).
TEST_F(SparseClusterTest, NumEpochsEndsTheJobWithItsInput) {
  absl::StatusOr<SyntheticCtr> data = SyntheticCtr::Create(DataConfig());
  ASSERT_TRUE(data.ok()) << data.status();
  Env* env = Env::Default();
  const std::string shards = dir_ + "/epoch_shards";
  ASSERT_TRUE(env->CreateDirs(shards).ok());
  const int sizes[] = {3000, 3000, 2000, 2000, 1000, 1000};
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(
        data->WriteTsv(env, absl::StrCat(shards, "/part-", i, ".tsv"), sizes[i], 200 + i).ok());
  }
  // The shares as dealt in name order (file i to replica i % 3), the same
  // in both epochs.
  const std::string config = WriteClusterConfig(
      LoopbackConfig{.ps = 1,
                     .workers = 2,
                     .training = "  update: sync\n  sync_timeout: 30\n  shuffle_buffer: 1000\n"
                                 "  shuffle_files: false\n"});
  ProcessResult r = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
       "--train_files=" + shards + "/part-*.tsv", "--num_epochs=2", "--job_dir=" + job_dir(),
       "--eval_steps=0", "--log_every_n_steps=20", "--batch_size=100", "--learning_rate=0.003",
       "--embedding_learning_rate=0.1", "--eval_batch_size=1000"},
      300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Replica 0 (the chief) reads parts 0 and 3, worker 0 parts 1 and 4,
  // worker 1 parts 2 and 5.
  EXPECT_NE(r.output.find("the chief's input ended at global step 100"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("worker 0's input ended at global step 80"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("worker 1's input ended at global step 60"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("every replica's input ended (num_epochs 2): the job ends at global "
                          "step 100"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(LastEval(r.output).step, 100) << r.output;
  // Each replica said where its input was, and wrote it for TensorBoard.
  EXPECT_NE(r.output.find("input: epoch 2 of 2, file 2 of 2, 100%"), std::string::npos) << r.output;
  for (int replica = 0; replica < 3; ++replica) {
    absl::StatusOr<std::vector<std::string>> events =
        env->ListDir(absl::StrCat(job_dir(), "/input/replica-", replica));
    ASSERT_TRUE(events.ok()) << events.status();
    EXPECT_EQ(events->size(), 1u);
  }
  EXPECT_NE(r.output.find("Exported the model for serving"), std::string::npos) << r.output;
  absl::StatusOr<std::string> marker = env->ReadFile(job_dir() + "/COMPLETED");
  ASSERT_TRUE(marker.ok()) << marker.status() << "\n" << r.output;
  EXPECT_NE(marker->find("global_step: 100"), std::string::npos) << *marker;
  EXPECT_NE(marker->find("ended: input"), std::string::npos) << *marker;
  // Run again, with a train_steps the input never reached: the job is
  // complete (its data is done), nothing to do.
  ProcessResult again =
      RunProcess({kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_,
                  "--data_dir=" + ctr_, "--train_files=" + shards + "/part-*.tsv", "--num_epochs=2",
                  "--train_steps=5000", "--job_dir=" + job_dir()},
                 120);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("already finished"), std::string::npos) << again.output;
}

// A job restarted with another number of workers (issue 40): the files, and
// rests of files, its 2 replicas had not read are dealt to the 3 it has
// now, so that the job still trains on every example of its epoch once (and
// on the examples of the shuffle windows being handed out at the restart,
// which the log counts, once more).
TEST_F(SparseClusterTest, ARestartWithAnotherNumberOfWorkersDealsTheUnreadFilesAnew) {
  absl::StatusOr<SyntheticCtr> data = SyntheticCtr::Create(DataConfig());
  ASSERT_TRUE(data.ok()) << data.status();
  Env* env = Env::Default();
  const std::string shards = dir_ + "/redeal_shards";
  ASSERT_TRUE(env->CreateDirs(shards).ok());
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(data->WriteTsv(env, absl::StrCat(shards, "/part-", i, ".tsv"), 1000, 300 + i).ok());
  }
  const std::string training = "  update: sync\n  sync_timeout: 30\n  shuffle_buffer: 1000\n";
  const auto run = [&](int workers, const std::string& train_steps) {
    const std::string config =
        WriteClusterConfig(LoopbackConfig{.ps = 1,
                                          .workers = workers,
                                          .training = training,
                                          .file = absl::StrCat("cluster_", workers, ".yaml")});
    return RunProcess(
        {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
         "--train_files=" + shards + "/part-*.tsv", "--num_epochs=1",
         "--train_steps=" + train_steps, "--job_dir=" + job_dir(), "--eval_steps=0",
         "--log_every_n_steps=20", "--batch_size=100", "--learning_rate=0.003",
         "--embedding_learning_rate=0.1", "--eval_batch_size=1000"},
        300);
  };
  // 2 replicas train 12 steps of 100 examples each (3 files of 1000 each).
  ProcessResult first = run(1, "12");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // 3 replicas go on to the end of the epoch.
  ProcessResult r = run(2, "5000");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.output, m,
      std::regex("the job ran with 2 replicas and has 3 now: what they had not read at step 12 "
                 "\\(([0-9]+) files or rests of files, to complete epoch 1\\).*up to ([0-9]+) "
                 "examples trained before are read again")))
      << r.output;
  const int64_t read_again = std::stoll(m[2]);
  EXPECT_LE(read_again, 2 * 1000);  // a shuffle window per replica
  // Where each replica's input ended: the examples the job trained on.
  int64_t trained = 12 * 2 * 100;
  for (const std::string who : {"the chief's", "worker 0's", "worker 1's"}) {
    ASSERT_TRUE(
        std::regex_search(r.output, m, std::regex(who + " input ended at global step ([0-9]+)")))
        << who << "\n"
        << r.output;
    trained += (std::stoll(m[1]) - 12) * 100;
  }
  std::printf("re-dealt: %lld examples trained of 6000 (%lld read again by the deal)\n",
              static_cast<long long>(trained), static_cast<long long>(read_again));
  // Each replica drops its last examples that are fewer than a batch.
  EXPECT_LE(trained, 6000 + read_again) << r.output;
  EXPECT_GT(trained, 6000 + read_again - 3 * 100) << r.output;
  EXPECT_TRUE(env->FileExists(job_dir() + "/input/deal.txt"));
  absl::StatusOr<std::string> marker = env->ReadFile(job_dir() + "/COMPLETED");
  ASSERT_TRUE(marker.ok()) << marker.status();
  EXPECT_NE(marker->find("ended: input"), std::string::npos) << *marker;
}

// A ps killed after a replica's input ended: the restored ps has forgotten
// it; the replica says it again (or trains again, if the restore went back
// past its end), and the job still ends with its input.
TEST_F(SparseClusterTest, AnInputThatEndedIsSaidAgainToARestartedPs) {
  absl::StatusOr<SyntheticCtr> data = SyntheticCtr::Create(DataConfig());
  ASSERT_TRUE(data.ok()) << data.status();
  Env* env = Env::Default();
  const std::string shards = dir_ + "/uneven";
  ASSERT_TRUE(env->CreateDirs(shards).ok());
  // Worker 1 (replica 2) reads parts 2 and 5 (in name order, shuffle_files
  // false): 1000 examples, 50 batches of 20; the others 20000 and more.
  const int sizes[] = {20000, 20000, 500, 500, 1000, 500};
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(
        data->WriteTsv(env, absl::StrCat(shards, "/part-", i, ".tsv"), sizes[i], 500 + i).ok());
  }
  const std::string config = WriteClusterConfig(
      LoopbackConfig{.ps = 1,
                     .workers = 2,
                     .training = "  update: sync\n  sync_timeout: 30\n  shuffle_buffer: 1000\n"
                                 "  checkpoint_steps: 100\n  shuffle_files: false\n"});
  const std::string log = dir_ + "/uneven.log";
  Background launch = StartProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
       "--train_files=" + shards + "/part-*.tsv", "--num_epochs=1", "--job_dir=" + job_dir(),
       "--eval_steps=0", "--log_every_n_steps=100", "--batch_size=20", "--learning_rate=0.003",
       "--embedding_learning_rate=0.1", "--eval_batch_size=1000"},
      log);
  ASSERT_TRUE(WaitForText(log, "worker 1's input ended at global step 50", 120)) << ReadAll(log);
  const std::vector<pid_t> ps = FindProcesses({"pstrain-ps", job_dir()});
  ASSERT_EQ(ps.size(), 1u) << ReadAll(log);
  ASSERT_EQ(::kill(ps[0], SIGKILL), 0);
  ASSERT_EQ(WaitProcess(&launch, 300), 0) << ReadAll(log);
  const std::string out = ReadAll(log);
  // Restored at or past step 50 (a checkpoint after worker 1 left), the
  // restarted ps is told again; restored below it (no checkpoint yet),
  // worker 1 trains from there again and its input ends anew.
  EXPECT_TRUE(out.find("input ended (said again)") != std::string::npos ||
              out.find("below where worker 1's input ended; training from there again") !=
                  std::string::npos)
      << out;
  EXPECT_NE(out.find("every replica's input ended (num_epochs 1): the job ends at global step"),
            std::string::npos)
      << out;
  EXPECT_TRUE(env->FileExists(job_dir() + "/COMPLETED")) << out;
}

// `n` examples of `stream` as CSV with a header: an id, a free-text note
// (quoted, with commas and doubled quotes) that the schema does not read,
// the label "clicked", the 13 counts I1..I13 (empty when missing) and the
// categorical fields C1..C8 as hex, C1 quoted.
std::string CtrCsv(const SyntheticCtr& data, int64_t n, uint64_t stream) {
  const CriteoBatch b = data.Generate(n, stream);
  std::string out = "id,note,clicked";
  for (int j = 1; j <= kCriteoNumDense; ++j) absl::StrAppend(&out, ",I", j);
  for (int f = 1; f <= kFields; ++f) absl::StrAppend(&out, ",C", f);
  out += "\r\n";
  for (int64_t i = 0; i < b.size(); ++i) {
    absl::StrAppend(&out, i, ",\"row ", i, ", said \"\"hi\"\"\",", static_cast<int>(b.labels[i]));
    for (int j = 0; j < kCriteoNumDense; ++j) {
      const int64_t k = i * kCriteoNumDense + j;
      out += ",";
      if (b.dense_present[k]) absl::StrAppend(&out, b.dense[k]);
    }
    for (int f = 0; f < kFields; ++f) {
      const std::string hex = absl::StrFormat("%08x", b.categorical[i * kCriteoNumCategorical + f]);
      absl::StrAppend(&out, f == 0 ? ",\"" : ",", hex, f == 0 ? "\"" : "");
    }
    out += "\r\n";
  }
  return out;
}

// CSV input (issue 40): gzip'd CSV shards with a header, read by a schema
// (counts through log1p, fields hashed as tf.strings.to_hash_bucket_fast),
// train Wide & Deep on a sync cluster for 2 epochs, evaluated on a CSV file,
// to near the planted model's AUC.
TEST_F(SparseClusterTest, CsvShardsWithASchemaTrainWideAndDeep) {
  absl::StatusOr<SyntheticCtr> data = SyntheticCtr::Create(DataConfig());
  ASSERT_TRUE(data.ok()) << data.status();
  Env* env = Env::Default();
  const std::string csv = dir_ + "/csv";
  ASSERT_TRUE(env->CreateDirs(csv).ok());
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(env->WriteFileAtomic(absl::StrCat(csv, "/train-", i, ".csv.gz"),
                                     testutil::Gzip(CtrCsv(*data, 12000, 300 + i)))
                    .ok());
  }
  ASSERT_TRUE(
      env->WriteFileAtomic(csv + "/test.csv", CtrCsv(*data, 10000, kSyntheticTestStream)).ok());
  std::string schema = "csv:\n  label: clicked\n  missing: default\n  numeric:\n";
  for (int j = 1; j <= kCriteoNumDense; ++j) {
    absl::StrAppend(&schema, "    - {name: I", j, ", transform: log1p}\n");
  }
  schema += "  categorical:\n";
  for (int f = 1; f <= kFields; ++f) {
    absl::StrAppend(&schema, "    - {name: C", f, ", hash_buckets: 1000000}\n");
  }
  ASSERT_TRUE(env->WriteFileAtomic(csv + "/schema.yaml", schema).ok());
  const std::string config = WriteClusterConfig(
      LoopbackConfig{.ps = 1,
                     .workers = 2,
                     .training = "  update: sync\n  sync_timeout: 30\n  shuffle_buffer: 2000\n"});
  ProcessResult r = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
       "--train_files=" + csv + "/train-*.csv.gz", "--eval_files=" + csv + "/test.csv",
       "--csv_schema=" + csv + "/schema.yaml", "--num_epochs=2", "--job_dir=" + job_dir(),
       "--eval_steps=0", "--log_every_n_steps=100", "--batch_size=100", "--learning_rate=0.003",
       "--embedding_learning_rate=0.1", "--eval_batch_size=1000"},
      300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Eval eval = LastEval(r.output);
  std::printf("CSV: AUC %.4f at step %lld (planted %.4f)\n", eval.auc,
              static_cast<long long>(eval.step), planted_.auc);
  // 0.8152 and 0.8153 in two runs side by side here; read back from
  // TFRecords, 0.8075 (fewer steps): both 0.02 or more over the bound.
  EXPECT_GT(eval.auc, planted_.auc - 0.05) << r.output;
  EXPECT_NE(r.output.find("every replica's input ended"), std::string::npos) << r.output;
  // The PROJECTOR tab: each table's rows named by the CSV's hex text, whose
  // hash is the row's id.
  const int64_t named = testutil::ExpectJobProjector(env, job_dir(), 10000, 1000000);
  std::printf("CSV: %lld projector rows named by their CSV text\n", static_cast<long long>(named));
  EXPECT_GT(named, 1000);
  EXPECT_TRUE(std::regex_search(
      r.output,
      std::regex(
          R"(Wrote the projector's rows at global step [0-9]+ to .*projector_config\.pbtxt: emb_C1/embeddings [0-9]+ of [0-9]+ rows \([0-9]+ named\))")))
      << r.output;
  // pstrain-ckpt names them the same from the job's own schema and files.
  ProcessResult rows =
      RunProcess({kBin + "/pstrain-ckpt", job_dir(), "--projector_dir=" + dir_ + "/csv_projector",
                  "--projector_rows=20"},
                 60);
  ASSERT_EQ(rows.exit_code, 0) << rows.output;
  EXPECT_TRUE(std::regex_search(rows.output,
                                std::regex(R"(emb_C1/embeddings: 20 of [0-9]+ rows .*, 20 named)")))
      << rows.output;

  // pstrain-data convert: the CSV shards as 3 gzip'd TFRecord shards of
  // Examples, which describe reads and a job trains on as well.
  ProcessResult converted =
      RunProcess({kBin + "/pstrain-data", "convert", csv + "/train-*.csv.gz", "--out",
                  csv + "/conv", "--shards", "3", "--csv_schema", csv + "/schema.yaml"},
                 120);
  ASSERT_EQ(converted.exit_code, 0) << converted.output;
  EXPECT_NE(converted.output.find("wrote 48000 examples from 4 files to " + csv +
                                  "/conv-*-of-00003.tfrecord.gz (3 files"),
            std::string::npos)
      << converted.output;
  ProcessResult described = RunProcess(
      {kBin + "/pstrain-data", "describe", csv + "/conv-00001-of-00003.tfrecord.gz"}, 60);
  ASSERT_EQ(described.exit_code, 0) << described.output;
  EXPECT_NE(described.output.find("16000 tf.train.Example records, checksums OK"),
            std::string::npos)
      << described.output;
  EXPECT_NE(described.output.find("dense: float, 13"), std::string::npos) << described.output;
  EXPECT_NE(described.output.find("C8: int64"), std::string::npos) << described.output;
  ProcessResult from_records = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
       "--train_files=" + csv + "/conv-*.tfrecord.gz", "--eval_files=" + csv + "/test.csv",
       "--csv_schema=" + csv + "/schema.yaml", "--num_epochs=2", "--job_dir=" + dir_ + "/conv_job",
       "--eval_steps=0", "--log_every_n_steps=100", "--batch_size=100", "--learning_rate=0.003",
       "--embedding_learning_rate=0.1", "--eval_batch_size=1000"},
      300);
  ASSERT_EQ(from_records.exit_code, 0) << from_records.output;
  const Eval converted_eval = LastEval(from_records.output);
  std::printf("converted to TFRecords: AUC %.4f at step %lld\n", converted_eval.auc,
              static_cast<long long>(converted_eval.step));
  EXPECT_GT(converted_eval.auc, planted_.auc - 0.05) << from_records.output;
  // Each replica reads one shard: 16000 examples x 2 epochs / 100 a batch.
  EXPECT_EQ(converted_eval.step, 320) << from_records.output;

  // A schema that names a column the files lack stops every role at start,
  // naming it.
  ASSERT_TRUE(env->WriteFileAtomic(csv + "/bad.yaml",
                                   absl::StrReplaceAll(schema, {{"name: C8,", "name: C9,"}}))
                  .ok());
  ProcessResult bad = RunProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
       "--train_files=" + csv + "/train-*.csv.gz", "--eval_files=" + csv + "/test.csv",
       "--csv_schema=" + csv + "/bad.yaml", "--num_epochs=1", "--job_dir=" + dir_ + "/bad_job"},
      120);
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_NE(bad.output.find("C9"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace pstrain
