// A ps served with mutual TLS and a job token (in this process, over real
// gRPC on loopback): the job's own tasks get in; a client without TLS, without
// a certificate, with another job's certificate, for another task's name,
// without the token or with another one can neither read nor write a
// parameter, and is told why.
#include <stdlib.h>

#include <memory>
#include <string>
#include <vector>

#include "common/env.h"
#include "config/cluster_config.h"
#include "grpc/grpc.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ps_protocol/shard_layout.h"
#include "rpc/grpc_parameter_servers.h"
#include "rpc/grpc_security.h"
#include "rpc/ps_client.h"
#include "rpc/testing/ps_test_util.h"
#include "security/job_credentials.h"
#include "testing/temp_dir.h"

namespace pstrain {
namespace {

// gRPC's threads record OpenSSL's errors (a refused handshake) in OpenSSL's
// per-thread error state (904 bytes), freed as each thread exits. gRPC
// shuts down, joining its threads, on a thread of its own once its last
// object is gone, so at the process's exit one may still be running and
// LeakSanitizer reports its state as leaked (CI stop 61, in the ASan build).
// Holding gRPC from before the first test to after the last, and then
// shutting it down blocking, joins them first.
class GrpcLifetime : public ::testing::Environment {
 public:
  void SetUp() override { grpc_init(); }
  void TearDown() override { grpc_shutdown_blocking(); }
};
::testing::Environment* const grpc_lifetime = ::testing::AddGlobalTestEnvironment(new GrpcLifetime);

using testing_util::kNumParams;

std::string NewDir() { return testing_util::TempDirRemovedAtExit("pstrain_ps_security"); }

// `name`'s credentials ("ps-0", "worker-0") in a pstrain-certs directory,
// with the token, loaded as a task loads them.
WireSecurity Credentials(const std::string& dir, const std::string& name) {
  TrainingSpec t;
  t.tls_dir = dir;
  t.token_file = JoinPath(dir, "job.token");
  const size_t dash = name.rfind('-');
  absl::StatusOr<WireSecurity> wire = LoadWireSecurity(
      Env::Default(), t, TaskSpec{name.substr(0, dash), std::stoi(name.substr(dash + 1))});
  EXPECT_TRUE(wire.ok()) << wire.status();
  return wire.value_or(WireSecurity());
}

class PsSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_ = JoinPath(NewDir(), "certs");
    other_ = JoinPath(NewDir(), "certs");
    ASSERT_TRUE(MakeJobCredentials(job_, {"ps-0", "worker-0"}).ok());
    ASSERT_TRUE(MakeJobCredentials(other_, {"ps-0", "worker-0"}).ok());
    ps_ = testing_util::StartPs(0, 1, nullptr, Credentials(job_, "ps-0"));
    layout_ = ComputeShardLayout(kNumParams, /*num_state=*/1, /*layer_starts=*/{0}, 1);
    // The job's own worker initializes the parameters to 0..9.
    servers_ = *GrpcParameterServers::Create({ps_->address}, layout_, absl::Seconds(10),
                                             absl::Seconds(2), Credentials(job_, "worker-0"));
    std::vector<float> params(kNumParams);
    for (int i = 0; i < kNumParams; ++i) params[i] = static_cast<float>(i);
    const float state = 7;
    ASSERT_TRUE(servers_->Initialize("tiny", params.data(), &state, 0).ok());
  }
  void TearDown() override { ps_->server->Shutdown(); }

  // A stub to the ps over `credentials`, checking the server as `server_name`.
  std::unique_ptr<ParameterServer::Stub> Stub(std::shared_ptr<grpc::ChannelCredentials> credentials,
                                              const std::string& server_name = "ps-0") {
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride(server_name);
    return ParameterServer::NewStub(grpc::CreateCustomChannel(ps_->address, credentials, args));
  }
  std::shared_ptr<grpc::ChannelCredentials> Tls(const std::string& ca_dir,
                                                const std::string& cert_dir) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = *Env::Default()->ReadFile(JoinPath(ca_dir, "ca.crt"));
    o.pem_cert_chain = *Env::Default()->ReadFile(JoinPath(cert_dir, "worker-0.crt"));
    o.pem_private_key = *Env::Default()->ReadFile(JoinPath(cert_dir, "worker-0.key"));
    return grpc::SslCredentials(o);
  }

  // A read and a write through `stub` carrying `token` ("" for none); both
  // must fail with `code`. Returns the read's message.
  std::string ExpectRefused(ParameterServer::Stub* stub, const std::string& token,
                            grpc::StatusCode code) {
    auto context = [&] {
      auto c = std::make_unique<grpc::ClientContext>();
      c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      if (!token.empty()) c->AddMetadata(kJobTokenHeader, token);
      return c;
    };
    PullRequest pull;
    PullResponse pulled;
    grpc::Status read = stub->Pull(context().get(), pull, &pulled);
    EXPECT_EQ(read.error_code(), code) << read.error_message();
    EXPECT_TRUE(pulled.params().empty());
    PushRequest push;
    push.set_replica(0);
    std::vector<float> grads(kNumParams, 100.0f);
    push.set_gradients(
        std::string(reinterpret_cast<const char*>(grads.data()), grads.size() * sizeof(float)));
    PushResponse pushed;
    grpc::Status write = stub->Push(context().get(), push, &pushed);
    EXPECT_EQ(write.error_code(), code) << write.error_message();
    return read.error_message();
  }

  // The parameters are still 0..9 (read by the job's own worker).
  void ExpectUnchanged() {
    absl::StatusOr<ParameterView> view = servers_->Read();
    ASSERT_TRUE(view.ok()) << view.status();
    for (int i = 0; i < kNumParams; ++i) EXPECT_EQ(view->params[i], i);
    EXPECT_EQ(view->global_step, 0);
  }

  std::string job_, other_;
  std::unique_ptr<testing_util::TestPs> ps_;
  ShardLayout layout_;
  std::unique_ptr<GrpcParameterServers> servers_;
};

