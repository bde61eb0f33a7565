#ifndef PSTRAIN_TESTS_FAKES_FAKE_GCS_H_
#define PSTRAIN_TESTS_FAKES_FAKE_GCS_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace httplib {
class Server;
}

namespace pstrain {
namespace testing_util {

// Binds `server` to host:port (0: any free port) and serves it on `thread`;
// the port, or -1.
int ServeOnThread(httplib::Server* server, std::thread* thread, const std::string& host, int port);

// A Cloud Storage server of our own for tests: the JSON API's URL paths and
// answers for what pstrain uses (object media download and metadata, media
// upload, list with prefix/delimiter/pages, delete, rewriteTo; the error
// JSON), objects in memory, plus fault injection. Runs on its own thread.
class FakeGcs {
 public:
  FakeGcs();
  ~FakeGcs();  // Stops the server.

  // Listens on `host` (port 0: any free port); returns the port, or -1.
  int Start(const std::string& host = "127.0.0.1", int port = 0);
  void Stop();
  // "http://host:port", for STORAGE_EMULATOR_HOST.
  std::string endpoint() const { return endpoint_; }

  void CreateBucket(const std::string& bucket);
  // Requests must carry "Authorization: Bearer <token>" (else 401); empty: any.
  void RequireToken(const std::string& token);
  // The next `count` requests are answered `status` (429, 503, ...) and do nothing.
  void FailNext(int count, int status);
  // Lists return at most this many entries per page.
  void SetPageSize(int page_size);

  bool HasObject(const std::string& bucket, const std::string& name);
  std::string GetObject(const std::string& bucket, const std::string& name);
  void PutObject(const std::string& bucket, const std::string& name, const std::string& data);
  std::set<std::string> ObjectNames(const std::string& bucket);

 private:
  void Route();

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string endpoint_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::map<std::string, std::string>> buckets_ ABSL_GUARDED_BY(mu_);
  std::string token_ ABSL_GUARDED_BY(mu_);
  int fail_count_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_status_ ABSL_GUARDED_BY(mu_) = 503;
  int page_size_ ABSL_GUARDED_BY(mu_) = 1000;
};

// The Compute Engine metadata server of our own for tests: answers
// /computeMetadata/v1/<path> from a map when the request carries
// "Metadata-Flavor: Google" (else 403), 404 for a missing key, and a token
// at instance/service-accounts/default/token.
class FakeMetadata {
 public:
  FakeMetadata();
  ~FakeMetadata();
  int Start(const std::string& host = "127.0.0.1", int port = 0);
  void Stop();
  std::string base_url() const { return base_url_; }
  void Set(const std::string& path, const std::string& value);
  void Remove(const std::string& path);

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string base_url_;
  absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testing_util
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_FAKES_FAKE_GCS_H_
