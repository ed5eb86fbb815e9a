#include "draft/transition_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ops/cpu_features.h"
#include "util/rng.h"

namespace goose {
namespace {

std::vector<int32_t> Ids(const std::vector<Candidate>& c) {
  std::vector<int32_t> out;
  for (const auto& x : c) out.push_back(x.token);
  return out;
}

// Harvests a row whose top-K are `ids` with descending scores.
void HarvestIds(TransitionTable* t, int32_t prev, int32_t tok, std::vector<int32_t> ids) {
  std::vector<float> scores;
  for (size_t i = 0; i < ids.size(); ++i) scores.push_back(1.0f / static_cast<float>(i + 2));
  t->Harvest(prev, tok, ids, scores);
}

TEST(TopKTest, OrdersByLogitThenLowerIdAndSoftmaxesTheKeptValues) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 2.0f};
  int32_t ids[4];
  float scores[4];
  TopK(logits.data(), 6, 4, ids, scores);
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 4), (std::vector<int32_t>{1, 3, 2, 5}));
  const double z = 2 * std::exp(3.0) + 2 * std::exp(2.0);
  EXPECT_NEAR(scores[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(scores[2], std::exp(2.0) / z, 1e-6);
  EXPECT_EQ(scores[0], scores[1]);
  double sum = 0;
  for (float s : scores) sum += s;
  EXPECT_NEAR(sum, 1.0, 1e-6);
}

TEST(TopKTest, AllEqualLogitsKeepsLowestIds) {
  std::vector<float> logits(100, 0.5f);
  int32_t ids[10];
  float scores[10];
  TopK(logits.data(), 100, 10, ids, scores);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(ids[i], i);
    EXPECT_FLOAT_EQ(scores[i], 0.1f);
  }
}

TEST(TopKTest, MatchesSortOnRandomRowsWithTies) {
  SplitMix64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 1 + static_cast<int>(rng.Below(300));
    std::vector<float> logits(n);
    for (auto& x : logits) x = static_cast<float>(rng.Below(20)) * 0.25f;  // many ties
    std::vector<int32_t> ref(n);
    for (int i = 0; i < n; ++i) ref[i] = i;
    std::stable_sort(ref.begin(), ref.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    int32_t ids[10];
    float scores[10];
    TopK(logits.data(), n, 10, ids, scores);
    for (int i = 0; i < 10; ++i) {
      if (i < n) {
        EXPECT_EQ(ids[i], ref[i]) << "trial " << trial << " rank " << i;
      } else {
        EXPECT_EQ(ids[i], -1);  // vocab smaller than k
        EXPECT_EQ(scores[i], 0.0f);
      }
    }
  }
}

// Vocabulary-sized rows (TopK's vectorized scan) on every CPU level: the ids of a stable sort
// by logit, NaNs last, with ties and signed zeros; an ascending row inserts at every step.
TEST(TopKTest, VocabularyRowsMatchSortOnEveryCpuLevel) {
  SplitMix64 rng(9);
  for (int trial = 0; trial < 6; ++trial) {
    const int n = 151936 + trial;
    std::vector<float> logits(n);
    for (int i = 0; i < n; ++i) {
      logits[i] = trial == 5 ? static_cast<float>(i) * 1e-3f
                             : static_cast<float>(rng.Below(4000)) * 0.01f - 20.0f;
      if (trial == 4 && i % 997 == 3) logits[i] = NAN;
      if (trial == 3 && i % 5 == 0) logits[i] = (i % 2 ? -0.0f : 0.0f);
    }
    std::vector<int32_t> ref(n);
    for (int i = 0; i < n; ++i) ref[i] = i;
    std::stable_sort(ref.begin(), ref.end(), [&](int a, int b) {
      const bool na = std::isnan(logits[a]), nb = std::isnan(logits[b]);
      return na != nb ? nb : !na && logits[a] > logits[b];
    });
    for (int level = 0; level <= static_cast<int>(DetectCpuLevel()); ++level) {
      SetCpuLevelCap(static_cast<CpuLevel>(level));
      int32_t ids[8];
      float scores[8];
      TopK(logits.data(), n, 8, ids, scores);
      for (int i = 0; i < 8; ++i) {
        ASSERT_EQ(ids[i], ref[i]) << "trial " << trial << " level " << level << " rank " << i;
      }
    }
    SetCpuLevelCap(kMaxCpuLevel);
  }
}

