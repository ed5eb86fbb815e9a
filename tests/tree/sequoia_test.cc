// Sequoia DP (docs/methods.md §3.5) against brute-force enumeration, and BuildFromTemplate.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tree/tree_builders.h"
#include "tree_test_util.h"

namespace goose {
namespace {

// F of a set of rank paths: 1 + sum over nodes of the product of p over the path.
double EvalPaths(const std::vector<std::vector<int>>& paths, const std::vector<double>& p) {
  double f = 1;
  for (const auto& path : paths) {
    double v = 1;
    for (int r : path) v *= p[r];
    f += v;
  }
  return f;
}

// Best F over every tree with <= budget nodes, node depth <= max_depth, child ranks 0..b-1 with
// b <= |p|: grows trees one node at a time (any node may receive its next-rank child).
struct Node {
  int depth, children;
  double f;
};
double BruteForce(std::vector<Node>& nodes, const std::vector<double>& p, int budget, int max_depth,
                  double value) {
  double best = value;
  if (static_cast<int>(nodes.size()) >= budget) return best;
  const int n = static_cast<int>(nodes.size());
  for (int u = 0; u < n; ++u) {
    if (nodes[u].depth >= max_depth || nodes[u].children >= static_cast<int>(p.size())) continue;
    const double f = nodes[u].f * p[nodes[u].children];
    ++nodes[u].children;
    nodes.push_back({nodes[u].depth + 1, 0, f});
    best = std::max(best, BruteForce(nodes, p, budget, max_depth, value + f));
    nodes.pop_back();
    --nodes[u].children;
  }
  return best;
}

void CheckShape(const SequoiaShape& s, int budget, int max_depth, const std::vector<double>& p) {
  EXPECT_LE(static_cast<int>(s.paths.size()) + 1, std::max(budget, 1));
  std::set<std::vector<int>> seen = {{}};
  std::map<std::vector<int>, int> kids;
  for (const auto& path : s.paths) {
    ASSERT_FALSE(path.empty());
    EXPECT_LE(static_cast<int>(path.size()), max_depth);
    std::vector<int> parent(path.begin(), path.end() - 1);
    EXPECT_TRUE(seen.count(parent)) << "parents must come first";
    EXPECT_EQ(path.back(), kids[parent]++) << "ranks 0..b-1 in order";
    EXPECT_LT(path.back(), static_cast<int>(p.size()));
    seen.insert(path);
  }
  EXPECT_NEAR(EvalPaths(s.paths, p), s.expected_tokens, 1e-12);
}

TEST(SequoiaDpTest, MatchesBruteForceOnSmallCases) {
  std::vector<std::vector<double>> ps = {{0.6, 0.2, 0.1}, {0.3, 0.3, 0.3}, {0.9},
                                         {0.5, 0.4},      {0.1, 0.6, 0.2}, {0.0, 0.0}};
  SplitMix64 rng(7);
  for (int i = 0; i < 6; ++i) {
    std::vector<double> p(1 + rng.Below(3));
    for (double& x : p) x = rng.Uniform() / p.size();
    ps.push_back(p);
  }
  for (const auto& p : ps) {
    for (int budget = 1; budget <= 6; ++budget) {
      for (int depth = 0; depth <= 4; ++depth) {
        SCOPED_TRACE(testing::Message()
                     << "budget " << budget << " depth " << depth << " p0 " << p[0]);
        const SequoiaShape s = SequoiaDp(p, budget, depth);
        std::vector<Node> nodes = {{0, 0, 1.0}};
        EXPECT_NEAR(s.expected_tokens, BruteForce(nodes, p, budget, depth, 1.0), 1e-12);
        CheckShape(s, budget, depth, p);
      }
    }
  }
}

TEST(SequoiaDpTest, ValueGrowsWithBudget) {
  const std::vector<double> p = {0.5, 0.2, 0.1, 0.05};
  double prev = 0;
  for (int budget = 1; budget <= 64; ++budget) {
    const SequoiaShape s = SequoiaDp(p, budget, 6);
    EXPECT_GT(s.expected_tokens, prev) << budget;
    EXPECT_EQ(static_cast<int>(s.paths.size()) + 1, budget);
    CheckShape(s, budget, 6, p);
    prev = s.expected_tokens;
  }
  // A single candidate per node: the optimum is a chain, F = sum 0.8^i.
  const std::vector<double> chain = {0.8};
  const SequoiaShape s = SequoiaDp(chain, 5, 10);
  EXPECT_NEAR(s.expected_tokens, 1 + 0.8 + 0.64 + 0.512 + 0.4096, 1e-12);
  ASSERT_EQ(s.paths.size(), 4u);
  EXPECT_EQ(s.paths[3], (std::vector<int>{0, 0, 0, 0}));
  // Depth 0: root only.
  EXPECT_TRUE(SequoiaDp(p, 30, 0).paths.empty());
}

TEST(SequoiaDpTest, BuildFromTemplateFillsAndSkips) {
  const std::vector<double> p = {0.5, 0.2, 0.1, 0.05};
  const SequoiaShape s = SequoiaDp(p, 40, 5);
  TransitionTable table(512, 10);
  tree_test::FillFullTable(table);
  DraftTree t = BuildFromTemplate(3, 2, s, table, 0.01f);
  ASSERT_EQ(t.size(), 40);
  EXPECT_EQ(t.CheckInvariants(), "");
  for (int i = 1; i < t.size(); ++i) {
    EXPECT_EQ(t.rank[i], s.paths[i - 1].back());
    EXPECT_EQ(t.tokens[i], table.UnigramIds(t.tokens[t.parents[i]])[t.rank[i]]);
  }
  // A table with only 2 candidates per row: every path through rank >= 2 is dropped.
  TransitionTable narrow(512, 2);
  tree_test::FillFullTable(narrow);
  DraftTree n = BuildFromTemplate(3, 2, s, narrow, 0.01f);
  int expected = 1;
  for (const auto& path : s.paths) {
    bool ok = true;
    for (int r : path) ok = ok && r < 2;
    expected += ok;
  }
  EXPECT_EQ(n.size(), expected);
  EXPECT_EQ(n.CheckInvariants(), "");
  // min_score above rank 1's score (0.25) keeps only rank-0 chains.
  DraftTree m = BuildFromTemplate(3, 2, s, table, 0.3f);
  for (int i = 1; i < m.size(); ++i) EXPECT_EQ(m.rank[i], 0);
  // An unknown anchor has no successors: root only.
  TransitionTable empty(512, 10);
  EXPECT_EQ(BuildFromTemplate(3, 2, s, empty, 0.01f).size(), 1);
}

}  // namespace
}  // namespace goose
