// JSON views of generation results and statistics (for --json and the benchmark files).
#pragma once

#include <span>

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace goose {

// Speculation statistics: forward passes, MAT, per-source drafted/reached/accepted, per-depth
// and per-rank acceptance, routes, spine continuations, scored tree sizes ("tree_nodes": size ->
// passes).
nlohmann::json SpecStatsJson(const SpecStats& s, int64_t n_generated);

// {"mean_accepted_tokens", "forward_passes", "tokens_per_second", "prompt_tokens_per_second",
//  ... SpecStatsJson ...}
nlohmann::json GenerateStatsJson(const GenerateResult& r, int n_prompt);

// {"tokens", "accepted", "rejected"}: the prediction's tokens, those the output reproduced
// (draft/prediction_matcher.h) and the rest, as OpenAI's usage counts them
// (accepted_prediction_tokens, rejected_prediction_tokens).
nlohmann::json PredictionJson(std::span<const int32_t> prediction, std::span<const int32_t> output);

// Mean accepted tokens per target pass after prefill (convention 1, docs/methods.md §7):
// generated / passes.
double MeanAcceptedTokens(int64_t n_generated, int64_t forward_passes);

}  // namespace goose