TEST_F(PsSecurityTest, TheJobsOwnTasksTrain) {
  PsClientOptions o;
  o.ps_addresses = {ps_->address};
  o.layout = layout_;
  o.replica = 0;
  o.rpc_timeout = absl::Seconds(10);
  o.retry_budget = absl::Seconds(2);
  o.wire = Credentials(job_, "worker-0");
  std::unique_ptr<PsClient> client = *PsClient::Create(o);
  std::vector<float> grads(kNumParams, 1.0f);
  const float stats = 3;
  absl::StatusOr<PushOutcome> outcome = client->Push(0, grads.data(), &stats);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->global_step, 1);
  absl::StatusOr<ParameterView> view = servers_->Read();
  ASSERT_TRUE(view.ok());
  for (int i = 0; i < kNumParams; ++i) EXPECT_EQ(view->params[i], i - 1.0f);
}

TEST_F(PsSecurityTest, ClientsWithoutTheJobsCertificateCannotConnect) {
  const std::string token = Credentials(job_, "worker-0").token;
  // Plaintext to a TLS port: no handshake, no call.
  ExpectRefused(Stub(grpc::InsecureChannelCredentials()).get(), token,
                grpc::StatusCode::UNAVAILABLE);
  // TLS that trusts the job's CA but shows no certificate of its own.
  grpc::SslCredentialsOptions no_cert;
  no_cert.pem_root_certs = *Env::Default()->ReadFile(JoinPath(job_, "ca.crt"));
  ExpectRefused(Stub(grpc::SslCredentials(no_cert)).get(), token, grpc::StatusCode::UNAVAILABLE);
  // Another job's certificate (the client trusts our CA; the ps does not
  // trust theirs).
  ExpectRefused(Stub(Tls(job_, other_)).get(), token, grpc::StatusCode::UNAVAILABLE);
  // A client of another job does not trust this ps.
  ExpectRefused(Stub(Tls(other_, other_)).get(), token, grpc::StatusCode::UNAVAILABLE);
  // The job's certificate, but the client dials it as ps 1: the ps's
  // certificate names ps-0, so it is not the task the client meant.
  ExpectRefused(Stub(Tls(job_, job_), "ps-1").get(), token, grpc::StatusCode::UNAVAILABLE);
  ExpectUnchanged();
}

TEST_F(PsSecurityTest, CallsWithoutTheJobTokenAreRefused) {
  auto stub = Stub(Tls(job_, job_));
  EXPECT_NE(
      ExpectRefused(stub.get(), "", grpc::StatusCode::UNAUTHENTICATED).find("carries no job token"),
      std::string::npos);
  const std::string theirs = Credentials(other_, "worker-0").token;
  EXPECT_NE(
      ExpectRefused(stub.get(), theirs, grpc::StatusCode::UNAUTHENTICATED).find("wrong job token"),
      std::string::npos);
  // Every other call too, Save and Shutdown included.
  grpc::ClientContext save_context;
  SaveRequest save;
  save.set_step(1);
  SaveResponse saved;
  EXPECT_EQ(stub->Save(&save_context, save, &saved).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext shutdown_context;
  ShutdownResponse shut;
  EXPECT_EQ(stub->Shutdown(&shutdown_context, ShutdownRequest(), &shut).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(ps_->shard->WaitForShutdown(absl::Milliseconds(1)));
  ExpectUnchanged();
  // With the token, the same channel works.
  grpc::ClientContext ok_context;
  ok_context.AddMetadata(kJobTokenHeader, Credentials(job_, "worker-0").token);
  StatusResponse status;
  EXPECT_TRUE(stub->Status(&ok_context, StatusRequest(), &status).ok());
}

TEST_F(PsSecurityTest, APlaintextPsStillChecksItsToken) {
  WireSecurity plain;
  plain.token = "0123456789abcdef0123";
  std::unique_ptr<testing_util::TestPs> ps = testing_util::StartPs(0, 1, nullptr, plain);
  auto stub = ParameterServer::NewStub(
      grpc::CreateChannel(ps->address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext none;
  StatusResponse status;
  EXPECT_EQ(stub->Status(&none, StatusRequest(), &status).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext with;
  with.AddMetadata(kJobTokenHeader, plain.token);
  EXPECT_TRUE(stub->Status(&with, StatusRequest(), &status).ok());
  ps->server->Shutdown();
}

}  // namespace
}  // namespace pstrain
