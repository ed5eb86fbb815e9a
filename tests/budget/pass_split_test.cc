// SplitPass against brute force: over random trees (falling values), curves and rates, the
// split scores as well as the best choice of a prefix of every tree (roots in, fixed rows in),
// and keeps prefixes the greedy rule can reach. Plus the shapes a server meets: a steep curve
// cuts every tree to its root, a flat one keeps them whole, fixed rows are never cut.
#include "budget/pass_split.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "budget/budget_chooser.h"
#include "tree/size_cut.h"
#include "util/rng.h"

namespace goose {
namespace {

double Cost(const std::vector<double>& cost, int rows) {
  const int last = static_cast<int>(cost.size()) - 1;
  return rows <= last ? cost[rows] : cost[last] * rows / last;
}

double Score(const std::vector<PassTree>& trees, const std::vector<int>& keep,
             const std::vector<double>& cost, double rate) {
  double tokens = 0;
  int rows = 0;
  for (size_t i = 0; i < trees.size(); ++i) {
    rows += keep[i];
    if (trees[i].fixed) continue;
    for (int k = 0; k < keep[i]; ++k) tokens += k == 0 ? 1.0 : trees[i].values[k];
  }
  return SizeScore(tokens, Cost(cost, rows), rate);
}

TEST(SplitPass, ScoresAsTheBestPrefixOfEveryTree) {
  SplitMix64 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<CostSample> samples;
    double c = 0.01;
    for (int n : {1, 2, 4, 8, 16, 32, 64}) {
      c += (n > 8 ? 0.002 * n : 0.0004 * n) * rng.Uniform();
      samples.push_back({n, c});
    }
    const std::vector<double> cost = ExpandCostCurve(samples);
    std::vector<PassTree> trees(1 + rng.Below(3));
    for (PassTree& t : trees) {
      t.fixed = rng.Below(4) == 0;
      t.rows = 1 + static_cast<int>(rng.Below(6));
      t.values = {1.0};
      for (int k = 1; k < t.rows; ++k) t.values.push_back(t.values.back() * rng.Uniform());
    }
    const double rate = trial % 2 ? 0.0 : 50 + 500 * rng.Uniform();
    const std::vector<int> keep = SplitPass(trees, cost, rate);
    double best = -HUGE_VAL;
    std::vector<int> pick(trees.size());
    std::function<void(size_t)> all = [&](size_t i) {
      if (i == trees.size()) {
        best = std::max(best, Score(trees, pick, cost, rate));
        return;
      }
      for (int k = trees[i].fixed ? trees[i].rows : 1; k <= trees[i].rows; ++k) {
        pick[i] = k;
        all(i + 1);
      }
    };
    all(0);
    for (size_t i = 0; i < trees.size(); ++i) {
      ASSERT_GE(keep[i], 1);
      ASSERT_LE(keep[i], trees[i].rows);
      if (trees[i].fixed) {
        ASSERT_EQ(keep[i], trees[i].rows);
      }
    }
    EXPECT_NEAR(Score(trees, keep, cost, rate), best, 1e-9 * std::max(1.0, std::fabs(best)))
        << "trial " << trial;
  }
}

TEST(SplitPass, SteepCurvesCutToRootsFlatOnesKeepEverything) {
  const std::vector<PassTree> trees = {{{1, 0.9, 0.8, 0.7}, 4, false},
                                       {{1, 0.5, 0.2}, 3, false},
                                       {{}, 64, true}};  // a prefill chunk
  std::vector<double> steep(129), flat(129);
  for (int n = 1; n <= 128; ++n) {
    steep[n] = 0.01 * n;             // every row costs a whole pass
    flat[n] = 0.01 * (1 + n / 1e4);  // rows nearly free
  }
  EXPECT_EQ(SplitPass(trees, steep, 100.0), (std::vector<int>{1, 1, 64}));
  EXPECT_EQ(SplitPass(trees, flat, 100.0), (std::vector<int>{4, 3, 64}));
  // In between (a row costs 0.6 tokens at 100 tokens/s), the nodes worth more than they cost
  // go in, whichever tree they are in.
  std::vector<double> mid(129);
  for (int n = 1; n <= 128; ++n) mid[n] = 0.01 + 0.006 * n;
  EXPECT_EQ(SplitPass(trees, mid, 100.0), (std::vector<int>{4, 1, 64}));
}

}  // namespace
}  // namespace goose
