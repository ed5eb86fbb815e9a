#include "model/top_logits.h"

#include <algorithm>

namespace goose {

std::vector<TokenLogit> TopLogits(const float* logits, int n_vocab, int k) {
  // Higher logit first, then lower id; a NaN ranks below every number.
  auto before = [](const TokenLogit& a, const TokenLogit& b) {
    const bool a_nan = a.logit != a.logit, b_nan = b.logit != b.logit;
    if (a_nan != b_nan) return b_nan;
    if (!a_nan && a.logit != b.logit) return a.logit > b.logit;
    return a.id < b.id;
  };
  std::vector<TokenLogit> all(static_cast<size_t>(std::max(n_vocab, 0)));
  for (int v = 0; v < n_vocab; ++v) all[v] = {v, logits[v]};
  const size_t n = std::min<size_t>(all.size(), static_cast<size_t>(std::max(k, 0)));
  std::partial_sort(all.begin(), all.begin() + n, all.end(), before);
  all.resize(n);
  return all;
}

StatusOr<std::vector<std::vector<TokenLogit>>> PromptTopLogits(const Model& model,
                                                               std::span<const int32_t> prompt,
                                                               int k, int chunk, int n_ctx,
                                                               ThreadPool* pool) {
  if (prompt.empty()) return Status::Error("top logits: the prompt is empty");
  if (k < 1) return Status::Error(StrFormat("top logits: k = %d, expected at least 1", k));
  const int n = static_cast<int>(prompt.size());
  if (n_ctx > 0 && n > n_ctx) {
    return Status::Error(
        StrFormat("top logits: the prompt (%d tokens) does not fit a context of %d", n, n_ctx));
  }
  const int pass = chunk > 0 ? std::min(chunk, n) : n;
  Context ctx(model, n_ctx > 0 ? n_ctx : n, pool);
  std::vector<std::vector<TokenLogit>> out;
  out.reserve(prompt.size());
  for (int at = 0; at < n; at += pass) {
    const int len = std::min(pass, n - at);
    GOOSE_RETURN_IF_ERROR(ctx.ForwardChain(prompt.subspan(at, len)));
    for (int i = 0; i < len; ++i) {
      out.push_back(TopLogits(ctx.logits(i), model.config().n_vocab, k));
    }
    ctx.KeepAll();
  }
  return out;
}

}  // namespace goose
