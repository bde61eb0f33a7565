#include "launch/supervisor.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/supervisor_test_util.h"

namespace pstrain {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using testing_util::ExpectAllGone;
using testing_util::Lines;
using testing_util::Options;
using testing_util::Sh;

// A grandchild is reaped by whoever inherited it (maybe nobody, in a
// container), so a zombie counts as dead.
bool DeadOrZombie(pid_t pid) {
  if (kill(pid, 0) == -1 && errno == ESRCH) return true;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

bool EventuallyDead(pid_t pid) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!DeadOrZombie(pid)) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// Takes the pid from a line "[name] helper <pid>".
pid_t HelperPid(const Lines& lines, const std::string& prefix) {
  for (const std::string& line : lines.Get()) {
    int pid = 0;
    if (absl::StartsWith(line, prefix) && absl::SimpleAtoi(line.substr(prefix.size()), &pid)) {
      return pid;
    }
  }
  return 0;
}

// Prints "ready" once its SIGTERM trap is set; exits 0 on SIGTERM, as a role that saves would.
constexpr char kExitsOnTerm[] = "trap 'echo got TERM; exit 0' TERM; echo ready; sleep 30 & wait";

TEST(ExitInfoTest, Describe) {
  ExitInfo exited;
  exited.exited = true;
  exited.exit_code = 3;
  EXPECT_EQ(exited.Describe(), "exited with status 3");
  EXPECT_FALSE(exited.ok());
  ExitInfo killed;
  killed.signaled = true;
  killed.signal = SIGKILL;
  EXPECT_EQ(killed.Describe(), "was killed by signal 9 (SIGKILL)");
  EXPECT_FALSE(killed.ok());
  ExitInfo fine;
  fine.exited = true;
  EXPECT_TRUE(fine.ok());
}

TEST(SupervisorTest, AllSucceedAndEveryLineIsPrefixedAndWhole) {
  Lines lines;
  // b and c write 200 lines of 500 bytes each at the same time.
  auto long_lines = [](char c) {
    return absl::StrCat("s=$(printf '%0500d' 0 | tr 0 ", std::string(1, c),
                        "); i=0; while [ $i -lt 200 ]; do echo \"$s\"; i=$((i+1)); done");
  };
  auto supervisor = Supervisor::Start({Sh("a", "echo one; echo two >&2; printf partial"),
                                       Sh("b", long_lines('b')), Sh("c", long_lines('c'))},
                                      Options(lines));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();
  ASSERT_EQ(pids.size(), 3u);

  const JobResult result = (*supervisor)->Wait("", absl::ZeroDuration());
  EXPECT_TRUE(result.ok);
  EXPECT_EQ(result.summary, "all 3 processes exited 0");
  ASSERT_EQ(result.exits.size(), 3u);
  const std::vector<std::string> names = {"a", "b", "c"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(result.exits[i].name, names[i]);
    EXPECT_EQ(result.exits[i].pid, pids[i]);
    EXPECT_TRUE(result.exits[i].exited);
    EXPECT_EQ(result.exits[i].exit_code, 0);
    EXPECT_FALSE(result.exits[i].stopped_by_supervisor);
  }

  int b_lines = 0, c_lines = 0;
  std::vector<std::string> a_lines;
  for (const std::string& line : lines.Get()) {
    if (line == "[b] " + std::string(500, 'b')) {
      ++b_lines;
    } else if (line == "[c] " + std::string(500, 'c')) {
      ++c_lines;
    } else if (absl::StartsWith(line, "[a] ")) {
      a_lines.push_back(line);
    } else {
      ADD_FAILURE() << "unexpected line: " << line.substr(0, 80);
    }
  }
  EXPECT_EQ(b_lines, 200);
  EXPECT_EQ(c_lines, 200);
  EXPECT_EQ(a_lines, (std::vector<std::string>{"[a] one", "[a] two", "[a] partial"}));
  supervisor->reset();
  ExpectAllGone(pids);
}

TEST(SupervisorTest, NonZeroExitStopsTheRest) {
  Lines lines;
  const absl::Time start = absl::Now();
  auto supervisor = Supervisor::Start(
      {Sh("a", "sleep 30"), Sh("b", "echo dying; exit 3"), Sh("c", "sleep 30")}, Options(lines));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();

  const JobResult result = (*supervisor)->Wait("", absl::ZeroDuration());
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.summary, "b exited with status 3; stopped the rest");
  ASSERT_EQ(result.exits.size(), 3u);
  EXPECT_EQ(result.exits[1].exit_code, 3);
  EXPECT_FALSE(result.exits[1].stopped_by_supervisor);
  for (int i : {0, 2}) {
    EXPECT_TRUE(result.exits[i].stopped_by_supervisor);
    EXPECT_TRUE(result.exits[i].signaled);
    EXPECT_EQ(result.exits[i].signal, SIGTERM);
  }
  // The child's last words come before the launcher's verdict.
  const int dying = lines.IndexOf("[b] dying");
  const int verdict = lines.IndexOf("[launcher] b exited with status 3; stopping the rest");
  EXPECT_GE(dying, 0);
  EXPECT_GT(verdict, dying);
  supervisor->reset();
  ExpectAllGone(pids);
}

