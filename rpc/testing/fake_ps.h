#ifndef PSTRAIN_RPC_TESTING_FAKE_PS_H_
#define PSTRAIN_RPC_TESTING_FAKE_PS_H_

// A fake ps for the client's tests: gRPC ParameterServer tasks in this
// process whose answers each test scripts (the status, how late, and in which
// order the chunks of a step are answered). Its parameters and state encode
// their own offset and round (Value, StateValue), so an answer written at the
// wrong offset shows; it checks the pushed gradients and batch statistics are
// Grad and Stat over the chunk.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "ps_protocol/shard_layout.h"

namespace pstrain {
namespace testing_util {

// What the fake answers for parameter i in its answers of `round`: distinct
// for every offset and round (exact in float32 below 2^20).
float Value(int64_t i, int round);
float StateValue(int64_t k, int round);
// The gradients and batch statistics the tests push.
float Grad(int64_t i);
float Stat(int64_t k);

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
  // ...nor, if named, before the test opens this gate (OpenGate): an answer
  // held until the client has done what the test checks first, however
  // slowly the machine runs it.
  std::string gate;
  int round = 0;  // the parameters and state: Value(i, round), StateValue(k, round)
  int64_t global_step = 0;
  int64_t generation = 0;
  bool stale = false;
  bool job_done = false;
};

using Script = std::function<Answer(const SeenCall& call)>;

Answer Unavailable();  // UNAVAILABLE ("the fake ps is starting")
Answer Ok(int round, int64_t global_step, int64_t generation = 1);

// Fake ps tasks, one gRPC server each on a port of 127.0.0.1, answering
// Pull, PushPull, Status and Leave for the chunks of `layout` as the script
// says (by default: OK, round 0, step 0). Answers go out from a thread of
// the fake, so a held or late answer blocks no gRPC thread.
class FakePs {
 public:
  explicit FakePs(const ShardLayout& layout);
  // Answers every held call (CANCELLED) and stops the servers.
  ~FakePs();

  bool started() const { return started_; }
  const std::vector<std::string>& addresses() const { return addresses_; }

  void SetScript(Script script);
  // Releases the answers held for `gate`, and those that will be.
  void OpenGate(const std::string& gate);

  // The calls of `method` so far, in arrival order.
  std::vector<SeenCall> Calls(const std::string& method) const;
  // How many calls of `method` reached ps task `ps` for `chunk`.
  int Count(const std::string& method, int ps, int chunk) const;
  int CountChunk(const std::string& method, int chunk) const;
  // The chunks whose calls of `method` were answered, in that order, once
  // `n` were (or 5 s went by): a client may see an answer before the fake
  // has finished sending it.
  std::vector<int> AnswerOrder(const std::string& method, int n) const;

 private:
  class Reactor;
  class Service;

  // A call whose answer is due.
  struct Held {
    Reactor* reactor;
    std::string method;
    grpc::Status status;
    absl::Time due;
    int after_answered;
    std::string gate;
  };

  // Records the call, asks the script, fills the response (`fill`, if OK)
  // and queues the answer.
  grpc::ServerUnaryReactor* Handle(const std::string& method, int ps, int chunk,
                                   const std::function<void(SeenCall*)>& record,
                                   const std::function<void(const Answer&, const Chunk&)>& fill);
  void Answered(const std::string& method, int chunk);
  // Sends the answers that are due; all of them once stopping.
  void Run();

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
  std::set<std::string> open_gates_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, int>> answered_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace testing_util
}  // namespace pstrain

#endif  // PSTRAIN_RPC_TESTING_FAKE_PS_H_
