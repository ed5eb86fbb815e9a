#include "draft/context_matcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "util/rng.h"

namespace goose {
namespace {

using Tokens = std::vector<int32_t>;

// ---- Brute-force reference of docs/methods.md §2.1 / §2.2 on a plain token vector. ----

struct RefMatch {
  int n = 0;
  std::vector<int64_t> starts;  // occurrences with a known successor, increasing
};

RefMatch RefLongest(const Tokens& s, const std::vector<int>& sizes) {
  const int64_t t = static_cast<int64_t>(s.size());
  for (int n : sizes) {
    if (t < n + 1) continue;
    RefMatch m{n, {}};
    for (int64_t j = 0; j + n < t; ++j) {
      if (std::equal(s.begin() + j, s.begin() + j + n, s.end() - n)) m.starts.push_back(j);
    }
    if (!m.starts.empty()) return m;
  }
  return {};
}

Tokens RefPropose(const Tokens& s, const std::vector<int>& sizes, int max_tokens) {
  const RefMatch m = RefLongest(s, sizes);
  if (m.n == 0) return {};
  const int64_t start = m.starts[0] + m.n;
  const int64_t end = std::min<int64_t>(static_cast<int64_t>(s.size()), start + max_tokens);
  return Tokens(s.begin() + start, s.begin() + end);
}

bool RefConsensus(const Tokens& s, const std::vector<int>& sizes) {
  const RefMatch m = RefLongest(s, sizes);
  if (m.starts.size() < 2) return false;
  for (int64_t j : m.starts) {
    if (s[j + m.n] != s[m.starts[0] + m.n]) return false;
  }
  return true;
}

double RefConfidence(int len, bool consensus) {
  if (len == 0) return 0;
  if (consensus) return 1;
  if (len >= 8) return std::min(0.9, 0.7 + 0.2 * (len - 8) / 12);
  return 0.6 * len / 8;
}

Tokens RefSpine(const Tokens& pool) {
  const std::vector<int> sizes = {5, 4, 3};
  Tokens chain = RefPropose(pool, sizes, 20);
  const bool cons = RefConsensus(pool, sizes);
  const double c = RefConfidence(static_cast<int>(chain.size()), cons);
  if (!(c > 0.6 + 1e-12)) return chain;
  // Exact: c is a multiple of 1/120 or 1, so round(120c) is exact.
  const int64_t limit = static_cast<int64_t>(std::llround(c * 120)) * 100 / 120;
  while (static_cast<int64_t>(chain.size()) < limit) {
    Tokens s = pool;
    s.insert(s.end(), chain.begin(), chain.end());
    const Tokens next = RefPropose(s, sizes, 20);
    if (next.empty()) break;
    const bool stop =
        c == 1.0 && RefConfidence(static_cast<int>(next.size()), RefConsensus(s, sizes)) < 1.0;
    chain.insert(chain.end(), next.begin(), next.end());
    if (stop) break;
  }
  return chain;
}

// The reference PLD loop (apoorvumang/prompt-lookup-decoding), transcribed.
Tokens RefPld(const Tokens& s, int max_n, int min_n, int num) {
  const int64_t len = static_cast<int64_t>(s.size());
  for (int n = max_n; n >= min_n; --n) {
    if (len < n) continue;
    for (int64_t idx = 0; idx + n <= len; ++idx) {
      if (!std::equal(s.begin() + idx, s.begin() + idx + n, s.end() - n)) continue;
      const int64_t start = idx + n, end = start + num;
      if (end <= len && start < len - n) return Tokens(s.begin() + start, s.begin() + end);
    }
  }
  return {};
}

Tokens Concat(const Tokens& a, const Tokens& b) {
  Tokens out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

Tokens RandomTokens(SplitMix64* rng, int n, int alphabet) {
  Tokens out(n);
  for (auto& t : out) t = static_cast<int32_t>(rng->Below(alphabet));
  return out;
}

// ---- Confidence ----

TEST(MatchConfidenceTest, ExactValues) {
  auto eq = [](Confidence c, int64_t num, int64_t den) { return c.num * den == num * c.den; };
  EXPECT_TRUE(eq(MatchConfidence(0, false), 0, 1));
  EXPECT_TRUE(eq(MatchConfidence(0, true), 0, 1));
  EXPECT_TRUE(MatchConfidence(3, true).IsOne());
  EXPECT_TRUE(eq(MatchConfidence(8, false), 7, 10));
  EXPECT_TRUE(eq(MatchConfidence(20, false), 9, 10));
  EXPECT_TRUE(eq(MatchConfidence(25, false), 9, 10));
  EXPECT_TRUE(eq(MatchConfidence(6, false), 9, 20));
  EXPECT_TRUE(eq(MatchConfidence(1, false), 3, 40));
  const Confidence c14 = MatchConfidence(14, false);
  EXPECT_EQ(c14.num, 4);
  EXPECT_EQ(c14.den, 5);
  EXPECT_EQ(c14.FloorTimes(40), 32);  // B = 60 + 32 = 92, not 91
  EXPECT_EQ(c14.FloorTimes(100), 80);
  EXPECT_TRUE(c14.GreaterThan(3, 5));
  EXPECT_FALSE(MatchConfidence(7, false).GreaterThan(3, 5));  // 21/40 < 0.6
  EXPECT_FALSE(MatchConfidence(20, false).IsOne());
  for (int len = 0; len <= 30; ++len) {
    for (bool cons : {false, true}) {
      EXPECT_NEAR(MatchConfidence(len, cons).value(), RefConfidence(len, cons), 1e-12) << len;
    }
  }
}

// ---- Propose / Consensus vs brute force ----

TEST(ContextMatcherTest, SimpleMatchAndNoSelfMatch) {
  ContextMatcher m;
  m.Append(Tokens{1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(m.Propose().ngram, 0);  // the query 5-gram exists only as itself
  m.Append(Tokens{9, 3, 4, 5});
  const ContextMatch r = m.Propose();
  EXPECT_EQ(r.ngram, 3);
  EXPECT_EQ(r.start, 5);
  EXPECT_EQ(r.tokens, (Tokens{6, 7, 9, 3, 4, 5}));  // runs into the tail of the pool
  EXPECT_FALSE(m.Consensus());
  EXPECT_EQ(m.Propose({}, 2).tokens, (Tokens{6, 7}));
  // With `extra` the query is the tail of pool + extra.
  const ContextMatch e = m.Propose(Tokens{6, 7});
  EXPECT_EQ(e.ngram, 5);  // 3 4 5 6 7 occurs at 2
  EXPECT_EQ(e.tokens, (Tokens{9, 3, 4, 5, 6, 7}));
}

TEST(ContextMatcherTest, ConsensusNeedsTwoOccurrencesWithTheSameSuccessor) {
  ContextMatcher m;
  m.Append(Tokens{1, 2, 3, 9, 1, 2, 3, 9, 1, 2, 3});
  EXPECT_FALSE(m.Consensus());  // longest n = 5: "3 9 1 2 3" occurred only once before
  m.Append(Tokens{9, 1, 2, 3});
  EXPECT_EQ(m.Propose().ngram, 5);
  EXPECT_TRUE(m.Consensus());
  m.Append(Tokens{8, 1, 2, 3});
  EXPECT_FALSE(m.Consensus());  // followed by 9, 9, 8
  // Longest n decides: "7 1 2 3" occurred once, so no consensus even though the 3-gram has 3.
  ContextMatcher m2;
  m2.Append(Tokens{1, 2, 3, 9, 1, 2, 3, 9, 7, 1, 2, 3, 9, 5, 7, 1, 2, 3});
  EXPECT_EQ(m2.Propose().ngram, 4);
  EXPECT_FALSE(m2.Consensus());
  // Consensus on pool + extra counts occurrences whose successor is in extra.
  ContextMatcher m3;
  m3.Append(Tokens{1, 2, 3, 9, 5});
  EXPECT_FALSE(m3.Consensus(Tokens{1, 2, 3}));
  EXPECT_TRUE(m3.Consensus(Tokens{1, 2, 3, 9, 1, 2, 3}));
}

TEST(ContextMatcherTest, MatchesBruteForceOnRandomStreams) {
  SplitMix64 rng(1234);
  const std::vector<int> sizes = {5, 4, 3};
  int hits = 0, consensus = 0, extended = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const int alphabet = 2 + static_cast<int>(rng.Below(5));
    ContextMatcher m;
    Tokens pool;
    for (int step = 0; step < 25; ++step) {
      const Tokens add = RandomTokens(&rng, 1 + static_cast<int>(rng.Below(12)), alphabet);
      m.Append(add);
      pool.insert(pool.end(), add.begin(), add.end());
      ASSERT_EQ(m.pool(), pool);
      Tokens extra;
      if (rng.Below(2)) extra = RandomTokens(&rng, static_cast<int>(rng.Below(30)), alphabet);
      const Tokens full = Concat(pool, extra);
      const int max_tokens = rng.Below(3) ? 20 : 1 + static_cast<int>(rng.Below(30));
      const ContextMatch got = m.Propose(extra, max_tokens);
      const RefMatch ref = RefLongest(full, sizes);
      ASSERT_EQ(got.ngram, ref.n) << "trial " << trial << " step " << step;
      ASSERT_EQ(got.tokens, RefPropose(full, sizes, max_tokens));
      if (ref.n > 0) {
        ASSERT_EQ(got.start, ref.starts[0] + ref.n);
        ++hits;
      }
      const bool cons = m.Consensus(extra);
      ASSERT_EQ(cons, RefConsensus(full, sizes));
      consensus += cons;
      const Tokens spine = m.ProposeSpine().tokens;
      ASSERT_EQ(spine, RefSpine(pool)) << "trial " << trial;
      extended += spine.size() > 20;
    }
  }
  // The streams exercise matches, consensus and chain extension, not just misses.
  EXPECT_GT(hits, 1500);
  EXPECT_GT(consensus, 100);
  EXPECT_GT(extended, 100);
}

TEST(ContextMatcherTest, ClearResetsEverything) {
  ContextMatcher m;
  m.Append(Tokens{1, 2, 3, 4, 1, 2, 3});
  EXPECT_EQ(m.Propose().ngram, 3);
  const size_t mem = m.memory_bytes();
  EXPECT_GT(mem, 7 * sizeof(int32_t));
  m.Clear();
  EXPECT_TRUE(m.pool().empty());
  m.Append(Tokens{5, 1, 2, 3});
  EXPECT_EQ(m.Propose().ngram, 0);
}

// ---- Spine (confidence + chain extension) ----

Tokens Period(int period, int len, int offset = 0) {
  Tokens out;
  for (int i = 0; i < len; ++i) out.push_back((offset + i) % period);
  return out;
}

TEST(ContextMatcherTest, SaturatedConsensusExtendsToOneHundred) {
  ContextMatcher m;
  m.Append(Period(30, 65));  // S S 0..4: the 5-gram 0..4 occurred twice, both followed by 5
  const ContextMatcher::Spine s = m.ProposeSpine();
  EXPECT_TRUE(s.consensus);
  EXPECT_TRUE(s.confidence.IsOne());
  EXPECT_EQ(s.ngram, 5);
  EXPECT_EQ(s.tokens, Period(30, 100, 5));
}

TEST(ContextMatcherTest, LongMatchExtendsPastTheLimitWithoutCut) {
  // One earlier occurrence of the tail, 20-token continuation: c = 0.9, limit 90; chunks of 20
  // reach 100 (convention 10: not cut back to 90).
  ContextMatcher m;
  Tokens pool = Period(40, 40);
  const Tokens tail = {0, 1, 2, 3, 4};
  pool.insert(pool.end(), tail.begin(), tail.end());
  m.Append(pool);
  const ContextMatcher::Spine s = m.ProposeSpine();
  EXPECT_FALSE(s.consensus);
  EXPECT_EQ(s.confidence.num * 10, s.confidence.den * 9);
  EXPECT_EQ(s.tokens.size(), 100u);
  EXPECT_EQ(s.tokens, RefSpine(pool));
  EXPECT_EQ(Tokens(s.tokens.begin(), s.tokens.begin() + 35), Period(40, 35, 5));
}

TEST(ContextMatcherTest, ExtensionOnlyAboveSixTenths) {
  ContextMatcher m;
  const Tokens pool = {1, 2, 3, 4, 5, 6, 9, 9, 9, 1, 2, 3};  // 3-gram match, 9 tokens follow
  m.Append(pool);
  const ContextMatcher::Spine s = m.ProposeSpine();
  EXPECT_EQ(s.confidence.num * 120, s.confidence.den * 86);  // len 9: 0.7 + 0.2/12
  EXPECT_EQ(Tokens(s.tokens.begin(), s.tokens.begin() + 9), (Tokens{4, 5, 6, 9, 9, 9, 1, 2, 3}));
  EXPECT_GE(s.tokens.size(), 71u);  // limit floor(100 * 86/120) = 71
  EXPECT_LT(s.tokens.size(), 71u + 20u);
  EXPECT_EQ(s.tokens, RefSpine(pool));
  ContextMatcher m2;
  m2.Append(Tokens{1, 2, 3, 4, 5, 1, 2, 3});  // continuation 4 5 1 2 3 (5 tokens): c = 0.375
  const ContextMatcher::Spine s2 = m2.ProposeSpine();
  EXPECT_EQ(s2.tokens, (Tokens{4, 5, 1, 2, 3}));
  EXPECT_FALSE(s2.confidence.GreaterThan(3, 5));
}

TEST(ContextMatcherTest, SaturatedStopsAfterAnUnsaturatedContinuation) {
  // Consensus on 7 8 9 -> 1 (twice), continuation 1..: after the first chunk the tail n-gram has
  // a single earlier occurrence, so that continuation (c < 1) is appended and extension stops.
  Tokens pool = {7, 8, 9, 1, 50, 7, 8, 9, 1, 51};
  for (int i = 0; i < 30; ++i) pool.push_back(100 + i);
  pool.insert(pool.end(), {60, 7, 8, 9});
  ContextMatcher m;
  m.Append(pool);
  const ContextMatcher::Spine s = m.ProposeSpine();
  EXPECT_TRUE(s.consensus);
  EXPECT_TRUE(s.confidence.IsOne());
  EXPECT_EQ(s.tokens, RefSpine(pool));
  // First chunk: pool[3..23); second: one more chunk then stop, well below the limit of 100.
  EXPECT_GT(s.tokens.size(), 20u);
  EXPECT_LT(s.tokens.size(), 100u);
}

// ---- PLD ----

TEST(ContextMatcherTest, PldMatchesTheReferenceLoop) {
  SplitMix64 rng(99);
  int hits = 0;
  for (int trial = 0; trial < 80; ++trial) {
    const int alphabet = 2 + static_cast<int>(rng.Below(8));
    ContextMatcher m;  // sizes 5, 4, 3 indexed: PLD's 2 and 1 are scanned
    ContextMatcher pld(MatcherParams{.ngram_sizes = {3, 2, 1}});  // as the pld method has it
    Tokens pool;
    for (int step = 0; step < 15; ++step) {
      const Tokens add = RandomTokens(&rng, 1 + static_cast<int>(rng.Below(8)), alphabet);
      m.Append(add);
      pld.Append(add);
      pool.insert(pool.end(), add.begin(), add.end());
      const Tokens got = pld.ProposePld();
      ASSERT_EQ(got, RefPld(pool, 3, 1, 10)) << "trial " << trial << " step " << step;
      ASSERT_EQ(m.ProposePld(), got);
      hits += !got.empty();
      for (const ContextMatcher* x : {&m, &pld}) {
        ASSERT_EQ(x->ProposePld(6, 2, 4), RefPld(pool, 6, 2, 4));  // n = 6: unindexed, scanned
        ASSERT_EQ(x->ProposePld(2, 2, 1), RefPld(pool, 2, 2, 1));
      }
    }
  }
  EXPECT_GT(hits, 300);
}

TEST(ContextMatcherTest, PldNeedsFullContinuationBeforeTheQuery) {
  ContextMatcher m;
  m.Append(Tokens{1, 2, 3, 4, 5, 6, 7, 1, 2, 3});
  EXPECT_TRUE(m.ProposePld(3, 1, 10).empty());  // only 6 tokens follow the match at 0
  EXPECT_EQ(m.ProposePld(3, 1, 6), (Tokens{4, 5, 6, 7, 1, 2}));
  EXPECT_EQ(m.ProposePld(3, 1, 7), (Tokens{4, 5, 6, 7, 1, 2, 3}));
  // Overlapping window (continuation starting inside the query) is not a match: 1 1 1.
  ContextMatcher m2;
  m2.Append(Tokens{1, 1});
  EXPECT_TRUE(m2.ProposePld(3, 1, 1).empty());  // n=1 match at 0 starts at the query (1)
  m2.Append(1);                                 // 1 1 1: n=1 match at 0, start 1 < 3 - 1
  EXPECT_EQ(m2.ProposePld(3, 1, 1), (Tokens{1}));
}

}  // namespace
}  // namespace goose
