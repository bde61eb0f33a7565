// PsClient (and GrpcParameterServers) against a fake ps (fake_ps.h): a gRPC
// ParameterServer in this process whose answers each test scripts (the
// status, how late, and in which order the chunks are answered), to check
// what the client does when a ps is unavailable, slow, or answers the chunks
// of a step out of order. tests/ps_rpc_test.cc runs the client against the
// real ps.
#include "rpc/ps_client.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_protocol/shard_layout.h"
#include "rpc/grpc_parameter_servers.h"
#include "rpc/testing/fake_ps.h"

namespace pstrain {
namespace {

using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::Answer;
using testing_util::FakePs;
using testing_util::Grad;
using testing_util::Ok;
using testing_util::SeenCall;
using testing_util::Stat;
using testing_util::StateValue;
using testing_util::Unavailable;
using testing_util::Value;

// Four chunks over two ps, two on each, of unequal sizes (140000, 150000,
// 140000, 150000 values: layers must be large for the layout not to merge
// them), so a chunk's answer written at another chunk's offset shows.
constexpr int64_t kNumParams = 580000;
constexpr int64_t kNumState = 3;

const ShardLayout& TestLayout() {
  static const ShardLayout* layout = new ShardLayout(
      ComputeShardLayout(kNumParams, kNumState, {0, 140000, 290000, 430000}, /*num_ps=*/2));
  return *layout;
}

// Whether `params` and `state` hold every chunk's values of `round`, each
// chunk at its own offset.
AssertionResult HoldsRound(const float* params, const float* state, int round) {
  for (int64_t i = 0; i < kNumParams; ++i) {
    if (params[i] != Value(i, round)) {
      return AssertionFailure() << "params[" << i << "] = " << params[i] << ", expected "
                                << Value(i, round) << " (round " << round << ")";
    }
  }
  for (int64_t k = 0; k < kNumState; ++k) {
    if (state[k] != StateValue(k, round)) {
      return AssertionFailure() << "state[" << k << "] = " << state[k] << ", expected "
                                << StateValue(k, round) << " (round " << round << ")";
    }
  }
  return AssertionSuccess();
}

class FakePsTest : public ::testing::Test {
 protected:
  FakePsTest() : fake_(TestLayout()), grads_(kNumParams), stats_(kNumState) {
    for (int64_t i = 0; i < kNumParams; ++i) grads_[i] = Grad(i);
    for (int64_t k = 0; k < kNumState; ++k) stats_[k] = Stat(k);
  }

  void SetUp() override {
    ASSERT_TRUE(fake_.started());
    // The layout the tests rely on: chunks 0 and 1 on ps 0, 2 and 3 on ps 1.
    const auto& chunks = TestLayout().chunks;
    ASSERT_EQ(chunks.size(), 4u);
    const int64_t begins[] = {0, 140000, 290000, 430000, kNumParams};
    for (int c = 0; c < 4; ++c) {
      EXPECT_EQ(chunks[c].ps, c / 2);
      EXPECT_EQ(chunks[c].begin, begins[c]);
      EXPECT_EQ(chunks[c].end, begins[c + 1]);
    }
    ASSERT_EQ(chunks[0].state, kNumState);
  }

  PsClientOptions Options() const {
    PsClientOptions o;
    o.ps_addresses = fake_.addresses();
    o.layout = TestLayout();
    o.replica = 0;
    o.rpc_timeout = absl::Seconds(5);
    o.retry_budget = absl::Seconds(5);
    o.consistent_pull_wait = absl::Seconds(2);
    // These tests check a push as a whole (Push returns once every chunk
    // has answered); the overlap tests below turn it on.
    o.overlap_pull = false;
    return o;
  }

