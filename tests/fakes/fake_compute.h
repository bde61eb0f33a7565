#ifndef PSTRAIN_TESTS_FAKES_FAKE_COMPUTE_H_
#define PSTRAIN_TESTS_FAKES_FAKE_COMPUTE_H_

// A Compute Engine API of our own for tests, for the real `gcloud` CLI
// pointed at it (api_endpoint_overrides/compute =
// http://127.0.0.1:PORT/compute/v1/): it keeps what is inserted
// (firewalls, instance templates, instance group managers...) by project,
// scope and collection, answers every change with a finished operation,
// lets gcloud read back what it made, and records every request.

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace httplib {
class Server;
}

namespace pstrain {
namespace testing_util {

class FakeCompute {
 public:
  struct Call {
    std::string method;   // GET, POST, DELETE...
    std::string path;     // after /compute/v1/: "projects/p/global/firewalls"
    nlohmann::json body;  // null without one
  };

  FakeCompute();
  ~FakeCompute();
  // Listens on 127.0.0.1 (any free port); returns the port, or -1.
  int Start();
  void Stop();
  // The value for api_endpoint_overrides/compute.
  std::string endpoint() const { return endpoint_; }

  // Every request but operation polls, in order.
  std::vector<Call> calls();
  // A resource inserted and not deleted: "projects/p/global/firewalls/x".
  bool Has(const std::string& path);
  nlohmann::json Get(const std::string& path);

 private:
  void Handle(const std::string& method, const std::string& path, const std::string& body,
              int* status, nlohmann::json* answer);
  nlohmann::json Operation(const std::string& scope, const std::string& type,
                           const std::string& target) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string endpoint_;
  absl::Mutex mu_;
  std::map<std::string, nlohmann::json> resources_ ABSL_GUARDED_BY(mu_);
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, nlohmann::json> operations_ ABSL_GUARDED_BY(mu_);  // by name
};

}  // namespace testing_util
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_FAKES_FAKE_COMPUTE_H_
