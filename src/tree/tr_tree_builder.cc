// BuildTrTree: Token Recycling's static template "2.2.2" (docs/methods.md §3.3).
#include <algorithm>
#include <map>

#include "tree/tree_builders.h"

namespace goose {
namespace {

// TR uses the first 8 ranks of its [V x 8] matrix.
constexpr int kTrRanks = 8;

// Child counts of template "2.2.2" (docs/methods.md §3.3); unlisted paths have none.
const std::map<std::vector<int>, int>& ChildCounts() {
  static const std::map<std::vector<int>, int> counts = {
      {{}, 8},
      {{0}, 8},
      {{1}, 4},
      {{2}, 3},
      {{3}, 2},
      {{4}, 1},
      {{5}, 1},
      {{6}, 1},
      {{7}, 1},
      {{0, 0}, 8},
      {{0, 1}, 3},
      {{0, 2}, 2},
      {{0, 3}, 1},
      {{0, 4}, 1},
      {{0, 5}, 1},
      {{0, 6}, 1},
      {{0, 7}, 1},
      {{1, 0}, 2},
      {{1, 1}, 1},
      {{2, 0}, 1},
      {{3, 0}, 1},
      {{4, 0}, 1},
      {{5, 0}, 1},
      {{0, 0, 0}, 5},
      {{0, 0, 1}, 2},
      {{0, 0, 2}, 1},
      {{0, 0, 3}, 1},
      {{0, 0, 4}, 1},
      {{0, 1, 0}, 1},
      {{0, 2, 0}, 1},
      {{1, 0, 0}, 1},
      {{2, 0, 0}, 1},
      {{3, 0, 0}, 1},
      {{0, 0, 0, 0}, 3},
      {{0, 0, 0, 1}, 1},
      {{0, 0, 0, 2}, 1},
      {{0, 0, 1, 0}, 1},
      {{0, 1, 0, 0}, 1},
      {{1, 0, 0, 0}, 1},
      {{0, 0, 0, 0, 0}, 2},
      {{0, 0, 0, 1, 0}, 1},
  };
  return counts;
}

}  // namespace

const std::vector<std::vector<int>>& TrTemplatePaths() {
  static const std::vector<std::vector<int>> paths = [] {
    std::vector<std::vector<int>> out;
    // Level by level; within a level, parents in the previous level's order, children by rank.
    std::vector<std::vector<int>> level = {{}};
    while (!level.empty()) {
      std::vector<std::vector<int>> next;
      for (const auto& parent : level) {
        auto it = ChildCounts().find(parent);
        const int count = it == ChildCounts().end() ? 0 : it->second;
        for (int r = 0; r < count; ++r) {
          std::vector<int> child = parent;
          child.push_back(r);
          next.push_back(child);
        }
      }
      out.insert(out.end(), next.begin(), next.end());
      level = std::move(next);
    }
    return out;
  }();
  return paths;
}

DraftTree BuildTrTree(int32_t anchor, const TransitionTable& table) {
  DraftTree tree;
  tree.Reset(anchor);
  const int ranks = std::min(kTrRanks, table.k());
  // Template node -> tree node, or -1 when the node (or an ancestor) was dropped.
  const auto& paths = TrTemplatePaths();
  std::map<std::vector<int>, int> node_of = {{{}, 0}};
  for (const auto& path : paths) {
    std::vector<int> parent_path(path.begin(), path.end() - 1);
    const int parent = node_of[parent_path];  // Parents precede children in `paths`.
    const int rank = path.back();
    int node = -1;
    if (parent >= 0 && rank < ranks) {
      const int32_t parent_tok = tree.tokens[parent];
      // Out-of-vocab tokens have no row: they behave like a never-harvested (zero) row.
      const bool in_vocab = parent_tok >= 0 && parent_tok < table.n_vocab();
      const int32_t tok = in_vocab ? table.UnigramIds(parent_tok)[rank] : 0;
      const float score = in_vocab ? table.UnigramScores(parent_tok)[rank] : 0.0f;
      // A repeated sibling token is dropped with its subtree (see tree_builders.h), and so is
      // a padding id (-1, a row harvested with fewer than K candidates).
      if (tok >= 0 && tree.FindChild(parent, tok) < 0) {
        node = tree.Add(tok, parent, NodeSource::kBranch, rank, score);
      }
    }
    node_of[path] = node;
  }
  return tree;
}

}  // namespace goose