TEST(TopKTest, NanLogitsSortLast) {
  const std::vector<float> logits = {NAN, 1.0f, NAN, 2.0f};
  int32_t ids[3];
  float scores[3];
  TopK(logits.data(), 4, 3, ids, scores);
  EXPECT_EQ(ids[0], 3);
  EXPECT_EQ(ids[1], 1);
  EXPECT_EQ(ids[2], 0);
  EXPECT_EQ(scores[2], 0.0f);
  EXPECT_FALSE(std::isnan(scores[0]));
}

TEST(TransitionTableTest, NeverHarvestedRowsAreZeroAndHaveNoSuccessors) {
  TransitionTable t(50, 10);
  EXPECT_FALSE(t.Observed(7));
  EXPECT_FALSE(t.HasSuccessors(7, 3));
  EXPECT_TRUE(t.Successors(7, 3).empty());
  for (int32_t id : t.UnigramIds(7)) EXPECT_EQ(id, 0);
  for (float s : t.UnigramScores(7)) EXPECT_EQ(s, 0.0f);
}

TEST(TransitionTableTest, LastHarvestWinsAndBigramIsKeyedOnPrevAndTok) {
  TransitionTable t(50, 4);
  HarvestIds(&t, 1, 7, {10, 11, 12, 13});
  HarvestIds(&t, 2, 7, {20, 21, 22, 23});  // same tok, other prev: unigram overwritten
  EXPECT_EQ(Ids(t.Successors(7, 1)), (std::vector<int32_t>{10, 11, 12, 13}));  // bigram (1,7)
  EXPECT_EQ(Ids(t.Successors(7, 2)), (std::vector<int32_t>{20, 21, 22, 23}));  // bigram (2,7)
  EXPECT_EQ(Ids(t.Successors(7, 3)), (std::vector<int32_t>{20, 21, 22, 23}));  // unigram
  EXPECT_EQ(Ids(t.Successors(7, -1)), (std::vector<int32_t>{20, 21, 22, 23}));
  EXPECT_EQ(t.UnigramIds(7)[0], 20);
  HarvestIds(&t, 1, 7, {30, 31, 32, 33});  // overwrite bigram (1,7)
  EXPECT_EQ(Ids(t.Successors(7, 1)), (std::vector<int32_t>{30, 31, 32, 33}));
  EXPECT_EQ(t.bigram_entries(), 2u);
  // prev unknown: unigram only.
  HarvestIds(&t, -1, 8, {1, 2});
  EXPECT_EQ(t.bigram_entries(), 2u);
  EXPECT_TRUE(t.Observed(8));
}

// A verification pass over nodes (token, parent token) harvested in node order with TopK rows.
TEST(TransitionTableTest, HarvestingAPassInNodeOrderLastOccurrenceWins) {
  constexpr int kVocab = 40, kK = 5;
  SplitMix64 rng(3);
  const std::vector<std::pair<int32_t, int32_t>> nodes = {{5, -1}, {7, 5}, {5, 7}, {9, 5}};
  std::vector<std::vector<float>> logits(nodes.size(), std::vector<float>(kVocab));
  for (auto& row : logits) {
    for (auto& x : row) x = static_cast<float>(rng.Normal());
  }
  TransitionTable t(kVocab, kK);
  std::vector<std::vector<int32_t>> top(nodes.size(), std::vector<int32_t>(kK));
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::vector<float> scores(kK);
    TopK(logits[i].data(), kVocab, kK, top[i].data(), scores.data());
    t.Harvest(nodes[i].second, nodes[i].first, top[i], scores);
  }
  EXPECT_EQ(Ids(t.Successors(5, -1)), top[2]);  // unigram row 5: node 2 (last) wins
  EXPECT_EQ(Ids(t.Successors(5, 3)), top[2]);   // unknown bigram -> unigram
  EXPECT_EQ(Ids(t.Successors(5, 7)), top[2]);   // bigram (7, 5)
  EXPECT_EQ(Ids(t.Successors(7, 5)), top[1]);
  EXPECT_EQ(Ids(t.Successors(9, 5)), top[3]);
  EXPECT_EQ(t.bigram_entries(), 3u);  // the root row (prev unknown) made no bigram
  EXPECT_TRUE(t.HasSuccessors(9, -1));
  EXPECT_FALSE(t.HasSuccessors(6, 5));
  const auto s = t.Successors(7, 5);
  for (size_t i = 1; i < s.size(); ++i) EXPECT_GE(s[i - 1].score, s[i].score);
  // An empty harvest makes the row observed but without successors.
  t.Harvest(1, 11, {}, {});
  EXPECT_TRUE(t.Observed(11));
  EXPECT_FALSE(t.HasSuccessors(11, 1));
  EXPECT_TRUE(t.Successors(11, 1).empty());
}