  std::unique_ptr<PsClient> Client(const PsClientOptions& o) {
    auto client = PsClient::Create(o);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  absl::StatusOr<PushOutcome> Push(PsClient& client, int64_t step) {
    return client.Push(step, grads_.data(), stats_.data());
  }

  FakePs fake_;
  std::vector<float> grads_;
  std::vector<float> stats_;
};

using PsClientFakePsTest = FakePsTest;
using GrpcParameterServersFakePsTest = FakePsTest;

// --- A ps that answers UNAVAILABLE ---

TEST_F(PsClientFakePsTest, PushRetriesAnUnavailableChunkWithBackoffUntilItAnswers) {
  // Chunk 2 (on ps 1) is unavailable for its first 4 calls of the first step
  // and for the first call of the second; the other chunks answer at once.
  fake_.SetScript([](const SeenCall& call) {
    if (call.chunk == 2 && (call.attempt < 4 || call.attempt == 5)) return Unavailable();
    const int step = call.chunk == 2 ? (call.attempt < 5 ? 1 : 2) : call.attempt + 1;
    return Ok(step, step);
  });
  auto client = Client(Options());
  ASSERT_NE(client, nullptr);

  auto outcome = Push(*client, 0);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->global_step, 1);
  // Only the unavailable chunk was sent again, every time with the same
  // step, replica and gradients (the ps counts a retried (replica, step)
  // once, so the retry must be the same push).
  EXPECT_EQ(fake_.CountChunk("PushPull", 2), 5);
  for (int c : {0, 1, 3}) EXPECT_EQ(fake_.CountChunk("PushPull", c), 1) << "chunk " << c;
  std::vector<absl::Time> arrivals;  // chunk 2's calls
  for (const SeenCall& call : fake_.Calls("PushPull")) {
    EXPECT_EQ(call.step, 0) << "chunk " << call.chunk << " attempt " << call.attempt;
    EXPECT_EQ(call.replica, 0);
    EXPECT_TRUE(call.gradients_ok) << "chunk " << call.chunk << " attempt " << call.attempt;
    EXPECT_TRUE(call.batch_stats_ok) << "chunk " << call.chunk << " attempt " << call.attempt;
    if (call.chunk == 2) arrivals.push_back(call.arrived);
  }
  // With exponential backoff (50, 100, 200, 400 ms between the calls), not a
  // busy loop: each retry waits at least its backoff after the failure.
  ASSERT_EQ(arrivals.size(), 5u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_GE(arrivals[k + 1] - arrivals[k], absl::Milliseconds(50 << k) - absl::Milliseconds(1))
        << "before retry " << k + 1;
  }
  auto view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(HoldsRound(view->params, view->state, 1));

  // The next step starts again from the shortest backoff (50 ms, not 800).
  outcome = Push(*client, 1);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->global_step, 2);
  const std::vector<SeenCall> calls = fake_.Calls("PushPull");
  std::vector<absl::Time> second;  // chunk 2's calls of the second step
  for (const SeenCall& call : calls) {
    if (call.chunk == 2 && call.attempt >= 5) second.push_back(call.arrived);
  }
  ASSERT_EQ(second.size(), 2u);
  EXPECT_GE(second[1] - second[0], absl::Milliseconds(49));
  EXPECT_LT(second[1] - second[0], absl::Milliseconds(750));
  view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(HoldsRound(view->params, view->state, 2));
  EXPECT_TRUE(fake_.Calls("Pull").empty());  // the pushes brought the parameters back
}

TEST_F(PsClientFakePsTest, PushGivesUpOnAPsThatStaysUnavailableWithinTheRetryBudget) {
  fake_.SetScript([](const SeenCall& call) { return call.ps == 1 ? Unavailable() : Ok(1, 1); });
  PsClientOptions o = Options();
  o.retry_budget = absl::Seconds(2);
  auto client = Client(o);
  ASSERT_NE(client, nullptr);

  const absl::Time start = absl::Now();
  auto outcome = Push(*client, 0);
  const absl::Duration elapsed = absl::Now() - start;
  ASSERT_FALSE(outcome.ok());
  EXPECT_TRUE(absl::IsUnavailable(outcome.status())) << outcome.status();
  // Names the call, the ps that did not answer (task and address), and why.
  const std::string message(outcome.status().message());
  EXPECT_THAT(message, HasSubstr("PushPull to ps 1 at " + fake_.addresses()[1]));
  EXPECT_THAT(message, HasSubstr("the fake ps is starting"));
  EXPECT_THAT(message, HasSubstr("gave up after retrying for 2s"));
  EXPECT_EQ(message.find(fake_.addresses()[0]), std::string::npos) << message;
  // Retried with doubling backoff for about the budget: a retry is only
  // given up when its backoff would end past the budget, and the backoff is
  // never longer than the time already spent, so at least half the budget
  // went by (however slow the calls); and not much more than the budget.
  // About 6 calls (at 0, 50, 150, 350, 750, 1550 ms), not a busy loop.
  EXPECT_GE(elapsed, absl::Milliseconds(900));
  EXPECT_LT(elapsed, absl::Seconds(4));
  for (int c : {2, 3}) {
    const int attempts = fake_.CountChunk("PushPull", c);
    EXPECT_GE(attempts, 2) << "chunk " << c;
    EXPECT_LE(attempts, 8) << "chunk " << c;
  }
  for (int c : {0, 1}) EXPECT_EQ(fake_.CountChunk("PushPull", c), 1) << "chunk " << c;

  // The error is the step's, not the client's: once ps 1 is back, the next
  // push goes through.
  fake_.SetScript([](const SeenCall&) { return Ok(2, 2); });
  outcome = Push(*client, 0);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->global_step, 2);
  auto view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(HoldsRound(view->params, view->state, 2));
}

