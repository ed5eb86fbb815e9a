// f16 / bf16 conversions: exhaustive f16 round trip and hand-checked rounding cases.
#include "util/fp16.h"

#include <gtest/gtest.h>

#include <cmath>

namespace goose {
namespace {

TEST(Fp16Test, AllHalfValuesRoundTripExactly) {
  int n_nan = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    const bool is_nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    if (is_nan) {
      ASSERT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f)))) << h;  // NaN stays NaN
      ++n_nan;
      continue;
    }
    ASSERT_EQ(F32ToF16(f), h) << "h=0x" << std::hex << h << " f=" << f;
  }
  EXPECT_EQ(n_nan, 2 * 1023);
}

TEST(Fp16Test, KnownValues) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::isinf(F16ToF32(0x7c00)));
  EXPECT_EQ(F16ToF32(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(F16ToF32(0x8000)));
  EXPECT_EQ(F16Table()[0x3c00], 1.0f);
}

TEST(Fp16Test, F32ToF16RoundsToNearestEven) {
  const float ulp1 = std::ldexp(1.0f, -10);              // f16 ulp at 1.0
  EXPECT_EQ(F32ToF16(1.0f + ulp1 / 2), 0x3c00);          // tie -> even (down)
  EXPECT_EQ(F32ToF16(1.0f + 3 * ulp1 / 2), 0x3c02);      // tie -> even (up)
  EXPECT_EQ(F32ToF16(1.0f + ulp1 / 2 + 1e-7f), 0x3c01);  // above the tie
  EXPECT_EQ(F32ToF16(1.0f + ulp1 / 2 - 1e-7f), 0x3c00);  // below the tie
  EXPECT_EQ(F32ToF16(-1.0f - 3 * ulp1 / 2), 0xbc02);
  // Overflow: 65520 is the tie between 65504 and "65536" -> inf; just below stays finite.
  EXPECT_EQ(F32ToF16(65519.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);
  EXPECT_EQ(F32ToF16(1e10f), 0x7c00);
  EXPECT_EQ(F32ToF16(-1e10f), 0xfc00);
  EXPECT_EQ(F32ToF16(INFINITY), 0x7c00);
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000);
  EXPECT_EQ(F32ToF16(NAN) & 0x7c00, 0x7c00);
  EXPECT_NE(F32ToF16(NAN) & 0x3ff, 0);
}

TEST(Fp16Test, F32ToF16Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // f16 subnormal step
  EXPECT_EQ(F32ToF16(tiny), 0x0001);
  EXPECT_EQ(F32ToF16(tiny / 2), 0x0000);            // tie -> even (0)
  EXPECT_EQ(F32ToF16(tiny / 2 * 1.0001f), 0x0001);  // just above half -> rounds up
  EXPECT_EQ(F32ToF16(tiny * 1.5f), 0x0002);         // tie 1.5 -> even 2
  EXPECT_EQ(F32ToF16(tiny * 2.5f), 0x0002);         // tie 2.5 -> even 2
  EXPECT_EQ(F32ToF16(tiny * 3.5f), 0x0004);
  EXPECT_EQ(F32ToF16(-tiny * 3.0f), 0x8003);
  EXPECT_EQ(F32ToF16(tiny / 4), 0x0000);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -30)), 0x0000);
  // Largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -14) - tiny / 4), 0x0400);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -14) - tiny), 0x03ff);
}

// Brute check against a double-precision reference on a pseudo-random sample.
TEST(Fp16Test, MatchesNearestRepresentable) {
  uint32_t x = 12345;
  for (int i = 0; i < 200000; ++i) {
    x = x * 1664525u + 1013904223u;
    const float f = BitsToFloat((x & 0x8fffffffu) | 0x30000000u);  // |f| roughly 1e-9 .. 1e9
    if (!std::isfinite(f) || std::fabs(f) > 65504.0f) continue;
    const uint16_t h = F32ToF16(f);
    const double got = F16ToF32(h);
    // Neighbours of h must not be strictly closer.
    for (int d : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(h + d);
      const double other = F16ToF32(n);
      if ((n & 0x7c00u) == 0x7c00u || ((h ^ n) & 0x8000u)) continue;
      ASSERT_LE(std::fabs(got - f), std::fabs(other - f)) << f;
    }
  }
}

TEST(Bf16Test, Rounding) {
  EXPECT_EQ(F32ToBF16(1.0f), 0x3f80);
  EXPECT_EQ(BF16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(BF16ToF32(0xc040), -3.0f);
  // 1 + 2^-8 is exactly half a bf16 ulp above 1.0: tie -> even (1.0).
  EXPECT_EQ(F32ToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3*2^-8 is a tie between 0x3f81 and 0x3f82: even -> 0x3f82.
  EXPECT_EQ(F32ToBF16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(F32ToBF16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(F32ToBF16(BitsToFloat(0x3f80ffffu)), 0x3f81);
  EXPECT_EQ(F32ToBF16(BitsToFloat(0x7f7fffffu)), 0x7f80);  // max float rounds to inf
  EXPECT_EQ(F32ToBF16(INFINITY), 0x7f80);
  const uint16_t nan = F32ToBF16(NAN);
  EXPECT_TRUE(std::isnan(BF16ToF32(nan)));
  EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(BitsToFloat(0x7f800001u)))));  // sNaN stays NaN
  // Every bf16 value round-trips.
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = BF16ToF32(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(F32ToBF16(f), b);
  }
}

}  // namespace
}  // namespace goose