TEST(SupervisorTest, KilledBySignalStopsTheRest) {
  Lines lines;
  auto supervisor =
      Supervisor::Start({Sh("ps:0", "sleep 30"), Sh("worker:1", "kill -9 $$")}, Options(lines));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();

  const JobResult result = (*supervisor)->Wait("", absl::ZeroDuration());
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.summary, "worker:1 was killed by signal 9 (SIGKILL); stopped the rest");
  EXPECT_THAT(lines.Get(),
              Contains("[launcher] worker:1 was killed by signal 9 (SIGKILL); stopping the rest"));
  EXPECT_TRUE(result.exits[1].signaled);
  EXPECT_EQ(result.exits[1].signal, SIGKILL);
  supervisor->reset();
  ExpectAllGone(pids);
}

TEST(SupervisorTest, IgnoringSigtermGetsSigkillAfterTheGrace) {
  Lines lines;
  auto supervisor = Supervisor::Start({Sh("a", "trap '' TERM; echo ready; sleep 30")},
                                      Options(lines, absl::Milliseconds(200)));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();
  ASSERT_TRUE(lines.WaitFor("[a] ready"));

  const absl::Time start = absl::Now();
  (*supervisor)->RequestStop();
  const JobResult result = (*supervisor)->Wait("", absl::ZeroDuration());
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(200));
  EXPECT_LT(took, absl::Seconds(4));
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.summary, "stop requested; a was killed by signal 9 (SIGKILL)");
  EXPECT_THAT(lines.Get(),
              Contains("[launcher] a still running 200ms after SIGTERM; sending SIGKILL"));
  supervisor->reset();
  ExpectAllGone(pids);
}

TEST(SupervisorTest, SecondStopRequestKillsAtOnce) {
  Lines lines;
  auto supervisor = Supervisor::Start({Sh("a", "trap '' TERM; echo ready; sleep 30")},
                                      Options(lines, absl::Seconds(30)));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();
  ASSERT_TRUE(lines.WaitFor("[a] ready"));

  const absl::Time start = absl::Now();
  std::thread stopper([&] {
    (*supervisor)->RequestStop();
    ASSERT_TRUE(
        lines.WaitFor("[launcher] stop requested; stopping a (SIGTERM, then SIGKILL after 30s)"));
    (*supervisor)->RequestStop();
  });
  const JobResult result = (*supervisor)->Wait("", absl::ZeroDuration());
  stopper.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  EXPECT_EQ(result.exits[0].signal, SIGKILL);
  EXPECT_THAT(lines.Get(), Contains("[launcher] stop requested again; sending SIGKILL to a"));
  supervisor->reset();
  ExpectAllGone(pids);
}

TEST(SupervisorTest, PrimaryExitingZeroStopsTheRestAfterItsGrace) {
  Lines lines;
  auto supervisor = Supervisor::Start(
      {Sh("ps:0", "sleep 30"), Sh("chief:0", "echo done"), Sh("worker:0", "exit 0")},
      Options(lines));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();

  const absl::Time start = absl::Now();
  const JobResult result = (*supervisor)->Wait("chief:0", absl::Milliseconds(200));
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(200));
  EXPECT_LT(took, absl::Seconds(4));
  EXPECT_TRUE(result.ok) << result.summary;
  EXPECT_EQ(result.summary, "chief:0 exited 0; stopped ps:0, still running 200ms later");
  EXPECT_TRUE(result.exits[0].stopped_by_supervisor);
  EXPECT_FALSE(result.exits[0].ok());
  EXPECT_TRUE(result.exits[1].ok());
  EXPECT_TRUE(result.exits[2].ok());
  EXPECT_THAT(lines.Get(), Contains("[chief:0] done"));
  EXPECT_THAT(lines.Get(),
              Contains("[launcher] chief:0 exited 0; stopping ps:0, still running 200ms later"));
  supervisor->reset();
  ExpectAllGone(pids);
}

