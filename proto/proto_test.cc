#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "proto/parameter_server.pb.h"

namespace pstrain {
namespace {

// Gradients travel as raw little-endian float bytes; a round trip through the
// wire format must give back the same floats bit for bit.
TEST(ParameterServerProtoTest, PushRequestRoundTripsFloatBytes) {
  std::vector<float> grads = {1.5f, -2.25f, 0.0f, 3.0e-7f};
  PushRequest request;
  request.set_chunk(1);
  request.set_replica(3);
  request.set_step(42);
  request.set_gradients(reinterpret_cast<const char*>(grads.data()), grads.size() * sizeof(float));

  std::string wire;
  ASSERT_TRUE(request.SerializeToString(&wire));
  PushRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(parsed.chunk(), 1);
  EXPECT_EQ(parsed.replica(), 3);
  EXPECT_EQ(parsed.step(), 42);
  ASSERT_EQ(parsed.gradients().size(), grads.size() * sizeof(float));
  std::vector<float> back(grads.size());
  std::memcpy(back.data(), parsed.gradients().data(), parsed.gradients().size());
  EXPECT_EQ(back, grads);
}

TEST(ParameterServerProtoTest, TruncatedBytesDoNotParse) {
  PullResponse response;
  response.set_global_step(7);
  response.set_params(std::string(64, '\x01'));
  std::string wire;
  ASSERT_TRUE(response.SerializeToString(&wire));
  PullResponse parsed;
  EXPECT_FALSE(parsed.ParseFromString(wire.substr(0, wire.size() - 10)));
}

TEST(ParameterServerProtoTest, ServiceDeclaresEveryMethod) {
  const auto* service = PushRequest::descriptor()->file()->FindServiceByName("ParameterServer");
  ASSERT_NE(service, nullptr);
  for (const char* method : {"Initialize", "Pull", "Push", "PushPull", "Status", "Shutdown"}) {
    EXPECT_NE(service->FindMethodByName(method), nullptr) << method;
  }
}

}  // namespace
}  // namespace pstrain
