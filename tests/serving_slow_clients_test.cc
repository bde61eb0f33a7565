// pstrain-serve against slow and hostile clients (issue 25), on loopback with
// raw sockets: stalled uploads and slow-drip headers cost the server a file
// descriptor, not a handler thread, and are cut off at --body_timeout_ms and
// --header_timeout_ms; a client that never reads is closed after
// --write_timeout_ms; a body that is not UTF-8 gets 400 saying so; past
// --max_connections a connection gets 503. Healthy requests are answered
// promptly throughout. The export is mnist_cnn's initial values
// (make_test_export): nothing is trained. Every wait is bounded.
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "tests/http_test_client.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using std::chrono::milliseconds;
using testing_util::Background;
using testing_util::Clock;
using testing_util::Connection;
using testing_util::ErrorNames;
using testing_util::FreePort;
using testing_util::Image;
using testing_util::kTcpEstablished;
using testing_util::Ms;
using testing_util::Percentile;
using testing_util::PredictRequest;
using testing_util::ProcessResult;
using testing_util::ReadAll;
using testing_util::Request;
using testing_util::Response;
using testing_util::RunProcess;
using testing_util::ServerSideState;
using testing_util::StartProcess;
using testing_util::Threads;
using testing_util::WaitProcess;

const std::string kBin = PSTRAIN_BIN_DIR;
const std::string kMakeExport = PSTRAIN_MAKE_TEST_EXPORT;

// The server's limits in these tests: short, so that the tests are quick.
constexpr milliseconds kHeaderTimeout(2000);
constexpr milliseconds kBodyTimeout(3000);
constexpr milliseconds kWriteTimeout(2000);
// How late past a timeout a connection may still be closed (the server's
// timer granularity, a loaded 2-core machine).
constexpr milliseconds kMargin(2000);
// A healthy request is answered within this, whatever the other clients do.
constexpr milliseconds kPrompt(1000);

class ServingSlowClientsTest : public testing_util::ClusterTestBase {
 protected:
  ServingSlowClientsTest() : ClusterTestBase("serving_slow") {}

  void SetUp() override {
    ClusterTestBase::SetUp();
    ProcessResult made = RunProcess({kMakeExport, JoinPath(dir_, "export"), "3"}, 60);
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }

  void TearDown() override {
    if (server_.pid > 0) {
      ::kill(server_.pid, SIGTERM);
      EXPECT_EQ(WaitProcess(&server_, 20), 0) << ReadAll(server_.log_path);
    }
    ClusterTestBase::TearDown();
  }

