// The Supervisor's single-task recovery: restarts within a budget.
#include <stdlib.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launch/supervisor.h"
#include "testing/supervisor_test_util.h"

namespace pstrain {
namespace {

using ::testing::Contains;
using testing_util::Lines;
using testing_util::Options;
using testing_util::Sh;

// A script that counts its runs in `file` and dies as `deaths` says for the
// first runs ("kill": SIGKILL, "138": exit 138), then exits 0.
std::string DiesAtFirst(const std::string& file, const std::vector<std::string>& deaths) {
  std::string script = absl::StrCat("n=$(cat ", file, " 2>/dev/null || echo 0); echo $((n+1)) > ",
                                    file, "; echo run $n; ");
  for (size_t i = 0; i < deaths.size(); ++i) {
    script += absl::StrCat("if [ $n -eq ", i, " ]; then ",
                           deaths[i] == "kill" ? "kill -9 $$" : "exit " + deaths[i], "; fi; ");
  }
  return script + "exit 0";
}

std::string TempFile(const std::string& name) {
  std::string dir = "/tmp/supervisor_test_XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return absl::StrCat(dir, "/", name);
}

TEST(SupervisorTest, ADeadProcessIsRestartedWhileTheOthersGoOn) {
  Lines lines;
  SupervisorOptions options = Options(lines);
  options.max_restarts = 3;
  options.restart_delay = absl::Milliseconds(50);
  const std::string runs = TempFile("runs");
  auto supervisor = Supervisor::Start(
      {Sh("ps:0", "sleep 1; echo still here"), Sh("worker:1", DiesAtFirst(runs, {"kill", "138"}))},
      options);
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const pid_t ps = (*supervisor)->pids()[0];
  const JobResult result = (*supervisor)->Wait("", absl::ZeroDuration());
  EXPECT_TRUE(result.ok) << result.summary;
  EXPECT_EQ(result.summary, "all 2 processes exited 0");
  ASSERT_EQ(result.exits.size(), 2u);
  EXPECT_EQ(result.exits[0].restarts, 0);
  EXPECT_EQ(result.exits[0].pid, ps);  // never disturbed
  EXPECT_EQ(result.exits[1].restarts, 2);
  const std::vector<std::string> got = lines.Get();
  EXPECT_THAT(got, Contains("[launcher] worker:1 was killed by signal 9 (SIGKILL); restarting it "
                            "in 50ms (restart 1 of 3)"));
  EXPECT_THAT(
      got, Contains("[launcher] worker:1 exited with status 138; restarting it in 50ms (restart 2 "
                    "of 3)"));
  EXPECT_THAT(got, Contains("[worker:1] run 2"));  // the third run's output is read too
  EXPECT_THAT(got, Contains("[ps:0] still here"));
  EXPECT_GE(lines.IndexOf("[worker:1] run 2"), lines.IndexOf("[worker:1] run 1"));
}

TEST(SupervisorTest, PastTheRestartBudgetOrAnotherFailureEndsTheJob) {
  Lines lines;
  SupervisorOptions options = Options(lines);
  options.max_restarts = 2;
  options.restart_delay = absl::Milliseconds(20);
  const std::string runs = TempFile("runs");
  auto supervisor = Supervisor::Start(
      {Sh("ps:0", "sleep 30"), Sh("worker:1", DiesAtFirst(runs, {"kill", "kill", "kill"}))},
      options);
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  JobResult result = (*supervisor)->Wait("", absl::ZeroDuration());
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.summary, "worker:1 was killed by signal 9 (SIGKILL); stopped the rest");
  EXPECT_EQ(result.exits[1].restarts, 2);
  EXPECT_THAT(lines.Get(), Contains("[launcher] worker:1 was killed by signal 9 (SIGKILL); "
                                    "stopping the rest"));

  // Exit 1 is a task's own verdict (it failed and ended the job): no restart.
  Lines lines2;
  SupervisorOptions options2 = Options(lines2);
  options2.max_restarts = 2;
  supervisor = Supervisor::Start({Sh("ps:0", "sleep 30"), Sh("chief:0", "exit 1")}, options2);
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  result = (*supervisor)->Wait("", absl::ZeroDuration());
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.summary, "chief:0 exited with status 1; stopped the rest");
  EXPECT_EQ(result.exits[1].restarts, 0);
}

}  // namespace
}  // namespace pstrain
