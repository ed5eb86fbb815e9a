// Request parsing for the HTTP API: JSON bytes in, a plain request struct or an OpenAI-style
// error out. Pure functions (no model, no I/O), so a fuzzer can call them on any bytes.
//
// Contract
// - ParseCompletionRequest(body, kind): POST /v1/completions (kCompletion: `prompt` is a string,
//   a one-element array of strings, or an array of token ids) and /v1/chat/completions (kChat:
//   `messages`, each {role, content} with content a string or an array of {"type": "text"}
//   parts). Parameters: max_tokens / max_completion_tokens, temperature, top_p, top_k, seed,
//   stop (string or list), n (1 only), stream, stream_options.include_usage, prediction
//   (OpenAI's Predicted Outputs: {"type": "content", "content": a string or an array of
//   {"type": "text"} parts}), and the extension
//   "goose": {"spec": METHOD[+MOD...], "budget": N | "auto"}. Unknown fields are ignored
//   (clients send model, user, ...); known ones goose cannot honour (penalties, logit_bias,
//   logprobs, tools, n > 1, best_of, echo, suffix, response_format other than text) are errors
//   rather than silently dropped.
// - Defaults are `goose generate`'s, so a request without parameters gets exactly what
//   `goose generate -p PROMPT` prints: greedy (temperature 0), top_k 40, top_p 0.95, seed 0.
//   max_tokens absent = until the context is full.
// - Every error names the field ("param") and says what is allowed; status 400. Bodies that are
//   not JSON, not UTF-8 or not an object are errors too, and so is one whose arrays and objects
//   nest more than kMaxJsonDepth deep (checked in one pass before parsing, so no input makes
//   anything here recurse deeper). A message quotes a bad value escaped and cut short (a
//   container only by its type). Nothing here touches the file system: no field names a file.
// - ParseTokenizeRequest / ParseDetokenizeRequest: llama-server's POST /tokenize
//   {"content", "add_special" (false), "parse_special" (true), "with_pieces" (false)} and
//   POST /detokenize {"tokens": [ids]}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "server/chat_template.h"

namespace goose::server {

// {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field ("" = none)
  std::string code;   // machine-readable reason ("" = none)
};

template <typename T>
class ApiOr {
 public:
  ApiOr(T value) : v_(std::move(value)) {}         // NOLINT: implicit like StatusOr
  ApiOr(ApiError error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  const T& value() const { return std::get<T>(v_); }
  T& value() { return std::get<T>(v_); }
  const ApiError& error() const { return std::get<ApiError>(v_); }

 private:
  std::variant<T, ApiError> v_;
};

enum class ApiKind { kCompletion, kChat };

// Limits on what one request may ask for (beyond them: 400).
inline constexpr int kMaxTokensLimit = 1 << 24;   // as `goose generate -n`
inline constexpr float kMaxTemperature = 100.0f;  // as `goose generate --temp`
inline constexpr int kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 256;
inline constexpr int kMaxBudget = 128;    // the largest tree the engine scores
inline constexpr int kMaxJsonDepth = 32;  // arrays and objects nested in one another

struct CompletionRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::string prompt;                  // kCompletion, text form
  std::vector<int32_t> prompt_tokens;  // kCompletion, token-id form (prompt_is_tokens)
  bool prompt_is_tokens = false;
  std::vector<ChatMessage> messages;  // kChat
  int max_tokens = -1;                // -1: until the context is full
  float temperature = 0.0f;
  float top_p = 0.95f;
  int top_k = 40;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  std::string model;                      // echoed back only
  std::optional<std::string> prediction;  // the text of "prediction", when given
  // The "goose" extension: empty spec = the server's --spec; budget: nullopt = the server's
  // --budget, 0 = the method's default; budget_auto = cost-aware.
  std::string spec;
  std::optional<int> budget;
  bool budget_auto = false;
};

struct TokenizeRequest {
  std::string content;
  bool add_special = false;
  bool parse_special = true;
  bool with_pieces = false;
};

struct DetokenizeRequest {
  std::vector<int64_t> tokens;  // checked against the vocabulary by the caller
};

ApiOr<CompletionRequest> ParseCompletionRequest(std::string_view body, ApiKind kind);
ApiOr<TokenizeRequest> ParseTokenizeRequest(std::string_view body);
ApiOr<DetokenizeRequest> ParseDetokenizeRequest(std::string_view body);

}  // namespace goose::server
