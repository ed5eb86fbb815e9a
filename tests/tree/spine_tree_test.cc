// GOOSE Algorithm 1 (docs/methods.md §3.6.2): plan arithmetic (worked examples of §3.6.4,
// convention 15) and tree shape.
#include <gtest/gtest.h>

#include <numeric>

#include "tree/exact_math.h"
#include "tree/tree_builders.h"
#include "tree_test_util.h"

namespace goose {
namespace {

using tree_test::ChildCount;
using tree_test::FillFullTable;

int Sum(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }

TEST(SpinePlanTest, WorkedExampleBalancedTier) {  // c = 0, e = 0.5, |S| = 40
  const SpineTreePlan p = PlanSpineTree(40, Confidence{0, 1}, SpineEma(1, 2), GooseParams{});
  EXPECT_EQ(p.budget, 60);
  EXPECT_EQ(p.ratio_num, 1);
  EXPECT_EQ(p.ratio_den, 2);
  EXPECT_EQ(p.spine_len, 30);
  EXPECT_EQ(p.spine_share, 14);
  EXPECT_EQ(p.root_share, 15);
  ASSERT_EQ(p.spine_alloc.size(), 30u);
  std::vector<int> want(30, 0);
  want[0] = 3;
  for (int i = 1; i < 12; ++i) want[i] = 1;
  EXPECT_EQ(p.spine_alloc, want);
}

TEST(SpinePlanTest, WorkedExampleLowTier) {  // c = 0, e = 0.1
  const SpineTreePlan p = PlanSpineTree(40, Confidence{0, 1}, SpineEma(1, 10), GooseParams{});
  EXPECT_EQ(p.budget, 60);
  EXPECT_EQ(p.ratio_num, 3);
  EXPECT_EQ(p.ratio_den, 20);
  EXPECT_EQ(p.spine_len, 9);
  EXPECT_EQ(p.spine_share, 25);
  EXPECT_EQ(p.root_share, 25);
  EXPECT_EQ(p.spine_alloc, (std::vector<int>{8, 4, 2, 2, 1, 1, 1, 1, 1}));
  // Middle tier.
  EXPECT_EQ(PlanSpineTree(40, Confidence{0, 1}, SpineEma(3, 10), GooseParams{}).spine_len, 18);
}

TEST(SpinePlanTest, WorkedExampleLongMatch) {  // c = 0.7 (8-token match), e = 0.5
  const Confidence c = MatchConfidence(8, false);
  ASSERT_EQ(c.num * 10, c.den * 7);
  const SpineTreePlan p = PlanSpineTree(40, c, SpineEma(1, 2), GooseParams{});
  EXPECT_EQ(p.budget, 88);
  EXPECT_EQ(p.ratio_num, 17);
  EXPECT_EQ(p.ratio_den, 20);
  EXPECT_EQ(p.spine_len, 40);
  EXPECT_EQ(p.spine_share, 23);
  EXPECT_EQ(p.root_share, 24);
  ASSERT_EQ(p.spine_alloc.size(), 40u);
  EXPECT_EQ(p.spine_alloc[0], 5);
  EXPECT_EQ(p.spine_alloc[1], 2);
  EXPECT_EQ(p.spine_alloc[2], 1);
  EXPECT_EQ(p.spine_alloc[3], 1);
  EXPECT_EQ(Sum(p.spine_alloc), 23);
}

TEST(SpinePlanTest, WorkedExampleSaturated) {  // c = 1
  const SpineTreePlan p = PlanSpineTree(120, Confidence{1, 1}, SpineEma(1, 2), GooseParams{});
  EXPECT_EQ(p.budget, 100);
  EXPECT_EQ(p.ratio_num, 1);
  EXPECT_EQ(p.ratio_den, 1);
  EXPECT_EQ(p.spine_len, 100);
  EXPECT_EQ(p.branch_budget, -1);
  EXPECT_EQ(p.spine_share, 0);
  EXPECT_EQ(p.root_share, 0);
  EXPECT_EQ(Sum(p.spine_alloc), 0);
}

TEST(SpinePlanTest, FourteenTokenMatchIsExact) {
  // In doubles c = 0.7 + 0.2 * 6 / 12 = 0.7999999999999999 and 60 + floor(40 c) = 91.
  const double c_double = 0.7 + 0.2 * (14 - 8) / 12;
  EXPECT_EQ(60 + static_cast<int>(c_double * 40), 91);
  const Confidence c = MatchConfidence(14, false);
  EXPECT_EQ(PlanSpineTree(40, c, SpineEma(1, 2), GooseParams{}).budget, 92);
  EXPECT_EQ(PlanSpineTree(0, Confidence{}, SpineEma(1, 2), GooseParams{}).spine_len, 0);
}

TEST(SpineEmaTest, OneOfSixLandsExactlyOnTwoFifths) {
  // docs/methods.md §3.6.3 in doubles: 0.3 * (1/6) + 0.7 * 0.5 = 0.39999999999999997 picks tier
  // 0.30.
  EXPECT_LT(0.3 * (1.0 / 6) + 0.7 * 0.5, 0.4);
  SpineEma e;
  e.Update(1, 6);  // exactly 1/20 + 7/20 = 2/5
  EXPECT_TRUE(e.exact());
  EXPECT_FALSE(e.Less(2, 5));
  EXPECT_TRUE(e.Less(401, 1000));
  EXPECT_DOUBLE_EQ(e.value(), 0.4);
  // Tier 0.50: r = 1/2 and a 40-token spine gets floor(60 / 2) = 30 nodes (not floor(60 * 0.3)).
  const SpineTreePlan p = PlanSpineTree(40, Confidence{0, 1}, e, GooseParams{});
  EXPECT_EQ(p.ratio_num, 1);
  EXPECT_EQ(p.ratio_den, 2);
  EXPECT_EQ(p.spine_len, 30);
}

TEST(SpineEmaTest, ExactOverManyCyclesAndAtTheLowerBoundary) {
  // 500 cycles stay exact and agree with a double replay to rounding.
  SpineEma e(1, 10);
  double d = 0.1;
  const int acc[] = {1, 0, 3, 2, 0, 5, 1, 1, 0, 7};
  const int drafted[] = {3, 4, 6, 9, 2, 5, 1, 8, 3, 7};
  for (int rep = 0; rep < 50; ++rep) {
    for (int i = 0; i < 10; ++i) {
      e.Update(acc[i], drafted[i]);
      d = 0.3 * (static_cast<double>(acc[i]) / drafted[i]) + 0.7 * d;
    }
  }
  EXPECT_TRUE(e.exact());
  EXPECT_NEAR(e.value(), d, 1e-12);
  // 7/10 * 2/7 = 1/5 exactly is not below 1/5 (tier 0.30, not 0.15).
  SpineEma g(2, 7);
  g.Update(0, 3);
  EXPECT_FALSE(g.Less(1, 5));
  EXPECT_TRUE(g.Less(201, 1000));
  EXPECT_EQ(PlanSpineTree(40, Confidence{0, 1}, g, GooseParams{}).ratio_den, 10);  // r = 3/10
}

TEST(SpinePlanTest, HarmonicAllocationsExactAtIntegers) {
  // H(3) = 11/6: 11 / H = 6, 11 / (2H) = 3 exactly; remaining caps the last at 2.
  EXPECT_EQ(tree_internal::HarmonicAllocations(11, 3), (std::vector<int>{6, 3, 2}));
  // H(2) = 3/2: share 3 -> 2, 1.
  EXPECT_EQ(tree_internal::HarmonicAllocations(3, 2), (std::vector<int>{2, 1}));
  EXPECT_EQ(tree_internal::HarmonicAllocations(0, 4), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(tree_internal::HarmonicAllocations(5, 1), (std::vector<int>{5}));
  const auto r = tree_internal::RationalFromDouble(0.15);
  EXPECT_EQ(r.num, 3);
  EXPECT_EQ(r.den, 20);
}

TEST(SpineTreeTest, SaturatedChainHas101Nodes) {
  TransitionTable table(512, 10);
  tree_test::FillFullTable(table);
  std::vector<int32_t> spine(130);
  for (int i = 0; i < 130; ++i) spine[i] = (i * 37) % 512;
  DraftTree t = BuildSpineTree(1, 0, spine, Confidence{1, 1}, SpineEma(1, 2), table, GooseParams{});
  ASSERT_EQ(t.size(), 101);
  EXPECT_EQ(t.CheckInvariants(), "");
  for (int i = 1; i < 101; ++i) {
    EXPECT_EQ(t.source[i], NodeSource::kSpine);
    EXPECT_EQ(t.parents[i], i - 1);
    EXPECT_EQ(t.tokens[i], spine[i - 1]);
  }
}

TEST(SpineTreeTest, NodeOrderSkipsAndAllocations) {
  // c = 0, e = 0.1: Ls = 9, root_share 25, allocations 8,4,2,2,1,1,1,1,1.
  TransitionTable table(512, 10);
  tree_test::FillFullTable(table);  // successors of t: t+1 .. t+10
  // Spine 50 -> 51 -> ... : S_{i+2} = S_{i+1} + 1 is each spine node's rank-0 successor and
  // S_1 = 51 is the anchor's (anchor 50), so the skip rules are exercised everywhere.
  std::vector<int32_t> spine;
  for (int i = 0; i < 40; ++i) spine.push_back(51 + i);
  DraftTree t =
      BuildSpineTree(50, 49, spine, Confidence{0, 1}, SpineEma(1, 10), table, GooseParams{});
  EXPECT_EQ(t.CheckInvariants(), "");
  EXPECT_LE(t.size(), 60);
  for (int i = 1; i <= 9; ++i) {
    EXPECT_EQ(t.source[i], NodeSource::kSpine);
    EXPECT_EQ(t.tokens[i], spine[i - 1]);
  }
  // Root branches (10 candidates, S_1 skipped -> 9, all above min_score) come next.
  int node = 10;
  for (int j = 0; j < 9; ++j, ++node) {
    EXPECT_EQ(t.parents[node], 0);
    EXPECT_EQ(t.tokens[node], 52 + j);
    EXPECT_EQ(t.rank[node], 1 + j);
  }
  // Spine branches in spine order; allocation capped by the 9 remaining candidates.
  const std::vector<int> alloc = {8, 4, 2, 2, 1, 1, 1, 1, 1};
  for (int i = 0; i < 9; ++i) {
    for (int j = 0; j < alloc[i]; ++j, ++node) {
      ASSERT_EQ(t.parents[node], i + 1) << "spine node " << i;
      EXPECT_EQ(t.source[node], NodeSource::kBranch);
      // Inner spine nodes skip the next spine token (rank 0); the last one (i = 8) does not.
      const int rank = i + 1 < 9 ? j + 1 : j;
      EXPECT_EQ(t.rank[node], rank);
      EXPECT_EQ(t.tokens[node], spine[i] + 1 + rank);
    }
  }
  EXPECT_EQ(t.tokens[node - 1], spine[9]) << "S_10 is not in the tree, so it is drafted";
  // The rest is BFS extension of branch nodes, parents in non-decreasing order.
  for (int i = node; i < t.size(); ++i) {
    EXPECT_GE(t.parents[i], 10);
    EXPECT_GE(t.parents[i], t.parents[i - 1]);
    EXPECT_LE(t.depth[i], 6);
  }
  EXPECT_EQ(t.size(), 60);  // the table is rich enough to fill the budget
}

TEST(SpineTreeTest, ExtensionWidthRule) {
  // No spine: root_share = 59. Every row has scores .5 .2 .1 .05 .05 .04 .03 .02 .005 .005.
  TransitionTable table(512, 10);
  tree_test::FillFullTable(table,
                           {0.5f, 0.2f, 0.1f, 0.05f, 0.05f, 0.04f, 0.03f, 0.02f, 0.005f, 0.005f});
  DraftTree t = BuildSpineTree(7, 6, {}, Confidence{0, 1}, SpineEma(1, 2), table, GooseParams{});
  EXPECT_EQ(t.CheckInvariants(), "");
  ASSERT_EQ(t.size(), 60);
  EXPECT_EQ(ChildCount(t, 0), 8);  // stops at the first score < 0.01
  // remaining 51: widths ceil(rem * s) capped by |succ| and K / dep = 10, then by min_score:
  // 51*.5 -> 8, 43*.2 -> 8 (9 wanted), 35*.1 -> 4, 31*.05 -> 2, 29*.05 -> 2, 27*.04 -> 2,
  // 25*.03 -> 1, 24*.02 -> 1.
  const std::vector<int> want = {8, 8, 4, 2, 2, 2, 1, 1};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(ChildCount(t, 1 + j), want[j]) << j;
  // First depth-2 node (score .5, remaining 23): ceil(11.5) = 12, capped by K / 2 = 5.
  EXPECT_EQ(ChildCount(t, 9), 5);
  // Second (score .2, remaining 18): ceil(3.6) = 4.
  EXPECT_EQ(ChildCount(t, 10), 4);
}

TEST(SpineTreeTest, BranchesAreKeyedOnTheBigram) {
  TransitionTable table(512, 10);
  tree_test::FillFullTable(table);  // unigram rows: t -> t+1 .. t+10
  const std::vector<float> sc = {0.4f, 0.3f, 0.2f, 0.1f};
  // (anchor_prev 49, anchor 50) and (anchor 50, S_1 = 300) have their own lists.
  table.Harvest(49, 50, std::vector<int32_t>{300, 401, 402, 403}, sc);
  table.Harvest(50, 300, std::vector<int32_t>{301, 411, 412, 413}, sc);
  // The bigram harvest also overwrote the unigram rows; restore them so only the bigram differs.
  FillFullTable(table);
  const std::vector<int32_t> spine = {300, 301, 302, 303};
  DraftTree t =
      BuildSpineTree(50, 49, spine, Confidence{0, 1}, SpineEma(1, 2), table, GooseParams{});
  ASSERT_EQ(t.CheckInvariants(), "");
  std::vector<int32_t> root_kids, spine1_kids;
  for (int i = 1; i < t.size(); ++i) {
    if (t.source[i] != NodeSource::kBranch) continue;
    if (t.parents[i] == 0) root_kids.push_back(t.tokens[i]);
    if (t.parents[i] == 1) spine1_kids.push_back(t.tokens[i]);
  }
  EXPECT_EQ(root_kids, (std::vector<int32_t>{401, 402, 403}));  // S_1 = 300 skipped
  ASSERT_FALSE(spine1_kids.empty());
  EXPECT_EQ(spine1_kids[0], 411);  // S_2 = 301 skipped
}

TEST(SpineTreeTest, EmptyTableGivesSpineOnly) {
  TransitionTable table(64, 10);
  const std::vector<int32_t> spine = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  DraftTree t =
      BuildSpineTree(1, 0, spine, MatchConfidence(10, false), SpineEma(1, 2), table, GooseParams{});
  EXPECT_EQ(t.size(), 11);
  EXPECT_EQ(t.CheckInvariants(), "");
}

}  // namespace
}  // namespace goose
