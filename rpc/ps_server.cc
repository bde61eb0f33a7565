#include "rpc/ps_server.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "rpc/grpc_security.h"
#include "rpc/grpc_util.h"
#include "rpc/ps_service.h"

namespace pstrain {
namespace {

// The largest request a ps needs: a push (or an initialization) of all of
// its range and every state value, float32, with room for the rest of the
// message. Bigger ones are refused by gRPC (RESOURCE_EXHAUSTED) before they
// are read into memory.
// A model with embedding tables pushes its batch's rows, whose size the ps
// cannot bound in advance: the largest message then.
int64_t MaxRequestBytes(const PsStatus& status, const Model& model, int copies) {
  if (model.has_sparse()) return kMaxMessageBytes;
  if (copies > 1) {
    // A rejoin's copy of any chunk it holds: its values, up to 2 optimizer
    // slots and the values before the last sync step.
    return 4 * (model.num_params() + 2 * model.num_state()) * static_cast<int64_t>(sizeof(float)) +
           (1 << 20);
  }
  return (status.end - status.begin + model.num_state()) * static_cast<int64_t>(sizeof(float)) +
         (1 << 20);
}

}  // namespace

struct GrpcPsServer::Impl {
  Impl(PsTask* task, const std::string& token) : service(task, token) {}

  ParameterServerService service;  // outlives the server
  std::unique_ptr<grpc::Server> server;
  bool shut_down = false;
};

GrpcPsServer::GrpcPsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcPsServer::~GrpcPsServer() {
  if (!impl_->shut_down) Shutdown(absl::ZeroDuration());
}

absl::StatusOr<std::unique_ptr<GrpcPsServer>> GrpcPsServer::Start(PsTask* task, const Model& model,
                                                                  int index,
                                                                  const std::string& address,
                                                                  const WireSecurity& wire) {
  auto impl = std::make_unique<Impl>(task, wire.token);
  const int64_t max_request_bytes = MaxRequestBytes(task->Status(), model, task->copies());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, ServerCredentialsFor(wire), &port);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<int64_t>(max_request_bytes, kMaxMessageBytes)));
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterService(&impl->service);
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("ps ", index, " cannot listen on ", address,
                                               " (in use, or not an address of this host)"));
  }
  return std::unique_ptr<GrpcPsServer>(new GrpcPsServer(std::move(impl)));
}

void GrpcPsServer::Shutdown(absl::Duration grace) {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
}

}  // namespace pstrain
