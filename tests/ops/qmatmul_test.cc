// Quantized formats and the integer-dot MatMul: round-trip bounds, known blocks, every kernel
// path bitwise equal to the scalar reference for every batch size and thread count, and the
// reference itself within the activation-quantization bound of the exact product.
#include "ops/qmatmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "ops/cpu_features.h"
#include "ops/ops.h"
#include "ops/quant.h"
#include "util/aligned.h"
#include "util/fp16.h"
#include "util/rng.h"
#include "util/thread_pool.h"

namespace goose {
namespace {

const DType kIntTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0,
                           DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

std::vector<float> RandomRow(SplitMix64& r, int64_t n, double scale) {
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(r.Normal() * scale);
  return x;
}

std::vector<uint8_t> Quantize(DType t, const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<uint8_t> q(static_cast<size_t>(RowBytes(t, cols) * rows));
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeRow(t, x.data() + r * cols, cols, q.data() + r * RowBytes(t, cols));
  }
  return q;
}

// Per-element error bound of QuantizeRow -> DequantizeRow, from the block's own parameters
// (quant.h): Q8_0 half a step; Q4_0/Q5_0 one step (the far side of the range clips at 15), both
// plus the f16 rounding of d;
// Q4_K/Q5_K half a step plus half a min step; Q6_K half a step. Plus f32 rounding.
std::vector<double> ErrorBounds(DType t, const uint8_t* blk_row, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<double> bound(n);
  for (int64_t i = 0; i < n; ++i) {
    double b = 0;
    switch (t) {
      case DType::kQ8_0: {
        uint16_t dh;
        std::memcpy(&dh, blk_row + (i / 32) * 34, 2);
        // The levels use the unrounded d: add 127 f16 roundings of d (relative 2^-11, or
        // 2^-25 absolute when d is subnormal).
        b = F16ToF32(dh) * (0.5 + 127 * std::ldexp(1.0, -11)) + 127 * std::ldexp(1.0, -25);
        break;
      }
      case DType::kQ4_0: {
        uint16_t dh;
        std::memcpy(&dh, blk_row + (i / 32) * 18, 2);
        b = std::fabs(F16ToF32(dh)) * (1 + 8 * std::ldexp(1.0, -11)) + 8 * std::ldexp(1.0, -25);
        break;
      }
      case DType::kQ5_0: {
        uint16_t dh;
        std::memcpy(&dh, blk_row + (i / 32) * 22, 2);
        b = std::fabs(F16ToF32(dh)) * (1 + 16 * std::ldexp(1.0, -11)) + 16 * std::ldexp(1.0, -25);
        break;
      }
      case DType::kQ4_K:
      case DType::kQ5_K: {
        const uint8_t* blk = blk_row + (i / 256) * (t == DType::kQ4_K ? 144 : 176);
        uint16_t dh, mh;
        std::memcpy(&dh, blk, 2);
        std::memcpy(&mh, blk + 2, 2);
        uint8_t sc, m;
        GetScaleMinK4(static_cast<int>((i % 256) / 32), blk + 4, &sc, &m);
        b = 0.5 * F16ToF32(dh) * sc + 0.5 * F16ToF32(mh);
        break;
      }
      case DType::kQ6_K: {
        const uint8_t* blk = blk_row + (i / 256) * 210;
        uint16_t dh;
        std::memcpy(&dh, blk + 208, 2);
        b = 0.5 * F16ToF32(dh) * static_cast<int8_t>(blk[192 + (i % 256) / 16]);
        break;
      }
      default:
        break;
    }
    bound[i] = b * 1.0001 + 1e-6 * std::fabs(x[i]) + 1e-30;
  }
  return bound;
}

TEST(QMatMulTest, RoundTripWithinFormatBounds) {
  SplitMix64 rng(1);
  const int64_t n = 256 * 6;
  for (double scale : {1e-3, 1.0, 300.0}) {
    for (DType t : kIntTypes) {
      std::vector<float> x = RandomRow(rng, n, scale);
      x[5] = 0.0f;
      for (int i = 256; i < 512; ++i) x[i] = 0.0f;             // an all-zero super-block
      for (int i = 512; i < 768; ++i) x[i] = std::fabs(x[i]);  // all positive (min = 0)
      std::vector<uint8_t> q(static_cast<size_t>(RowBytes(t, n)) + 1);
      QuantizeRow(t, x.data(), n, q.data() + 1);  // +1: unaligned
      std::vector<float> y(n);
      DequantizeRow(t, q.data() + 1, n, y.data());
      const auto bound = ErrorBounds(t, q.data() + 1, x);
      double rms = 0;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(static_cast<double>(x[i]) - y[i]), bound[i])
            << GetDTypeInfo(t).name << " scale " << scale << " i " << i << " x " << x[i];
        rms += (x[i] - y[i]) * (x[i] - y[i]);
        if (i >= 256 && i < 512) {
          ASSERT_EQ(y[i], 0.0f);
        }
      }
      // Relative RMS error of each format on Gaussian data, loosely: 4-bit < 0.12, 6/8-bit
      // < 0.03 (and nonzero: it does quantize).
      rms = std::sqrt(rms / n) / scale;
      const bool four = t == DType::kQ4_0 || t == DType::kQ4_K;
      const bool five = t == DType::kQ5_0 || t == DType::kQ5_K;
      EXPECT_LT(rms, four ? 0.12 : five ? 0.06 : 0.03) << GetDTypeInfo(t).name;
      EXPECT_GT(rms, 1e-4) << GetDTypeInfo(t).name;
    }
  }
}

