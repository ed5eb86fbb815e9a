// TopLogits: the highest logits of a row, and of every position of a prompt (goose generate
// --top-logits, and the tests against llama.cpp's reference logits).
//
// Contract
// - TopLogits(row, n_vocab, k): the min(k, n_vocab) highest logits, highest first; equal
//   logits in increasing id order (NaNs are never chosen before a number).
// - PromptTopLogits scores `prompt` from an empty context of its own, of n_ctx tokens (0: the
//   prompt's length; give the generation's context size to get its numbers: phi3's LongRoPE
//   factors depend on it), in passes of at most `chunk` tokens (0: one pass), and returns every
//   position's TopLogits in order. A pass keeps every row's logits and a row's logits are the
//   same bits whatever the split. Errors: an empty prompt, k < 1, a token outside the
//   vocabulary, a prompt longer than n_ctx.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace goose {

struct TokenLogit {
  int32_t id = 0;
  float logit = 0;
};

std::vector<TokenLogit> TopLogits(const float* logits, int n_vocab, int k);

StatusOr<std::vector<std::vector<TokenLogit>>> PromptTopLogits(const Model& model,
                                                               std::span<const int32_t> prompt,
                                                               int k, int chunk, int n_ctx,
                                                               ThreadPool* pool);

}  // namespace goose
