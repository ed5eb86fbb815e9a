#include "engine/report.h"

#include <algorithm>

#include "draft/prediction_matcher.h"

namespace goose {

namespace {

// What a draft model's drafting cost (the methods that draft with one), per cycle it drafted.
nlohmann::json DraftModelJson(const SpecStats& s) {
  using nlohmann::json;
  const double n = static_cast<double>(std::max<int64_t>(s.draft_cycles, 1));
  json passes = json::object();  // draft passes -> cycles
  for (int k = 0; k <= SpecStats::kMaxDraftPasses; ++k) {
    if (s.draft_passes_cycles[k]) passes[std::to_string(k)] = s.draft_passes_cycles[k];
  }
  json slots = json::object();  // per source: tree nodes besides the root per cycle
  for (int src = 1; src < kNumSources; ++src) {
    if (s.drafted[src]) slots[NodeSourceName(static_cast<NodeSource>(src))] = s.drafted[src] / n;
  }
  json j;
  j["cycles"] = s.draft_cycles;
  j["passes"] = s.draft_passes;
  j["passes_per_cycle"] = s.draft_passes / n;
  j["passes_histogram"] = passes;
  j["rows"] = s.draft_rows;
  j["seconds"] = s.draft_seconds;
  j["seconds_per_cycle"] = s.draft_seconds / n;
  j["pruned_slots"] = s.pruned_slots;
  j["pruned_slots_per_cycle"] = s.pruned_slots / n;
  j["slots_per_cycle"] = slots;
  return j;
}

}  // namespace

double MeanAcceptedTokens(int64_t n_generated, int64_t forward_passes) {
  return forward_passes > 0 ? static_cast<double>(n_generated) / forward_passes
                            : static_cast<double>(n_generated);
}

nlohmann::json SpecStatsJson(const SpecStats& s, int64_t n_generated) {
  using nlohmann::json;
  json j;
  j["forward_passes"] = s.cycles;
  j["mean_accepted_tokens"] = MeanAcceptedTokens(n_generated, s.cycles);
  json routes = json::object();
  for (int r = 0; r < kNumRoutes; ++r) routes[RouteName(static_cast<Route>(r))] = s.route_cycles[r];
  j["routes"] = routes;
  json drafted = json::object(), accepted = json::object(), reached = json::object(),
       rate = json::object();
  for (int src = 1; src < kNumSources; ++src) {
    const char* name = NodeSourceName(static_cast<NodeSource>(src));
    drafted[name] = s.drafted[src];
    accepted[name] = s.accepted[src];
    reached[name] = s.reached[src];
    rate[name] = s.reached[src] ? static_cast<double>(s.accepted[src]) / s.reached[src] : 0.0;
  }
  j["drafted"] = drafted;
  j["accepted"] = accepted;
  j["reached"] = reached;
  j["acceptance_per_reached"] = rate;
  // Per depth and rank, trimmed after the last non-empty bucket.
  json by_depth = json::object(), by_rank = json::object();
  for (int src = 1; src < kNumSources; ++src) {
    const char* name = NodeSourceName(static_cast<NodeSource>(src));
    int last = -1;
    for (int d = 0; d <= SpecStats::kMaxDepth; ++d) {
      if (s.drafted_depth[src][d]) last = d;
    }
    json rows = json::array();
    for (int d = 1; d <= last; ++d) {
      rows.push_back({{"depth", d},
                      {"drafted", s.drafted_depth[src][d]},
                      {"reached", s.reached_depth[src][d]},
                      {"accepted", s.accepted_depth[src][d]}});
    }
    if (last >= 1) by_depth[name] = rows;
    last = -1;
    for (int k = 0; k < SpecStats::kMaxRank; ++k) {
      if (s.reached_rank[src][k]) last = k;
    }
    rows = json::array();
    for (int k = 0; k <= last; ++k) {
      rows.push_back({{"rank", k},
                      {"reached", s.reached_rank[src][k]},
                      {"accepted", s.accepted_rank[src][k]}});
    }
    if (last >= 0) by_rank[name] = rows;
  }
  j["acceptance_by_depth"] = by_depth;
  j["acceptance_by_rank"] = by_rank;
  j["spine_continuation_cycles"] = s.spine_continuation_cycles;
  j["spine_continuation_tokens"] = s.spine_continuation_tokens;
  j["bonus_tokens"] = s.bonus;
  json sizes = json::object();  // scored tree size -> passes
  for (int n = 1; n <= SpecStats::kMaxTreeNodes; ++n) {
    if (s.tree_nodes[n]) sizes[std::to_string(n)] = s.tree_nodes[n];
  }
  j["tree_nodes"] = sizes;
  j["mean_tree_nodes"] = s.MeanTreeNodes();
  if (s.draft_cycles > 0) j["draft_model"] = DraftModelJson(s);
  return j;
}

nlohmann::json GenerateStatsJson(const GenerateResult& r, int n_prompt) {
  const int64_t n = static_cast<int64_t>(r.tokens.size());
  nlohmann::json j = SpecStatsJson(r.stats, n);
  j["prompt_tokens"] = n_prompt;
  j["generated_tokens"] = n;
  j["prompt_seconds"] = r.prefill_seconds;
  j["generation_seconds"] = r.decode_seconds;
  j["prompt_tokens_per_second"] = r.prefill_seconds > 0 ? n_prompt / r.prefill_seconds : 0.0;
  // The first generated token comes from the prefill pass; the rest from decode passes.
  j["tokens_per_second"] = r.decode_seconds > 0 ? (n - 1) / r.decode_seconds : 0.0;
  j["hit_context_limit"] = r.hit_context_limit;
  return j;
}

nlohmann::json PredictionJson(std::span<const int32_t> prediction,
                              std::span<const int32_t> output) {
  const int64_t accepted = ReproducedPredictionTokens(prediction, output);
  const int64_t n = static_cast<int64_t>(prediction.size());
  return {{"tokens", n}, {"accepted", accepted}, {"rejected", n - accepted}};
}

}  // namespace goose
