#include "verify/verifier.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "util/rng.h"
#include "verify/spec_stats.h"

namespace goose {
namespace {

using Tokens = std::vector<int32_t>;

// Builds trees through the public vectors only, so these tests do not depend on tree/ code.
struct TreeBuilder {
  DraftTree t;
  explicit TreeBuilder(int32_t anchor) { Push(anchor, -1, NodeSource::kRoot, 0); }
  int Push(int32_t tok, int parent, NodeSource src, int rank) {
    t.tokens.push_back(tok);
    t.parents.push_back(parent);
    t.depth.push_back(parent < 0 ? 0 : t.depth[parent] + 1);
    t.source.push_back(src);
    t.rank.push_back(rank);
    t.tier.push_back(0);
    t.score.push_back(1.0f);
    return t.size() - 1;
  }
};

// 0 root(100); spine 1:11 <- 0, 2:12 <- 1, 3:13 <- 2; root branches 4:21, 5:22;
// spine branches 6:30 <- 1, 8:40 <- 2; extension 7:31 <- 6.
DraftTree SpineTree() {
  TreeBuilder b(100);
  b.Push(11, 0, NodeSource::kSpine, 0);
  b.Push(12, 1, NodeSource::kSpine, 0);
  b.Push(13, 2, NodeSource::kSpine, 0);
  b.Push(21, 0, NodeSource::kBranch, 0);
  b.Push(22, 0, NodeSource::kBranch, 1);
  b.Push(30, 1, NodeSource::kBranch, 0);
  b.Push(31, 6, NodeSource::kBranch, 0);
  b.Push(40, 2, NodeSource::kBranch, 0);
  return b.t;
}

// target() from a per-node script; records every call.
struct Script {
  std::map<int, int32_t> next;
  std::vector<int> calls;
  std::function<int32_t(int)> Fn() {
    return [this](int node) {
      calls.push_back(node);
      auto it = next.find(node);
      EXPECT_NE(it, next.end()) << "target() called for unscripted node " << node;
      return it == next.end() ? -7 : it->second;
    };
  }
};

const std::function<bool(int32_t)> kNoStop = [](int32_t) { return false; };

TEST(WalkTreeTest, SpineAcceptedFully) {
  const DraftTree t = SpineTree();
  Script s{{{0, 11}, {1, 12}, {2, 13}, {3, 14}}, {}};
  const AcceptResult r = WalkTree(t, s.Fn(), kNoStop);
  EXPECT_EQ(r.path, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.tokens, (Tokens{11, 12, 13, 14}));
  EXPECT_EQ(r.bonus, 14);
  EXPECT_FALSE(r.stopped);
  EXPECT_FALSE(r.spine_continuation);
  EXPECT_EQ(s.calls, (std::vector<int>{0, 1, 2, 3}));
}

TEST(WalkTreeTest, SpineFailsAtDepthTwoAndABranchContinues) {
  const DraftTree t = SpineTree();
  Script s{{{0, 11}, {1, 30}, {6, 31}, {7, 99}}, {}};
  const AcceptResult r = WalkTree(t, s.Fn(), kNoStop);
  EXPECT_EQ(r.path, (std::vector<int32_t>{1, 6, 7}));
  EXPECT_EQ(r.tokens, (Tokens{11, 30, 31, 99}));
  EXPECT_EQ(r.bonus, 99);
  EXPECT_TRUE(r.spine_continuation);
  EXPECT_EQ(s.calls, (std::vector<int>{0, 1, 6, 7}));

  SpecStats st;
  AccumulateStats(t, Route::kSpineTree, r, &st);
  const int sp = static_cast<int>(NodeSource::kSpine), br = static_cast<int>(NodeSource::kBranch);
  EXPECT_EQ(st.cycles, 1);
  EXPECT_EQ(st.route_cycles[static_cast<int>(Route::kSpineTree)], 1);
  EXPECT_EQ(st.committed, 4);
  EXPECT_EQ(st.bonus, 1);
  EXPECT_EQ(st.drafted[sp], 3);
  EXPECT_EQ(st.reached[sp], 2);  // nodes 1, 2 (node 3's parent 2 was rejected)
  EXPECT_EQ(st.accepted[sp], 1);
  EXPECT_EQ(st.drafted[br], 5);
  EXPECT_EQ(st.reached[br], 4);  // 4, 5, 6, 7 (not 8: its parent 2 is off the path)
  EXPECT_EQ(st.accepted[br], 2);
  EXPECT_EQ(st.drafted[0], 0);  // the root is never drafted
  EXPECT_EQ(st.reached_depth[sp][1], 1);
  EXPECT_EQ(st.reached_depth[sp][2], 1);
  EXPECT_EQ(st.accepted_depth[sp][1], 1);
  EXPECT_EQ(st.accepted_depth[sp][2], 0);
  EXPECT_EQ(st.accepted_depth[br][2], 1);
  EXPECT_EQ(st.accepted_depth[br][3], 1);
  EXPECT_EQ(st.reached_rank[br][0], 3);
  EXPECT_EQ(st.reached_rank[br][1], 1);
  EXPECT_EQ(st.accepted_rank[br][0], 2);
  EXPECT_EQ(st.branch_parents_reached, 3);  // root, node 1, node 6
  EXPECT_EQ(st.spine_continuation_cycles, 1);
  EXPECT_EQ(st.spine_continuation_tokens, 2);
  EXPECT_EQ(st.tree_nodes[9], 1);  // root + 3 spine + 5 branch nodes
  EXPECT_EQ(st.tree_nodes_total, 9);

  SpecStats total;
  total.Merge(st);
  total.Merge(st);
  EXPECT_EQ(total.tree_nodes[9], 2);
  EXPECT_DOUBLE_EQ(total.MeanTreeNodes(), 9.0);
  EXPECT_EQ(total.accepted[br], 4);
  EXPECT_EQ(total.accepted_rank[br][0], 4);
  EXPECT_DOUBLE_EQ(total.TokensPerCycle(), 4.0);
  EXPECT_NE(total.Summary().find("spine continuations 2"), std::string::npos) << total.Summary();
}

TEST(WalkTreeTest, NothingMatchesGivesBonusOnly) {
  const DraftTree t = SpineTree();
  Script s{{{0, 55}}, {}};
  const AcceptResult r = WalkTree(t, s.Fn(), kNoStop);
  EXPECT_TRUE(r.path.empty());
  EXPECT_EQ(r.tokens, (Tokens{55}));
  EXPECT_EQ(r.bonus, 55);
  EXPECT_EQ(s.calls, (std::vector<int>{0}));
  SpecStats st;
  AccumulateStats(t, Route::kSpineTree, r, &st);
  EXPECT_EQ(st.reached[static_cast<int>(NodeSource::kSpine)], 1);
  EXPECT_EQ(st.reached[static_cast<int>(NodeSource::kBranch)], 2);
  EXPECT_EQ(st.accepted[static_cast<int>(NodeSource::kBranch)], 0);
}

TEST(WalkTreeTest, RootOnlyTreeIsAnArStep) {
  TreeBuilder b(5);
  Script s{{{0, 6}}, {}};
  const AcceptResult r = WalkTree(b.t, s.Fn(), kNoStop);
  EXPECT_EQ(r.tokens, (Tokens{6}));
  SpecStats st;
  AccumulateStats(b.t, Route::kAr, r, &st);
  EXPECT_EQ(st.route_cycles[static_cast<int>(Route::kAr)], 1);
}

TEST(WalkTreeTest, StopTokenInsideThePathEndsWithoutBonus) {
  const DraftTree t = SpineTree();
  Script s{{{0, 11}, {1, 12}}, {}};
  const AcceptResult r = WalkTree(t, s.Fn(), [](int32_t tok) { return tok == 12; });
  EXPECT_EQ(r.path, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(r.tokens, (Tokens{11, 12}));
  EXPECT_EQ(r.bonus, -1);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(s.calls, (std::vector<int>{0, 1}));  // node 2 is never asked for a token

  // A stop token as the bonus is committed (and reported).
  Script s2{{{0, 11}, {1, 77}}, {}};
  const AcceptResult r2 = WalkTree(t, s2.Fn(), [](int32_t tok) { return tok == 77; });
  EXPECT_EQ(r2.tokens, (Tokens{11, 77}));
  EXPECT_EQ(r2.bonus, 77);
  EXPECT_TRUE(r2.stopped);
}

TEST(WalkTreeTest, SpinePreferredOnDuplicateElseFirstInNodeOrder) {
  TreeBuilder b(100);
  b.Push(11, 0, NodeSource::kBranch, 0);  // 1
  b.Push(11, 0, NodeSource::kSpine, 0);   // 2 (artificial duplicate)
  b.Push(12, 1, NodeSource::kBranch, 0);  // 3
  b.Push(12, 2, NodeSource::kBranch, 0);  // 4
  b.Push(12, 2, NodeSource::kBranch, 1);  // 5 duplicate branch: first (4) wins
  Script s{{{0, 11}, {2, 12}, {4, 1}}, {}};
  const AcceptResult r = WalkTree(b.t, s.Fn(), kNoStop);
  EXPECT_EQ(r.path, (std::vector<int32_t>{2, 4}));
  EXPECT_TRUE(r.spine_continuation);
  EXPECT_EQ(r.tokens, (Tokens{11, 12, 1}));
}

// The route is what the builder reports; chain nodes count as source kChain.
TEST(WalkTreeTest, ChainRouteCountsAsChain) {
  TreeBuilder b(1);
  b.Push(2, 0, NodeSource::kChain, 0);
  b.Push(3, 1, NodeSource::kChain, 0);
  Script s{{{0, 2}, {1, 4}}, {}};
  const AcceptResult r = WalkTree(b.t, s.Fn(), kNoStop);
  EXPECT_EQ(r.tokens, (Tokens{2, 4}));
  EXPECT_FALSE(r.spine_continuation);
  SpecStats st;
  AccumulateStats(b.t, Route::kChain, r, &st);
  EXPECT_EQ(st.route_cycles[static_cast<int>(Route::kChain)], 1);
  EXPECT_EQ(st.accepted[static_cast<int>(NodeSource::kChain)], 1);
  EXPECT_EQ(st.accepted[static_cast<int>(NodeSource::kSpine)], 0);
}

// A toy "sampled" target: the token after a prefix is a deterministic function of the prefix and
// the position-keyed uniform draw, like the real sampler with UniformAt(seed, pos).
int32_t SampledNext(const Tokens& prefix, uint64_t seed, int alphabet) {
  uint64_t h = 0;
  for (int32_t t : prefix) h = Mix64(h ^ static_cast<uint32_t>(t));
  const double u = UniformAt(seed, prefix.size());
  // Skewed distribution so that drafts are accepted often: mostly (h % alphabet).
  if (u < 0.6) return static_cast<int32_t>(h % alphabet);
  return static_cast<int32_t>((h >> 17) % alphabet + static_cast<uint64_t>(u * 1000) % 2);
}

TEST(WalkTreeTest, SamplingWalkEqualsPlainDecodingAndAsksOnlyVisitedNodes) {
  SplitMix64 rng(42);
  int total_accepted = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int alphabet = 2 + static_cast<int>(rng.Below(4));
    const uint64_t seed = rng.Next();
    const Tokens prompt = {7, static_cast<int32_t>(rng.Below(alphabet))};
    // Random tree with distinct sibling tokens; draft tokens mostly follow the "model".
    TreeBuilder b(prompt.back());
    std::vector<Tokens> node_prefix = {prompt};
    const int n = 1 + static_cast<int>(rng.Below(30));
    for (int i = 1; i < n; ++i) {
      const int p = static_cast<int>(rng.Below(b.t.size()));
      int32_t tok = rng.Below(2) ? SampledNext(node_prefix[p], seed, alphabet)
                                 : static_cast<int32_t>(rng.Below(alphabet + 1));
      bool dup = false;
      for (int u = 1; u < b.t.size(); ++u) dup |= b.t.parents[u] == p && b.t.tokens[u] == tok;
      if (dup) continue;
      b.Push(tok, p, rng.Below(2) ? NodeSource::kSpine : NodeSource::kBranch, 0);
      Tokens pre = node_prefix[p];
      pre.push_back(tok);
      node_prefix.push_back(pre);
    }
    std::vector<int> calls;
    const AcceptResult r = WalkTree(
        b.t,
        [&](int node) {
          calls.push_back(node);
          return SampledNext(node_prefix[node], seed, alphabet);
        },
        kNoStop);
    // Plain decoding from the same prompt with the same position-keyed draws.
    Tokens plain = prompt;
    for (size_t i = 0; i < r.tokens.size(); ++i)
      plain.push_back(SampledNext(plain, seed, alphabet));
    ASSERT_EQ(r.tokens, Tokens(plain.begin() + prompt.size(), plain.end())) << "trial " << trial;
    // target() was asked exactly for the root and each accepted node, in order.
    std::vector<int> expected_calls = {0};
    expected_calls.insert(expected_calls.end(), r.path.begin(), r.path.end());
    ASSERT_EQ(calls, expected_calls);
    // The walk is maximal: no child of the stop node carries the bonus.
    const int last = r.path.empty() ? 0 : r.path.back();
    for (int u = 1; u < b.t.size(); ++u) {
      ASSERT_FALSE(b.t.parents[u] == last && b.t.tokens[u] == r.bonus);
    }
    total_accepted += static_cast<int>(r.path.size());
  }
  EXPECT_GT(total_accepted, 150);  // the property is exercised on real accepted paths
}

}  // namespace
}  // namespace goose