TEST(QMatMulTest, KnownQ4_0Block) {
  // ggml's reference: d = max / -8 where max is the signed value of largest magnitude.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16) * 0.5f;  // -8 .. 7.5
  BlockQ4_0 blk;
  QuantizeRow(DType::kQ4_0, x.data(), 32, &blk);
  EXPECT_EQ(F16ToF32(blk.d), 1.0f);  // -8 / -8
  EXPECT_EQ(blk.qs[0] & 0xF, 0);     // -8 * (1/1) + 8.5 -> 0
  EXPECT_EQ(blk.qs[0] >> 4, 8);      // x[16] = 0 -> 8
  EXPECT_EQ(blk.qs[15] >> 4, 15);    // 7.5 + 8.5 = 16 -> clamped to 15
  std::vector<float> y(32);
  DequantizeRow(DType::kQ4_0, &blk, 32, y.data());
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[31], 7.0f);
}

TEST(QMatMulTest, KnownQ5_0Block) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16);  // -16 .. 15
  BlockQ5_0 blk;
  QuantizeRow(DType::kQ5_0, x.data(), 32, &blk);
  EXPECT_EQ(F16ToF32(blk.d), 1.0f);  // -16 / -16
  std::vector<float> y(32);
  DequantizeRow(DType::kQ5_0, &blk, 32, y.data());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], x[i]) << i;  // exactly representable
  EXPECT_EQ(blk.qh[0], 0);                                  // values 0..7 have level < 16
  EXPECT_EQ(blk.qh[2], 0xFF);                               // values 16..23 have level >= 16
}

TEST(QMatMulTest, K4ScaleMinPackingRoundTrips) {
  // Every 6-bit scale/min in every slot survives the 12-byte packing.
  std::vector<float> x(256);
  SplitMix64 rng(5);
  for (int rep = 0; rep < 20; ++rep) {
    for (auto& v : x) v = static_cast<float>(rng.Normal());
    for (int j = 0; j < 8; ++j) {  // sub-block ranges of very different widths
      const float s = std::ldexp(1.0f, static_cast<int>(rng.Below(7)) - 3);
      for (int l = 0; l < 32; ++l) x[32 * j + l] *= s;
    }
    BlockQ4_K blk;
    QuantizeRow(DType::kQ4_K, x.data(), 256, &blk);
    std::vector<float> y(256);
    DequantizeRow(DType::kQ4_K, &blk, 256, y.data());
    const auto bound = ErrorBounds(DType::kQ4_K, reinterpret_cast<uint8_t*>(&blk), x);
    for (int i = 0; i < 256; ++i) ASSERT_LE(std::fabs(x[i] - y[i]), bound[i]) << i;
  }
}

