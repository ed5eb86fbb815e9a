// Token Recycling template and the balanced (isotropic) control.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tree/tree_builders.h"
#include "tree_test_util.h"

namespace goose {
namespace {

using tree_test::ChildCount;
using tree_test::FillFullTable;
using tree_test::LevelSizes;

TEST(TrTreeTest, TemplateShape) {
  const auto& paths = TrTemplatePaths();
  ASSERT_EQ(paths.size(), 80u);
  std::vector<int> levels(7, 0);
  std::set<std::vector<int>> seen = {{}};
  std::map<std::vector<int>, int> children;
  for (const auto& p : paths) {
    ASSERT_FALSE(p.empty());
    ASSERT_LE(p.size(), 6u);
    ++levels[p.size()];
    std::vector<int> parent(p.begin(), p.end() - 1);
    EXPECT_TRUE(seen.count(parent)) << "parent listed after child";
    // Ranks of a node's children are 0..b-1 in order.
    EXPECT_EQ(p.back(), children[parent]++);
    EXPECT_TRUE(seen.insert(p).second);
  }
  EXPECT_EQ(levels, (std::vector<int>{0, 8, 21, 25, 15, 8, 3}));
  EXPECT_EQ(children[{}], 8);
  EXPECT_EQ(children[{0}], 8);
  EXPECT_EQ(children[{1}], 4);
  EXPECT_EQ(children[(std::vector<int>{0, 0})], 8);
  EXPECT_EQ(children[(std::vector<int>{0, 0, 0})], 5);
  EXPECT_EQ(children[(std::vector<int>{0, 0, 0, 0})], 3);
  EXPECT_EQ(children[(std::vector<int>{0, 0, 0, 0, 0})], 2);
  EXPECT_EQ(children[(std::vector<int>{0, 0, 0, 1, 0})], 1);
}

TEST(TrTreeTest, FullTableGivesAllEightyNodes) {
  TransitionTable table(512, 10);
  FillFullTable(table);
  DraftTree t = BuildTrTree(100, table);
  ASSERT_EQ(t.size(), 81);
  EXPECT_EQ(t.CheckInvariants(), "");
  EXPECT_EQ(LevelSizes(t), (std::vector<int>{1, 8, 21, 25, 15, 8, 3}));
  for (int i = 1; i < t.size(); ++i) {
    const int32_t parent_tok = t.tokens[t.parents[i]];
    EXPECT_LT(t.rank[i], 8);
    EXPECT_EQ(t.tokens[i], table.UnigramIds(parent_tok)[t.rank[i]]);
    EXPECT_EQ(t.source[i], NodeSource::kBranch);
  }
  // Node order follows the template order.
  for (size_t i = 0; i < TrTemplatePaths().size(); ++i) {
    EXPECT_EQ(t.rank[i + 1], TrTemplatePaths()[i].back());
  }
}

TEST(TrTreeTest, EmptyTableDraftsZerosWithoutDuplicates) {
  // Rows never harvested are zeros: every node's eight candidates are token 0, so only the
  // rank-0 child survives at each level -> a chain of six 0s.
  TransitionTable table(64, 10);
  DraftTree t = BuildTrTree(5, table);
  ASSERT_EQ(t.size(), 7);
  EXPECT_EQ(t.CheckInvariants(), "");
  for (int i = 1; i < 7; ++i) {
    EXPECT_EQ(t.tokens[i], 0);
    EXPECT_EQ(t.parents[i], i - 1);
  }
}

TEST(TrTreeTest, DuplicateSiblingDroppedWithSubtree) {
  TransitionTable table(512, 10);
  FillFullTable(table);
  // Root row: rank 1 repeats rank 0's token, so template [1] (4 children, 10 nodes in its
  // subtree) disappears; [0] keeps its full subtree.
  const std::vector<int32_t> ids = {200, 200, 202, 203, 204, 205, 206, 207, 208, 209};
  const std::vector<float> sc = {0.3f, 0.2f, 0.1f, 0.1f, 0.1f, 0.05f, 0.05f, 0.05f, 0.03f, 0.02f};
  table.Harvest(-1, 100, ids, sc);
  DraftTree t = BuildTrTree(100, table);
  EXPECT_EQ(t.CheckInvariants(), "");
  int subtree_of_1 = 0;
  for (const auto& p : TrTemplatePaths()) subtree_of_1 += p[0] == 1;
  EXPECT_EQ(subtree_of_1, 10);
  EXPECT_EQ(t.size(), 81 - subtree_of_1);
  EXPECT_EQ(ChildCount(t, 0), 7);
  EXPECT_EQ(ChildCount(t, 1), 8);  // [0] intact
}

TEST(TrTreeTest, SmallKDropsMissingRanks) {
  TransitionTable table(512, 4);
  FillFullTable(table);
  DraftTree t = BuildTrTree(3, table);
  EXPECT_EQ(t.CheckInvariants(), "");
  int expected = 1;
  for (const auto& p : TrTemplatePaths()) {
    bool ok = true;
    for (int r : p) ok = ok && r < 4;
    expected += ok;
  }
  EXPECT_EQ(t.size(), expected);
  for (int i = 1; i < t.size(); ++i) EXPECT_LT(t.rank[i], 4);
}

TEST(BalancedTreeTest, ShapesOnFullTable) {
  TransitionTable table(512, 10);
  FillFullTable(table);  // every row has 10 candidates with scores >= 0.0156
  BalancedParams p;
  p.k = 3;
  DraftTree t3 = BuildBalancedTree(10, 9, table, p);
  EXPECT_EQ(t3.CheckInvariants(), "");
  EXPECT_EQ(LevelSizes(t3), (std::vector<int>{1, 3, 9, 27, 20}));
  p.k = 5;
  DraftTree t5 = BuildBalancedTree(10, 9, table, p);
  EXPECT_EQ(LevelSizes(t5), (std::vector<int>{1, 5, 25, 29}));
  // BFS: the first 5 depth-2 parents get 5 children each, in node order.
  for (int i = 0; i < t5.size(); ++i) {
    const int c = ChildCount(t5, i);
    EXPECT_LE(c, 5);
    if (i <= 5) {
      EXPECT_EQ(c, 5);
    }
  }
  for (int i = 1; i < t5.size(); ++i) EXPECT_GE(t5.depth[i], t5.depth[i - 1]);
  // Depth cap: k = 3, depth 3, huge budget -> complete ternary tree of 40 nodes.
  p.k = 3;
  p.max_depth = 3;
  p.budget = 10000;
  EXPECT_EQ(BuildBalancedTree(10, 9, table, p).size(), 40);
}

TEST(BalancedTreeTest, MinScoreAndEmptyRows) {
  TransitionTable table(64, 10);
  // Anchor 1 has three candidates above 0.01; their rows are empty.
  table.Harvest(-1, 1, std::vector<int32_t>{5, 6, 7, 8, 9},
                std::vector<float>{0.6f, 0.3f, 0.05f, 0.009f, 0.001f});
  BalancedParams p;
  p.k = 5;
  DraftTree t = BuildBalancedTree(1, -1, table, p);
  ASSERT_EQ(t.size(), 4);
  EXPECT_EQ(t.tokens[1], 5);
  EXPECT_EQ(t.tokens[3], 7);
  EXPECT_EQ(t.rank[3], 2);
  p.budget = 2;
  EXPECT_EQ(BuildBalancedTree(1, -1, table, p).size(), 2);
  p.budget = 1;
  EXPECT_EQ(BuildBalancedTree(1, -1, table, p).size(), 1);
}

}  // namespace
}  // namespace goose
