// pstrain-serve's request path from raw bytes: the HTTP parser (fed in two
// pieces, split where the first byte says) and then ModelServer::Handle on
// every request it completes, against an mnist_cnn export in memory. A parse
// refusal is a 4xx (or 501/505) with a message; an answer from the server is
// below 500 (500 is only for a fault of the server) and, when not 200, a
// JSON {"error": "..."} with a message.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.h"
#include "export/export.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "serving/http_request_parser.h"
#include "serving/model_server.h"

namespace {

// Made once; destroyed at exit (its batcher thread joined) before the leak
// check runs.
pstrain::ModelServer* Server() {
  static pstrain::MemEnv env;
  static std::unique_ptr<pstrain::ModelServer> server = [] {
    std::unique_ptr<pstrain::Model> model =
        *pstrain::BuildModel("mnist_cnn", pstrain::ModelOptions());
    std::vector<float> params(model->num_params()), state(model->num_state());
    model->InitializeVariables(1, params.data(), state.data());
    if (!pstrain::WriteExport(&env, "/export", *model, pstrain::ModelOptions(), 1, "", params,
                              state)
             .ok()) {
      std::abort();
    }
    pstrain::ModelServerOptions options;
    options.model_base_path = "/export";
    options.max_instances = 4;
    return *std::move(pstrain::ModelServer::Create(&env, options));
  }();
  return server.get();
}

void CheckAnswer(const pstrain::HttpAnswer& a) {
  if (a.status < 200 || a.status >= 500) std::abort();
  const nlohmann::json body = nlohmann::json::parse(a.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) std::abort();
  if (a.status != 200) {
    if (!body.contains("error") || !body["error"].is_string() ||
        body["error"].get<std::string>().empty()) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t split = std::min<size_t>(data[0], bytes.size());
  pstrain::HttpLimits limits;
  limits.max_head_bytes = 4096;
  limits.max_body_bytes = 1 << 20;
  pstrain::HttpRequestParser parser(limits);
  for (std::string_view piece : {bytes.substr(0, split), bytes.substr(split)}) {
    parser.Append(piece);
    while (parser.state() == pstrain::HttpRequestParser::State::kComplete) {
      pstrain::HttpServerRequest request = parser.TakeRequest();
      CheckAnswer(Server()->Handle(request.method, request.path, request.body));
    }
    if (parser.state() == pstrain::HttpRequestParser::State::kError) {
      const int status = parser.error_status();
      if (status < 400 || status >= 600 || status == 500 || parser.error_message().empty()) {
        std::abort();
      }
      break;
    }
  }
  return 0;
}
