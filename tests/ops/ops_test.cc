// Kernels vs straightforward double-precision references, and the bit-identical rule:
// a token's MatMul row is the same bits whatever the batch, thread count or CPU level.
#include "ops/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/cpu_features.h"
#include "ops/quant.h"
#include "util/fp16.h"
#include "util/rng.h"
#include "util/thread_pool.h"

namespace goose {
namespace {

std::vector<float> RandomVec(SplitMix64& rng, size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.Normal()) * scale;
  return v;
}

// A weight matrix in `dtype` plus its exact f32 values (what the kernels must multiply by).
struct TestWeights {
  WeightMatrix w;
  std::vector<uint8_t> bytes;
  std::vector<float> ref;  // [rows, cols]
};

TestWeights MakeWeights(DType dtype, int64_t rows, int64_t cols, uint64_t seed) {
  SplitMix64 rng(seed);
  TestWeights t;
  t.w.dtype = dtype;
  t.w.rows = rows;
  t.w.cols = cols;
  t.bytes.resize(static_cast<size_t>(RowBytes(dtype, cols) * rows));
  t.ref.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = t.bytes.data() + r * RowBytes(dtype, cols);
    float* ref = t.ref.data() + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = static_cast<float>(rng.Normal());
      if (dtype == DType::kF32) {
        std::memcpy(row + 4 * c, &v, 4);
        ref[c] = v;
      } else if (dtype == DType::kF16) {
        const uint16_t h = F32ToF16(v);
        std::memcpy(row + 2 * c, &h, 2);
        ref[c] = F16ToF32(h);
      } else if (dtype == DType::kBF16) {
        const uint16_t h = F32ToBF16(v);
        std::memcpy(row + 2 * c, &h, 2);
        ref[c] = BF16ToF32(h);
      }
    }
    if (dtype == DType::kQ8_0) {
      for (int64_t b = 0; b < cols / 32; ++b) {
        const uint16_t dh = F32ToF16(0.01f + 0.001f * static_cast<float>(rng.Below(50)));
        const float d = F16ToF32(dh);
        uint8_t* blk = row + b * 34;
        std::memcpy(blk, &dh, 2);
        for (int i = 0; i < 32; ++i) {
          const int8_t q = static_cast<int8_t>(static_cast<int>(rng.Below(255)) - 127);
          std::memcpy(blk + 2 + i, &q, 1);
          ref[b * 32 + i] = d * static_cast<float>(q);
        }
      }
    }
  }
  t.w.data = t.bytes.data();
  return t;
}

double RefDot(const float* a, const float* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

double AbsDot(const float* a, const float* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::fabs(static_cast<double>(a[i]) * b[i]);
  return s;
}

const DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0};

class LevelGuard {  // restores the CPU level cap at scope exit
 public:
  ~LevelGuard() { SetCpuLevelCap(kMaxCpuLevel); }
};

TEST(OpsTest, DotMatchesReferenceForAllLengths) {
  SplitMix64 rng(1);
  for (int n = 0; n <= 70; ++n) {
    auto a = RandomVec(rng, n), b = RandomVec(rng, n);
    EXPECT_NEAR(Dot(a.data(), b.data(), n), RefDot(a.data(), b.data(), n),
                1e-6 * AbsDot(a.data(), b.data(), n) + 1e-30)
        << "n=" << n;
  }
}

TEST(OpsTest, DotUsesTheDocumentedLaneOrderWithoutFma) {
  // Recompute the documented order in scalar code; any reordering or FMA contraction shows up
  // as a bit difference on random data.
  SplitMix64 rng(2);
  for (int n = 0; n <= 40; ++n) {
    auto a = RandomVec(rng, n), b = RandomVec(rng, n);
    if (n % 3 == 0 && n > 0) a[0] = -0.0f;  // signed zeros must not change the order's bits
    float lane[16] = {};
    for (int c = 0; c < n; ++c) {
      volatile float p = a[c] * b[c];  // volatile: rounded product, never fused
      lane[c % 16] += p;
    }
    for (int h = 8; h >= 1; h >>= 1) {
      for (int i = 0; i < h; ++i) lane[i] += lane[i + h];
    }
    const float got = Dot(a.data(), b.data(), n);
    EXPECT_EQ(std::memcmp(&got, &lane[0], 4), 0) << "n=" << n << " " << got << " " << lane[0];
  }
}

