// QuantizeRow / DequantizeRow: exact ggml Q8_0 blocks and round-trip error bounds.
#include "ops/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "util/fp16.h"
#include "util/rng.h"

namespace goose {
namespace {

TEST(QuantTest, Q8_0KnownBlockRoundsHalfAwayFromZero) {
  // amax = 127 -> d = 1 exactly, so qs = roundf(x): ties go away from zero as in ggml's roundf.
  float x[32] = {};
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -0.49f;
  x[5] = 3.6f;
  x[6] = -127.0f;
  BlockQ8_0 blk;
  QuantizeRow(DType::kQ8_0, x, 32, &blk);
  EXPECT_EQ(blk.d, 0x3c00);  // f16 1.0
  const int8_t want[7] = {127, 3, -3, 1, 0, 4, -127};
  for (int j = 0; j < 7; ++j) EXPECT_EQ(blk.qs[j], want[j]) << j;
  for (int j = 7; j < 32; ++j) EXPECT_EQ(blk.qs[j], 0) << j;
}

TEST(QuantTest, Q8_0KnownBlockScale) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  uint8_t raw[34];
  QuantizeRow(DType::kQ8_0, x, 32, raw);
  uint16_t d;
  std::memcpy(&d, raw, 2);
  EXPECT_EQ(d, 0x3008);  // f16(16/127) = 0.1259765625
  const int8_t* qs = reinterpret_cast<const int8_t*>(raw + 2);
  EXPECT_EQ(qs[0], -127);  // -16 * 127/16
  EXPECT_EQ(qs[16], 0);
  EXPECT_EQ(qs[17], 8);    // 7.9375 -> 8
  EXPECT_EQ(qs[31], 119);  // 15 * 7.9375 = 119.06
  EXPECT_EQ(qs[18], 16);   // 15.875 -> 16
  float back[32];
  DequantizeRow(DType::kQ8_0, raw, 32, back);
  EXPECT_EQ(back[0], -127 * 0.1259765625f);
  EXPECT_EQ(back[31], 119 * 0.1259765625f);
}

TEST(QuantTest, Q8_0ZeroBlock) {
  std::vector<float> x(64, 0.0f);
  x[40] = -1e-3f;
  std::vector<uint8_t> q(68, 0xAB);
  QuantizeRow(DType::kQ8_0, x.data(), 64, q.data());
  for (int i = 0; i < 34; ++i) EXPECT_EQ(q[i], 0) << i;  // d = 0, qs = 0
  std::vector<float> y(64, 5.0f);
  DequantizeRow(DType::kQ8_0, q.data(), 64, y.data());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.0f);
  EXPECT_NEAR(y[40], -1e-3f, 1e-5f);
}

std::vector<float> RandomRow(int64_t n, uint64_t seed, double scale) {
  SplitMix64 r(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(r.Normal() * scale);
  return x;
}

TEST(QuantTest, RoundTripErrorBounds) {
  const int64_t n = 32 * 40;
  for (double scale : {1e-3, 1.0, 300.0}) {
    const std::vector<float> x = RandomRow(n, 9, scale);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0}) {
      // +1: the output need not be aligned.
      std::vector<uint8_t> buf(RowBytes(t, n) + 1);
      QuantizeRow(t, x.data(), n, buf.data() + 1);
      std::vector<float> y(n);
      DequantizeRow(t, buf.data() + 1, n, y.data());
      double max_err = 0;
      for (int64_t b = 0; b < n / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        for (int j = 0; j < 32; ++j) {
          const int64_t i = b * 32 + j;
          const double err = std::fabs(static_cast<double>(x[i]) - y[i]);
          double bound = 0;
          switch (t) {
            case DType::kF32:
              bound = 0;
              break;
            case DType::kF16:
              bound = std::fabs(x[i]) * std::ldexp(1.0, -11) + 6e-8;
              break;
            case DType::kBF16:
              bound = std::fabs(x[i]) * std::ldexp(1.0, -8);
              break;
            // Half a step of d, plus 127 times the f16 rounding error of d (relative for
            // normal d, absolute half-step 2^-25 once d is an f16 subnormal).
            default:
              bound =
                  amax * (0.5 / 127 + std::ldexp(1.0, -11)) * 1.001 + 127 * std::ldexp(1.0, -25);
              break;
          }
          ASSERT_LE(err, bound) << GetDTypeInfo(t).name << " scale " << scale << " i " << i;
          max_err = std::max(max_err, err / scale);
        }
      }
      if (t == DType::kQ8_0) {
        EXPECT_GT(max_err, 1e-4);  // it does quantize
      }
    }
  }
}

TEST(QuantTest, F16AndBf16MatchScalarConversions) {
  const std::vector<float> x = RandomRow(100, 3, 10.0);
  std::vector<uint16_t> h(100), b(100);
  QuantizeRow(DType::kF16, x.data(), 100, h.data());
  QuantizeRow(DType::kBF16, x.data(), 100, b.data());
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(h[i], F32ToF16(x[i]));
    EXPECT_EQ(b[i], F32ToBF16(x[i]));
  }
  EXPECT_TRUE(QuantizeSupported(DType::kQ8_0));
  EXPECT_TRUE(QuantizeSupported(DType::kQ4_K));
  EXPECT_FALSE(QuantizeSupported(DType::kQ2_K));
}

}  // namespace
}  // namespace goose
