// Test helpers: synthetic TransitionTables built through the real Harvest().
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "draft/transition_table.h"
#include "tree/draft_tree.h"
#include "util/rng.h"

namespace goose::tree_test {

// Every row t harvested (unigram only) with ids (t + 1 + r) % V: distinct within a row, scores
// `scores` (default: non-increasing 0.5, 0.25, ... floored at 1/64, all above min_score 0.01).
inline void FillFullTable(TransitionTable& table, std::vector<float> scores = {}) {
  const int k = table.k();
  if (scores.empty()) {
    for (int r = 0; r < k; ++r) scores.push_back(0.5f / static_cast<float>(1 << std::min(r, 5)));
  }
  std::vector<int32_t> ids(k);
  for (int32_t t = 0; t < table.n_vocab(); ++t) {
    for (int r = 0; r < k; ++r) ids[r] = (t + 1 + r) % table.n_vocab();
    table.Harvest(-1, t, ids, scores);
  }
}

// Random table: a fraction of rows observed, some bigram entries; ids distinct per row, scores
// a softmax of random logits (sorted by Harvest).
inline void FillRandomTable(TransitionTable& table, SplitMix64& rng, double observed = 0.7,
                            double bigram = 0.3) {
  const int v = table.n_vocab(), k = std::min(table.k(), table.n_vocab());
  std::vector<int32_t> ids(k);
  std::vector<float> scores(k);
  auto random_row = [&]() {
    std::vector<int32_t> perm(v);
    for (int i = 0; i < v; ++i) perm[i] = i;
    for (int i = 0; i < k; ++i) std::swap(perm[i], perm[i + rng.Below(v - i)]);
    double sum = 0;
    const double temp = 0.3 + 3 * rng.Uniform();
    for (int i = 0; i < k; ++i) {
      ids[i] = perm[i];
      scores[i] = static_cast<float>(std::exp(rng.Normal() * temp));
      sum += scores[i];
    }
    for (auto& s : scores) s = static_cast<float>(s / sum);
  };
  for (int32_t t = 0; t < v; ++t) {
    if (rng.Uniform() < observed) {
      random_row();
      table.Harvest(-1, t, ids, scores);
    }
    if (rng.Uniform() < bigram) {
      random_row();
      table.Harvest(static_cast<int32_t>(rng.Below(v)), t, ids, scores);
    }
  }
}

// Nodes per depth (index 0 = root).
inline std::vector<int> LevelSizes(const DraftTree& tree) {
  std::vector<int> levels;
  for (int i = 0; i < tree.size(); ++i) {
    if (tree.depth[i] >= static_cast<int>(levels.size())) levels.resize(tree.depth[i] + 1, 0);
    ++levels[tree.depth[i]];
  }
  return levels;
}

inline int ChildCount(const DraftTree& tree, int node) {
  return static_cast<int>(std::count(tree.parents.begin(), tree.parents.end(), node));
}

}  // namespace goose::tree_test