TEST_F(PsClientFakePsTest, PullRetriesOnlyTheUnavailableChunk) {
  fake_.SetScript([](const SeenCall& call) {
    return call.chunk == 1 && call.attempt < 2 ? Unavailable() : Ok(0, 4);
  });
  auto client = Client(Options());
  ASSERT_NE(client, nullptr);
  const absl::Time start = absl::Now();
  auto view = client->Pull();
  const absl::Duration elapsed = absl::Now() - start;
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(HoldsRound(view->params, view->state, 0));
  EXPECT_EQ(view->global_step, 4);
  EXPECT_EQ(fake_.CountChunk("Pull", 1), 3);
  for (int c : {0, 2, 3}) EXPECT_EQ(fake_.CountChunk("Pull", c), 1) << "chunk " << c;
  EXPECT_GE(elapsed, absl::Milliseconds(145));  // backoff 50 + 100 ms
  EXPECT_LT(elapsed, absl::Seconds(3));
}

TEST_F(PsClientFakePsTest, PullGivesUpOnAChunkThatStaysUnavailableWithinTheRetryBudget) {
  fake_.SetScript([](const SeenCall& call) { return call.chunk == 2 ? Unavailable() : Ok(0, 4); });
  PsClientOptions o = Options();
  o.retry_budget = absl::Seconds(2);
  auto client = Client(o);
  ASSERT_NE(client, nullptr);
  const absl::Time start = absl::Now();
  auto view = client->Pull();
  const absl::Duration elapsed = absl::Now() - start;
  ASSERT_FALSE(view.ok());
  EXPECT_TRUE(absl::IsUnavailable(view.status())) << view.status();
  // A pull's error names the ps task and the chunk (not the address).
  const std::string message(view.status().message());
  EXPECT_THAT(message, HasSubstr("Pull to ps 1 (chunk 2)"));
  EXPECT_THAT(message, HasSubstr("the fake ps is starting"));
  EXPECT_THAT(message, HasSubstr("gave up after retrying for 2s"));
  EXPECT_GE(elapsed, absl::Milliseconds(900));  // as for a push, above
  EXPECT_LT(elapsed, absl::Seconds(4));
  EXPECT_GE(fake_.CountChunk("Pull", 2), 2);
  EXPECT_LE(fake_.CountChunk("Pull", 2), 8);
  for (int c : {0, 1, 3}) EXPECT_EQ(fake_.CountChunk("Pull", c), 1) << "chunk " << c;
}

// --- A slow ps ---

TEST_F(PsClientFakePsTest, PushToAPsSlowerThanTheDeadlineIsDeadlineExceeded) {
  // Chunk 1 would be answered after 5 s (the fake drops it at the end of the
  // test); the deadline is 1 s.
  fake_.SetScript([](const SeenCall& call) {
    Answer a = Ok(1, 1);
    if (call.chunk == 1) a.delay = absl::Seconds(5);
    return a;
  });
  PsClientOptions o = Options();
  o.rpc_timeout = absl::Seconds(1);
  auto client = Client(o);
  ASSERT_NE(client, nullptr);
  const absl::Time start = absl::Now();
  auto outcome = Push(*client, 0);
  const absl::Duration elapsed = absl::Now() - start;
  ASSERT_FALSE(outcome.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(outcome.status())) << outcome.status();
  const std::string message(outcome.status().message());
  EXPECT_THAT(message, HasSubstr("PushPull to ps 0 at " + fake_.addresses()[0] + " (chunk 1)"));
  EXPECT_THAT(message, Not(HasSubstr("gave up after retrying"))) << message;
  EXPECT_GE(elapsed, absl::Milliseconds(990));
  EXPECT_LT(elapsed, absl::Seconds(3));  // not the 5 s answer
  // Only UNAVAILABLE is retried: a ps that is this slow is not asked again.
  EXPECT_EQ(fake_.CountChunk("PushPull", 1), 1);
}

