// Fuzz target api_request: an HTTP request body of goose serve through its parser, which is all
// the server does with a body before it has a plain request (server/api_request.h).
//
// The first byte chooses the route (mod 4: /v1/completions, /v1/chat/completions, /tokenize,
// /detokenize); the rest is the body. Properties besides "no crash, leak, hang, UB":
// - an error is a 4xx with a message that is one clean line (it is sent to the client and
//   logged) and an error body that serializes;
// - an accepted request is within the documented limits: max_tokens -1..kMaxTokensLimit,
//   temperature 0..kMaxTemperature, top_p 0..1, top_k >= 0, at most kMaxStopStrings stop strings
//   of at most kMaxStopBytes, a budget 0..kMaxBudget, a method ParseSpecVariant accepts, text
//   that is valid UTF-8, token ids >= 0; a chat's messages are non-empty with known roles, and
//   render with every chat family (what the server does next).
// run-fuzz flags: -max_len=8192
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "method/method.h"
#include "server/api_request.h"
#include "server/api_response.h"
#include "server/chat_template.h"

namespace goose::fuzz {
namespace {

using server::ApiError;
using server::ApiKind;

template <typename T>
bool CheckError(const server::ApiOr<T>& r) {
  if (r.ok()) return false;
  const ApiError& e = r.error();
  FUZZ_CHECK(e.status >= 400 && e.status < 500, "status %d", e.status);
  FUZZ_CHECK(!e.message.empty(), "empty error message");
  FUZZ_CHECK(IsOneCleanLine(e.message), "error is not one clean line: %s", e.message.c_str());
  FUZZ_CHECK(IsOneCleanLine(e.param), "param is not one clean line: %s", e.param.c_str());
  const std::string body = server::Dump(server::ErrorBody(e));
  FUZZ_CHECK(!body.empty() && body.front() == '{', "error body %s", body.c_str());
  return true;
}

void CheckCompletion(std::string_view body, ApiKind kind) {
  const auto r = server::ParseCompletionRequest(body, kind);
  if (CheckError(r)) return;
  const server::CompletionRequest& c = r.value();
  FUZZ_CHECK(c.kind == kind, "kind");
  FUZZ_CHECK(c.max_tokens >= -1 && c.max_tokens <= server::kMaxTokensLimit, "max_tokens %d",
             c.max_tokens);
  FUZZ_CHECK(std::isfinite(c.temperature) && c.temperature >= 0 &&
                 c.temperature <= server::kMaxTemperature,
             "temperature %g", c.temperature);
  FUZZ_CHECK(std::isfinite(c.top_p) && c.top_p >= 0 && c.top_p <= 1, "top_p %g", c.top_p);
  FUZZ_CHECK(c.top_k >= 0, "top_k %d", c.top_k);
  FUZZ_CHECK(c.stop.size() <= static_cast<size_t>(server::kMaxStopStrings), "%zu stops",
             c.stop.size());
  for (const std::string& s : c.stop) {
    FUZZ_CHECK(s.size() <= server::kMaxStopBytes && IsValidUtf8(s), "stop string");
  }
  FUZZ_CHECK(!c.budget || (*c.budget >= 0 && *c.budget <= server::kMaxBudget), "budget %d",
             c.budget.value_or(-1));
  if (!c.spec.empty()) {
    SpecParams p;
    FUZZ_CHECK(ParseSpecVariant(c.spec, &p).ok(), "accepted spec '%s' does not parse",
               c.spec.c_str());
  }
  if (kind == ApiKind::kCompletion) {
    FUZZ_CHECK(IsValidUtf8(c.prompt), "prompt is not valid UTF-8");
    for (int32_t t : c.prompt_tokens) FUZZ_CHECK(t >= 0, "token id %d", t);
    FUZZ_CHECK(c.prompt_is_tokens || c.prompt_tokens.empty(), "token ids without the flag");
    return;
  }
  FUZZ_CHECK(!c.messages.empty(), "accepted chat without messages");
  for (const server::ChatMessage& m : c.messages) {
    FUZZ_CHECK(
        m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "developer",
        "role '%s'", m.role.c_str());
    FUZZ_CHECK(IsValidUtf8(m.content), "content is not valid UTF-8");
  }
  for (const char* name : {"chatml", "llama3", "llama2", "mistral", "gemma", "phi3"}) {
    server::ChatTemplate t;
    t.family = *server::ChatFamilyByName(name);
    const auto text = server::RenderChat(t, c.messages);
    FUZZ_CHECK(text.ok(), "%s cannot render an accepted chat: %s", name,
               text.status().message().c_str());
    FUZZ_CHECK(IsValidUtf8(*text), "%s rendered invalid UTF-8", name);
  }
}

}  // namespace
}  // namespace goose::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace goose;
  using namespace goose::fuzz;
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      CheckCompletion(body, server::ApiKind::kCompletion);
      break;
    case 1:
      CheckCompletion(body, server::ApiKind::kChat);
      break;
    case 2: {
      const auto r = server::ParseTokenizeRequest(body);
      if (!CheckError(r)) FUZZ_CHECK(IsValidUtf8(r.value().content), "content");
      break;
    }
    default: {
      const auto r = server::ParseDetokenizeRequest(body);
      (void)CheckError(r);  // ids are checked against the vocabulary by the route
      break;
    }
  }
  return 0;
}
