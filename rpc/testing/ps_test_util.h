#ifndef PSTRAIN_RPC_TESTING_PS_TEST_UTIL_H_
#define PSTRAIN_RPC_TESTING_PS_TEST_UTIL_H_

// A ps task served over real gRPC on loopback, in the test's process. It
// needs no GoogleTest (the benchmarks and fuzzers use it too): a ps that cannot
// be built or bound is a CHECK failure.

#include <memory>
#include <string>

#include "common/env.h"
#include "config/wire_security.h"
#include "grpcpp/grpcpp.h"
#include "models/model.h"
#include "ps/parameter_shard.h"
#include "ps/ps_task.h"
#include "rpc/ps_service.h"

namespace pstrain {
namespace testing_util {

inline constexpr int64_t kNumParams = 10;

struct TestPs {
  std::unique_ptr<PsTask> task;
  ParameterShard* shard = nullptr;  // the task's only chunk
  std::unique_ptr<ParameterServerService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

// Chunk `index` of `num_chunks` over kNumParams parameters, SGD with learning
// rate 1, 1 state value on chunk 0, async; its job dir is /job in `env` (the
// process's if null); served with `wire`'s credentials and token. It also
// holds ps `index` of `num_chunks`'s rows of two embedding tables
// (TestSparseModel: table 0 dynamic of dim 2, table 1 of 10 buckets and dim
// 1), async, Adagrad with learning rate 1.
// The model whose tables StartPs's ps hold: "emb/embeddings" (feature f,
// dynamic, dim 2) and "lin/f" (10 buckets, dim 1).
std::unique_ptr<Model> TestSparseModel();
// What StartPs may change (benchmarks): the model whose tables the ps holds
// (TestSparseModel() if null; it must outlive the call) and the job's steps.
struct TestPsOptions {
  const Model* sparse_model = nullptr;
  int64_t train_steps = 100;
  bool sync = false;  // both replicas' pushes make a step, for chunks and rows
};
std::unique_ptr<TestPs> StartPs(int index, int num_chunks, Env* env = nullptr,
                                const WireSecurity& wire = WireSecurity(),
                                const TestPsOptions& options = TestPsOptions());

}  // namespace testing_util
}  // namespace pstrain

#endif  // PSTRAIN_RPC_TESTING_PS_TEST_UTIL_H_