TEST(TransitionTableTest, ShortRowsArePaddedAndSortedByScore) {
  TransitionTable t(50, 4);
  t.Harvest(-1, 5, std::vector<int32_t>{3, 9, 4}, std::vector<float>{0.2f, 0.5f, 0.2f});
  const auto s = t.Successors(5, -1);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(Ids(s), (std::vector<int32_t>{9, 3, 4}));  // ties keep the given order
  EXPECT_FLOAT_EQ(s[0].score, 0.5f);
  EXPECT_EQ(t.UnigramIds(5)[3], -1);
  EXPECT_EQ(t.UnigramScores(5)[3], 0.0f);
}

TEST(TransitionTableTest, WithoutBigramTierOnlyUnigramIsUsed) {
  TransitionTable t(50, 2, 4, /*use_bigram=*/false);
  HarvestIds(&t, 1, 7, {10, 11});
  HarvestIds(&t, 2, 7, {20, 21});
  EXPECT_EQ(Ids(t.Successors(7, 1)), (std::vector<int32_t>{20, 21}));
  EXPECT_EQ(t.bigram_entries(), 0u);
}

TEST(TransitionTableTest, BigramMemoryIsBoundedAndRecentEntriesSurvive) {
  TransitionTable t(1000, 4, /*bigram_log2_slots=*/6);
  const size_t mem = t.memory_bytes();
  for (int32_t prev = 0; prev < 1000; ++prev) HarvestIds(&t, prev, (prev * 7) % 1000, {1, 2, 3, 4});
  EXPECT_EQ(t.memory_bytes(), mem);
  EXPECT_LE(t.bigram_entries(), 64u);
  EXPECT_GE(t.bigram_entries(), 32u);
  // The most recent harvest is always retrievable (it was just written to a slot).
  HarvestIds(&t, 5, 6, {9, 8, 7, 6});
  EXPECT_EQ(Ids(t.Successors(6, 5)), (std::vector<int32_t>{9, 8, 7, 6}));
  const size_t expected_min = 1000 * 4 * 8 + 1000 + 64 * (8 + 4 * 8);
  EXPECT_GE(mem, expected_min);
  EXPECT_LT(mem, expected_min + 1024);
}