// The CPU features kernel k needs that this CPU lacks ("" if it runs k).
std::string MissingFeatures(IntKernel k) {
  const CpuFeatures f = DetectCpuFeatures();
  switch (k) {
    case IntKernel::kScalar:
      return "";
    case IntKernel::kAvx2:
      return MissingCpuFeatures(f, CpuLevel::kAvx2);
    case IntKernel::kAvx512Vnni: {
      std::string m = MissingCpuFeatures(f, CpuLevel::kAvx512);
      if (!f.avx512vnni) m += (m.empty() ? "" : ", ") + std::string("avx512vnni");
      return m;
    }
    case IntKernel::kAmx:
      return MissingCpuFeatures(f, CpuLevel::kAmx);
  }
  return "?";
}

// The kernel-path tests run once per integer kernel (QMatMul's `kernel`): on this CPU, or
// skipped with the features it lacks, so that a run shows which paths it did not test.
class QMatMulKernelTest : public ::testing::TestWithParam<IntKernel> {
 protected:
  void SetUp() override {
    const std::string missing = MissingFeatures(GetParam());
    ASSERT_EQ(missing.empty(), IntKernelFor(DetectCpuLevel()) >= GetParam());
    if (!missing.empty()) {
      GTEST_SKIP() << "kernel " << IntKernelName(GetParam())
                   << " not tested on this CPU; missing: " << missing;
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Kernels, QMatMulKernelTest,
                         ::testing::Values(IntKernel::kScalar, IntKernel::kAvx2,
                                           IntKernel::kAvx512Vnni, IntKernel::kAmx),
                         [](const ::testing::TestParamInfo<IntKernel>& info) {
                           std::string name = IntKernelName(info.param);
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// The reference is the exact product up to activation quantization: each x moves by at most
// half a step of its block (amax / 254), so |err| <= sum |w_i| * step_i / 2 (+ f32 rounding).
TEST(QMatMulTest, ReferenceDotWithinActivationQuantizationBound) {
  SplitMix64 rng(7);
  const int cols = 512;
  for (DType t : kIntTypes) {
    const int sb = GetDTypeInfo(t).block_size == 32 ? 32 : 256;
    for (int rep = 0; rep < 8; ++rep) {
      const auto wf = RandomRow(rng, cols, 1.0);
      const auto q = Quantize(t, wf, 1, cols);
      std::vector<float> w(cols);
      DequantizeRow(t, q.data(), cols, w.data());
      const auto x = RandomRow(rng, cols, rep + 0.5);
      double exact = 0, tol = 0;
      for (int b = 0; b < cols / sb; ++b) {
        double amax = 0, wabs = 0;
        for (int i = b * sb; i < (b + 1) * sb; ++i) {
          exact += static_cast<double>(w[i]) * x[i];
          amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
          wabs += std::fabs(static_cast<double>(w[i]));
        }
        tol += wabs * amax / 254.0 * 1.001 + 1e-5 * wabs * amax;
      }
      EXPECT_NEAR(QDotReference(t, q.data(), cols, x.data()), exact, tol)
          << GetDTypeInfo(t).name << " rep " << rep;
    }
  }
}

// Every path of kernel k (direct, tiles, pairs of tiles, AMX: the dispatch table in qmatmul.cc),
// every batch size and thread count gives the reference's bits. 37 rows: partial
// tiles of 16 and 8; 181 x 768: enough work that even one token is split across threads (the
// direct few-token AVX-512 path, with its prefetch, over several full tiles per thread).
void CheckEveryBatchAndThreadCount(IntKernel k, int rows, int cols, std::vector<int> batches,
                                   uint64_t seed) {
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  SplitMix64 rng(seed);
  const int max_tok = *std::max_element(batches.begin(), batches.end());
  for (DType t : kIntTypes) {
    const auto wf = RandomRow(rng, static_cast<int64_t>(rows) * cols, 0.1);
    const auto q = Quantize(t, wf, rows, cols);
    WeightMatrix w{t, q.data(), rows, cols};
    auto x = RandomRow(rng, static_cast<int64_t>(max_tok) * cols, 3.0);
    for (int i = 0; i < cols; ++i) x[i] = 0.0f;  // a zero token: dx = 0 must be fine
    std::vector<float> ref(static_cast<size_t>(max_tok) * rows);
    for (int tok = 0; tok < max_tok; ++tok) {
      for (int r = 0; r < rows; ++r) {
        ref[tok * rows + r] = QDotReference(t, q.data() + r * w.row_bytes(), cols,
                                            x.data() + static_cast<size_t>(tok) * cols);
      }
    }
    // Q8_0, Q4_K, Q4_0 and Q5_0 also as tiles (WeightLayout::kTiles): every kernel reads
    // them, natively or not.
    AlignedVector<uint8_t> tiles;
    std::vector<WeightMatrix> layouts = {w};
    if (HasTiles(t)) {
      tiles.resize(static_cast<size_t>(TiledBytes(t, rows, cols)));
      RepackTiles(w, tiles.data());
      layouts.push_back({t, tiles.data(), rows, cols, WeightLayout::kTiles});
    }
    for (const WeightMatrix& wl : layouts) {
      for (ThreadPool* pool : pools) {
        for (int n : batches) {
          std::vector<float> out(static_cast<size_t>(n) * rows, -7.0f);
          QMatMul(wl, x.data(), n, out.data(), pool, k);
          for (size_t i = 0; i < out.size(); ++i) {
            ASSERT_EQ(std::memcmp(&out[i], &ref[i], 4), 0)
                << GetDTypeInfo(t).name << (wl.layout == WeightLayout::kTiles ? " tiles" : "")
                << " threads " << (pool ? pool->size() : 1) << " n " << n << " token " << i / rows
                << " row " << i % rows << ": " << out[i] << " vs " << ref[i];
          }
        }
      }
    }
  }
}

// Matrices stored as tiles in the tests: odd block counts (Q8_0 scales padded to 64 bytes),
// partial tiles, one full tile.
const std::tuple<DType, int, int> kTileShapes[] = {
    {DType::kQ8_0, 37, 96},  {DType::kQ8_0, 16, 32},  {DType::kQ8_0, 50, 768},
    {DType::kQ4_K, 37, 256}, {DType::kQ4_K, 16, 512}, {DType::kQ4_K, 50, 768},
    {DType::kQ4_0, 37, 96},  {DType::kQ4_0, 16, 64},  {DType::kQ5_0, 37, 96},
    {DType::kQ5_0, 50, 768}};

// Tiles hold exactly the rows' blocks: every row comes back byte for byte, and GetRow reads
// them as it reads rows.
TEST(QMatMulTest, TilesRoundTripAndMatchRows) {
  SplitMix64 rng(21);
  for (const auto& [t, rows, cols] : kTileShapes) {
    const auto q = Quantize(t, RandomRow(rng, int64_t{rows} * cols, 0.1), rows, cols);
    const WeightMatrix w{t, q.data(), rows, cols};
    const std::string what =
        std::string(GetDTypeInfo(t).name) + " " + std::to_string(rows) + "x" + std::to_string(cols);
    AlignedVector<uint8_t> tiles(static_cast<size_t>(TiledBytes(t, rows, cols)));
    RepackTiles(w, tiles.data());
    // The scalar repack (below AVX-512) writes the same bytes as the vectorized one.
    AlignedVector<uint8_t> scalar(tiles.size(), 0xAA);
    SetCpuLevelCap(CpuLevel::kAvx2);
    RepackTiles(w, scalar.data());
    SetCpuLevelCap(kMaxCpuLevel);
    ASSERT_EQ(std::memcmp(scalar.data(), tiles.data(), tiles.size()), 0) << what;
    const WeightMatrix wt{t, tiles.data(), rows, cols, WeightLayout::kTiles};
    std::vector<uint8_t> row(static_cast<size_t>(w.row_bytes()));
    std::vector<float> a(cols), b(cols);
    for (int r = 0; r < rows; ++r) {
      TiledRow(wt, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), q.data() + r * w.row_bytes(), row.size()), 0)
          << what << " row " << r;
      GetRow(w, r, a.data());
      GetRow(wt, r, b.data());
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << what << " row " << r;
    }
  }
}

// Tiles with odd block counts and partial tiles give every kernel the bits of the rows.
TEST_P(QMatMulKernelTest, TilesGiveTheBitsOfRows) {
  const IntKernel k = GetParam();
  SplitMix64 rng(21);
  for (const auto& [t, rows, cols] : kTileShapes) {
    const auto q = Quantize(t, RandomRow(rng, int64_t{rows} * cols, 0.1), rows, cols);
    const WeightMatrix w{t, q.data(), rows, cols};
    AlignedVector<uint8_t> tiles(static_cast<size_t>(TiledBytes(t, rows, cols)));
    RepackTiles(w, tiles.data());
    const WeightMatrix wt{t, tiles.data(), rows, cols, WeightLayout::kTiles};
    ThreadPool pool(2);
    for (int n : {1, 4, 9, 33}) {
      const auto x = RandomRow(rng, int64_t{n} * cols, 1.0);
      std::vector<float> want(static_cast<size_t>(n) * rows), got(want.size(), -7.0f);
      QMatMul(w, x.data(), n, want.data(), &pool, k);
      QMatMul(wt, x.data(), n, got.data(), &pool, k);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
          << GetDTypeInfo(t).name << " " << rows << "x" << cols << " n " << n;
    }
  }
}

TEST_P(QMatMulKernelTest, EveryBatchAndThreadCountEqualsReferenceBitwise) {
  CheckEveryBatchAndThreadCount(GetParam(), 37, 768, {1, 2, 3, 4, 5, 7, 8, 11, 16, 17, 40}, 9);
}

// Long rows (Q8_0: 2720 bytes), which on Intel run without the prefetch of the next tile
// (MaxPrefetchRowBytes), on the direct and the tile paths.
TEST_P(QMatMulKernelTest, LongRowsEqualReferenceBitwise) {
  CheckEveryBatchAndThreadCount(GetParam(), 37, 2560, {1, 5, 16, 40}, 11);
}

TEST_P(QMatMulKernelTest, FewTokensSplitAcrossThreadsEqualReferenceBitwise) {
  CheckEveryBatchAndThreadCount(GetParam(), 181, 768, {1, 2, 3}, 10);
}

// Activations whose quantized levels are exact halves (a block's maximum is 127, so its scale
// is 1 and x * (1 / d) = x): every vectorized rounding must round them away from zero as roundf
// does, and 0.49999997 down. One level off changes the product, so any slip shows bitwise.
TEST_P(QMatMulKernelTest, HalfwayActivationsRoundAsRoundf) {
  const IntKernel k = GetParam();
  SplitMix64 rng(12);
  const int rows = 32, cols = 768, n_tok = 17;
  std::vector<float> x(static_cast<size_t>(n_tok) * cols);
  for (size_t i = 0; i < x.size(); ++i) {
    const int k = static_cast<int>(rng.Next() % 254) - 127;  // k + 0.5 in [-126.5, 126.5]
    x[i] = static_cast<float>(k) + 0.5f;
    if (i % 7 == 3) x[i] = (i % 2 ? 1 : -1) * 0.49999997f;
  }
  for (size_t i = 0; i < x.size(); i += 32) x[i] = (i / 32) % 2 ? 127.0f : -127.0f;
  ThreadPool pool(2);
  for (DType t : kIntTypes) {
    const auto q = Quantize(t, RandomRow(rng, static_cast<int64_t>(rows) * cols, 0.1), rows, cols);
    WeightMatrix w{t, q.data(), rows, cols};
    std::vector<float> out(static_cast<size_t>(n_tok) * rows);
    QMatMul(w, x.data(), n_tok, out.data(), &pool, k);
    for (int tok = 0; tok < n_tok; ++tok) {
      for (int r = 0; r < rows; ++r) {
        const float want = QDotReference(t, q.data() + r * w.row_bytes(), cols,
                                         x.data() + static_cast<size_t>(tok) * cols);
        ASSERT_EQ(std::memcmp(&out[tok * rows + r], &want, 4), 0)
            << GetDTypeInfo(t).name << " token " << tok << " row " << r;
      }
    }
  }
}

// Matrices sharing one input (Q, K, V): one shared run gives each matrix QMatMul's bits, for
// row counts with partial tiles, every kernel, thread count and batch (AMX and direct).
TEST_P(QMatMulKernelTest, SharedRunEqualsOneMatMulEach) {
  const IntKernel k = GetParam();
  SplitMix64 rng(13);
  const int cols = 512, rows[] = {181, 16, 37};
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  for (DType t : kIntTypes) {
    std::vector<std::vector<uint8_t>> q;
    std::vector<WeightMatrix> w;
    for (int r : rows) q.push_back(Quantize(t, RandomRow(rng, int64_t{r} * cols, 0.1), r, cols));
    for (int i = 0; i < 3; ++i) w.push_back({t, q[i].data(), rows[i], cols});
    const WeightMatrix* ws[] = {&w[0], &w[1], &w[2]};
    for (int n : {1, 3, 16, 21}) {
      const auto x = RandomRow(rng, static_cast<int64_t>(n) * cols, 1.0);
      for (ThreadPool* pool : pools) {
        std::vector<float> want[3], got[3];
        float* outs[3];
        for (int i = 0; i < 3; ++i) {
          want[i].resize(static_cast<size_t>(n) * rows[i]);
          got[i].assign(want[i].size(), -7.0f);
          outs[i] = got[i].data();
          QMatMul(w[i], x.data(), n, want[i].data(), pool, k);
        }
        QMatMulShared(ws, 3, x.data(), n, outs, pool, k);
        for (int i = 0; i < 3; ++i) {
          ASSERT_EQ(std::memcmp(got[i].data(), want[i].data(), got[i].size() * 4), 0)
              << GetDTypeInfo(t).name << " n " << n << " matrix " << i;
        }
      }
    }
  }
}

// MatMulShared with mixed dtypes and widths (two Q8_0 matrices that share a run, a Q6_K one, an
// F32 one): each output equals its own MatMul, bitwise.
TEST(QMatMulTest, MatMulSharedOfMixedDtypesEqualsMatMul) {
  SplitMix64 rng(14);
  const int rows = 24, cols = 256;
  const auto q8a = Quantize(DType::kQ8_0, RandomRow(rng, rows * cols, 0.1), rows, cols);
  const auto q6 = Quantize(DType::kQ6_K, RandomRow(rng, rows * cols, 0.1), rows, cols);
  const auto q8b = Quantize(DType::kQ8_0, RandomRow(rng, 40 * cols, 0.1), 40, cols);
  const auto f32 = RandomRow(rng, rows * cols, 0.1);
  const WeightMatrix a{DType::kQ8_0, q8a.data(), rows, cols};
  const WeightMatrix b{DType::kQ6_K, q6.data(), rows, cols};
  // (c as tiles: a Q8_0 matrix of another layout than a runs on its own.)
  AlignedVector<uint8_t> tiles(static_cast<size_t>(TiledBytes(DType::kQ8_0, 40, cols)));
  RepackTiles({DType::kQ8_0, q8b.data(), 40, cols}, tiles.data());
  const WeightMatrix c{DType::kQ8_0, tiles.data(), 40, cols, WeightLayout::kTiles};
  const WeightMatrix d{DType::kF32, f32.data(), rows, cols};
  const WeightMatrix* ws[] = {&a, &b, &c, &d};
  ThreadPool pool(2);
  for (int n : {1, 5, 17}) {
    const auto x = RandomRow(rng, static_cast<int64_t>(n) * cols, 1.0);
    std::vector<float> got[4], want[4];
    float* outs[4];
    for (int i = 0; i < 4; ++i) {
      got[i].assign(static_cast<size_t>(n) * ws[i]->rows, -7.0f);
      want[i].resize(got[i].size());
      outs[i] = got[i].data();
      MatMul(*ws[i], x.data(), n, want[i].data(), &pool);
    }
    MatMulShared(ws, 4, x.data(), n, outs, &pool);
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(std::memcmp(got[i].data(), want[i].data(), got[i].size() * 4), 0)
          << "n " << n << " matrix " << i;
    }
  }
}

// MatMul dispatches quantized dtypes to QMatMul with the level's kernel.
TEST(QMatMulTest, MatMulUsesIntegerPath) {
  SplitMix64 rng(11);
  const int rows = 20, cols = 256;
  for (DType t : kIntTypes) {
    const auto q = Quantize(t, RandomRow(rng, rows * cols, 1.0), rows, cols);
    WeightMatrix w{t, q.data(), rows, cols};
    const auto x = RandomRow(rng, cols, 1.0);
    std::vector<float> out(rows);
    MatMul(w, x.data(), 1, out.data(), nullptr);
    for (int r = 0; r < rows; ++r) {
      const float want = QDotReference(t, q.data() + r * w.row_bytes(), cols, x.data());
      ASSERT_EQ(std::memcmp(&out[r], &want, 4), 0) << GetDTypeInfo(t).name << " row " << r;
    }
  }
}

}  // namespace
}  // namespace goose
