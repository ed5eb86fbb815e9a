#include "tree/draft_tree.h"

#include <gtest/gtest.h>

#include "tree/tree_builders.h"

namespace goose {
namespace {

TEST(DraftTreeTest, ResetAddFindChild) {
  DraftTree t;
  t.Reset(7);
  ASSERT_EQ(t.size(), 1);
  EXPECT_EQ(t.parents[0], -1);
  EXPECT_EQ(t.source[0], NodeSource::kRoot);
  const int a = t.Add(11, 0, NodeSource::kSpine);
  const int b = t.Add(12, 0, NodeSource::kBranch, 3, 0.25f);
  const int c = t.Add(13, a, NodeSource::kSpine);
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 2);
  EXPECT_EQ(t.depth[c], 2);
  EXPECT_EQ(t.rank[b], 3);
  EXPECT_FLOAT_EQ(t.score[b], 0.25f);
  EXPECT_EQ(t.FindChild(0, 12), b);
  EXPECT_EQ(t.FindChild(0, 13), -1);
  EXPECT_EQ(t.FindChild(a, 13), c);
  EXPECT_EQ(t.CheckInvariants(), "");
  t.Reset(3);
  EXPECT_EQ(t.size(), 1);
  EXPECT_EQ(t.tokens[0], 3);
  t.Clear();
  EXPECT_EQ(t.size(), 0);
}

TEST(DraftTreeTest, CheckInvariantsFindsViolations) {
  DraftTree t;
  t.Reset(1);
  t.Add(5, 0, NodeSource::kBranch);
  t.Add(6, 1, NodeSource::kBranch);
  ASSERT_EQ(t.CheckInvariants(), "");

  DraftTree dup = t;
  dup.Add(5, 0, NodeSource::kBranch);
  EXPECT_NE(dup.CheckInvariants().find("repeats a sibling"), std::string::npos);

  DraftTree same_token_other_parent = t;
  same_token_other_parent.Add(5, 1, NodeSource::kBranch);
  EXPECT_EQ(same_token_other_parent.CheckInvariants(), "");

  DraftTree bad_depth = t;
  bad_depth.depth[2] = 5;
  EXPECT_NE(bad_depth.CheckInvariants().find("node 2"), std::string::npos);

  DraftTree forward_parent = t;
  forward_parent.parents[1] = 2;
  EXPECT_NE(forward_parent.CheckInvariants().find("parent 2"), std::string::npos);

  DraftTree root_parent = t;
  root_parent.parents[0] = 0;
  EXPECT_NE(root_parent.CheckInvariants(), "");

  DraftTree sizes = t;
  sizes.rank.pop_back();
  EXPECT_NE(sizes.CheckInvariants().find("sizes"), std::string::npos);

  DraftTree second_root = t;
  second_root.source[2] = NodeSource::kRoot;
  EXPECT_NE(second_root.CheckInvariants(), "");
}

TEST(DraftTreeTest, NodeSourceNames) {
  EXPECT_STREQ(NodeSourceName(NodeSource::kRoot), "root");
  EXPECT_STREQ(NodeSourceName(NodeSource::kSpine), "spine");
  EXPECT_STREQ(NodeSourceName(NodeSource::kBranch), "branch");
  EXPECT_STREQ(NodeSourceName(NodeSource::kChain), "chain");
}

TEST(ChainBuilderTest, RespectsMaxNodes) {
  const std::vector<int32_t> toks = {4, 4, 9, 2, 7};
  DraftTree t = BuildChain(1, toks, 4);
  ASSERT_EQ(t.size(), 4);
  for (int i = 1; i < t.size(); ++i) {
    EXPECT_EQ(t.parents[i], i - 1);
    EXPECT_EQ(t.tokens[i], toks[i - 1]);
    EXPECT_EQ(t.source[i], NodeSource::kChain);
  }
  EXPECT_EQ(t.CheckInvariants(), "");
  EXPECT_EQ(BuildChain(1, toks, 100).size(), 6);
  EXPECT_EQ(BuildChain(1, toks, 1).size(), 1);
  EXPECT_EQ(BuildChain(1, toks, 0).size(), 1);  // root always present
  EXPECT_EQ(BuildChain(1, {}, 10).size(), 1);
}

}  // namespace
}  // namespace goose