TEST(SupervisorTest, OthersExitingWithinThePrimaryGraceIsAllOk) {
  Lines lines;
  auto supervisor = Supervisor::Start(
      {Sh("chief:0", "exit 0"), Sh("worker:0", "sleep 0.3; exit 0")}, Options(lines));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();

  const absl::Time start = absl::Now();
  const JobResult result = (*supervisor)->Wait("chief:0", absl::Seconds(20));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(result.ok);
  EXPECT_EQ(result.summary, "all 2 processes exited 0");
  EXPECT_FALSE(result.exits[1].stopped_by_supervisor);
  supervisor->reset();
  ExpectAllGone(pids);
}

TEST(SupervisorTest, UnknownPrimaryStopsEverything) {
  Lines lines;
  auto supervisor = Supervisor::Start({Sh("a", "sleep 30")}, Options(lines));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();
  const JobResult result = (*supervisor)->Wait("chief:0", absl::Seconds(1));
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.summary, "no process is named \"chief:0\"; stopped all processes");
  supervisor->reset();
  ExpectAllGone(pids);
}

TEST(SupervisorTest, RequestStopFromAnotherThreadEndsCleanly) {
  Lines lines;
  auto supervisor =
      Supervisor::Start({Sh("a", kExitsOnTerm), Sh("b", kExitsOnTerm)}, Options(lines));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();

  std::thread stopper([&] {
    ASSERT_TRUE(lines.WaitFor("[a] ready"));
    ASSERT_TRUE(lines.WaitFor("[b] ready"));
    (*supervisor)->RequestStop();
  });
  const JobResult result = (*supervisor)->Wait("", absl::ZeroDuration());
  stopper.join();
  EXPECT_TRUE(result.ok) << result.summary;
  EXPECT_EQ(result.summary, "stop requested; all 2 processes exited 0");
  for (const ExitInfo& exit : result.exits) {
    EXPECT_TRUE(exit.ok()) << exit.name << " " << exit.Describe();
    EXPECT_TRUE(exit.stopped_by_supervisor);
  }
  EXPECT_THAT(lines.Get(), Contains("[a] got TERM"));
  EXPECT_THAT(lines.Get(), Contains("[b] got TERM"));
  supervisor->reset();
  ExpectAllGone(pids);
}

void StopHandler(int) { Supervisor::RequestStopFromSignal(); }

TEST(SupervisorTest, RequestStopFromSignalHandler) {
  Lines lines;
  auto supervisor = Supervisor::Start({Sh("a", kExitsOnTerm)}, Options(lines));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();
  ASSERT_TRUE(lines.WaitFor("[a] ready"));

  struct sigaction action = {}, old_action = {};
  action.sa_handler = StopHandler;
  ASSERT_EQ(sigaction(SIGUSR1, &action, &old_action), 0);
  raise(SIGUSR1);
  sigaction(SIGUSR1, &old_action, nullptr);
  const JobResult result = (*supervisor)->Wait("", absl::ZeroDuration());
  EXPECT_TRUE(result.ok) << result.summary;
  EXPECT_THAT(lines.Get(), Contains("[a] got TERM"));
  supervisor->reset();
  ExpectAllGone(pids);
}