TEST(OpsTest, MatMulMatchesReferenceForEveryDType) {
  for (DType dtype : kDTypes) {
    const int rows = 37, cols = 96, n_tokens = 5;
    TestWeights t = MakeWeights(dtype, rows, cols, 10 + static_cast<int>(dtype));
    SplitMix64 rng(3);
    auto x = RandomVec(rng, static_cast<size_t>(n_tokens * cols));
    std::vector<float> out(static_cast<size_t>(n_tokens * rows));
    MatMul(t.w, x.data(), n_tokens, out.data(), nullptr);
    for (int tok = 0; tok < n_tokens; ++tok) {
      for (int r = 0; r < rows; ++r) {
        const float* wr = t.ref.data() + r * cols;
        const float* xt = x.data() + tok * cols;
        // Q8_0 multiplies int8-quantized activations (qmatmul.h): each x moves by at most
        // half a step amax/127 of its 32-block.
        double tol = 1e-6 * AbsDot(wr, xt, cols);
        if (dtype == DType::kQ8_0) {
          for (int b = 0; b < cols / 32; ++b) {
            double amax = 0, wabs = 0;
            for (int i = b * 32; i < b * 32 + 32; ++i) {
              amax = std::max(amax, std::fabs(static_cast<double>(xt[i])));
              wabs += std::fabs(static_cast<double>(wr[i]));
            }
            tol += wabs * amax / 254.0 * 1.001;
          }
        }
        EXPECT_NEAR(out[tok * rows + r], RefDot(wr, xt, cols), tol)
            << GetDTypeInfo(dtype).name << " t=" << tok << " r=" << r;
      }
    }
  }
}

// The bit-identical rule: every row of a batched call equals the one-token call, for every
// dtype, thread count (1, 2, 3) and CPU level.
TEST(OpsTest, MatMulBatchRowsAreBitwiseOneTokenRows) {
  LevelGuard guard;
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  // Big enough that the thread pool is used (rows * cols * tokens above the inline cutoff).
  // 160 columns: one of DotRowsTokens' column slices (256); 416: two.
  for (const int cols : {160, 416})
    for (DType dtype : kDTypes) {
      const int rows = 301, n_tokens = 21;  // 21: a 16-token group + a tail
      TestWeights t = MakeWeights(dtype, rows, cols, 20 + static_cast<int>(dtype));
      SplitMix64 rng(4);
      auto x = RandomVec(rng, static_cast<size_t>(n_tokens * cols));
      std::vector<float> single(static_cast<size_t>(n_tokens * rows));
      SetCpuLevelCap(CpuLevel::kBaseline);
      for (int tok = 0; tok < n_tokens; ++tok) {
        MatMul(t.w, x.data() + tok * cols, 1, single.data() + tok * rows, nullptr);
      }
      for (int level = 0; level <= static_cast<int>(DetectCpuLevel()); ++level) {
        SetCpuLevelCap(static_cast<CpuLevel>(level));
        for (ThreadPool* pool : pools) {
          for (int n : {1, 2, n_tokens}) {
            std::vector<float> batch(static_cast<size_t>(n * rows), -1.0f);
            MatMul(t.w, x.data(), n, batch.data(), pool);
            EXPECT_EQ(std::memcmp(batch.data(), single.data(), batch.size() * 4), 0)
                << GetDTypeInfo(dtype).name << " cols=" << cols << " level=" << level
                << " threads=" << (pool ? pool->size() : 1) << " n=" << n;
          }
        }
      }
    }
}

