#ifndef PSTRAIN_TESTS_PS_TEST_UTIL_H_
#define PSTRAIN_TESTS_PS_TEST_UTIL_H_

// A ps task served over real gRPC on loopback, in the test's process.

#include <memory>
#include <string>

#include "common/env.h"
#include "config/wire_security.h"
#include "grpcpp/grpcpp.h"
#include "ps/parameter_shard.h"
#include "ps/ps_service.h"
#include "ps/ps_task.h"

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
// process's if null); served with `wire`'s credentials and token.
std::unique_ptr<TestPs> StartPs(int index, int num_chunks, Env* env = nullptr,
                                const WireSecurity& wire = WireSecurity());

}  // namespace testing_util
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_PS_TEST_UTIL_H_
