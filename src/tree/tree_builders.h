// Tree builders: shape a DraftTree under a node budget from the draft sources
// (docs/methods.md §3.2-§3.7; conventions in §7). All builders are deterministic
// functions of their inputs and never exceed their budget (root included, except TR's fixed
// 81-node template and GOOSE's saturated 101-node chain, as specified).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "draft/context_matcher.h"
#include "draft/transition_table.h"
#include "tree/draft_tree.h"
#include "tree/spine_ema.h"

namespace goose {

// Chain: root -> tokens[0] -> tokens[1] ... (PLD, chain route). Sources tagged `source`.
// At most max_nodes nodes incl. the root; the root is always present (max_nodes < 1 acts as 1).
DraftTree BuildChain(int32_t anchor, std::span<const int32_t> tokens, int max_nodes,
                     NodeSource source = NodeSource::kChain);

// Token Recycling: the static 80-node template of docs/methods.md §3.3 ("2.2.2") filled from the
// unigram tier (rows never harvested give token 0s, convention 5; duplicate siblings are dropped).
// token(node) = UnigramIds(token(parent))[rank], ranks 0..7 (TR's k = 8; a table with a smaller K
// drops the nodes whose rank it lacks). TR's reference keeps duplicate siblings (e.g. eight 0s
// under an empty row); DraftTree needs distinct siblings, so a node whose token repeats an earlier
// sibling is dropped together with its template subtree. In template "2.2.2" an earlier sibling's
// subtree shape contains every later sibling's, and the tokens below equal tokens are the same, so
// no token path is lost and the walk's result is unchanged (only the dropped rows are no longer
// harvested). Nodes are tagged kBranch; ranks are the template ranks.
DraftTree BuildTrTree(int32_t anchor, const TransitionTable& table);
// The template as rank paths, level by level (parents before children), root excluded: 80 paths.
const std::vector<std::vector<int>>& TrTemplatePaths();

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

// Sequoia: optimal tree shape for per-rank acceptance p[0..W) (the DP of docs/methods.md §3.5),
// filled from the table. `budget` counts the root; `max_depth` is the deepest node depth (edges),
// i.e. the DP's l counts max_depth + 1 levels. The shape maximises F = 1 + sum_v prod p over at
// most `budget` nodes (the smallest node count reaching the best F); p values outside [0, 1] are
// clamped. BuildFromTemplate walks the paths in order; a node whose rank is missing from its
// parent's Successors list (or scores below min_score) is skipped with its subtree. Nodes are
// kBranch.
struct SequoiaShape {
  // Template as rank paths in node order (parents before children); root excluded.
  std::vector<std::vector<int>> paths;
  double expected_tokens = 0;  // F(T) incl. bonus
};
SequoiaShape SequoiaDp(std::span<const double> p_rank, int budget, int max_depth);
DraftTree BuildFromTemplate(int32_t anchor, int32_t anchor_prev, const SequoiaShape& shape,
                            const TransitionTable& table, float min_score);

// GOOSE spine tree: Algorithm 1 (docs/methods.md §3.6.2) with the paper defaults. Node order
// (convention 9): root, spine 1..Ls (kSpine), root branches, spine branches in spine order, then
// BFS extension (kBranch, rank = index in the Successors list). Root branches use
// Successors(anchor, anchor_prev) and skip S_1 only if Ls > 0; spine node i uses
// Successors(S_{i+1}, its parent's token) and skips S_{i+2} only if it is in the tree
// (convention 8). n <= B, except c == 1 with a spine reaching B: root + B spine nodes (the
// saturated 101-node chain). A candidate repeating an existing sibling (impossible for lists
// from TopK) is skipped so invariants always hold.
struct GooseParams {
  int base_budget = 60;                  // B0
  int max_extended_chain = 100;          // E = max(0, max_extended_chain - B0)
  double tiers[3] = {0.15, 0.30, 0.50};  // r0 for e < 1/5, < 2/5, else (exact tests)
  double rho = 0.5;                      // share of branch budget on spine nodes
  int k = 10;
  int max_depth = 6;  // D_max
  float min_score = 0.01f;
};
DraftTree BuildSpineTree(int32_t anchor, int32_t anchor_prev, std::span<const int32_t> spine,
                         Confidence c, const SpineEma& spine_ema, const TransitionTable& table,
                         const GooseParams& params);

// The table-independent numbers of Algorithm 1 steps 1-4 and 6 (docs/methods.md §3.6.2; worked
// examples in §3.6.4) for a spine of `spine_size` tokens, in exact arithmetic (convention 15; tiers
// and rho are read as the rationals they print as, 0.15 = 3/20; the tier test on the EMA is exact,
// see SpineEma). A confidence outside [0, 1] (or den <= 0) is clamped.
struct SpineTreePlan {
  int budget = 0;         // B = B0 + floor(c * E)
  int64_t ratio_num = 0;  // r = ratio_num / ratio_den = r0 + c (1 - r0)
  int64_t ratio_den = 1;
  int spine_len = 0;             // Ls = min(|S|, floor(B r))
  int branch_budget = 0;         // Bb = B - 1 - Ls (-1 for the saturated 100-node spine)
  int spine_share = 0;           // max(1, floor(Bb rho)) if Ls > 0 and Bb > 0, else 0
  int root_share = 0;            // max(0, Bb - spine_share)
  std::vector<int> spine_alloc;  // [Ls] 1/(i+1) allocations of spine_share
};
SpineTreePlan PlanSpineTree(int spine_size, Confidence c, const SpineEma& spine_ema,
                            const GooseParams& params);

}  // namespace goose
