// The ps's RPC handlers through real gRPC (a server in this process on
// loopback, the same service pstrain-ps runs, with a job token): each input
// is a sequence of calls, [method byte][length: 2 bytes][request bytes],
// sent as raw bytes, so malformed protobufs, wrong lengths, chunk ids,
// replicas, steps, dtypes and paths all reach the handlers, and the rows of
// embedding tables (PullRows, PushRows: tables, ids and values). The ps must
// answer every call and keep serving; a Status call after the input (and
// after any UNAVAILABLE answer) must succeed.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>

#include "common/env.h"
#include "glog/logging.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "proto/parameter_server.pb.h"
#include "rpc/grpc_security.h"
#include "rpc/testing/ps_test_util.h"

namespace {

constexpr char kToken[] = "fuzz-token-0123456789";
constexpr const char* kMethods[] = {"Initialize", "Pull",    "Push",  "PushPull", "Status",
                                    "Save",       "Restore", "Leave", "PullRows", "PushRows"};

struct Harness {
  pstrain::MemEnv env;  // the ps's job dir
  std::unique_ptr<pstrain::testing_util::TestPs> ps;
  std::unique_ptr<grpc::GenericStub> stub;

  Harness() {
    FLAGS_minloglevel = 2;                     // the ps's INFO lines for every call
    google::protobuf::SetLogHandler(nullptr);  // "invalid UTF-8" for every such string
    pstrain::WireSecurity wire;
    wire.token = kToken;
    ps = pstrain::testing_util::StartPs(0, 1, &env, wire);
    stub = std::make_unique<grpc::GenericStub>(
        grpc::CreateChannel(ps->address, grpc::InsecureChannelCredentials()));
  }

  grpc::Status Call(const std::string& method, std::string request) {
    if (method == "Save") {
      // A save may wait for a step the chunk never reaches; keep the wait
      // short so the threads that wait do not pile up over a run.
      pstrain::SaveRequest save;
      if (save.ParseFromString(request)) {
        save.set_wait_ms(std::min<int64_t>(save.wait_ms(), 5));
        request = save.SerializeAsString();
      }
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    context.AddMetadata(pstrain::kJobTokenHeader, kToken);
    grpc::Slice slice(request);
    grpc::ByteBuffer in(&slice, 1), out;
    std::promise<grpc::Status> done;
    stub->UnaryCall(&context, "/pstrain.ParameterServer/" + method, grpc::StubOptions(), &in, &out,
                    [&done](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness* harness = new Harness();
  size_t at = 0;
  for (int calls = 0; calls < 16 && at + 3 <= size; ++calls) {
    const char* method = kMethods[data[at] % (sizeof(kMethods) / sizeof(kMethods[0]))];
    const size_t length = std::min<size_t>(size - at - 3, data[at + 1] | (data[at + 2] << 8));
    const std::string request(reinterpret_cast<const char*>(data) + at + 3, length);
    at += 3 + length;
    const grpc::Status s = harness->Call(method, request);
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) std::abort();  // a hung handler
    // Pulls and pushes before an Initialize are answered UNAVAILABLE (retry
    // later); the same code from the transport means the ps went away.
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE && !harness->Call("Status", "").ok()) {
      std::abort();
    }
  }
  if (!harness->Call("Status", "").ok()) std::abort();
  return 0;
}
