// SizeCut against brute force: over random falling value sequences, cost curves, scales, rates
// and extra seconds, its cut is the best curve size of the whole sequence, and whenever
// MayGrow says no after k nodes no curve size above k scores more than the best size up to k;
// it does say no early in most cases (the point of it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tree/size_cut.h"
#include "util/rng.h"

namespace goose {
namespace {

TEST(SizeCut, CutsAtTheBestSizeAndStopsOnlyWhereNoLargerSizeCouldPay) {
  SplitMix64 rng(11);
  int early = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<CostSample> cost;
    double c = 0.01 + 0.01 * rng.Uniform();
    for (int n : {1, 2, 4, 8, 12, 16, 24, 32, 48, 64}) {
      c += (n > 4 ? 0.002 * n : 0.0005) * rng.Uniform();
      cost.push_back({n, c});
    }
    const int n_nodes = 1 + static_cast<int>(rng.Below(64));
    std::vector<double> values = {1.0};  // the root
    for (int i = 1; i < n_nodes; ++i) values.push_back(values.back() * rng.Uniform());
    std::vector<double> scale(n_nodes + 1);
    for (double& s : scale) s = 0.5 + rng.Uniform();
    // Both scores: the run's rate known (half the trials), or each size's tokens per second.
    const double rate = trial % 2 == 0 ? 20 + 200 * rng.Uniform() : 0.0;
    const double extra = trial % 3 == 0 ? 0.01 * rng.Uniform() : 0.0;
    // Brute force: the score of every curve size the sequence reaches, and the best of them.
    std::vector<double> score(n_nodes + 1, -HUGE_VAL);
    double expected = 1;
    int best = 1;
    for (int k = 1; k <= n_nodes; ++k) {
      if (k > 1) expected += scale[k - 1] * values[k - 1];
      for (const CostSample& s : cost) {
        if (s.nodes == k) score[k] = SizeScore(expected, s.seconds + extra, rate);
      }
      if (score[k] > score[best]) best = k;
    }
    SizeCut cut(cost, scale, rate, extra);
    bool stopped = false;
    for (int k = 1; k <= n_nodes; ++k) {
      if (k > 1) cut.Add(values[k - 1]);
      ASSERT_EQ(cut.size(), k);
      const double left = k < n_nodes ? values[k] : 0.0;
      if (stopped || cut.MayGrow(left)) continue;
      stopped = true;
      early += k < n_nodes;
      const double best_before = *std::max_element(score.begin(), score.begin() + k + 1);
      for (int s = k + 1; s <= n_nodes; ++s) {
        ASSERT_LE(score[s], best_before) << "trial " << trial << " stopped at " << k;
      }
      EXPECT_EQ(cut.best_size(), best) << "trial " << trial << " stopped at " << k;
    }
    EXPECT_EQ(cut.best_size(), best) << "trial " << trial;
  }
  EXPECT_GT(early, 1000);
}

}  // namespace
}  // namespace goose
