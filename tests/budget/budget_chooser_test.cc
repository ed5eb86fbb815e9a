// The cost-aware budget chooser against analytically solvable cost curves and acceptance tables.
#include "budget/budget_chooser.h"
#include "budget/idle_drafter.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

namespace goose {
namespace {

std::vector<CostSample> Linear(double base, double slope, int max_nodes) {
  std::vector<CostSample> c;
  for (int b = 1; b <= max_nodes; b *= 2) c.push_back({b, base + slope * (b - 1)});
  return c;
}

TEST(ExpandCostCurve, InterpolatesAndIsNonDecreasing) {
  const std::vector<double> c = ExpandCostCurve({{1, 1.0}, {4, 4.0}, {8, 3.0}, {16, 10.0}});
  ASSERT_EQ(c.size(), 17u);
  EXPECT_DOUBLE_EQ(c[1], 1.0);
  EXPECT_DOUBLE_EQ(c[2], 2.0);
  // 4 measured 4.0 but 8 measured 3.0: the noise is clipped to what the bigger pass achieved.
  EXPECT_DOUBLE_EQ(c[4], 3.0);
  EXPECT_DOUBLE_EQ(c[12], 6.5);
  for (int b = 2; b <= 16; ++b) EXPECT_LE(c[b - 1], c[b]) << b;
  EXPECT_TRUE(ExpandCostCurve({}).empty());
}

TEST(CorrectCostCurve, ObservedSizesReplaceAndOthersScaleLikeTheirNeighbour) {
  const std::vector<CostSample> cal = {{16, 27.0}, {1, 10.0}, {2, 11.0}, {4, 12.0}, {8, 17.0}};
  // 2 observed 1.2x its calibration, 8 as calibrated; 5 is not a calibrated size (ignored).
  // 1 scales like 2 (none below); 4 like 2, above its calibration (the machine is slower now
  // than then); 16 like 8.
  std::vector<CostSample> c = CorrectCostCurve(cal, {{2, 13.2}, {8, 17.0}, {5, 99.0}});
  ASSERT_EQ(c.size(), 5u);
  const double want[][2] = {{1, 12.0}, {2, 13.2}, {4, 14.4}, {8, 17.0}, {16, 27.0}};
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].nodes, want[i][0]);
    EXPECT_NEAR(c[i].seconds, want[i][1], 1e-12) << c[i].nodes;
  }
  // Observed faster than calibrated (a calibration in a busy moment): the others follow down.
  c = CorrectCostCurve(cal, {{2, 5.5}});
  EXPECT_NEAR(c[0].seconds, 5.0, 1e-12);
  EXPECT_NEAR(c[2].seconds, 6.0, 1e-12);
  EXPECT_NEAR(c[4].seconds, 13.5, 1e-12);
  // Noisy medians that say 4 nodes cost more than 8 (seen on the 1.5B-cost model): 4 (and 2,
  // 1 with it) no dearer than 8, so a tree is never cut to 4 for a cost 8 does not have.
  const std::vector<CostSample> cal_1b = {{1, 32.7}, {2, 32.7}, {4, 32.7}, {8, 44.5}, {12, 54.6}};
  c = CorrectCostCurve(cal_1b, {{1, 40.3}, {2, 40.6}, {4, 47.1}, {8, 42.3}});
  const double noisy[] = {40.3, 40.6, 42.3, 42.3, 54.6 * 42.3 / 44.5};
  ASSERT_EQ(c.size(), 5u);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i].seconds, noisy[i], 1e-9) << c[i].nodes;
  // Nothing observed: the calibration as it is (sorted).
  const std::vector<CostSample> same = CorrectCostCurve(cal, {});
  const double cal_sorted[] = {10.0, 11.0, 12.0, 17.0, 27.0};
  for (size_t i = 0; i < same.size(); ++i) EXPECT_EQ(same[i].seconds, cal_sorted[i]);
}

TEST(ExpectedTokens, ChainIsGeometric) {
  AcceptanceModel m;
  m.rank_p = {0.5};
  const std::vector<double> e = ExpectedTokens(m, 10);
  for (int b = 1; b <= 10; ++b) EXPECT_NEAR(e[b], 2.0 - std::pow(0.5, b - 1), 1e-12) << b;
}

