// ObservedCosts against synthetic cycle times on a machine whose speed changes.
#include "budget/observed_costs.h"

#include <gtest/gtest.h>

namespace goose {
namespace {

const std::vector<CostSample> kCalibrated = {{1, 40e-3}, {4, 44e-3}, {8, 50e-3}, {12, 64e-3}};

double At(const std::vector<CostSample>& c, int nodes) {
  for (const CostSample& s : c) {
    if (s.nodes == nodes) return s.seconds;
  }
  return -1;
}

TEST(ObservedCosts, MediansOfTheSizesTimedOftenEnough) {
  ObservedCosts o(kCalibrated);
  EXPECT_TRUE(o.Medians().empty());
  for (int i = 0; i < 7; ++i) o.Record(8, (60 + i) * 1e-3);  // median 63 ms
  for (int i = 0; i < 3; ++i) o.Record(4, 1.0);              // too few to say
  const std::vector<CostSample> m = o.Medians();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_NEAR(At(m, 8), 63e-3, 1e-6);
  EXPECT_EQ(o.cycles(), 10u);
}

// The machine's small passes flip between two speeds (1.5B-cost model: 4-node cycles 35 or
// 47 ms): the figure follows within kKept cycles of the flip, not 64.
TEST(ObservedCosts, RecentCyclesDecide) {
  ObservedCosts o(kCalibrated);
  for (int i = 0; i < 64; ++i) o.Record(4, 35e-3);
  for (int i = 0; i < 9; ++i) o.Record(4, 47e-3);
  EXPECT_NEAR(At(o.Medians(), 4), 47e-3, 1e-6);
  // Sizes interleaved: each keeps its own last cycles (a ring indexed by all cycles left old
  // figures of a size in place forever).
  ObservedCosts mixed(kCalibrated);
  for (int i = 0; i < 64; ++i) mixed.Record(i % 2 ? 8 : 4, 35e-3);
  for (int i = 0; i < 18; ++i) mixed.Record(i % 2 ? 8 : 4, 50e-3);
  const std::vector<CostSample> m = mixed.Medians();
  EXPECT_NEAR(At(m, 4), 50e-3, 1e-6);
  EXPECT_NEAR(At(m, 8), 50e-3, 1e-6);
}

TEST(ObservedCosts, PriorFillsWhatThisRunHasNotTimed) {
  ObservedCosts o(kCalibrated);
  // Nothing timed: the prior where it has a size, the rest scaled like their neighbours.
  std::vector<CostSample> c = o.Curve({{8, 60e-3}});
  EXPECT_NEAR(At(c, 8), 60e-3, 1e-12);
  EXPECT_NEAR(At(c, 12), 64e-3 * 1.2, 1e-12);  // like 8, above its calibration
  EXPECT_NEAR(At(c, 4), 44e-3 * 1.2, 1e-12);   // nothing timed below: like 8 above it
  for (int i = 0; i < 4; ++i) o.Record(8, 55e-3);
  c = o.Curve({{8, 60e-3}, {12, 90e-3}});
  EXPECT_NEAR(At(c, 8), 55e-3, 1e-9);  // this run's figure over the prior's
  EXPECT_NEAR(At(c, 12), 90e-3, 1e-9);
  for (size_t i = 1; i < c.size(); ++i) EXPECT_LE(c[i - 1].seconds, c[i].seconds);
}

TEST(ObservedCosts, PriorCountsAsOneCycle) {
  ObservedCosts o(kCalibrated);
  o.Seed({{8, 80e-3}});
  for (int i = 0; i < 3; ++i) o.Record(8, 50e-3);
  EXPECT_NEAR(At(o.Medians(), 8), 50e-3, 1e-6);  // 4 cycles: the prior and 3 new
}

// A size priced out by one slow moment is tried again: up, the next size above the last
// cycle's at the price of the largest one up to it; down, the curve ends below it.
TEST(ObservedCosts, ExploreCurveOffersTheNeighbouringSizes) {
  const std::vector<CostSample> curve = {{1, 10.0}, {2, 11.0}, {4, 12.0}, {8, 30.0}, {16, 50.0}};
  std::vector<CostSample> up = ObservedCosts::ExploreCurve(curve, 4, true);
  ASSERT_EQ(up.size(), 4u);
  EXPECT_EQ(up.back().nodes, 8);
  EXPECT_EQ(up.back().seconds, 12.0);
  up = ObservedCosts::ExploreCurve(curve, 6, true);  // a tree cut between sizes
  EXPECT_EQ(up.back().nodes, 8);
  EXPECT_EQ(up.back().seconds, 12.0);
  std::vector<CostSample> down = ObservedCosts::ExploreCurve(curve, 8, false);
  ASSERT_EQ(down.size(), 3u);
  EXPECT_EQ(down.back().nodes, 4);
  EXPECT_EQ(down.back().seconds, 12.0);
  // Nothing above the largest size, nothing of 2 nodes or more below 2: the curve as it is.
  EXPECT_EQ(ObservedCosts::ExploreCurve(curve, 16, true).size(), curve.size());
  EXPECT_EQ(ObservedCosts::ExploreCurve(curve, 2, false).size(), curve.size());
  EXPECT_EQ(ObservedCosts::ExploreCurve(curve, 1, true).back().nodes, 2);
  EXPECT_TRUE(ObservedCosts::ExploreCurve({}, 4, true).empty());
}

TEST(ObservedCosts, IgnoresWhatNoCurveCovers) {
  ObservedCosts o(kCalibrated);
  for (int i = 0; i < 10; ++i) {
    o.Record(0, 1.0);
    o.Record(13, 1.0);
    o.Record(4, 0.0);
    o.Record(4, -1.0);
  }
  EXPECT_EQ(o.cycles(), 0u);
  EXPECT_TRUE(o.Medians().empty());
  ObservedCosts none;
  none.Record(1, 1.0);
  EXPECT_TRUE(none.Medians().empty());
  EXPECT_TRUE(none.Curve({}).empty());
}

}  // namespace
}  // namespace goose
