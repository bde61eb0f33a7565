#include "cloud/gcs_env.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cloud/metadata.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

constexpr char kScheme[] = "gs://";

bool Ok(const HttpResponse& r) { return r.status >= 200 && r.status < 300; }

}  // namespace

// A WritableFile whose every Flush replaces the object with all of it.
class GcsEnv::WritableObject : public WritableFile {
 public:
  WritableObject(GcsEnv* env, std::string path) : env_(env), path_(std::move(path)) {}
  ~WritableObject() override { (void)Close(); }

  absl::Status Append(std::string_view data) override {
    if (closed_) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
    contents_.append(data);
    dirty_ = true;
    return absl::OkStatus();
  }
  absl::Status Flush() override {
    if (!dirty_) return absl::OkStatus();
    PSTRAIN_RETURN_IF_ERROR(env_->Upload(path_, contents_));
    dirty_ = false;
    return absl::OkStatus();
  }
  absl::Status Sync() override { return Flush(); }
  absl::Status Close() override {
    if (closed_) return absl::OkStatus();
    absl::Status s = Flush();
    closed_ = true;
    return s;
  }

 private:
  GcsEnv* const env_;
  const std::string path_;
  std::string contents_;
  bool dirty_ = true;  // an empty file is created too
  bool closed_ = false;
};

// An object uploaded whole at Commit: an upload replaces an object at once,
// so no temp object (and no server-side copy of one) is needed.
class GcsEnv::AtomicObject : public AtomicWritableFile {
 public:
  AtomicObject(GcsEnv* env, std::string path) : env_(env), path_(std::move(path)) {}

  absl::Status Append(std::string_view data) override {
    PSTRAIN_RETURN_IF_ERROR(Writing());
    contents_.append(data);
    return absl::OkStatus();
  }
  absl::Status Flush() override { return Writing(); }
  absl::Status Sync() override { return Writing(); }
  absl::Status Close() override {
    if (!committed_) closed_ = true;
    return absl::OkStatus();
  }
  absl::Status Commit() override {
    if (committed_) {
      return absl::FailedPreconditionError(absl::StrCat(path_, " is already committed"));
    }
    closed_ = true;
    PSTRAIN_RETURN_IF_ERROR(env_->Upload(path_, contents_));
    committed_ = true;
    contents_.clear();
    return absl::OkStatus();
  }

 private:
  absl::Status Writing() const {
    if (!closed_ && !committed_) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
  }

  GcsEnv* const env_;
  const std::string path_;
  std::string contents_;
  bool closed_ = false;
  bool committed_ = false;
};

bool IsGcsPath(const std::string& path) { return absl::StartsWith(path, kScheme); }

GcsEnv::GcsEnv(HttpTransport* transport, GcsOptions options)
    : transport_(transport), options_(std::move(options)) {}

absl::StatusOr<GcsEnv::Object> GcsEnv::Parse(const std::string& path) {
  if (!IsGcsPath(path)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a gs://bucket/object path"));
  }
  const std::string rest = path.substr(sizeof(kScheme) - 1);
  const size_t slash = rest.find('/');
  Object o;
  o.bucket = rest.substr(0, slash);
  o.name = slash == std::string::npos ? "" : rest.substr(slash + 1);
  while (!o.name.empty() && o.name.back() == '/') o.name.pop_back();
  if (o.bucket.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " names no bucket (gs://bucket/path)"));
  }
  return o;
}

std::string GcsEnv::ObjectUrl(const Object& o) const {
  return absl::StrCat(options_.endpoint, "/storage/v1/b/", UrlEncode(o.bucket), "/o/",
                      UrlEncode(o.name));
}