TEST(ExpectedTokens, TreeTakesTheLargestPathProducts) {
  AcceptanceModel m;
  m.rank_p = {0.6, 0.3};
  // Node values: 0.6, 0.36, 0.3, 0.216, then 0.18 twice (0.6*0.3 and 0.3*0.6).
  const std::vector<double> e = ExpectedTokens(m, 7);
  EXPECT_NEAR(e[2], 1.6, 1e-12);
  EXPECT_NEAR(e[3], 1.96, 1e-12);
  EXPECT_NEAR(e[4], 2.26, 1e-12);
  EXPECT_NEAR(e[5], 2.476, 1e-12);
  EXPECT_NEAR(e[6], 2.656, 1e-12);
  EXPECT_NEAR(e[7], 2.836, 1e-12);
}

TEST(ExpectedTokens, DepthFactorScalesDeeperNodes) {
  AcceptanceModel m;
  m.rank_p = {0.5};
  m.depth_factor = {1.0, 1.0, 2.0};  // depth >= 2 accepted with certainty once depth 1 is
  const std::vector<double> e = ExpectedTokens(m, 5);
  EXPECT_NEAR(e[5], 1 + 4 * 0.5, 1e-12);
}

TEST(BestBudget, ChainOnLinearCostMatchesClosedForm) {
  AcceptanceModel m;
  m.rank_p = {0.8};
  const int max_b = 64;
  const std::vector<double> cost = ExpandCostCurve(Linear(1.0, 0.1, max_b));
  // Closed form: E(B) = (1 - 0.8^B) / 0.2, c(B) = 1 + 0.1 (B - 1).
  int want = 1;
  double best = 0;
  for (int b = 1; b <= max_b; ++b) {
    const double rate = (1 - std::pow(0.8, b)) / 0.2 / (1 + 0.1 * (b - 1));
    if (rate > best) best = rate, want = b;
  }
  EXPECT_GT(want, 1);
  EXPECT_EQ(BestBudget(ExpectedTokens(m, max_b), cost), want);
}

TEST(BestBudget, FlatCostUntilAKneePicksTheKnee) {
  // Memory-bound up to 32 nodes, then steeply compute-bound: the best tree fills the flat part.
  std::vector<CostSample> c = {{1, 1.0}, {32, 1.0}, {64, 3.0}, {128, 6.0}};
  AcceptanceModel m;
  m.rank_p = {0.7, 0.2, 0.05};
  EXPECT_EQ(BestBudget(ExpectedTokens(m, 128), ExpandCostCurve(c)), 32);
}

TEST(BestBudget, NothingAcceptedMeansPlain) {
  AcceptanceModel m;
  m.rank_p = {0.0, 0.0};
  std::vector<CostSample> flat = {{1, 1.0}, {128, 1.0}};
  EXPECT_EQ(BestBudget(ExpectedTokens(m, 128), ExpandCostCurve(flat)), 1);
}

TEST(BestBudgetForTreeSizes, ChargesTheTreeThatIsBuiltNotTheBudget) {
  // Synthetic curve c(B) = 1 + B / 16 and a long accepted chain: nominally the biggest budget
  // pays (E grows by 0.99 a node, c by 1/16).
  std::vector<CostSample> samples;
  for (int b = 1; b <= 64; ++b) samples.push_back({b, 1.0 + b / 16.0});
  const std::vector<double> cost = ExpandCostCurve(samples);
  AcceptanceModel m;
  m.rank_p = {0.999};
  const std::vector<double> e = ExpectedTokens(m, 64);
  EXPECT_EQ(BestBudget(e, cost), 64);
  std::vector<std::vector<int64_t>> sizes(65, std::vector<int64_t>(65, 0));
  EXPECT_EQ(BestBudgetForTreeSizes(e, cost, sizes), 64);  // nothing observed: nominal
  sizes[64][64] = 10;                                     // trees filled their budget
  EXPECT_EQ(BestBudgetForTreeSizes(e, cost, sizes), 64);
  // Trees at budget 64 stopped at 11 nodes (PLD's chain): every budget >= 11 builds and costs
  // 11 nodes, and the smallest of the equal rates wins.
  sizes[64][64] = 0;
  sizes[64][11] = 20;
  sizes[5][5] = 3;  // cheap probes that filled their budget say nothing about larger ones
  EXPECT_EQ(BestBudgetForTreeSizes(e, cost, sizes), 11);
  // Half the cycles at 64 had room for all 64 nodes: the pooled rate
  // (E[11] + E[64]) / (c(11) + c(64)) beats E[11] / c(11) here.
  sizes[64][64] = 20;
  EXPECT_GT((e[11] + e[64]) / (cost[11] + cost[64]), e[11] / cost[11]);
  EXPECT_EQ(BestBudgetForTreeSizes(e, cost, sizes), 64);
}