TEST_F(PsClientFakePsTest, PullFromAPsSlowerThanTheDeadlineIsDeadlineExceeded) {
  fake_.SetScript([](const SeenCall& call) {
    Answer a = Ok(0, 1);
    if (call.chunk == 3) a.delay = absl::Seconds(5);
    return a;
  });
  PsClientOptions o = Options();
  o.rpc_timeout = absl::Seconds(1);
  auto client = Client(o);
  ASSERT_NE(client, nullptr);
  const absl::Time start = absl::Now();
  auto view = client->Pull();
  const absl::Duration elapsed = absl::Now() - start;
  ASSERT_FALSE(view.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(view.status())) << view.status();
  EXPECT_THAT(std::string(view.status().message()), HasSubstr("Pull to ps 1 (chunk 3)"));
  EXPECT_GE(elapsed, absl::Milliseconds(990));
  EXPECT_LT(elapsed, absl::Seconds(3));
  EXPECT_EQ(fake_.CountChunk("Pull", 3), 1);
}

TEST_F(PsClientFakePsTest, APsSlowButWithinTheDeadlineIsWaitedFor) {
  // Every call answered after 400 ms, within the 3 s deadline. (That the
  // chunks are in flight at once, not one after another, the out-of-order
  // tests below check without timing: there a chunk's answer waits for
  // another chunk's.)
  fake_.SetScript([](const SeenCall& call) {
    Answer a = call.method == "Pull" ? Ok(0, 3) : Ok(1, 4);
    a.delay = absl::Milliseconds(400);
    return a;
  });
  PsClientOptions o = Options();
  o.rpc_timeout = absl::Seconds(3);
  auto client = Client(o);
  ASSERT_NE(client, nullptr);
  auto view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(HoldsRound(view->params, view->state, 0));
  EXPECT_EQ(view->global_step, 3);
  const absl::Time start = absl::Now();
  auto outcome = Push(*client, 3);
  const absl::Duration elapsed = absl::Now() - start;
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->global_step, 4);
  EXPECT_GE(elapsed, absl::Milliseconds(390));
  view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(HoldsRound(view->params, view->state, 1));
  for (int c = 0; c < 4; ++c) EXPECT_EQ(fake_.CountChunk("PushPull", c), 1) << "chunk " << c;
}

// --- Chunks answered out of order ---

// Async: a view's step, and a push's, is the lowest chunk's, and the job is
// done only when every chunk says so (one chunk ahead of the others, as a
// replica killed mid-push leaves them, still owes the others their last
// pushes); each chunk's next push carries that chunk's own step and
// generation, as its last answer gave them.
TEST_F(PsClientFakePsTest, ChunksAnsweredOutOfOrderLandAtTheirOffsets) {
  static constexpr int64_t kPullSteps[4] = {5, 3, 9, 7};
  static constexpr int64_t kPushSteps[2][4] = {{11, 14, 10, 12}, {21, 24, 20, 22}};
  // Pushes go out last chunk first (3, 2, 1, 0); they are answered in the
  // order 2, 0, 1, 3: kPushPosition[c] is chunk c's place in it.
  static constexpr int kPushPosition[4] = {1, 2, 0, 3};
  fake_.SetScript([](const SeenCall& call) {
    Answer a;
    if (call.method == "Pull") {
      // Pulls go out in chunk order; answered 2 and 3, then 1, then 0.
      a = Ok(0, kPullSteps[call.chunk], 700 + call.chunk);
      a.after_answered = call.chunk == 0 ? 3 : call.chunk == 1 ? 2 : 0;
    } else if (call.method == "PushPull" && call.attempt < 2) {
      a = Ok(1 + call.attempt, kPushSteps[call.attempt][call.chunk],
             800 + 10 * call.attempt + call.chunk);
      a.after_answered = 4 * call.attempt + kPushPosition[call.chunk];
      // The second push: chunk 0 (answered second) says stale, chunk 2
      // (answered first) that the job is done; later answers say neither.
      a.stale = call.attempt == 1 && call.chunk == 0;
      a.job_done = call.attempt == 1 && call.chunk == 2;
    }
    return a;
  });
  auto client = Client(Options());
  ASSERT_NE(client, nullptr);

  auto view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(fake_.AnswerOrder("Pull", 4).back(), 0);
  EXPECT_TRUE(HoldsRound(view->params, view->state, 0));
  EXPECT_EQ(view->global_step, 3);  // of steps 5, 3, 9, 7
  EXPECT_FALSE(view->job_done);

  client->ReportProgress(2.5, 32);
  auto outcome = Push(*client, view->global_step);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(fake_.AnswerOrder("PushPull", 4), (std::vector<int>{2, 0, 1, 3}));
  EXPECT_EQ(outcome->global_step, 10);  // of 11, 14, 10, 12
  EXPECT_FALSE(outcome->stale);
  EXPECT_FALSE(outcome->job_done);
  std::vector<SeenCall> pushes = fake_.Calls("PushPull");
  ASSERT_EQ(pushes.size(), 4u);
  for (const SeenCall& call : pushes) {
    const int c = call.chunk;
    EXPECT_EQ(call.step, kPullSteps[c]) << "chunk " << c;
    EXPECT_EQ(call.generation, 700 + c) << "chunk " << c;
    EXPECT_TRUE(call.gradients_ok) << "chunk " << c;
    EXPECT_TRUE(call.batch_stats_ok) << "chunk " << c;
    // The progress rides on chunk 0's push only.
    EXPECT_EQ(call.loss_sum, c == 0 ? 2.5 : 0) << "chunk " << c;
    EXPECT_EQ(call.loss_batches, c == 0 ? 1 : 0) << "chunk " << c;
    EXPECT_EQ(call.examples, c == 0 ? 32 : 0) << "chunk " << c;
  }

  // The answers are the next view: no pull goes out.
  view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(fake_.Calls("Pull").size(), 4u);
  EXPECT_TRUE(HoldsRound(view->params, view->state, 1));
  EXPECT_EQ(view->global_step, 10);

  outcome = Push(*client, view->global_step);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(fake_.AnswerOrder("PushPull", 8), (std::vector<int>{2, 0, 1, 3, 2, 0, 1, 3}));
  EXPECT_EQ(outcome->global_step, 20);  // of 21, 24, 20, 22
  EXPECT_TRUE(outcome->stale);
  EXPECT_FALSE(outcome->job_done);  // chunk 2 alone says so
  pushes = fake_.Calls("PushPull");
  ASSERT_EQ(pushes.size(), 8u);
  for (size_t k = 4; k < pushes.size(); ++k) {
    const int c = pushes[k].chunk;
    EXPECT_EQ(pushes[k].attempt, 1);
    EXPECT_EQ(pushes[k].step, kPushSteps[0][c]) << "chunk " << c;
    EXPECT_EQ(pushes[k].generation, 800 + c) << "chunk " << c;
    EXPECT_EQ(pushes[k].loss_batches, 0) << "chunk " << c;  // reported once
  }
  view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(HoldsRound(view->params, view->state, 2));
  EXPECT_EQ(view->global_step, 20);
  EXPECT_FALSE(view->job_done);
}

