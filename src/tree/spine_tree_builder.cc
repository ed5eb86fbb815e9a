// BuildSpineTree / PlanSpineTree: GOOSE's anisotropic tree, Algorithm 1 as docs/methods.md
// §3.6.2 gives it (steps 1-8), with conventions 8, 9 and 15 of §7.
#include <algorithm>
#include <cmath>
#include <deque>
#include <utility>

#include "tree/exact_math.h"
#include "tree/tree_builders.h"

namespace goose {

using tree_internal::Rational;
using tree_internal::RationalFromDouble;

SpineTreePlan PlanSpineTree(int spine_size, Confidence c, const SpineEma& spine_ema,
                            const GooseParams& params) {
  // Clamp c into [0, 1]; c == 1 is the saturated case.
  if (c.den <= 0 || c.num <= 0) c = {0, 1};
  if (c.num >= c.den) c = {1, 1};
  const __int128 cn = c.num, cd = c.den;

  SpineTreePlan plan;
  const int64_t extension = std::max(0, params.max_extended_chain - params.base_budget);
  plan.budget = params.base_budget + static_cast<int>(extension * cn / cd);

  // Tier: e < 1/5, e < 2/5, else; exact (SpineEma keeps e as a fraction).
  const double tier = spine_ema.Less(1, 5)   ? params.tiers[0]
                      : spine_ema.Less(2, 5) ? params.tiers[1]
                                             : params.tiers[2];
  const Rational r0 = RationalFromDouble(tier);
  // r = r0 + c (1 - r0) = (p cd + cn (q - p)) / (q cd) for r0 = p / q.
  __int128 rn = static_cast<__int128>(r0.num) * cd + cn * (r0.den - r0.num);
  __int128 rd = static_cast<__int128>(r0.den) * cd;
  __int128 a = rn, b = rd;  // reduce by the gcd (no std::gcd for __int128)
  while (b != 0) {
    const __int128 t = a % b;
    a = b;
    b = t;
  }
  if (a > 1) {
    rn /= a;
    rd /= a;
  }
  plan.ratio_num = static_cast<int64_t>(rn);
  plan.ratio_den = static_cast<int64_t>(rd);

  const __int128 spine_cap = std::max<__int128>(0, plan.budget * rn / rd);
  plan.spine_len = static_cast<int>(std::min<__int128>(std::max(spine_size, 0), spine_cap));
  plan.branch_budget = plan.budget - 1 - plan.spine_len;
  if (plan.spine_len > 0 && plan.branch_budget > 0) {
    const Rational rho = RationalFromDouble(params.rho);
    const int64_t share = std::max<int64_t>(0, plan.branch_budget * rho.num / rho.den);
    plan.spine_share =
        static_cast<int>(std::min<int64_t>(std::max<int64_t>(1, share), plan.branch_budget));
  }
  plan.root_share = std::max(0, plan.branch_budget - plan.spine_share);
  plan.spine_alloc = tree_internal::HarmonicAllocations(plan.spine_share, plan.spine_len);
  return plan;
}

DraftTree BuildSpineTree(int32_t anchor, int32_t anchor_prev, std::span<const int32_t> spine,
                         Confidence c, const SpineEma& spine_ema, const TransitionTable& table,
                         const GooseParams& params) {
  const SpineTreePlan plan = PlanSpineTree(static_cast<int>(spine.size()), c, spine_ema, params);
  const int ls = plan.spine_len;
  DraftTree tree;
  tree.Reset(anchor);
  // Step 3: spine nodes 1..Ls (node i + 1 carries spine[i]).
  for (int i = 0; i < ls; ++i) tree.Add(spine[i], i, NodeSource::kSpine, 0, 1.0f);

  // (node, score it was drafted with), FIFO.
  std::deque<std::pair<int, float>> frontier;
  // Attaches up to `limit` candidates as branch children of `parent`, skipping `skip` (if
  // has_skip) and stopping at the first score below min_score; queues children that may grow.
  auto attach = [&](int parent, int32_t prev, int limit, bool has_skip, int32_t skip) {
    if (limit <= 0) return;
    const std::vector<Candidate> succ = table.Successors(tree.tokens[parent], prev);
    int attached = 0;
    for (size_t r = 0; r < succ.size() && attached < limit; ++r) {
      if (!(succ[r].score >= params.min_score)) break;  // NaN fails too
      if (has_skip && succ[r].token == skip) continue;
      if (tree.FindChild(parent, succ[r].token) >= 0) continue;  // malformed list guard
      const int node =
          tree.Add(succ[r].token, parent, NodeSource::kBranch, static_cast<int>(r), succ[r].score);
      ++attached;
      if (tree.depth[node] < params.max_depth) frontier.emplace_back(node, succ[r].score);
    }
  };

  // Step 5: root branches; skip S_1 only when it is in the tree (convention 8).
  attach(0, anchor_prev, plan.root_share, ls > 0, ls > 0 ? spine[0] : 0);
  // Step 6: spine branches, keyed on the spine bigram; skip S_{i+2} only if it is in the tree.
  for (int i = 0; i < ls; ++i) {
    const int32_t prev = i == 0 ? anchor : spine[i - 1];
    attach(i + 1, prev, plan.spine_alloc[i], i + 1 < ls, i + 1 < ls ? spine[i + 1] : 0);
  }

  // Step 7: breadth-first extension with confidence-scaled, depth-capped width.
  int remaining = plan.budget - tree.size();
  while (!frontier.empty() && remaining > 0) {
    const auto [v, s] = frontier.front();
    frontier.pop_front();
    const std::vector<Candidate> succ =
        table.Successors(tree.tokens[v], tree.tokens[tree.parents[v]]);
    const double want = std::ceil(static_cast<double>(remaining) * static_cast<double>(s));
    int width = static_cast<int>(std::max(1.0, std::min<double>(succ.size(), want)));
    width = std::min(width, std::max(1, params.k / tree.depth[v]));
    for (int r = 0; r < width && r < static_cast<int>(succ.size()); ++r) {
      if (remaining == 0 || !(succ[r].score >= params.min_score)) break;
      if (tree.FindChild(v, succ[r].token) >= 0) continue;  // malformed list guard
      const int node = tree.Add(succ[r].token, v, NodeSource::kBranch, r, succ[r].score);
      --remaining;
      if (tree.depth[node] < params.max_depth) frontier.emplace_back(node, succ[r].score);
    }
  }
  return tree;
}

}  // namespace goose
