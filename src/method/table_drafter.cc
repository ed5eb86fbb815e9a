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

void TableDrafter::Harvest(const ScoredRows& rows, int row, int32_t prev, int32_t token) {
  rows.TopK(row, table_.k(), topk_ids_.data(), topk_scores_.data());
  table_.Harvest(prev, token, topk_ids_, topk_scores_);
}

void TableDrafter::ObservePrefill(std::span<const int32_t> prompt, int i0, int i1,
                                  const ScoredRows& rows) {
  const int n_prompt = static_cast<int>(prompt.size());
  for (int i = std::max(i0, harvest_whole_prompt_ ? 0 : n_prompt - 1); i < i1; ++i) {
    Harvest(rows, i - i0, i > 0 ? prompt[i - 1] : -1, prompt[i]);
  }
}

void TableDrafter::Observe(const CycleInput& in, const Proposal& p, const ScoredRows& rows,
                           const AcceptResult& accepted) {
  const DraftTree& tree = p.tree;
  const bool root_has_prev = p.route == Route::kAr || p.route == Route::kChain;
  const int n = std::min(tree.size(), rows.n_rows());
  for (int i = 0; i < n; ++i) {
    const int32_t prev =
        i > 0 ? tree.tokens[tree.parents[i]] : (root_has_prev ? in.anchor_prev : -1);
    Harvest(rows, i, prev, tree.tokens[i]);
  }
}

}  // namespace goose