  // Starts pstrain-serve with the short limits and `flags`, and waits for
  // /healthz.
  testing::AssertionResult StartServer(const std::vector<std::string>& flags) {
    port_ = FreePort();
    std::vector<std::string> args = {kBin + "/pstrain-serve",
                                     "--model_base_path=" + JoinPath(dir_, "export"),
                                     "--model_name=mnist",
                                     "--host=127.0.0.1",
                                     absl::StrCat("--port=", port_),
                                     "--file_system_poll_wait_seconds=0",
                                     absl::StrCat("--header_timeout_ms=", kHeaderTimeout.count()),
                                     absl::StrCat("--body_timeout_ms=", kBodyTimeout.count()),
                                     absl::StrCat("--write_timeout_ms=", kWriteTimeout.count())};
    args.insert(args.end(), flags.begin(), flags.end());
    server_ = StartProcess(args, JoinPath(dir_, "serve.log"));
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      if (Call(Request("GET", "/healthz", ""), milliseconds(1000)).status == 200) {
        return testing::AssertionSuccess();
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    return testing::AssertionFailure() << "pstrain-serve did not answer /healthz in 20 s:\n"
                                       << ReadAll(server_.log_path);
  }

  // `request` on a new connection.
  Response Call(const std::string& request, milliseconds timeout) const {
    return testing_util::Call(port_, request, timeout);
  }

  // A healthy `request` is answered 200 within kPrompt.
  void ExpectPrompt(const std::string& request, const std::string& what) const {
    const auto start = Clock::now();
    const Response r = Call(request, kPrompt + milliseconds(2000));
    const double ms = Ms(Clock::now() - start);
    EXPECT_EQ(r.status, 200) << what << ": " << r.error << r.body;
    EXPECT_LT(ms, kPrompt.count()) << what;
  }

  int port_ = 0;
  Background server_;
};

TEST_F(ServingSlowClientsTest, StalledUploadsDoNotDelayHealthyRequestsAndTimeOut) {
  ASSERT_TRUE(StartServer({}));
  for (int i = 0; i < 5; ++i) ExpectPrompt(PredictRequest(i), "warm-up");
  const int threads_before = Threads(server_.pid);
  ASSERT_GT(threads_before, 0) << "no Threads: in /proc/" << server_.pid << "/status";

  // 256 uploads: the headers of a 100000-byte body, a few bytes of it, then nothing.
  constexpr int kStalled = 256;
  const std::string stall =
      "POST /v1/models/mnist:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"instances\": [[0.5, ";
  std::vector<Connection> stalled(kStalled);
  std::vector<Clock::time_point> stalled_at(kStalled);
  for (int i = 0; i < kStalled; ++i) {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    ASSERT_TRUE(stalled[i].Connect(port_, deadline)) << "stalled upload " << i;
    ASSERT_TRUE(stalled[i].SendAll(stall, deadline)) << "stalled upload " << i;
    stalled_at[i] = Clock::now();
  }

  // 200 healthy predictions from 4 clients, two keep-alive, two on a new
  // connection each; at most 8 s in all (a server stuck on the stalled ones
  // fails here rather than hang).
  constexpr int kClients = 4, kPerClient = 50;
  constexpr milliseconds kLatencyBound = kPrompt;
  const auto stream_deadline = Clock::now() + std::chrono::seconds(8);
  std::vector<std::vector<double>> latencies(kClients);
  std::vector<std::string> failures(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      const bool keep_alive = c % 2 == 0;
      Connection conn;
      for (int i = 0; i < kPerClient && Clock::now() < stream_deadline; ++i) {
        const auto start = Clock::now();
        const auto deadline = std::min(stream_deadline, start + milliseconds(3000));
        Response r;
        if (!conn.open() && !conn.Connect(port_, deadline)) {
          r.error = "cannot connect";
        } else if (!conn.SendAll(PredictRequest(i, keep_alive), deadline)) {
          r.error = "cannot send";
        } else {
          r = conn.ReadResponse(deadline);
        }
        if (r.status == 200) {
          latencies[c].push_back(Ms(Clock::now() - start));
        } else if (failures[c].empty()) {
          failures[c] = absl::StrCat("status ", r.status, " ", r.error, r.body);
        }
        if (!keep_alive || r.closed || r.status != 200) conn.Close();
      }
    });
  }
  for (std::thread& t : clients) t.join();
  const auto stream_end = Clock::now();
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  const double p50 = Percentile(all, 0.5), p99 = Percentile(all, 0.99);
  std::printf(
      "healthy predictions beside %d stalled uploads: %zu of %d answered 200, "
      "p50 %.1f ms, p99 %.1f ms (bound %lld ms), in %.0f ms\n",
      kStalled, all.size(), kClients * kPerClient, p50, p99,
      static_cast<long long>(kLatencyBound.count()), Ms(stream_end - stalled_at.back()));
  EXPECT_EQ(all.size(), static_cast<size_t>(kClients * kPerClient))
      << "first failure: " << absl::StrJoin(failures, " | ");
  EXPECT_LT(p99, kLatencyBound.count());
  const int threads_during = Threads(server_.pid);
  EXPECT_LT(threads_during - threads_before, kStalled / 8)
      << "threads " << threads_before << " -> " << threads_during;
  // The healthy stream ran while every upload was still stalled: none was
  // answered or closed before its body timeout.
  if (stream_end < stalled_at.front() + kBodyTimeout) {
    int open = 0;
    for (Connection& s : stalled) open += !s.Wait(POLLIN, Clock::now());
    EXPECT_EQ(open, kStalled) << "uploads answered or closed before --body_timeout_ms";
  }

  // Each stalled upload is answered 408 (or just closed) by its body timeout
  // plus the margin.
  std::vector<std::optional<Clock::time_point>> closed_at(kStalled);
  const auto wait_deadline = stalled_at.back() + kBodyTimeout + kMargin;
  int open = kStalled;
  while (open > 0) {
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (int i = 0; i < kStalled; ++i) {
      if (closed_at[i]) continue;
      fds.push_back({stalled[i].fd(), POLLIN, 0});
      which.push_back(i);
    }
    const int64_t left =
        std::max<int64_t>(0, std::chrono::ceil<milliseconds>(wait_deadline - Clock::now()).count());
    if (::poll(fds.data(), fds.size(), static_cast<int>(left)) <= 0) break;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0 || stalled[which[k]].ReadAvailable()) continue;
      closed_at[which[k]] = Clock::now();
      --open;
    }
  }
  int late = 0, not_408 = 0;
  std::string example;
  for (int i = 0; i < kStalled; ++i) {
    if (!closed_at[i] || *closed_at[i] > stalled_at[i] + kBodyTimeout + kMargin) ++late;
    const std::string& got = stalled[i].received();
    if (!got.empty() && !absl::StartsWith(got, "HTTP/1.1 408")) {
      ++not_408;
      example = got.substr(0, 200);
    }
  }
  EXPECT_EQ(late, 0) << "of " << kStalled << " stalled uploads, not closed within "
                     << (kBodyTimeout + kMargin).count() << " ms";
  EXPECT_EQ(not_408, 0) << "answered other than 408, e.g. " << example;
  stalled.clear();
  ExpectPrompt(PredictRequest(7), "after the stalled uploads");
}