// Async: the job is done for a replica once every chunk says so.
TEST_F(PsClientFakePsTest, AsyncJobIsDoneWhenEveryChunkSaysSo) {
  fake_.SetScript([](const SeenCall& call) {
    Answer a = Ok(0, call.method == "Pull" ? 99 + (call.chunk > 0) : 100, 1);
    // The pull: chunks 1-3 at train_steps (done), chunk 0 a step behind.
    a.job_done = call.method == "Pull" ? call.chunk > 0 : true;
    return a;
  });
  auto client = Client(Options());
  ASSERT_NE(client, nullptr);
  auto view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->global_step, 99);
  EXPECT_FALSE(view->job_done);
  auto outcome = Push(*client, view->global_step);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->global_step, 100);
  EXPECT_TRUE(outcome->job_done);
}

// Sync: a view's step, and a push's, is the lowest chunk step; every chunk
// pushes at the step of the view.
TEST_F(PsClientFakePsTest, SyncStepIsTheLowestChunkStepWhateverTheAnswerOrder) {
  static constexpr int64_t kPullSteps[4] = {5, 3, 9, 7};
  // Answered 2, 0, 1, 3: the lowest (chunk 1's) is neither chunk 0's nor the
  // first or last answer's.
  static constexpr int64_t kPushSteps[4] = {6, 4, 7, 8};
  static constexpr int kPushPosition[4] = {1, 2, 0, 3};
  fake_.SetScript([](const SeenCall& call) {
    Answer a;
    if (call.method == "Pull") {
      a = Ok(0, kPullSteps[call.chunk], 42);
      a.after_answered = call.chunk == 0 ? 3 : 0;
    } else {
      a = Ok(1, kPushSteps[call.chunk], 42);
      a.after_answered = kPushPosition[call.chunk];
    }
    return a;
  });
  PsClientOptions o = Options();
  o.sync = true;
  auto client = Client(o);
  ASSERT_NE(client, nullptr);

  auto view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(HoldsRound(view->params, view->state, 0));
  EXPECT_EQ(view->global_step, 3);

  auto outcome = Push(*client, view->global_step);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(fake_.AnswerOrder("PushPull", 4), (std::vector<int>{2, 0, 1, 3}));
  EXPECT_EQ(outcome->global_step, 4);
  for (const SeenCall& call : fake_.Calls("PushPull")) {
    EXPECT_EQ(call.step, 3) << "chunk " << call.chunk;
    EXPECT_EQ(call.generation, 42) << "chunk " << call.chunk;
    EXPECT_TRUE(call.gradients_ok) << "chunk " << call.chunk;
  }
  view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(fake_.Calls("Pull").size(), 4u);
  EXPECT_TRUE(HoldsRound(view->params, view->state, 1));
  EXPECT_EQ(view->global_step, 4);
}

