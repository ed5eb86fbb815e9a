#include "method/table_drafter.h"

#include <algorithm>

namespace goose {

TableDrafter::TableDrafter(TransitionTable& table, bool keep_table, bool harvest_whole_prompt)
    : table_(table),
      keep_table_(keep_table),
      harvest_whole_prompt_(harvest_whole_prompt),
      topk_ids_(table.k()),
      topk_scores_(table.k()) {}

void TableDrafter::Begin(std::span<const int32_t> prompt) {
  if (!keep_table_) table_.Clear();
}

void TableDrafter::Harvest(const float* logits, int n_vocab, int32_t prev, int32_t token) {
  TopK(logits, n_vocab, table_.k(), topk_ids_.data(), topk_scores_.data());
  table_.Harvest(prev, token, topk_ids_, topk_scores_);
}

void TableDrafter::ObservePrefill(std::span<const int32_t> prompt, int i0, int i1,
                                  const Context& ctx) {
  const int n_vocab = ctx.model().config().n_vocab;
  const int n_prompt = static_cast<int>(prompt.size());
  for (int i = std::max(i0, harvest_whole_prompt_ ? 0 : n_prompt - 1); i < i1; ++i) {
    Harvest(ctx.logits(i - i0), n_vocab, i > 0 ? prompt[i - 1] : -1, prompt[i]);
  }
}

void TableDrafter::Observe(const CycleInput& in, const Proposal& p, const Context& ctx,
                           const AcceptResult& accepted) {
  const DraftTree& tree = p.tree;
  const int n_vocab = ctx.model().config().n_vocab;
  const bool root_has_prev = p.route == Route::kAr || p.route == Route::kChain;
  for (int i = 0; i < tree.size(); ++i) {
    const int32_t prev =
        i > 0 ? tree.tokens[tree.parents[i]] : (root_has_prev ? in.anchor_prev : -1);
    Harvest(ctx.logits(i), n_vocab, prev, tree.tokens[i]);
  }
}

}  // namespace goose
