// What a generation request asks for (GenerateParams) and what it gets (GenerateResult), shared
// by the engine's Sequence, Scheduler and Engine and by every front end.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "method/method.h"
#include "sample/sampler.h"
#include "verify/spec_stats.h"

namespace goose {

// Called after every verified cycle (after the drafter observed it, before the commit) with the
// scored proposal and what the walk accepted; for tests and tracing.
using CycleCallback = std::function<void(const Proposal& proposal, const AcceptResult& accepted)>;

// Called with the newly committed tokens after every cycle; return false to stop early.
using TokenCallback = std::function<bool(std::span<const int32_t>)>;

struct GenerateParams {
  int n_predict = 128;
  // The prompt is scored in passes of at most this many tokens (0: one pass). A pass keeps the
  // logits of every row it scores, n x n_vocab floats (2.5 GB for 4096 tokens of a 152k
  // vocabulary); every row's logits equal a one-token pass's, so the split changes no bit.
  int prefill_chunk = 256;
  SamplingParams sampling;
  bool ignore_eos = false;
  // Extra stop tokens, honoured like the model's end-of-generation tokens (unless ignore_eos).
  std::vector<int32_t> stop_tokens;
  SpecParams spec;  // must have come through ParseSpecVariant (or name a method with defaults)
  // The output the caller expects (OpenAI's Predicted Outputs; no BOS), at most the context:
  // drafted from by the methods that draft from context (Drafter::SetPrediction). Output never
  // depends on it.
  std::vector<int32_t> prediction;
  CycleCallback on_cycle;
};

// Tokens in the largest prefill pass over a prompt of n_prompt tokens.
inline int PrefillPassTokens(const GenerateParams& p, int n_prompt) {
  return p.prefill_chunk > 0 ? std::min(p.prefill_chunk, n_prompt) : n_prompt;
}

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (prompt excluded)
  SpecStats stats;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  bool hit_context_limit = false;
  // --budget auto: the cycles run at each budget the engine's chooser picked (index = budget);
  // empty otherwise, and for a method that sizes its own trees (see stats.tree_nodes).
  std::vector<int64_t> budgets_chosen;
};

}  // namespace goose