TEST(OpsTest, GetRowConvertsExactlyOnEveryLevel) {
  LevelGuard guard;
  for (DType dtype : kDTypes) {
    // 77 columns: every vector width's loop plus a scalar tail (Q8_0 needs whole blocks).
    const int cols = dtype == DType::kQ8_0 ? 64 : 77;
    TestWeights t = MakeWeights(dtype, 5, cols, 30);
    for (int level = 0; level <= static_cast<int>(DetectCpuLevel()); ++level) {
      SetCpuLevelCap(static_cast<CpuLevel>(level));
      std::vector<float> row(cols, -1.0f);
      GetRow(t.w, 3, row.data());
      EXPECT_EQ(std::memcmp(row.data(), t.ref.data() + 3 * cols, cols * 4), 0)
          << GetDTypeInfo(dtype).name << " level=" << level;
    }
  }
}

// The kernels' weight conversion agrees bit for bit with quant.h's DequantizeRow.
TEST(OpsTest, GetRowMatchesDequantizeRow) {
  SplitMix64 rng(31);
  const int cols = 96;
  for (DType dtype : kDTypes) {
    const auto x = RandomVec(rng, cols, 2.0f);
    std::vector<uint8_t> bytes(static_cast<size_t>(RowBytes(dtype, cols)));
    QuantizeRow(dtype, x.data(), cols, bytes.data());
    WeightMatrix w{dtype, bytes.data(), 1, cols};
    std::vector<float> got(cols), want(cols);
    GetRow(w, 0, got.data());
    DequantizeRow(dtype, bytes.data(), cols, want.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), cols * 4), 0) << GetDTypeInfo(dtype).name;
  }
}

TEST(OpsTest, RmsNormMatchesReference) {
  SplitMix64 rng(5);
  const int n = 77;
  auto x = RandomVec(rng, n, 3.0f), w = RandomVec(rng, n);
  std::vector<float> y(n);
  RmsNorm(x.data(), w.data(), n, 1e-5f, y.data());
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
  for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i] * scale * w[i], 1e-5 * std::fabs(y[i]) + 1e-6);
}

TEST(OpsTest, RopeRotatesNormalAndNeoxPairs) {
  SplitMix64 rng(6);
  const int head_dim = 16, n_rot = 12, pos = 37;
  const float base = 10000.0f, scale = 0.5f;
  for (bool neox : {false, true}) {
    auto v = RandomVec(rng, head_dim);
    std::vector<float> got = v;
    Rope(got.data(), head_dim, n_rot, pos, base, scale, neox);
    for (int i = 0; i < n_rot / 2; ++i) {
      const double theta = pos * scale * std::pow(static_cast<double>(base), -2.0 * i / n_rot);
      const int i0 = neox ? i : 2 * i, i1 = neox ? i + n_rot / 2 : 2 * i + 1;
      EXPECT_NEAR(got[i0], v[i0] * std::cos(theta) - v[i1] * std::sin(theta), 1e-4);
      EXPECT_NEAR(got[i1], v[i0] * std::sin(theta) + v[i1] * std::cos(theta), 1e-4);
    }
    for (int i = n_rot; i < head_dim; ++i) EXPECT_EQ(got[i], v[i]);  // unrotated tail
  }
}

// Llama 3.1+ frequency factors divide theta_i before the linear scaling (as ggml).
TEST(OpsTest, RopeFrequencyFactorsDivideTheAngles) {
  const int n_rot = 8, pos = 123;
  const float base = 500000.0f, scale = 1.0f;
  const float factors[4] = {1.0f, 2.0f, 8.0f, 32.0f};
  float c[4], s[4];
  RopeCosSin(pos, n_rot, base, scale, factors, c, s);
  for (int i = 0; i < n_rot / 2; ++i) {
    const double theta =
        pos * scale * std::pow(static_cast<double>(base), -2.0 * i / n_rot) / factors[i];
    EXPECT_NEAR(c[i], std::cos(theta), 1e-4) << i;
    EXPECT_NEAR(s[i], std::sin(theta), 1e-4) << i;
  }
}

TEST(OpsTest, SwiGluMatchesReference) {
  SplitMix64 rng(7);
  const int n = 33;
  auto g = RandomVec(rng, n, 4.0f), u = RandomVec(rng, n);
  std::vector<float> out(n);
  SwiGlu(g.data(), u.data(), n, out.data());
  for (int i = 0; i < n; ++i) {
    const double ref = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
    EXPECT_NEAR(out[i], ref, 1e-6 * std::fabs(ref) + 1e-7);
  }
}

