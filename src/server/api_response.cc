#include "server/api_response.h"

#include "engine/report.h"

namespace goose::server {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json ErrorBody(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  return {{"error", err}};
}

json Usage(const GenerationOutcome& o) {
  json u = {{"prompt_tokens", o.n_prompt},
            {"completion_tokens", o.n_generated},
            {"total_tokens", o.n_prompt + o.n_generated}};
  if (o.prediction_tokens >= 0) {
    u["completion_tokens_details"] = {
        {"accepted_prediction_tokens", o.prediction_accepted},
        {"rejected_prediction_tokens", o.prediction_tokens - o.prediction_accepted}};
  }
  return u;
}

json GooseStats(const GenerationOutcome& o, const std::string& spec, const json& budget) {
  const GenerateResult& r = o.result;
  const SpecStats& s = r.stats;
  json drafted = json::object(), accepted = json::object();
  for (int src = 1; src < kNumSources; ++src) {
    const char* name = NodeSourceName(static_cast<NodeSource>(src));
    drafted[name] = s.drafted[src];
    accepted[name] = s.accepted[src];
  }
  const int64_t n = static_cast<int64_t>(r.tokens.size());
  json j = {
      {"spec", spec},
      {"budget", budget},
      {"mean_accepted_tokens", MeanAcceptedTokens(n, s.cycles)},
      {"forward_passes", s.cycles},
      {"mean_tree_nodes", s.MeanTreeNodes()},
      {"drafted", drafted},
      {"accepted", accepted},
      {"tokens_per_second", r.decode_seconds > 0 ? (n - 1) / r.decode_seconds : 0.0},
      {"prompt_tokens_per_second", r.prefill_seconds > 0 ? o.n_prompt / r.prefill_seconds : 0.0},
      {"prompt_seconds", r.prefill_seconds},
      {"generation_seconds", r.decode_seconds},
      {"slot", o.slot}};
  json chosen = json::object();  // "B": cycles, the budgets --budget auto chose
  for (size_t b = 1; b < o.budgets_chosen.size(); ++b) {
    if (o.budgets_chosen[b] > 0) chosen[std::to_string(b)] = o.budgets_chosen[b];
  }
  if (!chosen.empty()) j["budgets_chosen"] = chosen;
  return j;
}

json CompletionBody(const ResponseIds& ids, const std::string& text, const GenerationOutcome& o,
                    const json& goose) {
  json choice = {
      {"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", o.finish_reason}};
  return {{"id", ids.id},       {"object", "text_completion"},      {"created", ids.created},
          {"model", ids.model}, {"choices", json::array({choice})}, {"usage", Usage(o)},
          {"goose", goose}};
}

json ChatBody(const ResponseIds& ids, const std::string& text, const GenerationOutcome& o,
              const json& goose) {
  json choice = {{"index", 0},
                 {"message", {{"role", "assistant"}, {"content", text}}},
                 {"logprobs", nullptr},
                 {"finish_reason", o.finish_reason}};
  return {{"id", ids.id},       {"object", "chat.completion"},      {"created", ids.created},
          {"model", ids.model}, {"choices", json::array({choice})}, {"usage", Usage(o)},
          {"goose", goose}};
}

json ChunkBody(const ResponseIds& ids, const std::string& text, const char* finish_reason) {
  json choice = {{"index", 0},
                 {"text", text},
                 {"logprobs", nullptr},
                 {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)}};
  return {{"id", ids.id},
          {"object", "text_completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array({choice})}};
}

json ChatChunkBody(const ResponseIds& ids, const std::string& text, bool role_chunk,
                   const char* finish_reason) {
  json delta = json::object();
  if (role_chunk) delta["role"] = "assistant";
  if (role_chunk || !text.empty()) delta["content"] = text;
  json choice = {{"index", 0},
                 {"delta", delta},
                 {"logprobs", nullptr},
                 {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)}};
  return {{"id", ids.id},
          {"object", "chat.completion.chunk"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array({choice})}};
}

json UsageChunk(const ResponseIds& ids, bool chat, const GenerationOutcome& o) {
  return {{"id", ids.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", ids.created},
          {"model", ids.model},
          {"choices", json::array()},
          {"usage", Usage(o)}};
}

std::string SseEvent(const json& j) { return "data: " + Dump(j) + "\n\n"; }

}  // namespace goose::server
