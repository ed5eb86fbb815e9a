// CycleRate: the run's tokens per second from moving averages of cycle seconds and tokens.
#include "budget/cycle_rate.h"

#include <gtest/gtest.h>

namespace goose {
namespace {

TEST(CycleRate, FirstCycleAsIsThenMovingAverages) {
  CycleRate r;
  EXPECT_EQ(r.TokensPerSecond(), 0.0);
  r.Add(0.5, 2);  // 4 tokens/s
  EXPECT_DOUBLE_EQ(r.TokensPerSecond(), 4.0);
  // A cycle of 1 s committing 18 tokens moves the averages by 1/16 of the way: 0.53125 s and
  // 3 tokens, not the ratio (4 tokens/s) by 1/16 of its distance to 18.
  r.Add(1.0, 18);
  EXPECT_DOUBLE_EQ(r.seconds, 0.53125);
  EXPECT_DOUBLE_EQ(r.tokens, 3.0);
  EXPECT_DOUBLE_EQ(r.TokensPerSecond(), 3.0 / 0.53125);
  EXPECT_EQ(r.cycles, 2);
}

}  // namespace
}  // namespace goose