// --- overlap_pull: Push returns on chunk 0, the view waits for the rest ---

// Whether params[0, end) hold `round`'s values.
AssertionResult HoldsRoundBelow(const float* params, int64_t end, int round) {
  for (int64_t i = 0; i < end; ++i) {
    if (params[i] != Value(i, round)) {
      return AssertionFailure() << "params[" << i << "] = " << params[i] << ", expected "
                                << Value(i, round) << " (round " << round << ")";
    }
  }
  return AssertionSuccess();
}

TEST_F(PsClientFakePsTest, OverlapPushReturnsOnChunkZeroAndTheViewWaitsForTheRest) {
  // Chunk 3 (the last layers) answers 1.5 s after the others.
  fake_.SetScript([](const SeenCall& call) {
    if (call.method == "Pull") return Ok(0, 0);
    Answer a = Ok(call.attempt + 1, call.attempt + 1);
    if (call.chunk == 3) a.delay = absl::Milliseconds(1500);
    return a;
  });
  PsClientOptions o = Options();
  o.overlap_pull = true;
  o.sync = true;
  auto client = Client(o);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Pull().ok());  // the channels are up

  const absl::Time start = absl::Now();
  auto outcome = Push(*client, 0);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(1200));  // not after chunk 3's answer
  EXPECT_EQ(outcome->global_step, 1);
  EXPECT_FALSE(outcome->job_done);
  EXPECT_FALSE(outcome->discarded);

  auto view = client->PullOverlapped();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(fake_.Calls("Pull").size(), 4u);  // the answers are the view: no new pull
  ASSERT_TRUE(view->await_params);
  EXPECT_EQ(view->global_step, 1);
  const int64_t chunk3 = TestLayout().chunks[3].begin;
  // The first three chunks are in (the state with chunk 0) ...
  view->AwaitParams(chunk3);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(1200));
  EXPECT_TRUE(HoldsRoundBelow(view->params, chunk3, 1));
  for (int64_t k = 0; k < kNumState; ++k) EXPECT_EQ(view->state[k], StateValue(k, 1));
  // ... the rest when chunk 3 answers.
  view->AwaitParams();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(1490));
  EXPECT_TRUE(HoldsRound(view->params, view->state, 1));

  // The next step's push: its gradients go as the backward pass finishes
  // them, after the tail has settled.
  client->StartPush(1, grads_.data(), stats_.data());
  client->GradientsReady(0);
  outcome = Push(*client, 1);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->global_step, 2);
  view = client->Pull();  // a whole view: waits for chunk 3 again
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(HoldsRound(view->params, view->state, 2));
  for (int c = 0; c < 4; ++c) EXPECT_EQ(fake_.CountChunk("PushPull", c), 2) << "chunk " << c;
  for (const SeenCall& call : fake_.Calls("PushPull")) {
    EXPECT_EQ(call.step, call.attempt) << "chunk " << call.chunk;
    EXPECT_TRUE(call.gradients_ok) << "chunk " << call.chunk;
  }
  // Both steps' waits are counted: the rest of chunk 3's 1.5 s went to the
  // forward pass's AwaitParams, not to Push.
  ASSERT_EQ(client->exposed_millis().size(), 2u);
  EXPECT_GE(client->exposed_millis()[1], 250);
}

TEST_F(PsClientFakePsTest, OverlapTailThatFailsIsTheNextPushsErrorAndSendsNothing) {
  std::atomic<bool> fail = true;
  fake_.SetScript([&fail](const SeenCall& call) {
    if (call.method == "PushPull" && fail && call.chunk == 3) {
      // After chunks 0-2 of the first push have been answered.
      Answer a;
      a.status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "chunk 3 is broken");
      a.after_answered = 3;
      a.gate = "first push returned";
      return a;
    }
    return Ok(1, 1);
  });
  PsClientOptions o = Options();
  o.overlap_pull = true;
  auto client = Client(o);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Pull().ok());  // the channels are up

  auto outcome = Push(*client, 0);
  ASSERT_TRUE(outcome.ok()) << outcome.status();  // chunk 0 answered
  fake_.OpenGate("first push returned");
  auto view = client->PullOverlapped();
  ASSERT_TRUE(view.ok()) << view.status();
  view->AwaitParams();  // returns when chunk 3 has failed
  client->StartPush(1, grads_.data(), stats_.data());
  client->GradientsReady(0);
  outcome = Push(*client, 1);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition) << outcome.status();
  EXPECT_THAT(std::string(outcome.status().message()), HasSubstr("(chunk 3)"));
  // Nothing of the step computed on the broken view went out.
  for (int c = 0; c < 4; ++c) EXPECT_EQ(fake_.CountChunk("PushPull", c), 1) << "chunk " << c;

  // The error was that step's: the next pull reads the ps, and training goes on.
  fail = false;
  view = client->PullOverlapped();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(fake_.Calls("Pull").size(), 8u);
  outcome = Push(*client, 1);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(fake_.CountChunk("PushPull", 3), 2);
}

