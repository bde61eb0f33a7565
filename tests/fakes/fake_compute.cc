#include "tests/fakes/fake_compute.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "httplib.h"
#include "tests/fakes/fake_gcs.h"

namespace pstrain {
namespace testing_util {
namespace {

constexpr char kPrefix[] = "/compute/v1/";

nlohmann::json ErrorBody(int code, const std::string& reason, const std::string& message) {
  return {{"error",
           {{"code", code},
            {"message", message},
            {"errors", {{{"reason", reason}, {"message", message}, {"domain", "global"}}}}}}};
}

// "projects/p/global/firewalls/x" -> scope "projects/p/global", then the
// collection, the name and an action ("createInstances", "wait") if any.
struct ApiPath {
  std::string scope, collection, name, action;
  bool zonal = false;
};

bool ParsePath(const std::string& path, ApiPath* out) {
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  if (parts.size() < 4 || parts[0] != "projects") return false;
  size_t rest;
  if (parts[2] == "global" || parts[2] == "aggregated") {
    out->scope = absl::StrJoin(parts.begin(), parts.begin() + 3, "/");
    rest = 3;
  } else if ((parts[2] == "zones" || parts[2] == "regions") && parts.size() >= 5) {
    out->scope = absl::StrJoin(parts.begin(), parts.begin() + 4, "/");
    out->zonal = parts[2] == "zones";
    rest = 4;
  } else {
    return false;
  }
  out->collection = parts[rest];
  if (parts.size() > rest + 1) out->name = parts[rest + 1];
  if (parts.size() > rest + 2) {
    out->action = absl::StrJoin(parts.begin() + static_cast<long>(rest) + 2, parts.end(), "/");
  }
  return true;
}

}  // namespace

FakeCompute::FakeCompute() : server_(std::make_unique<httplib::Server>()) {
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    if (!absl::StartsWith(req.path, kPrefix)) {
      res.status = 404;
      res.set_content(ErrorBody(404, "notFound", "not a compute/v1 path: " + req.path).dump(),
                      "application/json");
      return;
    }
    int status = 200;
    nlohmann::json answer;
    Handle(req.method, req.path.substr(sizeof(kPrefix) - 1), req.body, &status, &answer);
    res.status = status;
    res.set_content(answer.dump(), "application/json");
  };
  server_->Get(".*", handler);
  server_->Post(".*", handler);
  server_->Delete(".*", handler);
  server_->Patch(".*", handler);
  server_->Put(".*", handler);
}

FakeCompute::~FakeCompute() { Stop(); }

int FakeCompute::Start() {
  const int bound = ServeOnThread(server_.get(), &thread_, "127.0.0.1", 0);
  if (bound > 0) endpoint_ = absl::StrCat("http://127.0.0.1:", bound, kPrefix);
  return bound;
}

void FakeCompute::Stop() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::vector<FakeCompute::Call> FakeCompute::calls() {
  absl::MutexLock lock(&mu_);
  return calls_;
}

bool FakeCompute::Has(const std::string& path) {
  absl::MutexLock lock(&mu_);
  return resources_.count(path) > 0;
}

nlohmann::json FakeCompute::Get(const std::string& path) {
  absl::MutexLock lock(&mu_);
  auto it = resources_.find(path);
  return it == resources_.end() ? nlohmann::json() : it->second;
}

nlohmann::json FakeCompute::Operation(const std::string& scope, const std::string& type,
                                      const std::string& target) {
  const std::string name = absl::StrCat("operation-", operations_.size() + 1);
  nlohmann::json op = {{"kind", "compute#operation"},
                       {"id", std::to_string(operations_.size() + 1)},
                       {"name", name},
                       {"operationType", type},
                       {"status", "DONE"},
                       {"progress", 100},
                       {"targetLink", endpoint_ + target},
                       {"selfLink", absl::StrCat(endpoint_, scope, "/operations/", name)}};
  if (absl::StrContains(scope, "/zones/")) op["zone"] = endpoint_ + scope;
  operations_[name] = op;
  return op;
}

void FakeCompute::Handle(const std::string& method, const std::string& path,
                         const std::string& body, int* status, nlohmann::json* answer) {
  ApiPath p;
  if (!ParsePath(path, &p)) {
    *status = 400;
    *answer = ErrorBody(400, "invalid", "cannot parse " + path);
    return;
  }
  absl::MutexLock lock(&mu_);
  if (p.collection == "operations") {  // gcloud polls or waits: every one is done
    auto it = operations_.find(p.name);
    if (it == operations_.end()) {
      *status = 404;
      *answer = ErrorBody(404, "notFound", "no operation " + p.name);
    } else {
      *answer = it->second;
    }
    return;
  }
  Call call{method, path, nullptr};
  if (!body.empty()) call.body = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  calls_.push_back(call);
  if (p.collection == "images" && p.name == "family") {
    *answer = {{"kind", "compute#image"},
               {"name", p.action + "-v20261101"},
               {"family", p.action},
               {"selfLink", absl::StrCat(endpoint_, p.scope, "/images/", p.action, "-v20261101")}};
    return;
  }
  const std::string collection = absl::StrCat(p.scope, "/", p.collection);
  const std::string key = absl::StrCat(collection, "/", p.name);
  if (method == "POST" && p.name.empty()) {
    if (!call.body.is_object() || !call.body.contains("name")) {
      *status = 400;
      *answer = ErrorBody(400, "required", "the request body has no name");
      return;
    }
    const std::string inserted =
        absl::StrCat(collection, "/", call.body["name"].get<std::string>());
    if (resources_.count(inserted) > 0) {
      *status = 409;
      *answer = ErrorBody(409, "alreadyExists", "The resource '" + inserted + "' already exists");
      return;
    }
    nlohmann::json resource = call.body;
    resource["selfLink"] = endpoint_ + inserted;
    resources_[inserted] = resource;
    *answer = Operation(p.scope, "insert", inserted);
  } else if (method == "POST" || method == "PATCH") {
    if (resources_.count(key) == 0) {
      *status = 404;
      *answer = ErrorBody(404, "notFound", "The resource '" + key + "' was not found");
      return;
    }
    *answer = Operation(p.scope, p.action.empty() ? "patch" : p.action, key);
  } else if (method == "GET" && !p.name.empty()) {
    auto it = resources_.find(key);
    if (it == resources_.end()) {
      *status = 404;
      *answer = ErrorBody(404, "notFound", "The resource '" + key + "' was not found");
      return;
    }
    *answer = it->second;
  } else if (method == "GET") {
    nlohmann::json items = nlohmann::json::array();
    for (const auto& [name, resource] : resources_) {
      if (absl::StartsWith(name, collection + "/")) items.push_back(resource);
    }
    *answer = {{"items", items}};
  } else if (method == "DELETE") {
    if (resources_.erase(key) == 0) {
      *status = 404;
      *answer = ErrorBody(404, "notFound", "The resource '" + key + "' was not found");
      return;
    }
    *answer = Operation(p.scope, "delete", key);
  } else {
    *status = 400;
    *answer = ErrorBody(400, "invalid", method + " " + path + " is not supported here");
  }
}

}  // namespace testing_util
}  // namespace pstrain