absl::StatusOr<HttpResponse> GcsEnv::Send(HttpRequest request) {
  if (options_.access_token) {
    absl::StatusOr<std::string> token = options_.access_token();
    if (!token.ok()) {
      return absl::Status(token.status().code(), absl::StrCat("no access token for Cloud Storage: ",
                                                              token.status().message()));
    }
    request.headers.emplace_back("Authorization", absl::StrCat("Bearer ", *token));
  }
  absl::StatusOr<HttpResponse> response =
      SendWithRetries(transport_, request, options_.retry_budget);
  if (!response.ok()) {
    return absl::UnavailableError(absl::StrCat("Cloud Storage at ", options_.endpoint,
                                               " does not answer: ", response.status().message()));
  }
  return response;
}

absl::Status GcsEnv::ErrorFor(const std::string& path, const HttpResponse& response) {
  const std::string what = absl::StrCat(path, ": ", DescribeResponse(response));
  switch (response.status) {
    case 404:
      return absl::NotFoundError(what);
    case 401:
    case 403:
      return absl::PermissionDeniedError(
          absl::StrCat(what, " (does the instance's service account have access to the bucket?)"));
    case 400:
      return absl::InvalidArgumentError(what);
    default:
      return RetryableHttpStatus(response.status) ? absl::UnavailableError(what)
                                                  : absl::UnknownError(what);
  }
}

absl::StatusOr<std::string> GcsEnv::ReadFile(const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(Object o, Parse(path));
  HttpRequest request;
  request.url = absl::StrCat(ObjectUrl(o), "?alt=media");
  PSTRAIN_ASSIGN_OR_RETURN(HttpResponse response, Send(std::move(request)));
  if (!Ok(response)) return ErrorFor(path, response);
  return std::move(response.body);
}

absl::StatusOr<uint64_t> GcsEnv::FileSize(const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(Object o, Parse(path));
  HttpRequest metadata;
  metadata.url = ObjectUrl(o);
  PSTRAIN_ASSIGN_OR_RETURN(HttpResponse about, Send(std::move(metadata)));
  if (!Ok(about)) return ErrorFor(path, about);
  const nlohmann::json json = nlohmann::json::parse(about.body, nullptr, false);
  uint64_t size = 0;
  if (!json.is_object() || !json.contains("size") || !json["size"].is_string() ||
      !absl::SimpleAtoi(json["size"].get<std::string>(), &size)) {
    return absl::DataLossError(
        absl::StrCat(path, ": the object's metadata has no size: ", about.body.substr(0, 200)));
  }
  return size;
}

absl::StatusOr<std::string> GcsEnv::ReadRange(const std::string& path, uint64_t offset, size_t n) {
  PSTRAIN_ASSIGN_OR_RETURN(Object o, Parse(path));
  if (n == 0) return std::string();
  HttpRequest request;
  request.url = absl::StrCat(ObjectUrl(o), "?alt=media");
  request.headers = {{"Range", absl::StrCat("bytes=", offset, "-", offset + n - 1)}};
  PSTRAIN_ASSIGN_OR_RETURN(HttpResponse response, Send(request));
  if (response.status == 416) {
    // The range starts at or past the end (an empty object, or its end),
    // which the object's size says; a 416 before the end (a proxy's answer
    // to a failure) is asked again once.
    PSTRAIN_ASSIGN_OR_RETURN(const uint64_t size, FileSize(path));
    if (offset >= size) return std::string();
    PSTRAIN_ASSIGN_OR_RETURN(response, Send(std::move(request)));
    if (response.status == 416) {
      return absl::UnavailableError(absl::StrCat(path, ": bytes ", offset, " on of an object of ",
                                                 size, " bytes were refused (416)"));
    }
  }
  if (!Ok(response)) return ErrorFor(path, response);
  if (response.status == 206) {
    if (response.body.size() > n) response.body.resize(n);
    return std::move(response.body);
  }
  // 200: a server that ignores Range sends the whole object.
  if (offset >= response.body.size()) return std::string();
  return response.body.substr(offset, n);
}

namespace {

class GcsSequentialFile : public SequentialFile {
 public:
  GcsSequentialFile(GcsEnv* env, std::string path, uint64_t offset, std::string first)
      : env_(env), path_(std::move(path)), offset_(offset), chunk_(std::move(first)) {}

