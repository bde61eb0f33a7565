#include "rpc/testing/fake_ps.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/parameter_server.grpc.pb.h"
#include "rpc/grpc_util.h"

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
namespace testing_util {
namespace {

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

}  // namespace

float Value(int64_t i, int round) { return static_cast<float>(i) + 0.25f * round; }
float StateValue(int64_t k, int round) { return 1000.0f + 10.0f * round + k; }
// The gradients and batch statistics the tests push.
float Grad(int64_t i) { return -static_cast<float>(i); }
float Stat(int64_t k) { return 7.0f + k; }

Answer Unavailable() {
  Answer a;
  a.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the fake ps is starting");
  return a;
}

Answer Ok(int round, int64_t global_step, int64_t generation) {
  Answer a;
  a.round = round;
  a.global_step = global_step;
  a.generation = generation;
  return a;
}

class FakePs::Reactor final : public grpc::ServerUnaryReactor {
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

class FakePs::Service final : public ParameterServer::CallbackService {
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

FakePs::FakePs(const ShardLayout& layout) : layout_(layout) {
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

FakePs::~FakePs() {
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

void FakePs::SetScript(Script script) {
  absl::MutexLock lock(&mu_);
  script_ = std::move(script);
}

std::vector<SeenCall> FakePs::Calls(const std::string& method) const {
  absl::MutexLock lock(&mu_);
  std::vector<SeenCall> calls;
  for (const SeenCall& c : calls_) {
    if (c.method == method) calls.push_back(c);
  }
  return calls;
}
int FakePs::Count(const std::string& method, int ps, int chunk) const {
  int n = 0;
  for (const SeenCall& c : Calls(method)) n += c.ps == ps && c.chunk == chunk;
  return n;
}
int FakePs::CountChunk(const std::string& method, int chunk) const {
  return Count(method, layout_.chunks[chunk].ps, chunk);
}
std::vector<int> FakePs::AnswerOrder(const std::string& method, int n) const {
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

grpc::ServerUnaryReactor* FakePs::Handle(
    const std::string& method, int ps, int chunk, const std::function<void(SeenCall*)>& record,
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
      held_.push_back({reactor, method, answer.status, absl::Now() + answer.delay,
                       answer.after_answered, answer.gate});
      cv_.Signal();
      return reactor;
    }
  }
  reactor->Finish(now);
  return reactor;
}

void FakePs::OpenGate(const std::string& gate) {
  absl::MutexLock lock(&mu_);
  open_gates_.insert(gate);
  cv_.Signal();
}

void FakePs::Answered(const std::string& method, int chunk) {
  absl::MutexLock lock(&mu_);
  answered_.emplace_back(method, chunk);
  ++num_answered_[method];
  cv_.Signal();
}

void FakePs::Run() {
  mu_.Lock();
  while (true) {
    std::vector<std::pair<Reactor*, grpc::Status>> ready;
    absl::Time next = absl::InfiniteFuture();
    const absl::Time now = absl::Now();
    for (auto it = held_.begin(); it != held_.end();) {
      const bool released = num_answered_[it->method] >= it->after_answered &&
                            (it->gate.empty() || open_gates_.contains(it->gate));
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

}  // namespace testing_util
}  // namespace pstrain
