// Sampler: greedy ties, reproducibility by (seed, position), temperature -> 0 equals greedy,
// top-k / top-p truncation, and that draws follow the distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "ops/cpu_features.h"
#include "sample/sampler.h"
#include "util/rng.h"

namespace goose {
namespace {

std::vector<float> RandomLogits(uint64_t seed, int n) {
  SplitMix64 rng(seed);
  std::vector<float> l(n);
  for (float& x : l) x = static_cast<float>(rng.Normal() * 3);
  return l;
}

TEST(Sampler, ArgmaxTiesGoToTheLowestId) {
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(Argmax(l.data(), 4), 1);
  Sampler greedy(SamplingParams{});
  EXPECT_EQ(greedy.Sample(l.data(), 4, 17), 1);
}

// Argmax's vectorized scan gives the plain loop's index on every CPU level: ties to the lowest
// id, NaNs skipped (a NaN first element stays the answer, as in the loop), signed zeros equal.
TEST(Sampler, ArgmaxMatchesThePlainLoopOnEveryCpuLevel) {
  auto plain = [](const std::vector<float>& l) {
    int32_t best = 0;
    for (int32_t i = 1; i < static_cast<int32_t>(l.size()); ++i) {
      if (l[i] > l[best]) best = i;
    }
    return best;
  };
  std::vector<std::vector<float>> rows;
  for (int n : {1, 7, 16, 17, 151936}) rows.push_back(RandomLogits(n, n));
  std::vector<float> ties(1000, 1.0f), rising(5000), zeros = {-0.0f, 0.0f, -1.0f, 0.0f};
  for (int i = 0; i < 5000; ++i) rising[i] = static_cast<float>(i);
  std::vector<float> nans = RandomLogits(3, 300);
  nans[0] = NAN;
  std::vector<float> nan_later = RandomLogits(4, 300);
  for (int i = 1; i < 300; i += 7) nan_later[i] = NAN;
  for (const auto& r : {ties, rising, zeros, nans, nan_later}) rows.push_back(r);
  for (int level = 0; level <= static_cast<int>(DetectCpuLevel()); ++level) {
    SetCpuLevelCap(static_cast<CpuLevel>(level));
    for (size_t k = 0; k < rows.size(); ++k) {
      EXPECT_EQ(Argmax(rows[k].data(), static_cast<int>(rows[k].size())), plain(rows[k]))
          << "row " << k << " level " << level;
    }
  }
  SetCpuLevelCap(kMaxCpuLevel);
}

TEST(Sampler, SameSeedAndPositionGiveTheSameToken) {
  SamplingParams p;
  p.temp = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.seed = 42;
  const Sampler a(p), b(p);
  const std::vector<float> l = RandomLogits(1, 300);
  int differing_positions = 0;
  for (int64_t pos = 0; pos < 200; ++pos) {
    EXPECT_EQ(a.Sample(l.data(), 300, pos), b.Sample(l.data(), 300, pos));
    differing_positions += a.Sample(l.data(), 300, pos) != a.Sample(l.data(), 300, pos + 1);
  }
  EXPECT_GT(differing_positions, 50) << "draws should vary with the position";
  p.seed = 43;
  const Sampler c(p);
  int differing_seeds = 0;
  for (int64_t pos = 0; pos < 200; ++pos) {
    differing_seeds += a.Sample(l.data(), 300, pos) != c.Sample(l.data(), 300, pos);
  }
  EXPECT_GT(differing_seeds, 50);
}

TEST(Sampler, TemperatureToZeroEqualsGreedy) {
  for (uint64_t s = 0; s < 50; ++s) {
    const std::vector<float> l = RandomLogits(s, 500);
    SamplingParams p;
    p.temp = 1e-4f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.seed = s;
    const Sampler cold(p);
    for (int64_t pos = 0; pos < 20; ++pos) {
      EXPECT_EQ(cold.Sample(l.data(), 500, pos), Argmax(l.data(), 500)) << "seed " << s;
    }
    p.temp = 0.0f;
    EXPECT_EQ(Sampler(p).Sample(l.data(), 500, 3), Argmax(l.data(), 500));
  }
}

TEST(Sampler, TopKAndTopPLimitTheCandidates) {
  // Probabilities ~ 0.5, 0.25, 0.125, ... : top-p 0.7 keeps the first two, top-k 3 the first 3.
  std::vector<float> l(10);
  for (int i = 0; i < 10; ++i) l[i] = static_cast<float>(-i * std::log(2.0));
  SamplingParams p;
  p.temp = 1.0f;
  p.top_k = 0;
  p.top_p = 0.7f;
  const Sampler top_p(p);
  p.top_p = 1.0f;
  p.top_k = 3;
  const Sampler top_k(p);
  for (int i = 0; i < 1000; ++i) {
    const double u = (i + 0.5) / 1000;
    EXPECT_LT(top_p.SampleWithUniform(l.data(), 10, u), 2);
    EXPECT_LT(top_k.SampleWithUniform(l.data(), 10, u), 3);
  }
  // Inverse CDF: u below 2/3 of the kept mass picks token 0 under top-p 0.7 (0.5 / 0.75).
  EXPECT_EQ(top_p.SampleWithUniform(l.data(), 10, 0.66), 0);
  EXPECT_EQ(top_p.SampleWithUniform(l.data(), 10, 0.67), 1);
}

TEST(Sampler, DrawsFollowTheSoftmax) {
  const std::vector<float> l = {1.0f, 0.0f, -1.0f, 2.0f};
  SamplingParams p;
  p.temp = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.seed = 7;
  const Sampler s(p);
  std::map<int, int> counts;
  const int n = 20000;
  for (int64_t pos = 0; pos < n; ++pos) ++counts[s.Sample(l.data(), 4, pos)];
  double z = 0;
  for (float x : l) z += std::exp(x);
  for (int t = 0; t < 4; ++t) {
    const double expect = std::exp(l[t]) / z;
    EXPECT_NEAR(counts[t] / static_cast<double>(n), expect, 0.015) << "token " << t;
  }
}

}  // namespace
}  // namespace goose
