// ThreadPool, ParseDType/GetDTypeInfo, position-keyed randomness and SplitMix64.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <set>
#include <vector>

#include "util/dtype.h"
#include "util/rng.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace goose {
namespace {

TEST(ThreadPoolTest, ParallelForCoversEachIndexOnce) {
  for (int nt = 1; nt <= 4; ++nt) {
    ThreadPool pool(nt);
    EXPECT_EQ(pool.size(), nt);
    for (int rep = 0; rep < 120; ++rep) {
      const int64_t n = rep % 37;  // includes 0, 1 and sizes below the thread count
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> calls{0};
      pool.ParallelFor(n, [&](int64_t b, int64_t e) {
        ASSERT_LT(b, e);
        calls.fetch_add(1);
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << nt << " " << n << " " << i;
      EXPECT_LE(calls.load(), nt);
      if (n == 0) {
        EXPECT_EQ(calls.load(), 0);
      }
    }
  }
}

TEST(ThreadPoolTest, RunCallsEveryThreadIdOnce) {
  for (int nt = 1; nt <= 4; ++nt) {
    ThreadPool pool(nt);
    for (int rep = 0; rep < 80; ++rep) {
      std::vector<std::atomic<int>> seen(nt);
      pool.Run([&](int t, int n) {
        ASSERT_EQ(n, nt);
        ASSERT_GE(t, 0);
        ASSERT_LT(t, nt);
        seen[t].fetch_add(1);
      });
      // Run returns only after all threads finished.
      for (int t = 0; t < nt; ++t) ASSERT_EQ(seen[t].load(), 1);
    }
  }
  EXPECT_GE(ThreadPool::DefaultThreads(), 1);
}

TEST(ThreadPoolTest, ZeroThreadsMeansOne) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), 1);
  int x = 0;
  pool.Run([&](int t, int n) { x += 1 + t + n; });
  EXPECT_EQ(x, 2);
}

TEST(DTypeTest, ParseAndGeometry) {
  DType t;
  ASSERT_TRUE(ParseDType("q8_0", &t));
  EXPECT_EQ(t, DType::kQ8_0);
  ASSERT_TRUE(ParseDType("BF16", &t));
  EXPECT_EQ(t, DType::kBF16);
  ASSERT_TRUE(ParseDType("F32", &t));
  EXPECT_EQ(t, DType::kF32);
  ASSERT_TRUE(ParseDType("q4_k", &t));
  EXPECT_EQ(t, DType::kQ4_K);
  EXPECT_FALSE(ParseDType("q9_0", &t));
  EXPECT_FALSE(ParseDType("", &t));
  EXPECT_EQ(GetDTypeInfo(DType::kQ8_0).block_size, 32);
  EXPECT_EQ(GetDTypeInfo(DType::kQ8_0).block_bytes, 34);
  EXPECT_EQ(GetDTypeInfo(DType::kQ4_K).block_bytes, 144);
  EXPECT_EQ(GetDTypeInfo(4u).block_size, 0);  // removed Q4_2
  EXPECT_EQ(GetDTypeInfo(1000u).block_size, 0);
  EXPECT_EQ(RowBytes(DType::kQ8_0, 64), 68);
  EXPECT_EQ(RowBytes(DType::kF16, 10), 20);
  EXPECT_TRUE(DTypeSupported(DType::kQ8_0));
  EXPECT_TRUE(DTypeSupported(DType::kQ4_0));
  EXPECT_FALSE(DTypeSupported(DType::kQ4_1));
}

TEST(RngTest, UniformAtIsDeterministicAndInRange) {
  double sum = 0;
  std::set<double> distinct;
  for (uint64_t pos = 0; pos < 20000; ++pos) {
    const double u = UniformAt(7, pos);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_EQ(u, UniformAt(7, pos));
    sum += u;
    distinct.insert(u);
  }
  EXPECT_NEAR(sum / 20000, 0.5, 0.01);
  EXPECT_EQ(distinct.size(), 20000u);
  EXPECT_NE(UniformAt(7, 3), UniformAt(8, 3));
  EXPECT_NE(UniformAt(7, 3), UniformAt(7, 4));
}

TEST(RngTest, SplitMix64) {
  SplitMix64 a(5), b(5);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.Next(), b.Next());
  SplitMix64 r(1);
  double s = 0, s2 = 0;
  const int n = 50000;
  for (int i = 0; i < n; ++i) {
    const double x = r.Normal();
    ASSERT_TRUE(std::isfinite(x));
    s += x;
    s2 += x * x;
  }
  EXPECT_NEAR(s / n, 0.0, 0.03);
  EXPECT_NEAR(s2 / n, 1.0, 0.03);
  for (int i = 0; i < 1000; ++i) ASSERT_LT(r.Below(7), 7u);
  EXPECT_EQ(r.Below(0), 0u);
}

TEST(StatusTest, Basics) {
  EXPECT_TRUE(Status::Ok().ok());
  Status e = Status::Error("x.gguf: bad");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "x.gguf: bad");
  StatusOr<int> v = 3;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 3);
  StatusOr<int> err = Status::Error("nope");
  EXPECT_FALSE(err.ok());
  EXPECT_EQ(err.status().message(), "nope");
  EXPECT_EQ(StrFormat("%s=%d", "a", 5), "a=5");
  EXPECT_EQ(StrFormat("%s", std::string(1000, 'z').c_str()).size(), 1000u);
}

}  // namespace
}  // namespace goose