std::string TempPath(const std::string& name) {
  return std::string(GOOSE_BINARY_DIR) + "/draft_test_" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

TEST(TransitionTableTest, SaveLoadRoundTrip) {
  TransitionTable t(64, 3, 5);
  HarvestIds(&t, 1, 2, {3, 4, 5});
  HarvestIds(&t, -1, 9, {10, 11});
  HarvestIds(&t, 9, 10, {63, 0, 1});
  const std::string path = TempPath("roundtrip.bin");
  ASSERT_TRUE(t.Save(path).ok());
  TransitionTable u(64, 3, 5);
  ASSERT_TRUE(u.Load(path).ok()) << u.Load(path).message();
  EXPECT_EQ(Ids(u.Successors(2, 1)), (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(Ids(u.Successors(9, 4)), (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(Ids(u.Successors(10, 9)), (std::vector<int32_t>{63, 0, 1}));
  EXPECT_FALSE(u.Observed(3));
  EXPECT_EQ(u.bigram_entries(), 2u);
  EXPECT_EQ(u.memory_bytes(), t.memory_bytes());
  EXPECT_EQ(ReadAll(path), ([&] {
              const std::string p2 = TempPath("roundtrip2.bin");
              EXPECT_TRUE(u.Save(p2).ok());
              return ReadAll(p2);
            }()));
}

TEST(TransitionTableTest, LoadRejectsCorruptFilesAndKeepsTable) {
  TransitionTable t(64, 3, 4, true, /*model_fingerprint=*/0x1234);
  HarvestIds(&t, 1, 2, {3, 4, 5});
  const std::string path = TempPath("good.bin");
  ASSERT_TRUE(t.Save(path).ok());
  const std::string good = ReadAll(path);
  const std::string bad = TempPath("bad.bin");

  TransitionTable u(64, 3, 4, true, 0x1234);
  HarvestIds(&u, -1, 7, {8});
  auto expect_error = [&](const std::string& data, const std::string& needle) {
    WriteAll(bad, data);
    const Status s = u.Load(bad);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(bad), std::string::npos) << s.message();
    EXPECT_EQ(Ids(u.Successors(7, -1)), (std::vector<int32_t>{8}));  // unchanged
  };
  auto patch = [&](size_t offset, const void* bytes, size_t n) {
    std::string d = good;
    std::memcpy(d.data() + offset, bytes, n);
    return d;
  };
  std::string d = good;
  d[0] = 'X';
  expect_error(d, "bad magic");
  expect_error(good.substr(0, good.size() - 5), "truncated");
  expect_error(good.substr(0, 10), "truncated");
  expect_error(good + "x", "trailing");
  d = good;
  d[8] = 9;  // version
  expect_error(d, "version");
  d = good;
  d[12] ^= 1;  // model fingerprint
  expect_error(d, "model mismatch");
  d = good;
  d[20] = 65;  // n_vocab
  expect_error(d, "vocab mismatch");
  d = good;
  d[24] = 4;  // k
  expect_error(d, "K mismatch");
  const uint32_t no_bigram = 0;
  expect_error(patch(28, &no_bigram, 4), "bigram tier mismatch");
  // A header asking for 2^30 bigram slots (~95 GB with K = 10) fails before any allocation.
  const uint64_t huge = uint64_t{1} << 30;
  expect_error(patch(32, &huge, 8), "bigram tier mismatch");
  const size_t first_id = 8 + 4 + 8 + 4 + 4 + 4 + 8;
  d = good;
  d[first_id + 2 * 3 * 4] = 100;  // row 2, rank 0 id = 100 >= n_vocab
  expect_error(d, "out of range");
  // Scores: row 2's (3 ids, then 64 * 3 ids before the scores) must stay in [0, 1] and sorted.
  const size_t first_score = first_id + 64 * 3 * 4;
  for (float bad_score : {NAN, INFINITY, 1e30f, -0.5f, 1.5f}) {
    expect_error(patch(first_score + 2 * 3 * 4, &bad_score, 4), "not in [0, 1]");
  }
  const float above = 0.9f;  // rank 1 above rank 0 (1/2)
  expect_error(patch(first_score + (2 * 3 + 1) * 4, &above, 4), "sorted by score");
  EXPECT_FALSE(u.Load(TempPath("does_not_exist.bin")).ok());
  TransitionTable w(65, 3, 4, true, 0x1234);
  const Status s = w.Load(path);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("vocab mismatch"), std::string::npos);
}

TEST(TransitionTableTest, LoadRequiresTheSameModelBigramTierAndSlots) {
  TransitionTable tr(64, 3, 4, /*use_bigram=*/false, 7);
  HarvestIds(&tr, 1, 2, {3, 4, 5});
  const std::string path = TempPath("tr.bin");
  ASSERT_TRUE(tr.Save(path).ok());
  // A unigram-only (TR) table into a bigram (GOOSE) table would silently drop the bigram tier.
  TransitionTable goose(64, 3, 4, /*use_bigram=*/true, 7);
  Status s = goose.Load(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bigram tier mismatch"), std::string::npos) << s.message();
  EXPECT_TRUE(goose.use_bigram());
  // Same vocabulary and K, another model.
  TransitionTable other_model(64, 3, 4, false, 8);
  s = other_model.Load(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model mismatch"), std::string::npos) << s.message();
  EXPECT_FALSE(other_model.Observed(2));
  // Another slot count.
  TransitionTable small(64, 3, 4, true, 7), large(64, 3, 6, true, 7);
  HarvestIds(&small, 1, 2, {3, 4, 5});
  ASSERT_TRUE(small.Save(path).ok());
  s = large.Load(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("16 slots"), std::string::npos) << s.message();
  TransitionTable same(64, 3, 4, false, 7);
  ASSERT_TRUE(tr.Save(path).ok());
  ASSERT_TRUE(same.Load(path).ok());
  EXPECT_EQ(Ids(same.Successors(2, 1)), (std::vector<int32_t>{3, 4, 5}));
}

}  // namespace
}  // namespace goose

namespace goose {
namespace {

TEST(TransitionTableBigram, HasBigramOnlyForHarvestedPairs) {
  TransitionTable t(16, 4);
  const std::vector<int32_t> ids = {1, 2, 3, 4};
  const std::vector<float> scores = {0.4f, 0.3f, 0.2f, 0.1f};
  t.Harvest(/*prev=*/5, /*tok=*/7, ids, scores);
  EXPECT_TRUE(t.HasBigram(7, 5));
  EXPECT_FALSE(t.HasBigram(7, 6));
  EXPECT_FALSE(t.HasBigram(5, 7));
  EXPECT_FALSE(t.HasBigram(7, -1));
  TransitionTable unigram_only(16, 4, 16, /*use_bigram=*/false);
  unigram_only.Harvest(5, 7, ids, scores);
  EXPECT_FALSE(unigram_only.HasBigram(7, 5));
  EXPECT_TRUE(unigram_only.Observed(7));
}

}  // namespace
}  // namespace goose