TEST_F(PsClientFakePsTest, OverlapTailThatFindsTheJobRolledBackDiscardsTheNextStep) {
  fake_.SetScript([](const SeenCall& call) {
    if (call.method == "PushPull" && call.chunk == 2 && call.attempt == 0) {
      Answer a;
      a.status = grpc::Status(grpc::StatusCode::ABORTED, "rolled back to a checkpoint");
      a.after_answered = 3;  // after chunks 0, 1 and 3
      a.gate = "first push returned";
      return a;
    }
    return Ok(call.method == "Pull" ? 3 : 1, call.method == "Pull" ? 0 : 1);
  });
  PsClientOptions o = Options();
  o.overlap_pull = true;
  o.sync = true;
  auto client = Client(o);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Pull().ok());  // the channels are up

  auto outcome = Push(*client, 0);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->discarded);
  fake_.OpenGate("first push returned");
  auto view = client->PullOverlapped();
  ASSERT_TRUE(view.ok()) << view.status();
  view->AwaitParams();
  client->StartPush(view->global_step, grads_.data(), stats_.data());
  client->GradientsReady(0);
  outcome = Push(*client, view->global_step);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->discarded);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(fake_.CountChunk("PushPull", c), 1) << "chunk " << c;
  // The step is computed anew from the ps's parameters.
  view = client->PullOverlapped();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(fake_.Calls("Pull").size(), 8u);
  EXPECT_TRUE(HoldsRound(view->params, view->state, 3));
  EXPECT_EQ(view->global_step, 0);
}

TEST_F(PsClientFakePsTest, OverlapSyncChunksApartWaitForEveryAnswer) {
  // The pull finds chunk 1 a step behind (a replica killed between its
  // chunks' pushes): this push brings them together, and Push waits for
  // chunk 3's late answer rather than claim chunk 0's step.
  fake_.SetScript([](const SeenCall& call) {
    if (call.method == "Pull") return Ok(0, call.chunk == 1 ? 4 : 5);
    Answer a = Ok(1, call.chunk == 1 ? 5 : 6);
    a.stale = call.chunk != 1;
    if (call.chunk == 3) a.delay = absl::Milliseconds(300);
    return a;
  });
  PsClientOptions o = Options();
  o.overlap_pull = true;
  o.sync = true;
  auto client = Client(o);
  ASSERT_NE(client, nullptr);
  auto view = client->PullOverlapped();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->global_step, 4);
  const absl::Time start = absl::Now();
  auto outcome = Push(*client, view->global_step);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(290));
  EXPECT_EQ(outcome->global_step, 5);
  view = client->PullOverlapped();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(HoldsRound(view->params, view->state, 1));  // no tail
}

TEST_F(PsClientFakePsTest, OverlapAsyncJobIsDoneWhenEveryChunkSaysSo) {
  // Chunk 0 says the job is done: Push waits for every answer (no early view).
  fake_.SetScript([](const SeenCall& call) {
    Answer a = Ok(0, call.method == "Pull" ? 99 + (call.chunk > 0) : 100, 1);
    a.job_done = call.method == "Pull" ? call.chunk > 0 : true;
    if (call.method == "PushPull" && call.chunk == 3) a.delay = absl::Milliseconds(200);
    return a;
  });
  PsClientOptions o = Options();
  o.overlap_pull = true;
  auto client = Client(o);
  ASSERT_NE(client, nullptr);
  auto view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_FALSE(view->job_done);
  auto outcome = Push(*client, view->global_step);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->global_step, 100);
  EXPECT_TRUE(outcome->job_done);
}