  absl::Status Read(size_t n, std::string* out) override {
    out->clear();
    while (out->size() < n) {
      if (used_ == chunk_.size()) {
        if (at_end_) break;
        PSTRAIN_ASSIGN_OR_RETURN(chunk_, env_->ReadRange(path_, offset_, GcsEnv::kReadChunkBytes));
        offset_ += chunk_.size();
        used_ = 0;
        if (chunk_.size() < GcsEnv::kReadChunkBytes) at_end_ = true;
        if (chunk_.empty()) break;
      }
      const size_t take = std::min(n - out->size(), chunk_.size() - used_);
      out->append(chunk_, used_, take);
      used_ += take;
    }
    return absl::OkStatus();
  }

  // The chunk read at open starts at offset_; the next one after it.
  void Opened() {
    offset_ += chunk_.size();
    if (chunk_.size() < GcsEnv::kReadChunkBytes) at_end_ = true;
  }

 private:
  GcsEnv* const env_;
  const std::string path_;
  uint64_t offset_;  // of the next chunk to fetch
  std::string chunk_;
  size_t used_ = 0;
  bool at_end_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SequentialFile>> GcsEnv::NewSequentialFile(const std::string& path,
                                                                          uint64_t offset) {
  PSTRAIN_ASSIGN_OR_RETURN(Object o, Parse(path));
  if (o.name.empty()) return absl::InvalidArgumentError(absl::StrCat(path, " names no object"));
  // The first chunk now: a missing object is an error at open, as a file's.
  PSTRAIN_ASSIGN_OR_RETURN(std::string first, ReadRange(path, offset, kReadChunkBytes));
  if (first.empty()) {
    // At or past the end, or an empty object: which of them, or none, the
    // metadata says (a missing object is NotFound).
    HttpRequest request;
    request.url = ObjectUrl(o);
    PSTRAIN_ASSIGN_OR_RETURN(HttpResponse response, Send(std::move(request)));
    if (!Ok(response)) return ErrorFor(path, response);
  }
  auto file = std::make_unique<GcsSequentialFile>(this, path, offset, std::move(first));
  file->Opened();
  return std::unique_ptr<SequentialFile>(std::move(file));
}

absl::Status GcsEnv::Upload(const std::string& path, std::string_view contents) {
  PSTRAIN_ASSIGN_OR_RETURN(Object o, Parse(path));
  if (o.name.empty()) return absl::InvalidArgumentError(absl::StrCat(path, " names no object"));
  HttpRequest request;
  request.method = "POST";
  request.url = absl::StrCat(options_.endpoint, "/upload/storage/v1/b/", UrlEncode(o.bucket),
                             "/o?uploadType=media&name=", UrlEncode(o.name));
  request.headers = {{"Content-Type", "application/octet-stream"}};
  request.body = std::string(contents);
  request.timeout = absl::Seconds(60) + absl::Seconds(contents.size() >> 20);  // 1 MB/s at worst
  PSTRAIN_ASSIGN_OR_RETURN(HttpResponse response, Send(std::move(request)));
  if (!Ok(response)) return ErrorFor(path, response);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WritableFile>> GcsEnv::NewWritableFile(const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(Object o, Parse(path));
  if (o.name.empty()) return absl::InvalidArgumentError(absl::StrCat(path, " names no object"));
  return std::unique_ptr<WritableFile>(new WritableObject(this, path));
}

absl::StatusOr<std::unique_ptr<AtomicWritableFile>> GcsEnv::NewAtomicWritableFile(
    const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(Object o, Parse(path));
  if (o.name.empty()) return absl::InvalidArgumentError(absl::StrCat(path, " names no object"));
  return std::unique_ptr<AtomicWritableFile>(new AtomicObject(this, path));
}

bool GcsEnv::FileExists(const std::string& path) {
  absl::StatusOr<Object> o = Parse(path);
  if (!o.ok()) return false;
  if (!o->name.empty()) {
    HttpRequest request;
    request.url = ObjectUrl(*o);
    absl::StatusOr<HttpResponse> response = Send(std::move(request));
    if (response.ok() && Ok(*response)) return true;
  }
  // A "directory": some object's name starts with "<name>/".
  HttpRequest request;
  request.url =
      absl::StrCat(options_.endpoint, "/storage/v1/b/", UrlEncode(o->bucket),
                   "/o?maxResults=1&prefix=", UrlEncode(o->name.empty() ? "" : o->name + "/"));
  absl::StatusOr<HttpResponse> response = Send(std::move(request));
  if (!response.ok() || !Ok(*response)) return false;
  const nlohmann::json json = nlohmann::json::parse(response->body, nullptr, false);
  return json.is_object() && json.contains("items") && json["items"].is_array() &&
         !json["items"].empty();
}

absl::Status GcsEnv::CreateDirs(const std::string& path) { return Parse(path).status(); }

absl::StatusOr<std::vector<std::string>> GcsEnv::ListDir(const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(Object o, Parse(path));
  const std::string prefix = o.name.empty() ? "" : o.name + "/";
  std::vector<std::string> names;
  std::string page_token;
  do {
    HttpRequest request;
    request.url = absl::StrCat(options_.endpoint, "/storage/v1/b/", UrlEncode(o.bucket),
                               "/o?delimiter=%2F&prefix=", UrlEncode(prefix),
                               page_token.empty() ? "" : "&pageToken=", UrlEncode(page_token));
    PSTRAIN_ASSIGN_OR_RETURN(HttpResponse response, Send(std::move(request)));
    if (!Ok(response)) return ErrorFor(path, response);
    const nlohmann::json json = nlohmann::json::parse(response.body, nullptr, false);
    if (!json.is_object()) {
      return absl::DataLossError(
          absl::StrCat(path, ": the object list is not JSON: ", response.body.substr(0, 200)));
    }
    for (const char* key : {"items", "prefixes"}) {
      if (!json.contains(key) || !json[key].is_array()) continue;
      for (const nlohmann::json& entry : json[key]) {
        const nlohmann::json* name = &entry;
        if (entry.is_object()) name = entry.contains("name") ? &entry["name"] : nullptr;
        if (name == nullptr || !name->is_string()) continue;
        // A name outside the prefix asked for (a server should not send one).
        if (!absl::StartsWith(name->get_ref<const std::string&>(), prefix)) continue;
        std::string n = name->get<std::string>().substr(prefix.size());
        while (!n.empty() && n.back() == '/') n.pop_back();
        if (!n.empty()) names.push_back(n);
      }
    }
    page_token = json.contains("nextPageToken") && json["nextPageToken"].is_string()
                     ? json["nextPageToken"].get<std::string>()
                     : "";
  } while (!page_token.empty());
  if (names.empty()) {
    return absl::NotFoundError(absl::StrCat("cannot list ", path, ": no objects under it"));
  }
  return names;
}

absl::Status GcsEnv::RenameFile(const std::string& from, const std::string& to) {
  PSTRAIN_ASSIGN_OR_RETURN(Object src, Parse(from));
  PSTRAIN_ASSIGN_OR_RETURN(Object dst, Parse(to));
  std::string rewrite_token;
  while (true) {
    HttpRequest request;
    request.method = "POST";
    request.url = absl::StrCat(
        ObjectUrl(src), "/rewriteTo/b/", UrlEncode(dst.bucket), "/o/", UrlEncode(dst.name),
        rewrite_token.empty() ? "" : "?rewriteToken=", UrlEncode(rewrite_token));
    request.headers = {{"Content-Type", "application/json"}};
    request.body = "{}";
    PSTRAIN_ASSIGN_OR_RETURN(HttpResponse response, Send(std::move(request)));
    if (!Ok(response)) return ErrorFor(absl::StrCat(from, " -> ", to), response);
    const nlohmann::json json = nlohmann::json::parse(response.body, nullptr, false);
    if (json.is_object() && json.contains("done") && json["done"].is_boolean() &&
        !json["done"].get<bool>() && json.contains("rewriteToken") &&
        json["rewriteToken"].is_string()) {
      rewrite_token = json["rewriteToken"].get<std::string>();
      continue;  // a large object is copied in several calls
    }
    break;
  }
  return DeleteFile(from);
}

absl::Status GcsEnv::DeleteFile(const std::string& path) {
  PSTRAIN_ASSIGN_OR_RETURN(Object o, Parse(path));
  HttpRequest request;
  request.method = "DELETE";
  request.url = ObjectUrl(o);
  PSTRAIN_ASSIGN_OR_RETURN(HttpResponse response, Send(std::move(request)));
  if (!Ok(response)) return ErrorFor(path, response);
  return absl::OkStatus();
}

Env* SchemeRoutingEnv::For(const std::string& path) const {
  return IsGcsPath(path) ? gcs_ : local_;
}

absl::StatusOr<std::string> SchemeRoutingEnv::ReadFile(const std::string& path) {
  return For(path)->ReadFile(path);
}
absl::StatusOr<std::unique_ptr<SequentialFile>> SchemeRoutingEnv::NewSequentialFile(
    const std::string& path, uint64_t offset) {
  return For(path)->NewSequentialFile(path, offset);
}
absl::StatusOr<std::unique_ptr<AtomicWritableFile>> SchemeRoutingEnv::NewAtomicWritableFile(
    const std::string& path) {
  return For(path)->NewAtomicWritableFile(path);
}
absl::StatusOr<std::unique_ptr<WritableFile>> SchemeRoutingEnv::NewWritableFile(
    const std::string& path) {
  return For(path)->NewWritableFile(path);
}
bool SchemeRoutingEnv::FileExists(const std::string& path) { return For(path)->FileExists(path); }
absl::StatusOr<uint64_t> SchemeRoutingEnv::FileSize(const std::string& path) {
  return For(path)->FileSize(path);
}
absl::Status SchemeRoutingEnv::CreateDirs(const std::string& path) {
  return For(path)->CreateDirs(path);
}
absl::StatusOr<std::vector<std::string>> SchemeRoutingEnv::ListDir(const std::string& path) {
  return For(path)->ListDir(path);
}
absl::Status SchemeRoutingEnv::RenameFile(const std::string& from, const std::string& to) {
  if (IsGcsPath(from) != IsGcsPath(to)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot rename ", from, " to ", to, " across file systems"));
  }
  return For(from)->RenameFile(from, to);
}
absl::Status SchemeRoutingEnv::DeleteFile(const std::string& path) {
  return For(path)->DeleteFile(path);
}

absl::Status SchemeRoutingEnv::DeleteDir(const std::string& path) {
  return For(path)->DeleteDir(path);
}

absl::Status SchemeRoutingEnv::SyncDir(const std::string& dir) { return For(dir)->SyncDir(dir); }

Env* ProcessEnv() {
  static Env* const env = [] {
    HttpTransport* transport = NewCurlTransport().release();
    GcsOptions options;
    const char* emulator = std::getenv("STORAGE_EMULATOR_HOST");
    if (emulator != nullptr && emulator[0] != '\0') {
      options.endpoint = emulator;
      if (!absl::StartsWith(options.endpoint, "http")) {
        options.endpoint = absl::StrCat("http://", options.endpoint);
      }
    } else {
      const char* host = std::getenv("GCE_METADATA_HOST");
      auto* metadata = new MetadataClient(transport, host != nullptr && host[0] != '\0'
                                                         ? absl::StrCat("http://", host)
                                                         : MetadataClient::kDefaultBaseUrl);
      options.access_token = [metadata] { return metadata->AccessToken(); };
    }
    auto* gcs = new GcsEnv(transport, std::move(options));
    return new SchemeRoutingEnv(Env::Default(), gcs);
  }();
  return env;
}

}  // namespace pstrain