TEST(SupervisorTest, MissingExecutableFailsStartAndKillsTheStarted) {
  Lines lines;
  auto supervisor = Supervisor::Start({ProcessSpec{"a", {"/bin/sleep", "30"}, {}},
                                       ProcessSpec{"b", {"/nonexistent/pstrain-x"}, {}}},
                                      Options(lines));
  ASSERT_FALSE(supervisor.ok());
  EXPECT_EQ(supervisor.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(supervisor.status().message(),
            "cannot start b: /nonexistent/pstrain-x: No such file or directory");
  // "a" was killed and reaped: this process has no children left at all.
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(SupervisorTest, InvalidSpecsAreRefused) {
  Lines lines;
  const std::vector<std::vector<ProcessSpec>> bad = {
      {},
      {Sh("a", "true"), Sh("a", "true")},
      {Sh("", "true")},
      {ProcessSpec{"a", {}, {}}},
      {Sh("a", "true", {{"A=B", "c"}})},
  };
  for (const auto& specs : bad) {
    auto supervisor = Supervisor::Start(specs, Options(lines));
    EXPECT_EQ(supervisor.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(SupervisorTest, EnvironmentIsInheritedAndOverridden) {
  Lines lines;
  ASSERT_EQ(setenv("PSTRAIN_TEST_B", "from the parent", 1), 0);
  ASSERT_EQ(setenv("PSTRAIN_TEST_C", "inherited", 1), 0);
  auto supervisor =
      Supervisor::Start({Sh("a", "echo \"$PSTRAIN_TEST_A|$PSTRAIN_TEST_B|$PSTRAIN_TEST_C\"",
                            {{"PSTRAIN_TEST_A", "hello"}, {"PSTRAIN_TEST_B", "world"}})},
                        Options(lines));
  unsetenv("PSTRAIN_TEST_B");
  unsetenv("PSTRAIN_TEST_C");
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();
  EXPECT_TRUE((*supervisor)->Wait("", absl::ZeroDuration()).ok);
  EXPECT_EQ(lines.Get(), std::vector<std::string>{"[a] hello|world|inherited"});
  supervisor->reset();
  ExpectAllGone(pids);
}

TEST(SupervisorTest, HelperHoldingTheOutputPipeDoesNotHangWaitAndIsKilled) {
  Lines lines;
  // The helper keeps the child's stdout open after the child exits 0.
  auto supervisor =
      Supervisor::Start({Sh("a", "sleep 30 & echo \"helper $!\"; echo bye")}, Options(lines));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();
  const absl::Time start = absl::Now();
  const JobResult result = (*supervisor)->Wait("", absl::ZeroDuration());
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  EXPECT_TRUE(result.ok);
  EXPECT_THAT(lines.Get(), Contains("[a] bye"));
  const pid_t helper = HelperPid(lines, "[a] helper ");
  ASSERT_GT(helper, 0);
  EXPECT_TRUE(EventuallyDead(helper));
  supervisor->reset();
  ExpectAllGone(pids);
}

TEST(SupervisorTest, HelperIgnoringSigtermDiesWithItsParent) {
  Lines lines;
  auto supervisor = Supervisor::Start(
      {Sh("a", "(trap '' TERM; exec sleep 30) & echo \"helper $!\"; wait")}, Options(lines));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  const std::vector<pid_t> pids = (*supervisor)->pids();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  pid_t helper = 0;
  while ((helper = HelperPid(lines, "[a] helper ")) == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GT(helper, 0);
  // The shell dies of SIGTERM at once; the helper must not wait for the grace.
  const absl::Time start = absl::Now();
  (*supervisor)->RequestStop();
  const JobResult result = (*supervisor)->Wait("", absl::ZeroDuration());
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  EXPECT_EQ(result.exits[0].signal, SIGTERM);
  EXPECT_TRUE(EventuallyDead(helper));
  supervisor->reset();
  ExpectAllGone(pids);
}

TEST(SupervisorTest, OverlongLineIsCutInsteadOfBuffered) {
  Lines lines;
  auto supervisor =
      Supervisor::Start({Sh("a", "head -c 70000 /dev/zero | tr '\\0' x")}, Options(lines));
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  EXPECT_TRUE((*supervisor)->Wait("", absl::ZeroDuration()).ok);
  EXPECT_EQ(lines.Get(), (std::vector<std::string>{"[a] " + std::string(65536, 'x'),
                                                   "[a] " + std::string(70000 - 65536, 'x')}));
}

TEST(SupervisorTest, ChildrenDieWhenTheLauncherIsKilled) {
  int pid_pipe[2];
  ASSERT_EQ(pipe(pid_pipe), 0);
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    // A stand-in launcher: start a child, report its pid, wait to be killed.
    SupervisorOptions options;
    options.sink = [](std::string_view) {};
    // Not under a shell: the death signal reaches the direct child only.
    auto supervisor =
        Supervisor::Start({ProcessSpec{"a", {"/bin/sleep", "30"}, {}}}, std::move(options));
    const pid_t child = supervisor.ok() ? (*supervisor)->pids()[0] : 0;
    if (write(pid_pipe[1], &child, sizeof(child)) != sizeof(child)) _exit(1);
    for (;;) pause();
  }
  close(pid_pipe[1]);
  pid_t child = 0;
  ASSERT_EQ(read(pid_pipe[0], &child, sizeof(child)), static_cast<ssize_t>(sizeof(child)));
  close(pid_pipe[0]);
  ASSERT_GT(child, 0);
  ASSERT_EQ(kill(child, 0), 0);
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  ASSERT_EQ(waitpid(launcher, nullptr, 0), launcher);
  EXPECT_TRUE(EventuallyDead(child));
}

TEST(SupervisorTest, DestructorStopsEverything) {
  Lines lines;
  std::vector<pid_t> pids;
  const absl::Time start = absl::Now();
  {
    auto supervisor =
        Supervisor::Start({Sh("a", "sleep 30"), Sh("b", kExitsOnTerm)}, Options(lines));
    ASSERT_TRUE(supervisor.ok()) << supervisor.status();
    pids = (*supervisor)->pids();
    ASSERT_TRUE(lines.WaitFor("[b] ready"));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  EXPECT_THAT(lines.Get(), Contains("[b] got TERM"));
  ExpectAllGone(pids);
}

}  // namespace
}  // namespace pstrain
