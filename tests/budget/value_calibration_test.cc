// ValueCalibration: per-step accepted / predicted, shrunk towards the overall ratio, and a state
// that loads only when sane.
#include "budget/value_calibration.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace goose {
namespace {

TEST(ValueCalibration, ScalesEachStepByWhatItsNodesWereAccepted) {
  ValueCalibration cal;
  std::vector<double> s = cal.NodeScale(12);
  ASSERT_EQ(s.size(), 13u);
  for (size_t i = 1; i < s.size(); ++i) EXPECT_DOUBLE_EQ(s[i], 1.0) << "nothing seen: values as is";
  // Node 1 predicted right, nodes 4-7 accepted twice as often as their values say.
  for (int c = 0; c < 400; ++c) {
    cal.Record(1, 0.5, c % 2 == 0);
    for (int i = 4; i < 8; ++i) cal.Record(i, 0.1, c % 5 == 0);
  }
  s = cal.NodeScale(12);
  // 1: (200 + 8 * overall) / (200 + 8), overall = (520 + 16) / (360 + 16) = 1.43.
  const double overall = (200.0 + 320.0 + 16) / (200.0 + 160.0 + 16);
  EXPECT_NEAR(s[1], (200 + 8 * overall) / 208.0, 1e-12);
  EXPECT_NEAR(s[4], (320 + 8 * overall) / 168.0, 1e-12);
  EXPECT_EQ(s[4], s[7]);
  EXPECT_NEAR(s[2], overall, 1e-12) << "a step never seen borrows the overall ratio";
  EXPECT_NEAR(s[8], overall, 1e-12);
  EXPECT_LT(s[1], 1.05);
  EXPECT_GT(s[4], 1.9);
  // Older evidence fades: scaling every sum keeps the ratios but weakens them against priors.
  ValueCalibration faded = cal;
  faded.Scale(0.01);
  EXPECT_LT(faded.NodeScale(12)[4], s[4]);
  EXPECT_GT(faded.NodeScale(12)[4], 1.0);
}

TEST(ValueCalibration, ClampsAbsurdRatios) {
  ValueCalibration cal;
  for (int c = 0; c < 1000; ++c) cal.Record(2, 1e-6, true);
  EXPECT_EQ(cal.NodeScale(4)[2], 2.0);
  ValueCalibration none;
  for (int c = 0; c < 1000; ++c) none.Record(2, 1.0, false);
  EXPECT_EQ(none.NodeScale(4)[2], 0.25);
}

TEST(ValueCalibration, SavedStateLoadsBackAndBadStateIsRejected) {
  ValueCalibration cal;
  cal.Record(1, 0.7, true);
  cal.Record(9, 0.2, false);
  const std::string bytes = cal.Save();
  ASSERT_EQ(bytes.size(), ValueCalibration::kBytes);
  ValueCalibration back;
  ASSERT_TRUE(back.Load(bytes).ok());
  EXPECT_EQ(back.Save(), bytes);
  EXPECT_EQ(back.NodeScale(16), cal.NodeScale(16));

  EXPECT_FALSE(back.Load(bytes.substr(1)).ok());
  for (double bad :
       {-1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    std::string b = bytes;
    std::memcpy(b.data() + 3 * sizeof(double), &bad, sizeof(bad));
    EXPECT_FALSE(back.Load(b).ok()) << bad;
  }
  EXPECT_EQ(back.Save(), bytes) << "a rejected state leaves the calibration as it was";
}

}  // namespace
}  // namespace goose