TEST(BudgetChooser, LearnsThatTreesStopShortOfTheBudget) {
  std::vector<CostSample> samples;
  for (int b = 1; b <= 64; ++b) samples.push_back({b, 1.0 + b / 16.0});
  BudgetChooser choose(samples);
  // A chain source accepted almost always whose trees never exceed 11 nodes.
  SpecStats h;
  BudgetHistory history;
  const int ch = static_cast<int>(NodeSource::kChain);
  std::vector<int> chosen;
  for (int cycle = 0; cycle < 60; ++cycle) {
    const int last = choose.Choose(h, history);
    chosen.push_back(last);
    const int nodes = std::min(last, 11);
    h.cycles += 1;
    h.committed += nodes;  // the whole chain, then the bonus token
    h.tree_nodes[nodes] += 1;
    h.tree_nodes_total += nodes;
    for (int d = 1; d < nodes; ++d) {
      h.drafted[ch] += 1;
      h.reached[ch] += 1;
      h.accepted[ch] += 1;
      h.reached_rank[ch][0] += 1;
      h.accepted_rank[ch][0] += 1;
      h.reached_depth[ch][d] += 1;
      h.accepted_depth[ch][d] += 1;
    }
    choose.Observe(last, nodes, nodes, &history);
  }
  // The budget climbs while the chain keeps being accepted, finds that trees stop at 11 nodes,
  // and settles there: every budget >= 11 builds 11 nodes and the smallest such wins
  // (exploration of its neighbours aside).
  EXPECT_GE(std::count(chosen.end() - 10, chosen.end(), 11), 8) << ::testing::PrintToString(chosen);
  ASSERT_TRUE(history.at.count(11));
  EXPECT_GT(history.at[11].tree_nodes[11], 0);
}

TEST(EstimateAcceptance, ReadsPerRankAndPerDepthCounts) {
  SpecStats s;
  const int br = static_cast<int>(NodeSource::kBranch);
  s.reached_rank[br][0] = 98;
  s.accepted_rank[br][0] = 49;
  s.reached_rank[br][1] = 48;
  s.accepted_rank[br][1] = 5;
  s.reached_depth[br][1] = 98;
  s.accepted_depth[br][1] = 49;
  s.reached_depth[br][2] = 48;
  s.accepted_depth[br][2] = 5;
  const AcceptanceModel m = EstimateAcceptance(s, 16);
  ASSERT_EQ(m.rank_p.size(), 2u);
  EXPECT_NEAR(m.rank_p[0], 0.49, 1e-12);  // 49 / (98 + 2 pseudo-misses)
  EXPECT_NEAR(m.rank_p[1], 0.1, 1e-12);
  ASSERT_EQ(m.depth_factor.size(), 3u);
  EXPECT_NEAR(m.depth_factor[2], 0.1 / 0.49, 1e-12);
}

SpecStats Drafted(int64_t reached, int64_t accepted) {
  SpecStats s;
  const int br = static_cast<int>(NodeSource::kBranch);
  s.cycles = reached;
  s.drafted[br] = reached;
  s.reached[br] = s.reached_rank[br][0] = s.reached_depth[br][1] = reached;
  s.accepted[br] = s.accepted_rank[br][0] = s.accepted_depth[br][1] = accepted;
  return s;
}