TEST_F(ServingSlowClientsTest, SlowDripHeadersAreCutOffAtTheHeaderTimeout) {
  ASSERT_TRUE(StartServer({}));
  ExpectPrompt(PredictRequest(1), "warm-up");
  // 32 clients (more than a thread-per-connection server's usual pool), each
  // sending a byte of its headers every 200 ms: 10 bytes by the timeout, of
  // headers that would take a minute.
  constexpr int kDrippers = 32;
  constexpr milliseconds kTick(200);
  const std::string text =
      absl::StrCat("POST /v1/models/mnist:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
                   std::string(300, 'a'), "\r\nContent-Length: 2\r\n\r\n{}");
  std::vector<Connection> drips(kDrippers);
  std::vector<Clock::time_point> connected_at(kDrippers);
  std::vector<std::optional<Clock::time_point>> closed_at(kDrippers);
  std::vector<size_t> sent(kDrippers, 0);
  for (int i = 0; i < kDrippers; ++i) {
    ASSERT_TRUE(drips[i].Connect(port_, Clock::now() + std::chrono::seconds(5))) << i;
    connected_at[i] = Clock::now();
  }
  const auto deadline = connected_at.back() + kHeaderTimeout + kMargin;
  std::thread healthy;
  double healthy_ms = -1;
  Response healthy_response;
  int open = kDrippers;
  for (int tick = 0; open > 0 && Clock::now() < deadline; ++tick) {
    for (int i = 0; i < kDrippers; ++i) {
      if (closed_at[i]) continue;
      // What the server sent (a 408), or its close.
      bool closed = !drips[i].ReadAvailable();
      if (!closed && sent[i] < text.size()) {
        const ssize_t n = drips[i].SendSome(std::string_view(text).substr(sent[i], 1));
        closed = n < 0;
        sent[i] += std::max<ssize_t>(n, 0);
      }
      if (closed) {
        closed_at[i] = Clock::now();
        --open;
      }
    }
    if (tick == 3) {  // a healthy request while they drip
      healthy = std::thread([&] {
        const auto start = Clock::now();
        healthy_response = Call(PredictRequest(2), kPrompt + milliseconds(2000));
        healthy_ms = Ms(Clock::now() - start);
      });
    }
    std::this_thread::sleep_for(kTick);
  }
  if (healthy.joinable()) healthy.join();
  EXPECT_EQ(healthy_response.status, 200) << healthy_response.error << healthy_response.body;
  EXPECT_LT(healthy_ms, kPrompt.count())
      << "a healthy request beside " << kDrippers << " slow-drip clients";
  int late = 0, not_408 = 0;
  std::string example;
  double slowest = 0;
  for (int i = 0; i < kDrippers; ++i) {
    if (closed_at[i]) slowest = std::max(slowest, Ms(*closed_at[i] - connected_at[i]));
    if (!closed_at[i] || *closed_at[i] > connected_at[i] + kHeaderTimeout + kMargin) ++late;
    const std::string& got = drips[i].received();
    if (!got.empty() && !absl::StartsWith(got, "HTTP/1.1 408")) {
      ++not_408;
      example = got.substr(0, 200);
    }
  }
  std::printf(
      "slow-drip clients: %d of %d closed, the last after %.0f ms; healthy request %.1f ms\n",
      kDrippers - open, kDrippers, slowest, healthy_ms);
  EXPECT_EQ(late, 0) << "of " << kDrippers << " slow-drip clients, not closed within "
                     << (kHeaderTimeout + kMargin).count() << " ms";
  EXPECT_EQ(not_408, 0) << "answered other than 408, e.g. " << example;
}

