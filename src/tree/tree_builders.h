// Tree builders: shape a DraftTree under a node budget from the draft sources
// (docs/algorithms.md §1.5, §2.1, §4.2; conventions in §9). All builders are deterministic
// functions of their inputs and never exceed their budget (root included, except TR's fixed
// 81-node template and GOOSE's saturated 101-node chain, as specified).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "draft/context_matcher.h"
#include "draft/transition_table.h"
#include "tree/draft_tree.h"

namespace goose {

// Chain: root -> tokens[0] -> tokens[1] ... (PLD, chain route). Sources tagged kChain.
DraftTree BuildChain(int32_t anchor, std::span<const int32_t> tokens, int max_nodes);

// Token Recycling: the static 80-node template of §2.1 ("2.2.2") filled from the unigram tier
// (rows never harvested give token 0s, convention 5; duplicate siblings are dropped).
DraftTree BuildTrTree(int32_t anchor, const TransitionTable& table);

// Balanced control: BFS, every node up to k children from Successors(tok, parent tok), same
// min_score and max_depth as GOOSE, budget `budget` nodes incl. root.
struct BalancedParams {
  int budget = 60;
  int k = 3;
  int max_depth = 6;
  float min_score = 0.01f;
};
DraftTree BuildBalancedTree(int32_t anchor, int32_t anchor_prev, const TransitionTable& table,
                            const BalancedParams& params);

// Sequoia: optimal tree shape for per-rank acceptance p[0..W) (§4.2 DP), filled from the table.
struct SequoiaShape {
  // Template as rank paths in node order (parents before children); root excluded.
  std::vector<std::vector<int>> paths;
  double expected_tokens = 0;  // F(T) incl. bonus
};
SequoiaShape SequoiaDp(std::span<const double> p_rank, int budget, int max_depth);
DraftTree BuildFromTemplate(int32_t anchor, int32_t anchor_prev, const SequoiaShape& shape,
                            const TransitionTable& table, float min_score);

// GOOSE spine tree: Algorithm 1 (§1.5) with the paper defaults.
struct GooseParams {
  int base_budget = 60;           // B0
  int max_extended_chain = 100;   // E = max(0, max_extended_chain - B0)
  double tiers[3] = {0.15, 0.30, 0.50};  // r0 for e < 0.2, < 0.4, else
  double rho = 0.5;               // share of branch budget on spine nodes
  int k = 10;
  int max_depth = 6;              // D_max
  float min_score = 0.01f;
};
DraftTree BuildSpineTree(int32_t anchor, int32_t anchor_prev, std::span<const int32_t> spine,
                         Confidence c, double spine_ema, const TransitionTable& table,
                         const GooseParams& params);

}  // namespace goose
