#ifndef PSTRAIN_CLOUD_GCS_ENV_H_
#define PSTRAIN_CLOUD_GCS_ENV_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cloud/http.h"
#include "common/env.h"

namespace pstrain {

struct GcsOptions {
  // The JSON API's address: https://storage.googleapis.com, or an emulator
  // (STORAGE_EMULATOR_HOST, as Google's client libraries honour it).
  std::string endpoint = "https://storage.googleapis.com";
  // An OAuth access token for each request (the metadata server's); unset:
  // anonymous (an emulator).
  std::function<absl::StatusOr<std::string>()> access_token;
  // How long a request that got no answer, 408, 429 or 5xx is retried.
  absl::Duration retry_budget = absl::Seconds(30);
};

// An Env over Cloud Storage's JSON API for "gs://bucket/object" paths, so a
// job dir or data dir can be a bucket as TensorFlow users pass it
// (--job-dir gs://bucket/job).
//
// Objects, not files: a "directory" is an object name prefix (CreateDirs
// does nothing; FileExists is true for an object or a non-empty prefix;
// ListDir lists one level under "dir/", NotFound if nothing is there; SyncDir does nothing). Each
// upload replaces an object at once, so an AtomicWritableFile (and WriteFileAtomic) is one upload
// at Commit, with no temp object, and readers see the old object or the new one, never a mix; the
// checkpoint protocol's order (shard and index objects first, the `checkpoint` object last) is
// then the commit point. RenameFile is a server-side rewrite then a delete. A
// WritableFile buffers in memory and each Flush, Sync or Close replaces the object with everything
// written so far (event files: TensorBoard re-reads the object, our event reader too).
//
// Errors name the gs:// path and what the server said: NotFound for a
// missing object or bucket, PermissionDenied for 401/403, Unavailable when
// the server does not answer within the retry budget. Thread-safe;
// `transport` must outlive the Env.
class GcsEnv : public Env {
 public:
  GcsEnv(HttpTransport* transport, GcsOptions options);

  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  // Reads the object in ranged GETs of kReadChunkBytes, each under the retry
  // budget; the first one is sent at once, so a missing object is NotFound
  // here.
  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path,
                                                                    uint64_t offset) override;
  absl::StatusOr<std::unique_ptr<AtomicWritableFile>> NewAtomicWritableFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  absl::StatusOr<uint64_t> FileSize(const std::string& path) override;
  absl::Status CreateDirs(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;
  absl::Status SyncDir(const std::string&) override { return absl::OkStatus(); }

  // Bytes per ranged read of a SequentialFile.
  static constexpr size_t kReadChunkBytes = 8 << 20;

  // The bytes [offset, offset + n) of the object (fewer at its end, none
  // past it).
  absl::StatusOr<std::string> ReadRange(const std::string& path, uint64_t offset, size_t n);

 private:
  struct Object {
    std::string bucket;
    std::string name;  // without the bucket; "" for the bucket's root
  };
  class WritableObject;
  class AtomicObject;

  static absl::StatusOr<Object> Parse(const std::string& path);
  // Replaces the object `path` with `contents` in one upload.
  absl::Status Upload(const std::string& path, std::string_view contents);
  // Sends `request` (with the access token) under the retry budget.
  absl::StatusOr<HttpResponse> Send(HttpRequest request);
  // The status for an answer that is not 2xx, naming `path`.
  static absl::Status ErrorFor(const std::string& path, const HttpResponse& response);
  std::string ObjectUrl(const Object& o) const;

  HttpTransport* const transport_;
  const GcsOptions options_;
};

// An Env that sends "gs://" paths to `gcs` and every other path to `local`;
// neither is owned.
class SchemeRoutingEnv : public Env {
 public:
  SchemeRoutingEnv(Env* local, Env* gcs) : local_(local), gcs_(gcs) {}

  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path,
                                                                    uint64_t offset) override;
  absl::StatusOr<std::unique_ptr<AtomicWritableFile>> NewAtomicWritableFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  bool FileExists(const std::string& path) override;
  absl::StatusOr<uint64_t> FileSize(const std::string& path) override;
  absl::Status CreateDirs(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;
  absl::Status DeleteDir(const std::string& path) override;
  absl::Status SyncDir(const std::string& dir) override;

 private:
  Env* For(const std::string& path) const;

  Env* const local_;
  Env* const gcs_;
};

// True for "gs://..." paths.
bool IsGcsPath(const std::string& path);

// The Env a pstrain binary uses: local files, and gs:// paths over Cloud
// Storage configured from the process environment (main() only):
// STORAGE_EMULATOR_HOST ("http://host:port": an emulator, no credentials),
// else storage.googleapis.com with the access token of the metadata server
// at GCE_METADATA_HOST (default metadata.google.internal). Lives as long as
// the process.
Env* ProcessEnv();

}  // namespace pstrain

#endif  // PSTRAIN_CLOUD_GCS_ENV_H_