TEST(OpsTest, SoftmaxMatchesReferenceAndHandlesLargeValues) {
  SplitMix64 rng(8);
  const int n = 50;
  auto x = RandomVec(rng, n, 10.0f);
  x[3] = 1000.0f;  // would overflow without max subtraction
  std::vector<float> y = x;
  Softmax(y.data(), n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - 1000.0);
  double total = 0;
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(y[i], std::exp(static_cast<double>(x[i]) - 1000.0) / sum, 1e-6);
    total += y[i];
  }
  EXPECT_NEAR(total, 1.0, 1e-5);
}

// Head sizes that take the 16-keys-at-once and register-resident paths (16, 32, 64, 128) and
// ones that do not (8, 24), with key counts around multiples of 16, on every CPU level.
TEST(OpsTest, AttentionHelpersEqualPerRowCalls) {
  LevelGuard guard;
  SplitMix64 rng(9);
  for (int level = 0; level <= static_cast<int>(DetectCpuLevel()); ++level) {
    SetCpuLevelCap(static_cast<CpuLevel>(level));
    for (int n : {8, 16, 24, 32, 64, 128}) {
      for (int n_rows : {1, 2, 5, 16, 37}) {
        const int stride = n + 8;
        auto q = RandomVec(rng, n), rows = RandomVec(rng, n_rows * stride);
        auto w = RandomVec(rng, n_rows);
        // The gather variants get the rows shuffled, as a tree node's ancestors are scattered.
        std::vector<const float*> ptrs(n_rows);
        for (int j = 0; j < n_rows; ++j) ptrs[j] = rows.data() + ((j * 7) % n_rows) * stride;
        std::vector<float> batch(n_rows), single(n_rows), gathered(n_rows), gathered_ref(n_rows);
        DotBatch(q.data(), rows.data(), stride, n_rows, n, 0.25f, batch.data());
        DotGather(q.data(), ptrs.data(), n_rows, n, 0.25f, gathered.data());
        std::vector<float> acc3(n, 0.5f), acc4(n, 0.5f);
        AxpyGather(w.data(), ptrs.data(), n_rows, n, acc3.data());
        SetCpuLevelCap(CpuLevel::kBaseline);  // the reference: per-row calls, baseline level
        for (int j = 0; j < n_rows; ++j) {
          single[j] = Dot(q.data(), rows.data() + j * stride, n) * 0.25f;
          gathered_ref[j] = Dot(q.data(), ptrs[j], n) * 0.25f;
          Axpy(w[j], ptrs[j], acc4.data(), n);
        }
        EXPECT_EQ(std::memcmp(gathered.data(), gathered_ref.data(), n_rows * 4), 0)
            << "gather level " << level << " n " << n << " keys " << n_rows;
        EXPECT_EQ(std::memcmp(acc3.data(), acc4.data(), n * 4), 0)
            << "gather level " << level << " n " << n << " rows " << n_rows;
        EXPECT_EQ(std::memcmp(batch.data(), single.data(), n_rows * 4), 0)
            << "level " << level << " n " << n << " keys " << n_rows;
        std::vector<float> acc1(n, 0.5f), acc2(n, 0.5f);
        for (int j = 0; j < n_rows; ++j) Axpy(w[j], rows.data() + j * stride, acc2.data(), n);
        SetCpuLevelCap(static_cast<CpuLevel>(level));
        AxpyRows(w.data(), rows.data(), stride, n_rows, n, acc1.data());
        EXPECT_EQ(std::memcmp(acc1.data(), acc2.data(), n * 4), 0)
            << "level " << level << " n " << n << " rows " << n_rows;
      }
    }
  }
}

