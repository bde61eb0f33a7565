// Online training (issue 41): a job that follows its train_files trains on
// each new file once as it lands, stops on SIGTERM with its model exported,
// and, restarted, goes on with the files that came meanwhile.

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <initializer_list>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/env.h"
#include "data/binary_metrics.h"
#include "data/synthetic/synthetic_ctr.h"
#include "gtest/gtest.h"
#include "io/export_format.h"
#include "nlohmann/json.hpp"
#include "tests/ctr_cluster_util.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::Background;
using testing_util::CtrClusterTest;
using testing_util::DataConfig;
using testing_util::LoopbackConfig;
using testing_util::ReadAll;
using testing_util::StartProcess;
using testing_util::WaitProcess;

const std::string kBin = PSTRAIN_BIN_DIR;

// Occurrences of `text` in `s`.
int Count(const std::string& s, const std::string& text) {
  int n = 0;
  for (size_t at = s.find(text); at != std::string::npos; at = s.find(text, at + 1)) ++n;
  return n;
}

// Waits (up to `secs`) until the file at `path` holds `text` `times` times.
// The lines of `s` that hold every one of `texts`.
int CountLines(const std::string& s, std::initializer_list<absl::string_view> texts) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(s, '\n')) {
    n += std::all_of(texts.begin(), texts.end(),
                     [&](absl::string_view t) { return absl::StrContains(line, t); });
  }
  return n;
}

