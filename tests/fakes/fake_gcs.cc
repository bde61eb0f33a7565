#include "tests/fakes/fake_gcs.h"

#include <chrono>
#include <regex>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace testing_util {
namespace {

void Error(httplib::Response& res, int status, const std::string& message) {
  nlohmann::json body = {{"error", {{"code", status}, {"message", message}}}};
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

nlohmann::json Resource(const std::string& bucket, const std::string& name, size_t size) {
  return {{"kind", "storage#object"},
          {"bucket", bucket},
          {"name", name},
          {"size", std::to_string(size)}};
}

}  // namespace

int ServeOnThread(httplib::Server* server, std::thread* thread, const std::string& host, int port) {
  const int bound = port == 0 ? server->bind_to_any_port(host.c_str())
                              : (server->bind_to_port(host.c_str(), port) ? port : -1);
  if (bound < 0) return -1;
  *thread = std::thread([server] { server->listen_after_bind(); });
  while (!server->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return bound;
}

FakeGcs::FakeGcs() : server_(std::make_unique<httplib::Server>()) { Route(); }

FakeGcs::~FakeGcs() { Stop(); }

int FakeGcs::Start(const std::string& host, int port) {
  const int bound = ServeOnThread(server_.get(), &thread_, host, port);
  if (bound > 0) endpoint_ = absl::StrCat("http://", host, ":", bound);
  return bound;
}

void FakeGcs::Stop() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

void FakeGcs::CreateBucket(const std::string& bucket) {
  absl::MutexLock lock(&mu_);
  buckets_[bucket];
}

void FakeGcs::RequireToken(const std::string& token) {
  absl::MutexLock lock(&mu_);
  token_ = token;
}

void FakeGcs::FailNext(int count, int status) {
  absl::MutexLock lock(&mu_);
  fail_count_ = count;
  fail_status_ = status;
}

void FakeGcs::SetPageSize(int page_size) {
  absl::MutexLock lock(&mu_);
  page_size_ = page_size;
}

bool FakeGcs::HasObject(const std::string& bucket, const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto b = buckets_.find(bucket);
  return b != buckets_.end() && b->second.count(name) > 0;
}

std::string FakeGcs::GetObject(const std::string& bucket, const std::string& name) {
  absl::MutexLock lock(&mu_);
  return buckets_[bucket][name];
}

void FakeGcs::PutObject(const std::string& bucket, const std::string& name,
                        const std::string& data) {
  absl::MutexLock lock(&mu_);
  buckets_[bucket][name] = data;
}

std::set<std::string> FakeGcs::ObjectNames(const std::string& bucket) {
  absl::MutexLock lock(&mu_);
  std::set<std::string> names;
  for (const auto& [name, data] : buckets_[bucket]) names.insert(name);
  return names;
}

void FakeGcs::Route() {
  using httplib::Request;
  using httplib::Response;
  server_->set_pre_routing_handler([this](const Request& req, Response& res) {
    absl::MutexLock lock(&mu_);
    if (fail_count_ > 0) {
      --fail_count_;
      Error(res, fail_status_, "injected failure");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!token_.empty() && req.get_header_value("Authorization") != "Bearer " + token_) {
      Error(res, 401, "Invalid Credentials");
      return httplib::Server::HandlerResponse::Handled;
    }
    static const std::regex kBucket(R"(^(?:/upload)?/storage/v1/b/([^/]+)/o)");
    std::smatch m;
    if (!std::regex_search(req.path, m, kBucket)) {
      Error(res, 404, "Not Found");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (buckets_.count(m[1].str()) == 0) {
      Error(res, 404, "The specified bucket does not exist.");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Object media or metadata.
  server_->Get(R"(/storage/v1/b/([^/]+)/o/(.+))", [this](const Request& req, Response& res) {
    absl::MutexLock lock(&mu_);
    const auto& objects = buckets_[req.matches[1]];
    auto it = objects.find(req.matches[2]);
    if (it == objects.end())
      return Error(res, 404, "No such object: " + std::string(req.matches[2]));
    if (req.get_param_value("alt") == "media") {
      res.set_content(it->second, "application/octet-stream");
    } else {
      res.set_content(Resource(req.matches[1], it->first, it->second.size()).dump(),
                      "application/json");
    }
  });
  // List.
  server_->Get(R"(/storage/v1/b/([^/]+)/o)", [this](const Request& req, Response& res) {
    absl::MutexLock lock(&mu_);
    const std::string bucket = req.matches[1];
    const std::string prefix = req.get_param_value("prefix");
    const std::string delimiter = req.get_param_value("delimiter");
    std::vector<std::pair<std::string, bool>> entries;  // (name, is a prefix)
    std::set<std::string> prefixes;
    for (const auto& [name, data] : buckets_[bucket]) {
      if (!absl::StartsWith(name, prefix)) continue;
      const size_t cut =
          delimiter.empty() ? std::string::npos : name.find(delimiter, prefix.size());
      if (cut == std::string::npos) {
        entries.emplace_back(name, false);
      } else if (prefixes.insert(name.substr(0, cut + delimiter.size())).second) {
        entries.emplace_back(name.substr(0, cut + delimiter.size()), true);
      }
    }
    size_t start = 0;
    if (req.has_param("pageToken") && !absl::SimpleAtoi(req.get_param_value("pageToken"), &start)) {
      start = 0;
    }
    nlohmann::json body = {{"kind", "storage#objects"}};
    body["items"] = nlohmann::json::array();
    body["prefixes"] = nlohmann::json::array();
    const size_t end = std::min(entries.size(), start + static_cast<size_t>(page_size_));
    for (size_t i = start; i < end; ++i) {
      if (entries[i].second) {
        body["prefixes"].push_back(entries[i].first);
      } else {
        body["items"].push_back(
            Resource(bucket, entries[i].first, buckets_[bucket][entries[i].first].size()));
      }
    }
    if (end < entries.size()) body["nextPageToken"] = std::to_string(end);
    res.set_content(body.dump(), "application/json");
  });
  // Media upload.
  server_->Post(R"(/upload/storage/v1/b/([^/]+)/o)", [this](const Request& req, Response& res) {
    const std::string name = req.get_param_value("name");
    if (req.get_param_value("uploadType") != "media" || name.empty()) {
      return Error(res, 400, "uploadType=media and a name are required");
    }
    absl::MutexLock lock(&mu_);
    buckets_[req.matches[1]][name] = req.body;
    res.set_content(Resource(req.matches[1], name, req.body.size()).dump(), "application/json");
  });
  // Server-side copy.
  server_->Post(R"(/storage/v1/b/([^/]+)/o/(.+)/rewriteTo/b/([^/]+)/o/(.+))",
                [this](const Request& req, Response& res) {
                  absl::MutexLock lock(&mu_);
                  const auto& from = buckets_[req.matches[1]];
                  auto it = from.find(req.matches[2]);
                  if (it == from.end()) return Error(res, 404, "No such object");
                  if (buckets_.count(req.matches[3]) == 0) {
                    return Error(res, 404, "The specified bucket does not exist.");
                  }
                  const std::string data = it->second;
                  buckets_[req.matches[3]][req.matches[4]] = data;
                  nlohmann::json body = {
                      {"kind", "storage#rewriteResponse"},
                      {"done", true},
                      {"objectSize", std::to_string(data.size())},
                      {"resource", Resource(req.matches[3], req.matches[4], data.size())}};
                  res.set_content(body.dump(), "application/json");
                });
  server_->Delete(R"(/storage/v1/b/([^/]+)/o/(.+))", [this](const Request& req, Response& res) {
    absl::MutexLock lock(&mu_);
    if (buckets_[req.matches[1]].erase(req.matches[2]) == 0) {
      return Error(res, 404, "No such object");
    }
    res.status = 204;
  });
}

FakeMetadata::FakeMetadata() : server_(std::make_unique<httplib::Server>()) {
  server_->Get(R"(/computeMetadata/v1/(.*))",
               [this](const httplib::Request& req, httplib::Response& res) {
                 if (req.get_header_value("Metadata-Flavor") != "Google") {
                   res.status = 403;
                   res.set_content("Missing Metadata-Flavor:Google header.", "text/plain");
                   return;
                 }
                 absl::MutexLock lock(&mu_);
                 auto it = values_.find(req.matches[1]);
                 if (it == values_.end()) {
                   res.status = 404;
                   res.set_content("Not Found", "text/plain");
                   return;
                 }
                 res.set_header("Metadata-Flavor", "Google");
                 res.set_content(it->second, "application/text");
               });
}

FakeMetadata::~FakeMetadata() { Stop(); }

int FakeMetadata::Start(const std::string& host, int port) {
  const int bound = ServeOnThread(server_.get(), &thread_, host, port);
  if (bound > 0) base_url_ = absl::StrCat("http://", host, ":", bound);
  return bound;
}

void FakeMetadata::Stop() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

void FakeMetadata::Set(const std::string& path, const std::string& value) {
  absl::MutexLock lock(&mu_);
  values_[path] = value;
}

void FakeMetadata::Remove(const std::string& path) {
  absl::MutexLock lock(&mu_);
  values_.erase(path);
}

}  // namespace testing_util
}  // namespace pstrain