// The two-head helpers (two heads of a KV group sharing each key load) give each head exactly
// the one-head call's bits, f32 and f16 rows, head widths with and without the fast path, key
// counts around multiples of 8 (tails), on every CPU level.
template <class T>
void ExpectTwoHeadsEqualOneEach(SplitMix64& rng, int level, int n, int n_rows) {
  const int stride = n + 8;
  const auto q0 = RandomVec(rng, n), q1 = RandomVec(rng, n);
  const auto w0 = RandomVec(rng, n_rows), w1 = RandomVec(rng, n_rows);
  const auto rows32 = RandomVec(rng, n_rows * stride);
  std::vector<T> rows(rows32.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if constexpr (std::is_same_v<T, uint16_t>) {
      rows[i] = F32ToF16(rows32[i]);
    } else {
      rows[i] = rows32[i];
    }
  }
  std::vector<float> s0(n_rows), s1(n_rows), r0(n_rows), r1(n_rows);
  DotBatch2(q0.data(), q1.data(), rows.data(), stride, n_rows, n, 0.25f, s0.data(), s1.data());
  DotBatch(q0.data(), rows.data(), stride, n_rows, n, 0.25f, r0.data());
  DotBatch(q1.data(), rows.data(), stride, n_rows, n, 0.25f, r1.data());
  std::vector<float> a0(n, 0.5f), a1(n, -0.5f), b0 = a0, b1 = a1;
  AxpyRows2(w0.data(), w1.data(), rows.data(), stride, n_rows, n, a0.data(), a1.data());
  AxpyRows(w0.data(), rows.data(), stride, n_rows, n, b0.data());
  AxpyRows(w1.data(), rows.data(), stride, n_rows, n, b1.data());
  const std::string at = std::string(sizeof(T) == 2 ? "f16" : "f32") + " level " +
                         std::to_string(level) + " n " + std::to_string(n) + " rows " +
                         std::to_string(n_rows);
  EXPECT_EQ(std::memcmp(s0.data(), r0.data(), n_rows * 4), 0) << at;
  EXPECT_EQ(std::memcmp(s1.data(), r1.data(), n_rows * 4), 0) << at;
  EXPECT_EQ(std::memcmp(a0.data(), b0.data(), n * 4), 0) << at;
  EXPECT_EQ(std::memcmp(a1.data(), b1.data(), n * 4), 0) << at;
}

TEST(OpsTest, TwoHeadHelpersEqualOneHeadCalls) {
  LevelGuard guard;
  SplitMix64 rng(23);
  for (int level = 0; level <= static_cast<int>(DetectCpuLevel()); ++level) {
    SetCpuLevelCap(static_cast<CpuLevel>(level));
    for (int n : {8, 16, 24, 64, 128}) {
      for (int n_rows : {1, 2, 7, 8, 9, 16, 37}) {
        ExpectTwoHeadsEqualOneEach<float>(rng, level, n, n_rows);
        ExpectTwoHeadsEqualOneEach<uint16_t>(rng, level, n, n_rows);
      }
    }
  }
}

