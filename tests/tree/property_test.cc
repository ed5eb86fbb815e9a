// Property test: every builder respects its budget and the DraftTree invariants on random tables,
// spines, confidences and parameters.
#include <gtest/gtest.h>

#include "tree/tree_builders.h"
#include "tree_test_util.h"

namespace goose {
namespace {

void CheckBranchScores(const DraftTree& t, float min_score) {
  for (int i = 1; i < t.size(); ++i) {
    if (t.source[i] == NodeSource::kBranch) {
      EXPECT_GE(t.score[i], min_score) << "node " << i;
    }
  }
}

TEST(TreePropertyTest, BudgetsAndInvariantsOverSeeds) {
  constexpr int kSeeds = 200;
  int full_goose = 0, full_balanced = 0;  // trees that used their whole budget
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    SplitMix64 rng(seed);
    const int vocab = 16 + static_cast<int>(rng.Below(200));  // small: many collisions
    const int k = 1 + static_cast<int>(rng.Below(10));
    TransitionTable table(vocab, k, 8);
    tree_test::FillRandomTable(table, rng, rng.Uniform(), rng.Uniform() * 0.5);
    const int32_t anchor = static_cast<int32_t>(rng.Below(vocab));
    const int32_t prev = static_cast<int32_t>(rng.Below(vocab + 1)) - 1;

    // Chain.
    std::vector<int32_t> spine(rng.Below(130));
    for (auto& s : spine) s = static_cast<int32_t>(rng.Below(vocab));
    const int max_nodes = static_cast<int>(rng.Below(40));
    const DraftTree chain = BuildChain(anchor, spine, max_nodes);
    EXPECT_LE(chain.size(), std::max(max_nodes, 1));
    EXPECT_EQ(chain.CheckInvariants(), "");

    // TR.
    const DraftTree tr = BuildTrTree(anchor, table);
    EXPECT_LE(tr.size(), 81);
    EXPECT_EQ(tr.CheckInvariants(), "");

    // Balanced.
    BalancedParams bp;
    bp.budget = 1 + static_cast<int>(rng.Below(100));
    bp.k = 1 + static_cast<int>(rng.Below(6));
    bp.max_depth = static_cast<int>(rng.Below(8));
    bp.min_score = static_cast<float>(rng.Uniform() * 0.05);
    const DraftTree bal = BuildBalancedTree(anchor, prev, table, bp);
    EXPECT_LE(bal.size(), bp.budget);
    full_balanced += bal.size() == bp.budget && bp.budget > 10;
    EXPECT_EQ(bal.CheckInvariants(), "");
    CheckBranchScores(bal, bp.min_score);
    for (int i = 0; i < bal.size(); ++i) {
      EXPECT_LE(bal.depth[i], bp.max_depth);
      EXPECT_LE(tree_test::ChildCount(bal, i), bp.k);
    }

    // Sequoia.
    std::vector<double> p(1 + rng.Below(6));
    for (double& x : p) x = rng.Uniform() / p.size();
    const int sbudget = 1 + static_cast<int>(rng.Below(50));
    const SequoiaShape shape = SequoiaDp(p, sbudget, static_cast<int>(rng.Below(7)));
    EXPECT_LE(static_cast<int>(shape.paths.size()) + 1, sbudget);
    const DraftTree seq = BuildFromTemplate(anchor, prev, shape, table, 0.01f);
    EXPECT_LE(seq.size(), sbudget);
    EXPECT_EQ(seq.CheckInvariants(), "");
    CheckBranchScores(seq, 0.01f);

    // GOOSE spine tree.
    GooseParams gp;
    gp.base_budget = 1 + static_cast<int>(rng.Below(80));
    gp.k = k;
    gp.max_depth = 1 + static_cast<int>(rng.Below(7));
    const bool consensus = rng.Below(4) == 0;
    const Confidence c =
        MatchConfidence(static_cast<int>(std::min<size_t>(spine.size(), 20)), consensus);
    const SpineEma ema(static_cast<int64_t>(rng.Below(1001)), 1000);
    const DraftTree goose = BuildSpineTree(anchor, prev, spine, c, ema, table, gp);
    const SpineTreePlan plan = PlanSpineTree(static_cast<int>(spine.size()), c, ema, gp);
    EXPECT_EQ(goose.CheckInvariants(), "");
    CheckBranchScores(goose, gp.min_score);
    if (c.IsOne() && plan.spine_len == plan.budget) {
      EXPECT_EQ(goose.size(), plan.budget + 1);  // saturated: root not counted
    } else {
      EXPECT_LE(goose.size(), plan.budget);
      full_goose += goose.size() == plan.budget && plan.budget > 10;
    }
    EXPECT_LE(plan.root_share + plan.spine_share, std::max(plan.branch_budget, 0));
    int spine_nodes = 0;
    for (int i = 1; i < goose.size(); ++i) {
      if (goose.source[i] != NodeSource::kSpine) continue;
      ++spine_nodes;
      EXPECT_EQ(goose.parents[i], i - 1);
      EXPECT_EQ(goose.tokens[i], spine[i - 1]);
    }
    EXPECT_EQ(spine_nodes, plan.spine_len);
    // Branches grown from branches stay within D_max.
    for (int i = 1; i < goose.size(); ++i) {
      if (goose.source[goose.parents[i]] == NodeSource::kBranch) {
        EXPECT_LE(goose.depth[i], gp.max_depth);
      }
    }
  }
  // The random tables are rich enough that budgets are often exhausted (the bound is tight).
  EXPECT_GT(full_goose, 10);
  EXPECT_GT(full_balanced, 10);
}

}  // namespace
}  // namespace goose
