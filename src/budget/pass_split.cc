#include "budget/pass_split.h"

#include <algorithm>
#include <cmath>

#include "tree/size_cut.h"

namespace goose {

namespace {

double PassCost(const std::vector<double>& cost, int rows) {
  const int last = static_cast<int>(cost.size()) - 1;
  if (last < 1) return static_cast<double>(rows);
  if (rows <= last) return cost[rows];
  return cost[last] * rows / last;
}

}  // namespace

std::vector<int> SplitPass(std::span<const PassTree> trees, const std::vector<double>& cost,
                           double rate) {
  std::vector<int> keep(trees.size(), 1);
  int rows = 0;
  double tokens = 0;
  for (size_t i = 0; i < trees.size(); ++i) {
    if (trees[i].fixed) keep[i] = trees[i].rows;
    rows += keep[i];
    tokens += trees[i].fixed ? 0.0 : 1.0;
  }
  std::vector<int> next = keep, best = keep;  // next[i]: the next node of tree i
  double best_score = SizeScore(tokens, PassCost(cost, rows), rate);
  while (true) {
    int pick = -1;
    for (size_t i = 0; i < trees.size(); ++i) {
      const PassTree& t = trees[i];
      if (t.fixed || next[i] >= t.rows) continue;
      if (pick < 0 || t.values[next[i]] > trees[pick].values[next[pick]])
        pick = static_cast<int>(i);
    }
    if (pick < 0) break;
    tokens += trees[pick].values[next[pick]++];
    ++rows;
    const double score = SizeScore(tokens, PassCost(cost, rows), rate);
    if (score > best_score) {
      best_score = score;
      best = next;
    }
  }
  return best;
}

}  // namespace goose