TEST(BudgetChooser, FallsBackToPlainAndProbesRarely) {
  // Compute-bound: c(B) = B. No tree can beat plain decoding.
  BudgetChooserOptions opt;
  opt.probe_every = 4;
  opt.max_probe_every = 16;
  BudgetChooser linear({{1, 1.0}, {64, 64.0}}, opt);
  EXPECT_EQ(linear.probe_budget(), 2);
  // Nothing drafted and no history yet: one cheap exploration cycle.
  EXPECT_EQ(linear.Choose(SpecStats{}, BudgetHistory{}), 2);
  const SpecStats none_accepted = Drafted(50, 0);
  int non_plain = 0;
  for (int i = 0; i < 200; ++i) non_plain += linear.Choose(none_accepted, BudgetHistory{}) != 1;
  // Probes after 4, 8, 16, 16, ... calls at budget 1: about 200/16 of them.
  EXPECT_GE(non_plain, 10);
  EXPECT_LE(non_plain, 16);
}

TEST(BudgetChooser, UsesTreesWhenTheyPay) {
  BudgetChooser choose({{1, 1.0}, {16, 1.0}, {128, 8.0}});
  // A chain with p ~ 0.7 on a flat curve up to 16.
  EXPECT_EQ(choose.Choose(Drafted(1000, 700), BudgetHistory{}), 16);
  EXPECT_EQ(choose.chosen()[16], 1);
}

// The calibration keeps each size's fastest pass; where real passes of 8 nodes cost about what
// 4 do, the corrected curve moves the choice from 4 to 8, keeping the chooser's counts.
TEST(BudgetChooser, ACorrectedCurveMovesTheChoice) {
  const std::vector<CostSample> steep = {{1, 1.0}, {4, 1.05}, {8, 1.6}, {16, 2.6}};
  BudgetChooser choose(steep);
  const SpecStats h = Drafted(1000, 700);  // a chain accepted with p ~ 0.7
  EXPECT_EQ(choose.Choose(h, BudgetHistory{}), 4);
  choose.SetCost(CorrectCostCurve(steep, {{1, 1.3}, {4, 1.3}, {8, 1.35}}));
  EXPECT_NEAR(choose.cost()[8], 1.35, 1e-12);
  EXPECT_NEAR(choose.cost()[16], 2.6 * 1.35 / 1.6, 1e-12);
  EXPECT_EQ(choose.samples().size(), 4u);
  EXPECT_EQ(choose.Choose(h, BudgetHistory{}), 8);
  EXPECT_EQ(choose.chosen()[4], 1);
  EXPECT_EQ(choose.chosen()[8], 1);
}

// Statistics that promise more than the cycles deliver: the per-rank counts keep saying 70% of
// the chain is accepted, but every cycle at budget 16 commits only its bonus token. Once 16 has
// run kMinMeasuredCycles cycles it is judged on what it committed (1 token for c(16) = c(1)),
// which no longer beats plain decoding (ties go to the smaller budget); the model alone would
// keep choosing 16 forever.
TEST(BudgetChooser, MeasuredTokensOverruleTheModel) {
  BudgetChooser choose({{1, 1.0}, {16, 1.0}, {128, 8.0}});
  SpecStats h = Drafted(1000, 700);
  BudgetHistory history;
  const int br = static_cast<int>(NodeSource::kBranch);
  std::vector<int> budgets;
  for (int cycle = 0; cycle < 200; ++cycle) {
    const int b = choose.Choose(h, history);
    budgets.push_back(b);
    h.cycles += 1;
    h.tree_nodes[b] += 1;
    h.tree_nodes_total += b;
    h.committed += 1;
    if (b > 1) {
      h.drafted[br] += b - 1;
      h.reached[br] += 10;
      h.reached_rank[br][0] += 10;
      h.reached_depth[br][1] += 10;
      h.accepted[br] += 7;
      h.accepted_rank[br][0] += 7;
      h.accepted_depth[br][1] += 7;
    }
    choose.Observe(b, b, 1, &history);
  }
  EXPECT_EQ(budgets[0], 16);
  const auto first_plain = std::find(budgets.begin(), budgets.end(), 1);
  ASSERT_NE(first_plain, budgets.end());
  EXPECT_LE(first_plain - budgets.begin(), kMinMeasuredCycles + 1);
  // Afterwards only the rare exploration probes run a tree.
  EXPECT_LE(std::count(budgets.end() - 100, budgets.end(), 16), 10);
}

