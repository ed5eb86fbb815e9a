// BuildBalancedTree: the isotropic control of docs/methods.md §3.4 / convention 11 (BFS, k
// children per node).
#include <deque>

#include "tree/tree_builders.h"

namespace goose {

DraftTree BuildBalancedTree(int32_t anchor, int32_t anchor_prev, const TransitionTable& table,
                            const BalancedParams& params) {
  DraftTree tree;
  tree.Reset(anchor);
  std::deque<int> frontier = {0};
  while (!frontier.empty() && tree.size() < params.budget) {
    const int v = frontier.front();
    frontier.pop_front();
    // Children would sit deeper than max_depth.
    if (tree.depth[v] >= params.max_depth) continue;
    const int32_t prev = v == 0 ? anchor_prev : tree.tokens[tree.parents[v]];
    const std::vector<Candidate> succ = table.Successors(tree.tokens[v], prev);
    int attached = 0;
    for (size_t r = 0; r < succ.size(); ++r) {
      if (attached == params.k || tree.size() >= params.budget) break;
      // Lists are sorted, so the rest is lower; a NaN score fails too.
      if (!(succ[r].score >= params.min_score)) break;
      // Lists hold distinct ids; the guard keeps siblings distinct even for a malformed list.
      if (tree.FindChild(v, succ[r].token) >= 0) continue;
      frontier.push_back(
          tree.Add(succ[r].token, v, NodeSource::kBranch, static_cast<int>(r), succ[r].score));
      ++attached;
    }
  }
  return tree;
}

}  // namespace goose
