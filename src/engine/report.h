// JSON views of generation results and statistics (for --json and the benchmark files).
#pragma once

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

// Mean accepted tokens per target pass after prefill (convention 1, docs/methods.md §7):
// generated / passes.
double MeanAcceptedTokens(int64_t n_generated, int64_t forward_passes);

}  // namespace goose