// A hill climb on measured rates: the model rates 8 nodes best (p = 0.5 per node), but the
// cycles commit 1 + B/4 tokens up to 16 nodes. Exploring the neighbours of the best measures 16,
// which then wins, and 32 (too costly), which does not; without the history (a new process) the
// measured winner would be forgotten, which is why the history is persisted.
TEST(BudgetChooser, ExploresNeighboursAndMovesToTheMeasuredBest) {
  // Flat to 16, then steep.
  BudgetChooser choose({{1, 1.0}, {4, 1.0}, {8, 1.05}, {16, 1.1}, {32, 3.0}});
  SpecStats h = Drafted(1000, 500);  // p = 0.5 per node: E(8) ~ 2, E(16) ~ 2
  BudgetHistory history;
  std::vector<int> budgets;
  for (int cycle = 0; cycle < 600; ++cycle) {
    const int b = choose.Choose(h, history);
    budgets.push_back(b);
    choose.Observe(b, b, 1 + std::min(b, 16) / 4, &history);
  }
  ASSERT_TRUE(history.at.count(16));
  EXPECT_GE(history.at[16].cycles, kMinMeasuredCycles);
  EXPECT_GE(std::count(budgets.end() - 50, budgets.end(), 16), 40);  // exploration aside
  BudgetChooser fresh({{1, 1.0}, {4, 1.0}, {8, 1.05}, {16, 1.1}, {32, 3.0}});
  EXPECT_EQ(fresh.Choose(h, history), 16) << "a persisted history starts at the measured best";
}

// The engine's idle drafter: once kMinStreak cycles in a row drafted nothing, a drafter that
// costs 10% of a pass is skipped for 0.1 / kShare cycles (its share of those passes under
// kShare); one that costs 0.1% of a pass (a big model) never is; a drafted tree ends the streak
// and asks again at once; a slow outlier moves the average, not all of it.
TEST(IdleDrafter, SkipsPlainStepsInProportionToTheDraftersShare) {
  auto skipped = [](IdleDrafter& idle) {
    int n = 0;
    while (idle.Skip()) ++n;
    return n;
  };
  IdleDrafter idle;
  EXPECT_FALSE(idle.Skip()) << "asks the drafter until it has measured it";
  for (int i = 1; i < IdleDrafter::kMinStreak; ++i) {
    idle.RootOnly(10e-6, 100e-6);
    EXPECT_FALSE(idle.Skip()) << "a short streak of empty cycles: " << i;
  }
  idle.RootOnly(10e-6, 100e-6);
  EXPECT_EQ(skipped(idle), static_cast<int>(0.1 / IdleDrafter::kShare));
  idle.RootOnly(10e-6, 100e-6);  // the streak goes on after the skipped cycles
  EXPECT_EQ(skipped(idle), static_cast<int>(0.1 / IdleDrafter::kShare));
  idle.Drafted();
  EXPECT_FALSE(idle.Skip());
  for (int i = 1; i < IdleDrafter::kMinStreak; ++i) idle.RootOnly(10e-6, 100e-6);
  EXPECT_FALSE(idle.Skip()) << "a drafted tree starts a new streak";
  idle.RootOnly(1e-3, 100e-6);  // one 100x outlier: a quarter of it, capped
  EXPECT_EQ(skipped(idle), IdleDrafter::kMaxSkip);
  EXPECT_LT(0.1 / IdleDrafter::kShare, IdleDrafter::kMaxSkip);
  IdleDrafter big;
  for (int i = 0; i < 100; ++i) {
    big.RootOnly(10e-6, 10e-3);
    EXPECT_FALSE(big.Skip());
  }
  big.RootOnly(1e-6, 0);  // no pass time: nothing learned
  EXPECT_FALSE(big.Skip());
}

}  // namespace
}  // namespace goose