// The f16 KV cache's rows: written with ConvertToF16 (the bits of F32ToF16, round to nearest
// even, on every level: normals, subnormals, ties, overflow, zeros), and read by the f16
// attention helpers with the bits the f32 ones give on the exactly widened rows.
TEST(OpsTest, F16RowsRoundAndReadTheSameOnEveryLevel) {
  LevelGuard guard;
  SplitMix64 rng(21);
  std::vector<float> x;
  for (float v : {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 1e9f, -1e9f, 6.1e-5f, 5.96e-8f, 2.98e-8f,
                  2.99e-8f, 1.0009765625f, 1.00048828125f, 1.00146484375f}) {
    x.push_back(v);
  }
  for (int i = 0; i < 4000; ++i) {
    const float scale = std::ldexp(1.0f, static_cast<int>(rng.Below(50)) - 30);
    x.push_back((static_cast<float>(rng.Below(1 << 20)) / (1 << 19) - 1.0f) * scale);
  }
  std::vector<uint16_t> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = F32ToF16(x[i]);
  for (int level = 0; level <= static_cast<int>(DetectCpuLevel()); ++level) {
    SetCpuLevelCap(static_cast<CpuLevel>(level));
    std::vector<uint16_t> got(x.size());
    ConvertToF16(x.data(), static_cast<int>(x.size()), got.data());
    EXPECT_EQ(got, want) << "level " << level;
  }
  for (int n : {8, 16, 24, 64, 128}) {
    for (int n_rows : {1, 5, 16, 37}) {
      const int stride = n + 8;
      const auto q = RandomVec(rng, n), w = RandomVec(rng, n_rows);
      const auto rows32 = RandomVec(rng, n_rows * stride);
      std::vector<uint16_t> rows(rows32.size());
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = F32ToF16(rows32[i]);
      std::vector<float> widened(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) widened[i] = F16ToF32(rows[i]);
      std::vector<const uint16_t*> ptrs(n_rows);
      std::vector<const float*> wptrs(n_rows);
      for (int j = 0; j < n_rows; ++j) {
        ptrs[j] = rows.data() + ((j * 7) % n_rows) * stride;
        wptrs[j] = widened.data() + ((j * 7) % n_rows) * stride;
      }
      SetCpuLevelCap(CpuLevel::kBaseline);
      std::vector<float> s_ref(n_rows), g_ref(n_rows), a_ref(n, 0.5f), ag_ref(n, 0.5f);
      DotBatch(q.data(), widened.data(), stride, n_rows, n, 0.25f, s_ref.data());
      DotGather(q.data(), wptrs.data(), n_rows, n, 0.25f, g_ref.data());
      AxpyRows(w.data(), widened.data(), stride, n_rows, n, a_ref.data());
      AxpyGather(w.data(), wptrs.data(), n_rows, n, ag_ref.data());
      for (int level = 0; level <= static_cast<int>(DetectCpuLevel()); ++level) {
        SetCpuLevelCap(static_cast<CpuLevel>(level));
        std::vector<float> s(n_rows), g(n_rows), a(n, 0.5f), ag(n, 0.5f);
        DotBatch(q.data(), rows.data(), stride, n_rows, n, 0.25f, s.data());
        DotGather(q.data(), ptrs.data(), n_rows, n, 0.25f, g.data());
        AxpyRows(w.data(), rows.data(), stride, n_rows, n, a.data());
        AxpyGather(w.data(), ptrs.data(), n_rows, n, ag.data());
        const std::string at = "level " + std::to_string(level) + " n " + std::to_string(n) +
                               " rows " + std::to_string(n_rows);
        EXPECT_EQ(std::memcmp(s.data(), s_ref.data(), n_rows * 4), 0) << at;
        EXPECT_EQ(std::memcmp(g.data(), g_ref.data(), n_rows * 4), 0) << at;
        EXPECT_EQ(std::memcmp(a.data(), a_ref.data(), n * 4), 0) << at;
        EXPECT_EQ(std::memcmp(ag.data(), ag_ref.data(), n * 4), 0) << at;
      }
    }
  }
}

// Softmax and SwiGlu use goose's own vector e^x: within a few ulp of std::exp over the range
// attention and SiLU produce, 0 far below it, and bitwise the same on every CPU level.
TEST(OpsTest, ExpBasedOpsAreAccurateAndEqualOnEveryLevel) {
  LevelGuard guard;
  const int n = 1001;  // a tail that is not a multiple of 16
  std::vector<float> x(n), g(n), u(n, 1.0f);
  for (int i = 0; i < n; ++i) x[i] = g[i] = -90.0f + 180.0f * i / (n - 1);
  std::vector<float> soft_ref, glu_ref;
  for (int level = 0; level <= static_cast<int>(DetectCpuLevel()); ++level) {
    SetCpuLevelCap(static_cast<CpuLevel>(level));
    std::vector<float> soft(x.begin(), x.begin() + 500), glu(n);  // softmax inputs <= ~0
    Softmax(soft.data(), static_cast<int>(soft.size()));
    SwiGlu(g.data(), u.data(), n, glu.data());
    if (level == 0) {
      soft_ref = soft;
      glu_ref = glu;
      const float max = x[499];
      double sum = 0;
      for (int i = 0; i < 500; ++i) sum += std::exp(static_cast<double>(x[i]) - max);
      for (int i = 0; i < 500; ++i) {
        const double want = std::exp(static_cast<double>(x[i]) - max) / sum;
        if (x[i] - max < -87.3f) {
          EXPECT_EQ(soft[i], 0.0f) << i;
        } else {
          EXPECT_NEAR(soft[i], want, 4e-7 * want + 1e-38) << i;
        }
      }
      for (int i = 0; i < n; ++i) {
        const double want = g[i] / (1.0 + std::exp(-static_cast<double>(g[i])));
        EXPECT_NEAR(glu[i], want, 4e-7 * std::fabs(want) + 1e-36) << g[i];
      }
      continue;
    }
    EXPECT_EQ(std::memcmp(soft.data(), soft_ref.data(), soft.size() * 4), 0) << "level " << level;
    EXPECT_EQ(std::memcmp(glu.data(), glu_ref.data(), n * 4), 0) << "level " << level;
  }
}