bool WaitForCount(const std::string& path, const std::string& text, int times, int secs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(secs);
  while (std::chrono::steady_clock::now() < deadline) {
    if (Count(ReadAll(path), text) >= times) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

class OnlineClusterTest : public CtrClusterTest {
 protected:
  OnlineClusterTest() : CtrClusterTest("online_cluster", PSTRAIN_BIN_DIR) {}

  // Part `i` of the click log: 2000 examples of stream 500 + i, landed
  // whole (written aside and renamed).
  void Land(int i) {
    absl::StatusOr<SyntheticCtr> data = SyntheticCtr::Create(DataConfig());
    ASSERT_TRUE(data.ok()) << data.status();
    ASSERT_TRUE(data->WriteTsv(Env::Default(), Part(i), 2000, 500 + i).ok());
  }
  std::string Part(int i) const { return absl::StrCat(dir_, "/logs/part-00", i, ".tsv"); }

  Background Launch(const std::string& log) {
    const std::string config = WriteClusterConfig(
        LoopbackConfig{.ps = 1,
                       .workers = 1,
                       .training = "  update: async\n  follow: true\n  poll_secs: 0.2\n"
                                   "  checkpoint_steps: 20\n  shuffle_buffer: 500\n"
                                   "  progressive_validation: true\n  progressive_window: 2000\n"
                                   "  export_steps: 20\n  exports_to_keep: 1\n"});
    return StartProcess(
        {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
         "--train_files=" + dir_ + "/logs/part-*.tsv", "--job_dir=" + job_dir(), "--eval_steps=0",
         "--log_every_n_steps=10", "--batch_size=100", "--learning_rate=0.003",
         "--embedding_learning_rate=0.1", "--eval_batch_size=1000"},
        log);
  }
};

TEST_F(OnlineClusterTest, AJobThatFollowsItsFilesTrainsOnEachNewOneAndStopsWhenAsked) {
  ASSERT_TRUE(Env::Default()->CreateDirs(dir_ + "/logs").ok());
  Land(0);
  Land(1);
  const std::string log = dir_ + "/online_1.log";
  Background launch = Launch(log);
  // The chief (replica 0) has part 0, worker 0 part 1; both wait for more.
  ASSERT_TRUE(WaitForCount(log, "of the 2 listed", 2, 120)) << ReadAll(log);
  Land(2);
  Land(3);
  ASSERT_TRUE(WaitForCount(log, "has read its 2 files of the 4 listed", 2, 120)) << ReadAll(log);
  ASSERT_EQ(::kill(launch.pid, SIGTERM), 0);
  ASSERT_EQ(WaitProcess(&launch, 120), 0) << ReadAll(log);
  std::string out = ReadAll(log);
  // Each file was read once, from its start, by the replica it was dealt to.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(Count(out, absl::StrCat("of 2 opens ", Part(i), " in epoch 1")), 1) << Part(i) << "\n"
                                                                                  << out;
    EXPECT_EQ(Count(out, absl::StrCat("replica ", i % 2, " of 2 opens ", Part(i))), 1) << out;
  }
  // Exported while it trained (from the first checkpoint after every 20
  // steps: how many depends on when the checkpoints fall, the job steps in
  // bursts), and as it stopped; the newest kept.
  EXPECT_GE(Count(out, "Exported the model for serving"), 2) << out;
  EXPECT_NE(out.find("the online job stopped: its last checkpoint is exported"), std::string::npos)
      << out;
  absl::StatusOr<std::vector<std::string>> versions =
      Env::Default()->ListDir(job_dir() + "/export");
  ASSERT_TRUE(versions.ok()) << versions.status();
  EXPECT_EQ(versions->size(), 1u);
  EXPECT_FALSE(Env::Default()->FileExists(job_dir() + "/COMPLETED"));
  absl::StatusOr<std::string> list = Env::Default()->ReadFile(job_dir() + "/input/files.txt");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(*list, absl::StrCat(Part(0), "\n", Part(1), "\n", Part(2), "\n", Part(3), "\n"));
  EXPECT_NE(out.find("checkpoint saved at global step"), std::string::npos) << out;
  // Each batch was predicted before it was trained on: the loss and AUC of
  // the last 2000 examples, in the log and for TensorBoard.
  const std::regex progressive(
      "progressive validation \\(last 2000 examples\\): loss = ([0-9.]+), auc = ([0-9.]+)");
  std::vector<double> aucs;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), progressive);
       it != std::sregex_iterator(); ++it) {
    aucs.push_back(std::stod((*it)[2]));
  }
  ASSERT_GE(aucs.size(), 2u) << out;
  std::printf("progressive AUC of the last 2000 examples: %.4f at first, %.4f at the stop\n",
              aucs.front(), aucs.back());
  // Async, so the stop comes after more or fewer steps: in 10 runs here (two
  // at a time, -j2 load) 0.5345 at first, 0.6109 to 0.6774 at the stop, so
  // the bound (first + 0.03) is 0.046 under the lowest.
  EXPECT_GT(aucs.back(), aucs.front() + 0.03) << out;
  for (int replica = 0; replica < 2; ++replica) {
    absl::StatusOr<std::vector<std::string>> events =
        Env::Default()->ListDir(absl::StrCat(job_dir(), "/progressive/replica-", replica));
    ASSERT_TRUE(events.ok()) << events.status();
    EXPECT_EQ(events->size(), 1u);
  }

  // Two more land while it is stopped; restarted, it trains on them.
  Land(4);
  Land(5);
  const std::string log2 = dir_ + "/online_2.log";
  Background again = Launch(log2);
  ASSERT_TRUE(WaitForCount(log2, "has read its 3 files of the 6 listed", 2, 120)) << ReadAll(log2);
  ASSERT_EQ(::kill(again.pid, SIGTERM), 0);
  ASSERT_EQ(WaitProcess(&again, 120), 0) << ReadAll(log2);
  out = ReadAll(log2);
  EXPECT_NE(out.find("training resumes at step"), std::string::npos) << out;
  for (int i = 4; i < 6; ++i) {
    EXPECT_EQ(Count(out, absl::StrCat("replica ", i % 2, " of 2 opens ", Part(i), " in epoch 1")),
              1)
        << out;
  }
  EXPECT_NE(out.find("Exported the model for serving"), std::string::npos) << out;
}

