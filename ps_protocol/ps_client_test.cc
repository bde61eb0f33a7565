// PsClient (and GrpcParameterServers) against a fake ps: a gRPC
// ParameterServer in this process whose answers each test scripts (the
// status, how late, and in which order the chunks are answered), to check
// what the client does when a ps is unavailable, slow, or answers the chunks
// of a step out of order. tests/ps_rpc_test.cc runs the client against the
// real ps.
#include "ps_protocol/ps_client.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/parameter_server.grpc.pb.h"
#include "ps_protocol/grpc_parameter_servers.h"
#include "ps_protocol/grpc_util.h"
#include "ps_protocol/shard_layout.h"

#if defined(__SANITIZE_THREAD__)
#define PSTRAIN_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PSTRAIN_UNDER_TSAN 1
#endif
#endif
#ifdef PSTRAIN_UNDER_TSAN
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace pstrain {
namespace {

using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;
using ::testing::HasSubstr;
using ::testing::Not;

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

// What the fake answers for parameter i in its answers of `round`: distinct
// for every offset and round (exact in float32 below 2^20).
float Value(int64_t i, int round) { return static_cast<float>(i) + 0.25f * round; }
float StateValue(int64_t k, int round) { return 1000.0f + 10.0f * round + k; }
// The gradients and batch statistics the tests push.
float Grad(int64_t i) { return -static_cast<float>(i); }
float Stat(int64_t k) { return 7.0f + k; }

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// Whether `bytes` are the float32 values f(begin), ..., f(end - 1).
bool FloatsAre(const std::string& bytes, int64_t begin, int64_t end, float (*f)(int64_t)) {
  if (bytes.size() != static_cast<size_t>(end - begin) * sizeof(float)) return false;
  for (int64_t i = begin; i < end; ++i) {
    float v;
    std::memcpy(&v, bytes.data() + (i - begin) * sizeof(float), sizeof(float));
    if (v != f(i)) return false;
  }
  return true;
}

// Finishes a call from the fake's own thread (not a gRPC one). gRPC hands
// the finish ops (fields of CallOpSendMessage, CallOpSendInitialMetadata...)
// to the gRPC thread that completes them through its core, which Debian
// builds without ThreadSanitizer, so the TSan build reports that hand-off
// as a race in gRPC's header code (tests/tsan/suppressions.txt does not list
// these frames). Under TSan, this thread's accesses inside Finish (gRPC's
// own; the fake's state is not touched there) are therefore not recorded.
void FinishFromOwnThread(grpc::ServerUnaryReactor* reactor, const grpc::Status& status) {
#ifdef PSTRAIN_UNDER_TSAN
  __tsan_ignore_thread_begin();
#endif
  reactor->Finish(status);
#ifdef PSTRAIN_UNDER_TSAN
  __tsan_ignore_thread_end();
#endif
}

// One call as the fake saw it.
struct SeenCall {
  std::string method;  // "Pull", "PushPull", "Status", "Leave"
  int ps = 0;          // the fake ps task that got it
  int chunk = -1;      // -1: a call to the whole task
  int attempt = 0;     // earlier calls of `method` to this ps and chunk
  absl::Time arrived;
  // PushPull's request, without its payload:
  int64_t step = 0;
  int64_t generation = 0;
  int replica = 0;
  double loss_sum = 0;
  int loss_batches = 0;
  int64_t examples = 0;
  bool gradients_ok = false;  // float32 Grad(i) over the chunk's range
  bool batch_stats_ok = false;
  // Leave's request:
  std::string reason;
};

// How the fake answers one call.
struct Answer {
  grpc::Status status;  // OK: the values below
  // Not before this long after the call arrived...
  absl::Duration delay = absl::ZeroDuration();
  // ...nor before this many calls of the method (to any fake ps task) have
  // been answered, counted from the fake's start: scripts the order the
  // chunks of a step are answered in.
  int after_answered = 0;
  int round = 0;  // the parameters and state: Value(i, round), StateValue(k, round)
  int64_t global_step = 0;
  int64_t generation = 0;
  bool stale = false;
  bool job_done = false;
};

using Script = std::function<Answer(const SeenCall& call)>;

// Fake ps tasks, one gRPC server each on a port of 127.0.0.1, answering
// Pull, PushPull, Status and Leave for the chunks of `layout` as the script
// says (by default: OK, round 0, step 0). Answers go out from a thread of
// the fake, so a held or late answer blocks no gRPC thread.
class FakePs {
 public:
  explicit FakePs(const ShardLayout& layout) : layout_(layout) {
    worker_ = std::thread([this] { Run(); });
    for (int ps = 0; ps < static_cast<int>(layout_.ranges.size()); ++ps) {
      services_.push_back(std::make_unique<Service>(this, ps));
      grpc::ServerBuilder builder;
      int port = 0;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
      builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
      builder.RegisterService(services_.back().get());
      servers_.push_back(builder.BuildAndStart());
      started_ = started_ && servers_.back() != nullptr && port > 0;
      addresses_.push_back(absl::StrCat("127.0.0.1:", port));
    }
  }

  // Answers every held call (CANCELLED) and stops the servers.
  ~FakePs() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      cv_.Signal();
    }
    worker_.join();
    for (auto& server : servers_) {
      if (server) server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    }
    servers_.clear();
  }

  bool started() const { return started_; }
  const std::vector<std::string>& addresses() const { return addresses_; }

  void SetScript(Script script) {
    absl::MutexLock lock(&mu_);
    script_ = std::move(script);
  }

  // The calls of `method` so far, in arrival order.
  std::vector<SeenCall> Calls(const std::string& method) const {
    absl::MutexLock lock(&mu_);
    std::vector<SeenCall> calls;
    for (const SeenCall& c : calls_) {
      if (c.method == method) calls.push_back(c);
    }
    return calls;
  }
  // How many calls of `method` reached ps task `ps` for `chunk`.
  int Count(const std::string& method, int ps, int chunk) const {
    int n = 0;
    for (const SeenCall& c : Calls(method)) n += c.ps == ps && c.chunk == chunk;
    return n;
  }
  int CountChunk(const std::string& method, int chunk) const {
    return Count(method, layout_.chunks[chunk].ps, chunk);
  }
  // The chunks whose calls of `method` were answered, in that order, once
  // `n` were (or 5 s went by): a client may see an answer before the fake
  // has finished sending it.
  std::vector<int> AnswerOrder(const std::string& method, int n) const {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto it = num_answered_.find(method);
      return it != num_answered_.end() && it->second >= n;
    };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(5));
    std::vector<int> order;
    for (const auto& [m, chunk] : answered_) {
      if (m == method) order.push_back(chunk);
    }
    return order;
  }

 private:
  class Reactor final : public grpc::ServerUnaryReactor {
   public:
    Reactor(FakePs* fake, std::string method, int chunk)
        : fake_(fake), method_(std::move(method)), chunk_(chunk) {}
    void OnDone() override {
      fake_->Answered(method_, chunk_);
      delete this;
    }

   private:
    FakePs* const fake_;
    const std::string method_;
    const int chunk_;
  };

  class Service final : public ParameterServer::CallbackService {
   public:
    Service(FakePs* fake, int ps) : fake_(fake), ps_(ps) {}

    grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext*, const PullRequest* request,
                                   PullResponse* response) override {
      return fake_->Handle(
          "Pull", ps_, request->chunk(), [](SeenCall*) {},
          [&](const Answer& a, const Chunk& chunk) {
            response->set_global_step(a.global_step);
            response->set_job_done(a.job_done);
            response->set_generation(a.generation);
            response->set_params(ChunkValues(chunk, a.round));
            response->set_state(StateValues(chunk, a.round));
          });
    }

    grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext*, const PushRequest* request,
                                       PushPullResponse* response) override {
      return fake_->Handle(
          "PushPull", ps_, request->chunk(),
          [&](SeenCall* call) {
            call->step = request->step();
            call->generation = request->generation();
            call->replica = request->replica();
            call->loss_sum = request->loss_sum();
            call->loss_batches = request->loss_batches();
            call->examples = request->examples();
            const auto& chunks = fake_->layout_.chunks;
            if (request->chunk() >= 0 && request->chunk() < static_cast<int>(chunks.size())) {
              const Chunk& chunk = chunks[request->chunk()];
              call->gradients_ok = request->dtype() == FLOAT32 && request->indices().empty() &&
                                   FloatsAre(request->gradients(), chunk.begin, chunk.end, Grad);
              call->batch_stats_ok = FloatsAre(request->batch_stats(), 0, chunk.state, Stat);
            }
          },
          [&](const Answer& a, const Chunk& chunk) {
            response->set_global_step(a.global_step);
            response->set_stale(a.stale);
            response->set_job_done(a.job_done);
            response->set_generation(a.generation);
            response->set_dtype(request->dtype());
            response->set_params(ChunkValues(chunk, a.round));
            response->set_state(StateValues(chunk, a.round));
          });
    }

    grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext*, const StatusRequest*,
                                     StatusResponse* response) override {
      return fake_->Handle(
          "Status", ps_, -1, [](SeenCall*) {},
          [&](const Answer& a, const Chunk&) {
            response->set_ps_task(ps_);
            response->set_model("fake");
            response->set_initialized(true);
            response->set_global_step(a.global_step);
            response->set_max_global_step(a.global_step);
            response->set_begin(fake_->layout_.ranges[ps_].first);
            response->set_end(fake_->layout_.ranges[ps_].second);
          });
    }

    grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext*, const LeaveRequest* request,
                                    LeaveResponse*) override {
      return fake_->Handle(
          "Leave", ps_, -1,
          [&](SeenCall* call) {
            call->replica = request->replica();
            call->reason = request->reason();
          },
          [](const Answer&, const Chunk&) {});
    }

   private:
    static std::string ChunkValues(const Chunk& chunk, int round) {
      std::vector<float> v;
      for (int64_t i = chunk.begin; i < chunk.end; ++i) v.push_back(Value(i, round));
      return Bytes(v);
    }
    static std::string StateValues(const Chunk& chunk, int round) {
      std::vector<float> v;
      for (int64_t k = 0; k < chunk.state; ++k) v.push_back(StateValue(k, round));
      return Bytes(v);
    }

    FakePs* const fake_;
    const int ps_;
  };

  // A call whose answer is due.
  struct Held {
    Reactor* reactor;
    std::string method;
    grpc::Status status;
    absl::Time due;
    int after_answered;
  };

  // Records the call, asks the script, fills the response (`fill`, if OK)
  // and queues the answer.
  grpc::ServerUnaryReactor* Handle(const std::string& method, int ps, int chunk,
                                   const std::function<void(SeenCall*)>& record,
                                   const std::function<void(const Answer&, const Chunk&)>& fill) {
    auto* reactor = new Reactor(this, method, chunk);
    grpc::Status now;
    {
      absl::MutexLock lock(&mu_);
      SeenCall call;
      call.method = method;
      call.ps = ps;
      call.chunk = chunk;
      call.arrived = absl::Now();
      for (const SeenCall& c : calls_) {
        call.attempt += c.method == method && c.ps == ps && c.chunk == chunk;
      }
      record(&call);
      calls_.push_back(call);
      Answer answer;
      if (chunk >= static_cast<int>(layout_.chunks.size()) ||
          (chunk >= 0 && layout_.chunks[chunk].ps != ps)) {
        answer.status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                     absl::StrCat("chunk ", chunk, " is not on ps ", ps));
      } else if (script_) {
        answer = script_(call);
      }
      if (answer.status.ok()) fill(answer, chunk >= 0 ? layout_.chunks[chunk] : Chunk());
      if (stopping_) {
        now = grpc::Status(grpc::StatusCode::CANCELLED, "the fake ps is stopping");
      } else {
        held_.push_back(
            {reactor, method, answer.status, absl::Now() + answer.delay, answer.after_answered});
        cv_.Signal();
        return reactor;
      }
    }
    reactor->Finish(now);
    return reactor;
  }

  void Answered(const std::string& method, int chunk) {
    absl::MutexLock lock(&mu_);
    answered_.emplace_back(method, chunk);
    ++num_answered_[method];
    cv_.Signal();
  }

  // Sends the answers that are due; all of them once stopping.
  void Run() {
    mu_.Lock();
    while (true) {
      std::vector<std::pair<Reactor*, grpc::Status>> ready;
      absl::Time next = absl::InfiniteFuture();
      const absl::Time now = absl::Now();
      for (auto it = held_.begin(); it != held_.end();) {
        const bool released = num_answered_[it->method] >= it->after_answered;
        if (stopping_) {
          ready.emplace_back(it->reactor,
                             grpc::Status(grpc::StatusCode::CANCELLED, "the fake ps is stopping"));
        } else if (released && it->due <= now) {
          ready.emplace_back(it->reactor, it->status);
        } else {
          if (released) next = std::min(next, it->due);
          ++it;
          continue;
        }
        it = held_.erase(it);
      }
      if (!ready.empty()) {
        mu_.Unlock();
        for (auto& [reactor, status] : ready) FinishFromOwnThread(reactor, status);
        mu_.Lock();
        continue;
      }
      if (stopping_) break;
      cv_.WaitWithDeadline(&mu_, next);
    }
    mu_.Unlock();
  }

  const ShardLayout layout_;
  std::vector<std::string> addresses_;
  bool started_ = true;
  std::vector<std::unique_ptr<Service>> services_;  // outlive the servers
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::thread worker_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  Script script_ ABSL_GUARDED_BY(mu_);
  std::vector<SeenCall> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<Held> held_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> num_answered_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, int>> answered_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