// GeluGlu and SoftCap use goose's vector tanh: close to double-precision tanh over the whole
// range (the polynomial near 0, e^x beyond, saturation far out), in place, and bitwise the
// same on every CPU level, tails included.
TEST(OpsTest, TanhBasedOpsAreAccurateAndEqualOnEveryLevel) {
  LevelGuard guard;
  const int n = 1001;
  std::vector<float> g(n), u(n);
  SplitMix64 rng(21);
  for (int i = 0; i < n; ++i) {
    g[i] = -12.0f + 24.0f * i / (n - 1);
    u[i] = static_cast<float>(rng.Normal());
  }
  g[500] = 0.0f;
  g[501] = 1e-3f;
  g[502] = -0.6249f;
  g[503] = 0.6251f;
  std::vector<float> glu_ref, cap_ref;
  for (int level = 0; level <= static_cast<int>(DetectCpuLevel()); ++level) {
    SetCpuLevelCap(static_cast<CpuLevel>(level));
    std::vector<float> glu(n), cap(g.begin(), g.end());
    for (float& x : cap) x *= 40.0f;  // scores from -480 to 480 under a cap of 50
    GeluGlu(g.data(), u.data(), n, glu.data());
    SoftCap(cap.data(), n, 50.0f);
    if (level == 0) {
      glu_ref = glu;
      cap_ref = cap;
      for (int i = 0; i < n; ++i) {
        const double x = g[i];
        const double gelu =
            0.5 * x * (1.0 + std::tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)));
        EXPECT_NEAR(glu[i], gelu * u[i], 1e-6 * std::fabs(gelu * u[i]) + 1e-7) << x;
        const double want = 50.0 * std::tanh(40.0 * x / 50.0);
        EXPECT_NEAR(cap[i], want, 1e-6 * std::fabs(want) + 1e-9) << x;
      }
      EXPECT_EQ(cap[500], 0.0f);
      EXPECT_EQ(cap[0], -50.0f);
      EXPECT_EQ(cap[n - 1], 50.0f);
      continue;
    }
    EXPECT_EQ(std::memcmp(glu.data(), glu_ref.data(), n * 4), 0) << "level " << level;
    EXPECT_EQ(std::memcmp(cap.data(), cap_ref.data(), n * 4), 0) << "level " << level;
  }
}

// Element-wise: a split of the array anywhere gives the same bits (a tree's rows are capped
// one at a time, a prefill's all at once).
TEST(OpsTest, SoftCapIsTheSameWhateverTheSplit) {
  SplitMix64 rng(22);
  auto x = RandomVec(rng, 77, 40.0f);
  std::vector<float> whole = x, parts = x;
  SoftCap(whole.data(), 77, 30.0f);
  SoftCap(parts.data(), 5, 30.0f);
  SoftCap(parts.data() + 5, 40, 30.0f);
  SoftCap(parts.data() + 45, 32, 30.0f);
  EXPECT_EQ(std::memcmp(whole.data(), parts.data(), 77 * 4), 0);
}

TEST(OpsTest, AxpyAccumulates) {
  std::vector<float> x = {1, 2, 3}, y = {10, 20, 30};
  Axpy(0.5f, x.data(), y.data(), 3);
  EXPECT_EQ(y, (std::vector<float>{10.5f, 21.0f, 31.5f}));
}

}  // namespace
}  // namespace goose
