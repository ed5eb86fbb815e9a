// Best-first spine tree: budget and invariants, optimality of the chosen node set under its own
// value model, and the anisotropy it is meant to produce from measured acceptance.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "tree/best_first_builder.h"
#include "tree/size_cut.h"
#include "tree_test_util.h"

namespace goose {
namespace {

using tree_test::FillFullTable;
using tree_test::FillRandomTable;

EdgeAcceptance UniformModel(double spine, double branch) {
  EdgeAcceptance m;
  for (auto& cls : m.spine) std::fill(std::begin(cls), std::end(cls), spine);
  for (auto& s : m.branch)
    for (auto& t : s) std::fill(std::begin(t), std::end(t), branch);
  return m;
}

TEST(BestFirstTree, RespectsBudgetAndInvariantsOnRandomTables) {
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    SplitMix64 rng(seed);
    TransitionTable table(40, 10);
    FillRandomTable(table, rng);
    std::vector<int32_t> spine(rng.Below(25));
    for (int32_t& t : spine) t = static_cast<int32_t>(rng.Below(40));
    EdgeAcceptance m = UniformModel(rng.Uniform(), rng.Uniform());
    for (auto& s : m.branch)
      for (auto& t : s)
        for (double& b : t) b = rng.Uniform() * 0.5;
    BestFirstParams p;
    p.budget = 1 + static_cast<int>(rng.Below(100));
    p.max_depth = 1 + static_cast<int>(rng.Below(20));
    std::vector<double> values;
    const DraftTree tree =
        BuildBestFirstTree(static_cast<int32_t>(rng.Below(40)), static_cast<int32_t>(rng.Below(40)),
                           spine, m, table, p, &values);
    ASSERT_EQ(tree.CheckInvariants(), "") << "seed " << seed;
    ASSERT_LE(tree.size(), p.budget);
    ASSERT_EQ(values.size(), static_cast<size_t>(tree.size()));
    for (int i = 1; i < tree.size(); ++i) {
      ASSERT_LE(tree.depth[i], p.max_depth);
      // A child is never worth more than its parent: the chosen set is a tree by construction.
      ASSERT_LE(values[i], values[tree.parents[i]]);
    }
    // Spine nodes form one chain from the root carrying the spine tokens in order.
    int expect_parent = 0, k = 0;
    for (int i = 1; i < tree.size(); ++i) {
      if (tree.source[i] != NodeSource::kSpine) continue;
      ASSERT_EQ(tree.parents[i], expect_parent);
      ASSERT_EQ(tree.tokens[i], spine[k]);
      expect_parent = i;
      ++k;
    }
  }
}

// The chosen nodes are the top-(budget-1) candidates by value: no candidate left out (a child of
// a chosen node) is worth more than the least valuable chosen node.
TEST(BestFirstTree, ChoosesTheHighestValueNodes) {
  TransitionTable table(30, 10);
  SplitMix64 rng(5);
  FillRandomTable(table, rng, 1.0, 0.0);
  const std::vector<int32_t> spine = {3, 4, 5, 6, 7, 8};
  EdgeAcceptance m = UniformModel(0.7, 0.0);
  for (auto& s : m.branch)
    for (auto& t : s)
      for (int b = 0; b < EdgeAcceptance::kScoreBins; ++b) t[b] = 0.08 * (b + 1);
  BestFirstParams p;
  p.budget = 25;
  std::vector<double> values;
  const DraftTree tree = BuildBestFirstTree(1, 2, spine, m, table, p, &values);
  ASSERT_EQ(tree.size(), 25);
  const double least = *std::min_element(values.begin() + 1, values.end());
  // Branch values do not depend on the spine-sibling split or tier here (no bigrams), so every
  // candidate left out is worth values[parent] * branch[0][0][bin].
  for (int v = 0; v < tree.size(); ++v) {
    const int32_t prev = v == 0 ? 2 : tree.tokens[tree.parents[v]];
    for (const Candidate& c : table.Successors(tree.tokens[v], prev)) {
      if (tree.FindChild(v, c.token) >= 0) continue;
      const double q = m.branch[0][0][EdgeAcceptance::ScoreBin(c.score)];
      EXPECT_LE(values[v] * q, least + 1e-12) << "left out a better candidate under node " << v;
    }
  }
}

TEST(BestFirstTree, TrustedSpineGoesDeepDoubtfulSpineStaysShort) {
  TransitionTable table(64, 10);
  FillFullTable(table);
  std::vector<int32_t> spine(40);
  std::iota(spine.begin(), spine.end(), 10);
  auto spine_len = [&](double p_spine) {
    EdgeAcceptance m = UniformModel(p_spine, 0.0);
    for (auto& s : m.branch)
      for (auto& t : s)
        for (int b = 0; b < EdgeAcceptance::kScoreBins; ++b) t[b] = 0.1 * b;
    BestFirstParams p;
    p.budget = 60;
    const DraftTree tree = BuildBestFirstTree(1, 0, spine, m, table, p);
    int n = 0;
    for (int i = 0; i < tree.size(); ++i) n += tree.source[i] == NodeSource::kSpine;
    return n;
  };
  const int deep = spine_len(0.97), shallow = spine_len(0.3);
  EXPECT_GE(deep, 30);
  EXPECT_LE(shallow, 3);
  EXPECT_GE(shallow, 1);
}

TEST(BestFirstTree, CutsAtTheSizeWithTheMostExpectedTokensPerSecond) {
  // A spine alone, each node accepted with 0.5 given its parent: node i is worth 0.5^i. Sizes
  // 4 and 8 cost about the same: 1 + 0.875 tokens in 1 s against 1 + 0.992 in 1.1 s, so 4.
  TransitionTable table(64, 10);
  std::vector<int32_t> spine(20);
  std::iota(spine.begin(), spine.end(), 10);
  const EdgeAcceptance m = UniformModel(0.5, 0.0);
  const std::vector<CostSample> cost = {{1, 1.0}, {2, 1.0}, {4, 1.0}, {8, 1.1}, {12, 2.0}};
  BestFirstParams p;
  p.budget = 64;
  p.cost = &cost;
  EXPECT_EQ(BuildBestFirstTree(1, 0, spine, m, table, p).size(), 4);
  // Nodes 4-7 calibrated at twice their values (such nodes were accepted twice as often as
  // predicted): 1.875 + 0.234 tokens in 1.1 s beats 1.875 in 1 s.
  const std::vector<double> scale = {1, 1, 1, 1, 2, 2, 2, 2, 1};
  p.node_scale = scale;
  EXPECT_EQ(BuildBestFirstTree(1, 0, spine, m, table, p).size(), 8);
  // Dearer passes: a node at its value pays for a 2-node pass (1.5 tokens in 1.2 s against 1 in
  // 1 s), at a quarter of it nothing does (1.125 in 1.2 s): the root alone, a plain step.
  const std::vector<CostSample> dear = {{1, 1.0}, {2, 1.2}, {4, 1.3}, {8, 1.4}};
  p.cost = &dear;
  p.node_scale = {};
  EXPECT_GE(BuildBestFirstTree(1, 0, spine, m, table, p).size(), 2);
  const std::vector<double> low = {0.25};
  p.node_scale = low;
  EXPECT_EQ(BuildBestFirstTree(1, 0, spine, m, table, p).size(), 1);
}

TEST(BestFirstTree, WithTheRunsRateCutsAtTheMostTokensBeyondWhatTheTimeEarns) {
  // Node i worth 0.9^i: E(4) = 3.439, E(8) = 5.694, E(12) = 7.174 tokens in 1.2, 1.6, 2.4 s.
  // This cycle's own best rate is at 8 (3.56 tokens/s against 2.87 and 2.99); but a run at 1.5
  // tokens/s gains most from 12 (7.174 - 1.5 * 2.4 = 3.57 against 3.29 at 8), and a run at 10
  // tokens/s from 4 (3.439 - 12 = -8.56 against -10.31 at 8: its time earns more elsewhere).
  TransitionTable table(64, 10);
  std::vector<int32_t> spine(20);
  std::iota(spine.begin(), spine.end(), 10);
  const EdgeAcceptance m = UniformModel(0.9, 0.0);
  const std::vector<CostSample> cost = {{1, 1.0}, {4, 1.2}, {8, 1.6}, {12, 2.4}};
  BestFirstParams p;
  p.budget = 64;
  p.cost = &cost;
  EXPECT_EQ(BuildBestFirstTree(1, 0, spine, m, table, p).size(), 8);
  p.rate = 1.5;
  EXPECT_EQ(BuildBestFirstTree(1, 0, spine, m, table, p).size(), 12);
  p.rate = 10;
  EXPECT_EQ(BuildBestFirstTree(1, 0, spine, m, table, p).size(), 4);
  EXPECT_DOUBLE_EQ(SizeScore(3.0, 2.0, 0), 1.5);
  EXPECT_DOUBLE_EQ(SizeScore(3.0, 2.0, 1.0), 1.0);
}

TEST(BestFirstTree, NoSpineNoTableGivesRootOnly) {
  TransitionTable table(16, 10);
  const DraftTree tree =
      BuildBestFirstTree(3, 2, {}, UniformModel(0.5, 0.5), table, BestFirstParams{});
  EXPECT_EQ(tree.size(), 1);
}

TEST(BestFirstTree, SpineTokenIsNotDuplicatedAsBranch) {
  TransitionTable table(32, 10);
  FillFullTable(table);  // row t lists t+1, t+2, ...
  // Spine continues the anchor 5 with 6, which is also rank 0 of row 5.
  const DraftTree tree = BuildBestFirstTree(5, 4, std::vector<int32_t>{6, 7},
                                            UniformModel(0.5, 0.4), table, BestFirstParams{});
  ASSERT_EQ(tree.CheckInvariants(), "");
  int sixes = 0;
  for (int i = 1; i < tree.size(); ++i) sixes += tree.parents[i] == 0 && tree.tokens[i] == 6;
  EXPECT_EQ(sixes, 1);
}

}  // namespace
}  // namespace goose