Answer Unavailable() {
  Answer a;
  a.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the fake ps is starting");
  return a;
}

Answer Ok(int round, int64_t global_step, int64_t generation = 1) {
  Answer a;
  a.round = round;
  a.global_step = global_step;
  a.generation = generation;
  return a;
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

// Async: a view's step, and a push's, is chunk 0's; each chunk's next push
// carries that chunk's own step and generation, as its last answer gave them.
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
  EXPECT_EQ(view->global_step, 5);
  EXPECT_FALSE(view->job_done);

  client->ReportProgress(2.5, 32);
  auto outcome = Push(*client, view->global_step);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(fake_.AnswerOrder("PushPull", 4), (std::vector<int>{2, 0, 1, 3}));
  EXPECT_EQ(outcome->global_step, 11);
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
  EXPECT_EQ(view->global_step, 11);

  outcome = Push(*client, view->global_step);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(fake_.AnswerOrder("PushPull", 8), (std::vector<int>{2, 0, 1, 3, 2, 0, 1, 3}));
  EXPECT_EQ(outcome->global_step, 21);
  EXPECT_TRUE(outcome->stale);
  EXPECT_TRUE(outcome->job_done);
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
  EXPECT_EQ(view->global_step, 21);
  EXPECT_TRUE(view->job_done);
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
  absl::Status s = (*servers)->Leave(3, "preempted", absl::Milliseconds(500));
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
    // Answered 3, then 2, then 1, then 0.
    Answer a = Ok(0, kSteps[call.chunk]);
    a.after_answered = 3 - call.chunk;
    return a;
  });
  auto servers = GrpcParameterServers::Create(fake_.addresses(), TestLayout(), absl::Seconds(5),
                                              absl::Seconds(5));
  ASSERT_TRUE(servers.ok()) << servers.status();
  auto view = (*servers)->Read();
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(fake_.AnswerOrder("Pull", 4), (std::vector<int>{3, 2, 1, 0}));
  EXPECT_TRUE(HoldsRound(view->params, view->state, 0));
  EXPECT_EQ(view->global_step, 5);  // chunk 0's
}

}  // namespace
}  // namespace pstrain