// SIGKILL of each role of an online job in turn (issue 41): a worker, the
// ps (the job rolls back to its checkpoint, which is of the step it was at:
// it saves every second), the chief; the launcher restarts each, the job goes
// on with the files that land meanwhile, and every file written is listed
// once and read from its start once, by the replica it was dealt to.
TEST_F(OnlineClusterTest, EveryRoleKilledInTurnResumesAndReadsEachFileOnce) {
  ASSERT_TRUE(Env::Default()->CreateDirs(dir_ + "/logs").ok());
  const std::string config = WriteClusterConfig(
      LoopbackConfig{.ps = 1,
                     .workers = 1,
                     .training = "  update: async\n  follow: true\n  poll_secs: 0.2\n"
                                 "  checkpoint_steps: 0\n  checkpoint_secs: 1\n"
                                 "  shuffle_buffer: 500\n"});
  Land(0);
  Land(1);
  const std::string log = dir_ + "/killed.log";
  Background launch = StartProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
       "--train_files=" + dir_ + "/logs/part-*.tsv", "--job_dir=" + job_dir(), "--eval_steps=0",
       "--log_every_n_steps=10", "--batch_size=100", "--learning_rate=0.003",
       "--embedding_learning_rate=0.1", "--eval_batch_size=1000", "--max_restarts=3"},
      log);
  int files = 2;
  // Both replicas read their files and wait; a checkpoint of that step.
  const auto caught_up = [&] {
    const std::string text =
        absl::StrCat("has read its ", files / 2, " files of the ", files, " listed");
    if (!WaitForCount(log, text, 2, 120)) return false;
    const int saved = Count(ReadAll(log), "Saving checkpoints for");
    return WaitForCount(log, "Saving checkpoints for", saved + 1, 30);
  };
  ASSERT_TRUE(caught_up()) << ReadAll(log);
  for (const std::string role : {"worker", "ps", "chief"}) {
    SCOPED_TRACE(role);
    const std::vector<pid_t> pids = testing_util::FindProcesses({"pstrain-" + role, job_dir()});
    ASSERT_EQ(pids.size(), 1u) << ReadAll(log);
    ASSERT_EQ(::kill(pids[0], SIGKILL), 0);
    ASSERT_TRUE(WaitForCount(log, absl::StrCat(role, ":0 was killed by signal 9"), 1, 60))
        << ReadAll(log);
    Land(files);
    Land(files + 1);
    files += 2;
    ASSERT_TRUE(caught_up()) << ReadAll(log);
  }
  ASSERT_EQ(::kill(launch.pid, SIGTERM), 0);
  ASSERT_EQ(WaitProcess(&launch, 120), 0) << ReadAll(log);
  const std::string out = ReadAll(log);
  EXPECT_NE(out.find("rolled back"), std::string::npos) << out;
  absl::StatusOr<std::string> list = Env::Default()->ReadFile(job_dir() + "/input/files.txt");
  ASSERT_TRUE(list.ok()) << list.status();
  std::string written;
  for (int i = 0; i < files; ++i) absl::StrAppend(&written, Part(i), "\n");
  EXPECT_EQ(*list, written);
  for (int i = 0; i < files; ++i) {
    // A file is opened from its start once by its replica (a replica that
    // restarts opens it again at the offset it had reached). The one
    // exception: a replica taken back to a checkpoint's position (the
    // rollback once the killed ps is back) reads again from there, so a file
    // its reader opened after that checkpoint (one that landed while the ps
    // was down) is opened from its start once more.
    const int replica = i % 2;
    const std::string task = replica == 0 ? "[chief:0]" : "[worker:0]";
    const int rewinds = CountLines(out, {task, "reading the batches from there again"});
    const int opens =
        Count(out, absl::StrCat("replica ", replica, " of 2 opens ", Part(i), " in epoch 1"));
    EXPECT_GE(opens, 1) << Part(i) << "\n" << out;
    EXPECT_LE(opens, 1 + rewinds) << Part(i) << "\n" << out;
    EXPECT_EQ(Count(out, absl::StrCat("replica ", 1 - replica, " of 2 opens ", Part(i))), 0) << out;
  }
  std::printf("killed a worker, the ps and the chief in turn: %d files written, each read once\n",
              files);
}

