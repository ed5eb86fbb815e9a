// Response bodies of the HTTP API in OpenAI's shapes (and llama-server's for /tokenize).
//
// Contract
// - ErrorBody: {"error": {"message", "type", "param", "code"}} (param/code null when empty).
// - CompletionBody / ChatBody: the non-streamed answer with one choice, "usage" and the "goose"
//   statistics. ChunkBody / ChatChunkBody: one server-sent event's JSON; UsageChunk: the last
//   chunk with stream_options.include_usage (no choices). SseEvent wraps JSON as
//   "data: ...\n\n"; kSseDone is the final "data: [DONE]\n\n".
// - GooseStats: what the request ran (spec, budget) and how speculation went: mean accepted
//   tokens, forward passes, mean tree size, drafted / accepted per source, tokens per second,
//   and with --budget auto the budgets chosen ("budgets_chosen": {"B": cycles}).
// - Text in these bodies is valid UTF-8 already (TextStream); Dump() still replaces anything
//   invalid rather than throw.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/api_request.h"
#include "server/generation.h"

namespace goose::server {

// Identifies one answer in every body and chunk of it.
struct ResponseIds {
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

std::string Dump(const nlohmann::json& j);
nlohmann::json ErrorBody(const ApiError& e);

// {prompt_tokens, completion_tokens, total_tokens}, and for a request with a prediction
// completion_tokens_details {accepted_prediction_tokens, rejected_prediction_tokens}.
nlohmann::json Usage(const GenerationOutcome& o);
// `spec`: the variant key run; `budget`: "auto" or the node budget used.
nlohmann::json GooseStats(const GenerationOutcome& o, const std::string& spec,
                          const nlohmann::json& budget);

nlohmann::json CompletionBody(const ResponseIds& ids, const std::string& text,
                              const GenerationOutcome& o, const nlohmann::json& goose);
nlohmann::json ChatBody(const ResponseIds& ids, const std::string& text, const GenerationOutcome& o,
                        const nlohmann::json& goose);

// finish_reason null while streaming; the last chunk carries it (and "goose").
nlohmann::json ChunkBody(const ResponseIds& ids, const std::string& text,
                         const char* finish_reason);
// role_chunk: the first chunk, {"role": "assistant", "content": ""}.
nlohmann::json ChatChunkBody(const ResponseIds& ids, const std::string& text, bool role_chunk,
                             const char* finish_reason);
nlohmann::json UsageChunk(const ResponseIds& ids, bool chat, const GenerationOutcome& o);

std::string SseEvent(const nlohmann::json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace goose::server