TEST_F(ServingSlowClientsTest, ClientsThatNeverReadAreClosedAfterTheWriteTimeout) {
  // Pipelined requests on one connection are not cut off by the request limit.
  ASSERT_TRUE(StartServer({"--keep_alive_max_requests=1000000"}));
  for (int i = 0; i < 3; ++i) ExpectPrompt(PredictRequest(i), "warm-up");
  const int threads_before = Threads(server_.pid);
  ASSERT_GT(threads_before, 0) << "no Threads: in /proc/" << server_.pid << "/status";

  // 8 clients with a small receive window each pipeline 12000 metadata
  // requests (~10 MB of answers, more than the socket buffers hold) and
  // never read.
  constexpr int kReaders = 8, kPipelined = 12000;
  const std::string one = Request("GET", "/v1/models/mnist/metadata", "");
  std::string pipelined;
  for (int i = 0; i < kPipelined; ++i) pipelined += one;
  std::vector<Connection> readers(kReaders);
  std::vector<size_t> sent(kReaders, 0);
  for (int i = 0; i < kReaders; ++i) {
    ASSERT_TRUE(readers[i].Connect(port_, Clock::now() + std::chrono::seconds(5), 4096)) << i;
  }
  // Whether the server has closed its end shows only on its side (an
  // orderly close waits behind the unread answers): /proc/net/tcp.
  if (ServerSideState(port_, readers[0].local_port()) != kTcpEstablished) {
    GTEST_SKIP() << "the server's end of a loopback connection is not in /proc/net/tcp";
  }
  // Push until everything is sent or no socket takes more for 300 ms (at most 5 s).
  const auto push_deadline = Clock::now() + std::chrono::seconds(5);
  auto last_progress = Clock::now();
  while (Clock::now() < push_deadline && Clock::now() < last_progress + milliseconds(300)) {
    bool all_sent = true;
    for (int i = 0; i < kReaders; ++i) {
      if (sent[i] == pipelined.size()) continue;
      const ssize_t n = readers[i].SendSome(std::string_view(pipelined).substr(sent[i]));
      if (n < 0) {  // closed already
        sent[i] = pipelined.size();
        continue;
      }
      if (n > 0) last_progress = Clock::now();
      sent[i] += n;
      all_sent = all_sent && sent[i] == pipelined.size();
    }
    if (all_sent) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  const auto stalled_at = Clock::now();
  // The server's ends of them that are still open.
  auto still_open = [&] {
    int open = 0;
    for (Connection& r : readers) {
      open += ServerSideState(port_, r.local_port()) == kTcpEstablished;
    }
    return open;
  };

  // Meanwhile the server answers others promptly, without a thread per
  // stalled client; halfway through the write timeout it has closed none.
  int threads_max = Threads(server_.pid), open_halfway = -1;
  for (int k = 0; Clock::now() < stalled_at + kWriteTimeout + kMargin; ++k) {
    if (open_halfway < 0 && Clock::now() >= stalled_at + kWriteTimeout / 2) {
      open_halfway = still_open();
    }
    ExpectPrompt(Request("GET", "/healthz", ""), "/healthz beside clients that do not read");
    if (k % 2 == 0) ExpectPrompt(PredictRequest(k), "a prediction beside clients that do not read");
    threads_max = std::max(threads_max, Threads(server_.pid));
    std::this_thread::sleep_for(milliseconds(250));
  }
  // A response's write timeout runs from when the server started writing it,
  // which is later than the client stalled when the server is still working
  // through the pipelined requests of the others (the suite runs two tests at
  // once on 2 cores: CI saw 4 of 8 still open at 4 s): give it a bounded while
  // more, and say how long it took.
  int open_after = still_open();
  const auto close_deadline = stalled_at + kWriteTimeout + kMargin + std::chrono::seconds(8);
  while (open_after > 0 && Clock::now() < close_deadline) {
    std::this_thread::sleep_for(milliseconds(100));
    open_after = still_open();
  }
  const auto closed_by =
      std::chrono::duration_cast<milliseconds>(Clock::now() - stalled_at).count();
  std::printf("clients that do not read: %d of %d open after %lld ms, %d after %lld ms\n",
              open_halfway, kReaders, static_cast<long long>(kWriteTimeout.count() / 2), open_after,
              static_cast<long long>(closed_by));
  EXPECT_EQ(open_halfway, kReaders) << "closed before half of --write_timeout_ms";
  EXPECT_EQ(open_after, 0) << "of " << kReaders << " clients that do not read, still open after "
                           << closed_by << " ms";
  EXPECT_LT(threads_max - threads_before, kReaders)
      << "threads " << threads_before << " -> " << threads_max;
  readers.clear();
  ExpectPrompt(Request("GET", "/healthz", ""), "/healthz after them");
}

TEST_F(ServingSlowClientsTest, BodiesThatAreNotUtf8Get400SayingSo) {
  ASSERT_TRUE(StartServer({}));
  const std::string json = absl::StrCat("{\"instances\": [", Image(1), "]}");
  // UTF-16LE with its byte-order mark.
  std::string utf16 = "\xFF\xFE";
  for (char c : json) utf16 += {c, '\0'};
  const Response r16 = Call(Request("POST", "/v1/models/mnist:predict", utf16), milliseconds(5000));
  EXPECT_EQ(r16.status, 400) << r16.error << r16.body;
  EXPECT_TRUE(ErrorNames(r16.body, "UTF-8")) << r16.body;
  EXPECT_TRUE(ErrorNames(r16.body, "UTF-16")) << r16.body;
  // Latin-1: "café" with é as the single byte E9.
  const std::string latin1 = absl::StrCat("{\"instances\": [", Image(1), "], \"x\": \"caf\xE9\"}");
  const Response r1 = Call(Request("POST", "/v1/models/mnist:predict", latin1), milliseconds(5000));
  EXPECT_EQ(r1.status, 400) << r1.error << r1.body;
  EXPECT_TRUE(ErrorNames(r1.body, "UTF-8")) << r1.body;
  ExpectPrompt(PredictRequest(1), "after the bodies that are not UTF-8");
}

TEST_F(ServingSlowClientsTest, ConnectionsPastTheLimitGet503) {
  constexpr int kLimit = 8;
  ASSERT_TRUE(
      StartServer({absl::StrCat("--max_connections=", kLimit), "--keep_alive_timeout_ms=30000"}));
  // kLimit connections, each answered once and kept open (keep-alive).
  std::vector<Connection> kept(kLimit);
  for (int i = 0; i < kLimit; ++i) {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    ASSERT_TRUE(kept[i].Connect(port_, deadline)) << i;
    ASSERT_TRUE(kept[i].SendAll(Request("GET", "/healthz", ""), deadline)) << i;
    const Response r = kept[i].ReadResponse(deadline);
    ASSERT_EQ(r.status, 200) << i << ": " << r.error << r.body;
  }
  // One more: 503 with a JSON error, then the close. (The server may answer
  // at once, before any request: listen first, then ask.)
  Connection extra;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  ASSERT_TRUE(extra.Connect(port_, deadline));
  if (!extra.Wait(POLLIN, Clock::now() + milliseconds(500))) {
    extra.SendAll(Request("GET", "/healthz", ""), deadline);
  }
  const Response refused = extra.ReadResponse(deadline);
  EXPECT_EQ(refused.status, 503) << refused.error << refused.body;
  if (refused.status == 503) {
    EXPECT_TRUE(ErrorNames(refused.body, "")) << refused.body;
    EXPECT_TRUE(refused.closed || extra.ReadUntilClosed(Clock::now() + milliseconds(2000)))
        << "the refused connection stays open";
  }
  extra.Close();
  // The kept ones are still served.
  deadline = Clock::now() + std::chrono::seconds(5);
  ASSERT_TRUE(kept[1].SendAll(Request("GET", "/healthz", ""), deadline));
  EXPECT_EQ(kept[1].ReadResponse(deadline).status, 200);
  // Once one closes, a new connection is served (the server sees the close
  // a little later: a few tries, at most 3 s).
  kept[0].Close();
  Response again;
  for (const auto until = Clock::now() + milliseconds(3000);
       again.status != 200 && Clock::now() < until;) {
    again = Call(Request("GET", "/healthz", ""), milliseconds(1000));
    if (again.status != 200) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(again.status, 200) << again.error << again.body;
}

}  // namespace
}  // namespace pstrain