// A follow job with train_steps ends there (issue 41): both replicas train
// their one batch and wait; then a file of 40 batches lands for the chief.
// The worker, waiting for new files, sees the job reach train_steps without
// it and stops too, and the job completes.
TEST_F(OnlineClusterTest, AFollowJobWithTrainStepsEndsThereWhileAReplicaWaits) {
  absl::StatusOr<SyntheticCtr> data = SyntheticCtr::Create(DataConfig());
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_TRUE(Env::Default()->CreateDirs(dir_ + "/logs").ok());
  ASSERT_TRUE(data->WriteTsv(Env::Default(), Part(0), 100, 900).ok());
  ASSERT_TRUE(data->WriteTsv(Env::Default(), Part(1), 100, 901).ok());
  const std::string config = WriteClusterConfig(
      LoopbackConfig{.ps = 1,
                     .workers = 1,
                     .training = "  update: async\n  follow: true\n  poll_secs: 0.2\n"
                                 "  shuffle_buffer: 500\n"});
  const std::string log = dir_ + "/steps.log";
  Background launch = StartProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
       "--train_files=" + dir_ + "/logs/part-*.tsv", "--job_dir=" + job_dir(), "--eval_steps=0",
       "--train_steps=30", "--log_every_n_steps=10", "--batch_size=100", "--learning_rate=0.003",
       "--embedding_learning_rate=0.1", "--eval_batch_size=1000"},
      log);
  ASSERT_TRUE(WaitForCount(log, "has read its 1 files of the 2 listed", 2, 120)) << ReadAll(log);
  ASSERT_TRUE(data->WriteTsv(Env::Default(), Part(2), 4000, 902).ok());
  ASSERT_EQ(WaitProcess(&launch, 120), 0) << ReadAll(log);
  const std::string out = ReadAll(log);
  EXPECT_NE(out.find("replica 0 of 2 opens " + Part(2)), std::string::npos) << out;
  EXPECT_NE(out.find("the job is over while this replica waits for new files"), std::string::npos)
      << out;
  EXPECT_TRUE(Env::Default()->FileExists(job_dir() + "/COMPLETED")) << out;
}

// The AUC of the model `model_dir` holds (a served one, through
// pstrain-serve's REST API at `url`, when not empty; else pstrain-predict's)
// on `batch`, whose instances go to `request_file`; -1 on failure.
double ModelAuc(const CriteoBatch& batch, const std::string& url, const std::string& model_dir,
                const std::string& request_file, int64_t* version = nullptr) {
  nlohmann::json instances = nlohmann::json::array();
  std::string lines;
  for (int64_t i = 0; i < batch.size(); ++i) {
    instances.push_back(testing_util::CtrInstance(batch, i));
    absl::StrAppend(&lines, instances.back().dump(), "\n");
  }
  nlohmann::json answer;
  if (!url.empty()) {
    if (!Env::Default()
             ->WriteFileAtomic(request_file, nlohmann::json({{"instances", instances}}).dump())
             .ok()) {
      return -1;
    }
    const auto [status, body] = testing_util::Curl("POST", url, request_file);
    if (status != 200) {
      ADD_FAILURE() << status << " " << body.substr(0, 500);
      return -1;
    }
    answer = nlohmann::json::parse(body);
    if (version != nullptr) *version = std::stoll(answer.value("model_version", "-1"));
  } else {
    if (!Env::Default()->WriteFileAtomic(request_file, lines).ok()) return -1;
    testing_util::ProcessResult r =
        testing_util::RunProcess({kBin + "/pstrain-predict", "--model_dir=" + model_dir,
                                  "--json_instances=" + request_file, "--format=json"},
                                 120);
    const size_t at = r.output.rfind("{\"predictions\"");
    if (r.exit_code != 0 || at == std::string::npos) {
      ADD_FAILURE() << r.output.substr(0, 2000);
      return -1;
    }
    answer = nlohmann::json::parse(r.output.substr(at));
  }
  std::vector<double> scores;
  for (const nlohmann::json& p : answer["predictions"]) {
    scores.push_back(p["logistic"][0].get<double>());
  }
  absl::StatusOr<double> auc = BinaryAuc(scores, batch.labels);
  return auc.ok() ? *auc : -1;
}