TEST_F(PsClientFakePsTest, SyncPullWaitsUntilEveryChunkIsOfOneGeneration) {
  // The first two pulls find chunk 3 still of generation 1 (a rollback half
  // done), later ones every chunk of generation 2.
  fake_.SetScript([](const SeenCall& call) {
    if (call.attempt < 2) return Ok(call.attempt, 10, call.chunk == 3 ? 1 : 2);
    return Ok(2, 10, 2);
  });
  // An async client takes the view as it is.
  auto async_client = Client(Options());
  ASSERT_NE(async_client, nullptr);
  auto view = async_client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(HoldsRound(view->params, view->state, 0));
  EXPECT_EQ(fake_.Calls("Pull").size(), 4u);

  PsClientOptions o = Options();
  o.sync = true;
  auto client = Client(o);
  ASSERT_NE(client, nullptr);
  view = client->Pull();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(HoldsRound(view->params, view->state, 2));
  EXPECT_EQ(view->global_step, 10);
  EXPECT_EQ(fake_.Calls("Pull").size(), 12u);
}

// --- GrpcParameterServers ---

TEST_F(GrpcParameterServersFakePsTest, StatusesRetryOnlyTheUnavailableTask) {
  fake_.SetScript([](const SeenCall& call) {
    return call.ps == 1 && call.attempt < 2 ? Unavailable() : Ok(0, 100 + call.ps);
  });
  auto servers = GrpcParameterServers::Create(fake_.addresses(), TestLayout(), absl::Seconds(5),
                                              absl::Seconds(5));
  ASSERT_TRUE(servers.ok()) << servers.status();
  auto statuses = (*servers)->Statuses();
  ASSERT_TRUE(statuses.ok()) << statuses.status();
  ASSERT_EQ(statuses->size(), 2u);
  for (int ps = 0; ps < 2; ++ps) {
    EXPECT_EQ((*statuses)[ps].ps_task, ps);
    EXPECT_EQ((*statuses)[ps].global_step, 100 + ps);
    EXPECT_EQ((*statuses)[ps].begin, TestLayout().ranges[ps].first);
    EXPECT_EQ((*statuses)[ps].end, TestLayout().ranges[ps].second);
  }
  EXPECT_EQ(fake_.Count("Status", 0, -1), 1);
  EXPECT_EQ(fake_.Count("Status", 1, -1), 3);
}

TEST_F(GrpcParameterServersFakePsTest, LeaveGivesUpWithinItsOwnRetryBudget) {
  fake_.SetScript([](const SeenCall& call) { return call.ps == 1 ? Unavailable() : Answer(); });
  // The servers' own budget is long; Leave's is 500 ms.
  auto servers = GrpcParameterServers::Create(fake_.addresses(), TestLayout(), absl::Seconds(5),
                                              absl::Seconds(10));
  ASSERT_TRUE(servers.ok()) << servers.status();
  const absl::Time start = absl::Now();
  absl::Status s =
      (*servers)->Leave(3, "preempted", /*input_ended=*/false, absl::Milliseconds(500));
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("Leave to ps 1 at " + fake_.addresses()[1]));
  EXPECT_THAT(std::string(s.message()), HasSubstr("gave up after retrying for 500ms"));
  EXPECT_GE(elapsed, absl::Milliseconds(200));
  EXPECT_LT(elapsed, absl::Milliseconds(2500));  // not the servers' 10 s
  EXPECT_EQ(fake_.Count("Leave", 0, -1), 1);
  EXPECT_GE(fake_.Count("Leave", 1, -1), 2);
  for (const SeenCall& call : fake_.Calls("Leave")) {
    EXPECT_EQ(call.replica, 3);
    EXPECT_EQ(call.reason, "preempted");
  }
}

TEST_F(GrpcParameterServersFakePsTest, ReadAssemblesChunksAnsweredOutOfOrder) {
  static constexpr int64_t kSteps[4] = {5, 3, 9, 7};
  fake_.SetScript([](const SeenCall& call) {
    if (call.method != "Pull") return Answer();
    // Answered 3, then 2, then 1, then 0.
    Answer a = Ok(0, kSteps[call.chunk]);
    a.after_answered = 3 - call.chunk;
    return a;
  });
  auto servers = GrpcParameterServers::Create(fake_.addresses(), TestLayout(), absl::Seconds(5),
                                              absl::Seconds(5));
  ASSERT_TRUE(servers.ok()) << servers.status();
  // Both channels connected first. A Pull whose first attempt failed in the
  // transport (a channel still connecting on a loaded machine) is retried only
  // after the others of its round, which wait for its answer: the round would
  // end at the deadline, 5 s (seen once in a loaded ctest run).
  ASSERT_TRUE((*servers)->Statuses().ok());
  auto view = (*servers)->Read();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(fake_.AnswerOrder("Pull", 4), (std::vector<int>{3, 2, 1, 0}));
  EXPECT_TRUE(HoldsRound(view->params, view->state, 0));
  EXPECT_EQ(view->global_step, 5);  // chunk 0's
}

}  // namespace
}  // namespace pstrain
