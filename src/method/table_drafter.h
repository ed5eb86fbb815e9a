// TableDrafter: the harvest every transition-table method shares (docs/methods.md §2.4).
//
// After every target pass each evaluated row, rejected tree nodes included, in node order (so the
// last occurrence of a token wins), is harvested: its top-K logits, softmaxed over those K,
// overwrite the table's unigram row of the row's input token and the bigram entry keyed on its
// predecessor. A node's predecessor is its tree parent's token; the root row of a tree route has
// none (unigram tier only), the root row of a chain route or plain step has the previous committed
// token. Prefill rows: every prompt row (GOOSE family) or only the last one (TR).
// A variant that does not keep its table clears it at the start of every request.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "method/method.h"

namespace goose {

class TableDrafter : public Drafter {
 public:
  TableDrafter(TransitionTable& table, bool keep_table, bool harvest_whole_prompt);

  void Begin(std::span<const int32_t> prompt) override;
  void ObservePrefill(std::span<const int32_t> prompt, int i0, int i1,
                      const ScoredRows& rows) override;
  // Harvests the tree's rows that were scored (all of them from goose's own passes; a host
  // engine may give fewer, or none).
  void Observe(const CycleInput& in, const Proposal& p, const ScoredRows& rows,
               const AcceptResult& accepted) override;

 protected:
  TransitionTable& table_;

 private:
  void Harvest(const ScoredRows& rows, int row, int32_t prev, int32_t token);
  bool keep_table_;
  bool harvest_whole_prompt_;
  std::vector<int32_t> topk_ids_;
  std::vector<float> topk_scores_;
};

}  // namespace goose