// The served model follows the drift (issue 41): an online Wide & Deep job
// (1 ps, 2 workers) trains on a click log whose planted model changes half
// its ids' weights after 4 files; pstrain-serve follows its exports (full
// versions and deltas). Each new file is first scored by the model served
// then (before it is trained on): its AUC falls at the drift and comes back
// to within 0.02 of the planted AUC within 8 files, while the export frozen
// before the drift stays fallen, more than 0.05 below where it was.
TEST_F(OnlineClusterTest, TheServedModelFollowsTheJobBackAfterADrift) {
  constexpr int kBefore = 4, kAfter = 8, kExamples = 20000, kScored = 10000;
  absl::StatusOr<SyntheticCtr> before = SyntheticCtr::Create(DataConfig());
  absl::StatusOr<SyntheticCtr> after = SyntheticCtr::Create(DataConfig());
  ASSERT_TRUE(before.ok() && after.ok());
  after->SetDrift(0.5, 1);
  Env* env = Env::Default();
  ASSERT_TRUE(env->CreateDirs(dir_ + "/logs").ok());
  const auto land = [&](int i) {
    const SyntheticCtr& planted = i < kBefore ? *before : *after;
    ASSERT_TRUE(planted.WriteTsv(env, Part(i), kExamples, 700 + i).ok());
  };
  for (int i = 0; i < kBefore; ++i) land(i);
  const std::string config = WriteClusterConfig(LoopbackConfig{
      .ps = 1,
      .workers = 2,
      .training = "  update: async\n  chief_trains: false\n  follow: true\n"
                  "  poll_secs: 0.2\n  checkpoint_steps: 20\n  shuffle_buffer: 1000\n"
                  "  export_steps: 20\n  full_export_every: 4\n"
                  "  exports_to_keep: 4\n"});
  const std::string log = dir_ + "/drift.log";
  Background launch = StartProcess(
      {kBin + "/pstrain-launch", "--config=" + config, "--model=" + spec_, "--data_dir=" + ctr_,
       "--train_files=" + dir_ + "/logs/part-*.tsv", "--job_dir=" + job_dir(), "--eval_steps=0",
       "--log_every_n_steps=50", "--batch_size=100", "--learning_rate=0.003",
       "--embedding_learning_rate=0.1", "--eval_batch_size=1000"},
      log);
  // Trained on the files before the drift (each replica read its 2), and
  // exported.
  ASSERT_TRUE(WaitForCount(log, absl::StrCat("files of the ", kBefore, " listed"), 2, 180))
      << ReadAll(log);
  const std::string exports = job_dir() + "/export";
  const auto newest_export = [&]() -> int64_t {
    absl::StatusOr<std::vector<int64_t>> v = ListExportVersions(env, exports);
    return v.ok() && !v->empty() ? v->back() : 0;
  };
  for (int i = 0; i < 600 && newest_export() == 0; ++i) absl::SleepFor(absl::Milliseconds(100));
  ASSERT_GT(newest_export(), 0) << ReadAll(log);
  const int port = testing_util::FreePort();
  const std::string base_url = absl::StrCat("http://127.0.0.1:", port, "/v1/models/ctr");
  Background serve =
      StartProcess({kBin + "/pstrain-serve", "--model_base_path=" + exports, "--model_name=ctr",
                    "--host=127.0.0.1", absl::StrCat("--port=", port),
                    "--file_system_poll_wait_seconds=1", absl::StrCat("--max_instances=", kScored)},
                   dir_ + "/serve.log");
  // Waits until pstrain-serve serves the newest export.
  const auto serving_newest = [&]() {
    for (int i = 0; i < 300; ++i) {
      const int64_t newest = newest_export();
      const auto [status, body] = testing_util::Curl("GET", base_url);
      if (status == 200 && nlohmann::json::parse(body)["model_version_status"][0]["version"] ==
                               std::to_string(newest)) {
        return newest;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return int64_t{0};
  };
  ASSERT_GT(serving_newest(), 0) << ReadAll(dir_ + "/serve.log");
  // The export before the drift, frozen.
  const std::string frozen = dir_ + "/frozen";
  std::error_code copied;
  for (int i = 0; i < 5; ++i) {
    std::filesystem::remove_all(frozen);
    std::filesystem::copy(exports, frozen, std::filesystem::copy_options::recursive, copied);
    if (!copied) break;
  }
  ASSERT_FALSE(copied) << copied.message();
  const CriteoBatch held_out = before->Generate(kScored, 799);
  const double frozen_before = ModelAuc(held_out, "", frozen, dir_ + "/frozen_request.json");
  std::printf("before the drift: the frozen export's AUC %.4f (planted %.4f)\n", frozen_before,
              before->Evaluate(held_out)->auc);

  int back_at = -1;  // the first file after the drift scored within 0.02 of the planted
  double served = 0, planted = 0;
  double served_last = 0, planted_last = 0;  // over the last 3 files
  for (int i = kBefore; i < kBefore + kAfter; ++i) {
    // The new file, scored by the model served before it lands.
    const CriteoBatch next = after->Generate(kScored, 700 + i);
    int64_t version = 0;
    served = ModelAuc(next, base_url + ":predict", "", dir_ + "/request.json", &version);
    planted = after->Evaluate(next)->auc;
    std::printf("file %d (%d after the drift): served AUC %.4f (version %lld), planted %.4f\n", i,
                i - kBefore + 1, served, static_cast<long long>(version), planted);
    if (back_at < 0 && i > kBefore && served > planted - 0.02) back_at = i - kBefore + 1;
    if (i >= kBefore + kAfter - 2) {
      served_last += served / 3;
      planted_last += planted / 3;
    }
    land(i);
    // Read by replica i % 2, whose file it is.
    ASSERT_TRUE(WaitForCount(log,
                             absl::StrCat("replica ", i % 2, " of 2 has read its ", i / 2 + 1,
                                          " files of the ", i + 1, " listed"),
                             1, 180))
        << ReadAll(log);
    const int64_t old = newest_export();
    // (Its last steps' export, if they reach another export_steps.)
    for (int k = 0; k < 30 && newest_export() == old; ++k) absl::SleepFor(absl::Milliseconds(100));
    ASSERT_GT(serving_newest(), 0) << ReadAll(dir_ + "/serve.log");
  }
  const CriteoBatch last = after->Generate(kScored, 700 + kBefore + kAfter);
  const double frozen_after = ModelAuc(last, "", frozen, dir_ + "/frozen_request.json");
  served = ModelAuc(last, base_url + ":predict", "", dir_ + "/request.json");
  planted = after->Evaluate(last)->auc;
  served_last += served / 3;
  planted_last += planted / 3;
  std::printf(
      "after %d files of the drift: served AUC %.4f, planted %.4f (over the last 3 files: %.4f and "
      "%.4f); the frozen export %.4f (it was %.4f); the served model came within 0.02 of the "
      "planted at file %d of the drift\n",
      kAfter, served, planted, served_last, planted_last, frozen_after, frozen_before, back_at);
  // In 10 runs here (two at a time, -j2 load): back within 0.02 at file 3
  // every time; over the last 3 files served 0.8097 to 0.8104 against the
  // planted 0.8163 (the bound is 0.013 under the lowest); the frozen export
  // 0.6383 to 0.6468 after the drift, 0.8252 to 0.8272 before it.
  EXPECT_GE(back_at, 1);
  EXPECT_LE(back_at, kAfter);
  EXPECT_GT(served_last, planted_last - 0.02);
  EXPECT_LT(frozen_after, frozen_before - 0.05);
  const std::string serve_log = ReadAll(dir_ + "/serve.log");
  EXPECT_NE(serve_log.find("rows applied in place"), std::string::npos) << serve_log;
  ASSERT_EQ(::kill(launch.pid, SIGTERM), 0);
  ASSERT_EQ(WaitProcess(&launch, 120), 0) << ReadAll(log);
  ::kill(serve.pid, SIGTERM);
  WaitProcess(&serve, 30);
}

// The stream to learn from: pstrain-data writes a file of a drifting click
// log every --every seconds, each with its planted AUC and the first file's
// model's AUC on it (which falls as the ids drift).
TEST_F(OnlineClusterTest, SyntheticCtrStreamWritesADriftingLog) {
  const std::string stream = dir_ + "/stream";
  testing_util::ProcessResult r = testing_util::RunProcess(
      {kBin + "/pstrain-data", "synthetic-ctr", "--stream", stream, "--examples", "5000", "--every",
       "0.1", "--drift", "0.3", "--count", "4", "--gzip"},
      120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::regex line(
      "shard ([0-9]+): 5000 examples to [^;]*part-0000[0-9].tsv.gz; planted AUC "
      "([0-9.]+) \\(the first shard's model: ([0-9.]+)\\)");
  std::vector<double> planted, first;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), line);
       it != std::sregex_iterator(); ++it) {
    planted.push_back(std::stod((*it)[2]));
    first.push_back(std::stod((*it)[3]));
  }
  ASSERT_EQ(planted.size(), 4u) << r.output;
  EXPECT_EQ(planted[0], first[0]);
  EXPECT_LT(first[3], planted[3] - 0.05) << r.output;
  for (int k = 0; k < 4; ++k) {
    EXPECT_TRUE(Env::Default()->FileExists(absl::StrCat(stream, "/part-0000", k, ".tsv.gz")));
  }
  // Nothing else is left in the directory (the files were written aside).
  absl::StatusOr<std::vector<std::string>> names = Env::Default()->ListDir(stream);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 4u);
}

}  // namespace
}  // namespace pstrain
