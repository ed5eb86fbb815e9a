// How --budget auto prices passes deep in a context (DepthCost): the slopes from two depths,
// the curve a request gets at its depth, passes brought back to the curve's depth before they
// correct it, and the cost cache keeping the slopes.
#include <gtest/gtest.h>

#include "budget/budget_policy.h"
#include "budget/cost_cache.h"

namespace goose {
namespace {

// c(1) goes 10 -> 12 ms and c(16) 20 -> 36 ms between 256 and 1024 tokens: per key 2/768 ms
// for one row and 16/768 for sixteen, so 14/768/15 ms a row-key and the rest a key.
TEST(DepthCost, SlopesFromTwoDepths) {
  const DepthCost d = DepthCostFrom(256, 1024, 10e-3, 12e-3, 16, 20e-3, 36e-3);
  ASSERT_TRUE(d.known());
  EXPECT_EQ(d.depth, 256);
  EXPECT_NEAR(d.per_row_key, 14e-3 / 768 / 15, 1e-12);
  EXPECT_NEAR(d.per_key, 2e-3 / 768 - 14e-3 / 768 / 15, 1e-12);
  EXPECT_NEAR(d.Extra(1, 1024), 2e-3, 1e-9);  // the measured points come back
  EXPECT_NEAR(d.Extra(16, 1024), 16e-3, 1e-9);
  EXPECT_NEAR(d.Extra(16, 256), 0.0, 1e-12);
  EXPECT_LT(d.Extra(16, 0), 0.0);  // shallower than the curve: cheaper
  // Noise that makes a pass look cheaper deeper in is no slope at all; equal depths, none.
  EXPECT_FALSE(DepthCostFrom(256, 1024, 12e-3, 10e-3, 16, 36e-3, 20e-3).known());
  EXPECT_FALSE(DepthCostFrom(256, 256, 10e-3, 12e-3, 16, 20e-3, 36e-3).known());
}

std::vector<CostSample> Flat() {
  return {{1, 10e-3}, {2, 10.5e-3}, {4, 11e-3}, {8, 12e-3}, {16, 20e-3}, {32, 40e-3}};
}

// `policy` on the Flat curve, learning pass costs, with slopes measured 256 and 1024 tokens
// deep; returns the slopes.
DepthCost SetUpDeep(BudgetPolicy* policy) {
  policy->SetCostCurve(Flat());
  policy->LearnPassCosts({});
  const DepthCost d = DepthCostFrom(256, 1024, 10e-3, 12e-3, 16, 20e-3, 36e-3);
  policy->SetDepthCost(d);
  return d;
}

// A tree sizing itself on the curve (tuned GOOSE) gets the curve of its depth: at 3000 tokens a
// 16-node pass costs what the slopes add, and the plan moves with the depth in steps.
TEST(DepthCost, AutoPlansOnTheCurveOfTheRequestsDepth) {
  BudgetPolicy policy;
  const DepthCost d = SetUpDeep(&policy);
  BudgetRequest r;
  r.variant = "goose";
  r.auto_budget = r.own_sizes = true;
  SequenceBudget seq = policy.Begin(r);
  SpecStats stats;
  BudgetHistory history;
  auto cost_of = [](const CyclePlan& plan, int nodes) {
    for (const CostSample& c : *plan.cost) {
      if (c.nodes == nodes) return c.seconds;
    }
    return -1.0;
  };
  const CyclePlan shallow = policy.Plan(seq, stats, history, 256);
  ASSERT_NE(shallow.cost, nullptr);
  EXPECT_NEAR(cost_of(shallow, 16), 20e-3, 1e-9);
  const double at_256 = cost_of(shallow, 16);
  const CyclePlan deep = policy.Plan(seq, stats, history, 3000);
  EXPECT_NEAR(cost_of(deep, 16), 20e-3 + d.Extra(16, 3000), 1e-9);
  EXPECT_NEAR(cost_of(deep, 1), 10e-3 + d.Extra(1, 3000), 1e-9);
  // A few tokens on the plan stays where it was (the curve moves every kDepthStep tokens).
  const CyclePlan near = policy.Plan(seq, stats, history, 3010);
  EXPECT_DOUBLE_EQ(cost_of(near, 16), cost_of(deep, 16));
  EXPECT_GT(cost_of(near, 16), at_256);
  // Without slopes the depth changes nothing.
  BudgetPolicy flat;
  flat.SetCostCurve(Flat());
  SequenceBudget s2 = flat.Begin(r);
  EXPECT_NEAR(cost_of(flat.Plan(s2, stats, history, 3000), 16), 20e-3, 1e-9);
}

// A pass timed deep in a context corrects the curve at the curve's depth: what the depth added
// comes off first, so a run deep in a long prompt does not make shallow passes look dear.
TEST(DepthCost, DeepPassesCorrectTheCurveAtItsDepth) {
  BudgetPolicy policy;
  const DepthCost d = SetUpDeep(&policy);
  for (int i = 0; i < 8; ++i) policy.RecordPass(16, 30e-3 + d.Extra(16, 3000), d.Extra(16, 3000));
  for (const CostSample& c : policy.CostCurve()) {
    if (c.nodes == 16) {
      EXPECT_NEAR(c.seconds, 30e-3, 1e-6);
    }
  }
}

// The cost cache keeps the slopes beside the curve; an unreadable "depth" loses them alone.
TEST(DepthCost, TheCostCacheKeepsTheSlopes) {
  const nlohmann::json key = {{"model", "m"}};
  nlohmann::json j = {
      {"key", key},
      {"calibrations", 1},
      {"noisy", false},
      {"curve", {{{"nodes", 1}, {"seconds", 1e-3}}, {{"nodes", 16}, {"seconds", 2e-3}}}},
      {"depth", {{"depth", 256}, {"per_key", 1e-7}, {"per_row_key", 2e-8}}}};
  auto c = ParseCostCache(j.dump(), key);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->depth.depth, 256);
  EXPECT_DOUBLE_EQ(c->depth.per_key, 1e-7);
  EXPECT_DOUBLE_EQ(c->depth.per_row_key, 2e-8);
  for (const nlohmann::json& bad :
       {nlohmann::json("x"),
        nlohmann::json({{"depth", 1e30}, {"per_key", 1e-7}, {"per_row_key", 0}}),
        nlohmann::json({{"depth", 256}, {"per_key", -1}, {"per_row_key", 0}}),
        nlohmann::json({{"depth", 256}, {"per_key", 1e-7}})}) {
    j["depth"] = bad;
    auto r = ParseCostCache(j.dump(), key);
    ASSERT_TRUE(r.ok()) << bad;  // the curve still serves
    EXPECT_FALSE(r->depth.known()) << bad;
  }
}

}  // namespace
}  // namespace goose
