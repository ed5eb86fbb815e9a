#include "draft/prediction_matcher.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace goose {
namespace {

std::vector<int32_t> Cont(const PredictionMatcher& m, int n = 4) {
  auto c = m.Continuation(n);
  return {c.begin(), c.end()};
}

// A prediction of distinct tokens 100, 101, ... (n of them).
std::vector<int32_t> Distinct(int n) {
  std::vector<int32_t> p(n);
  for (int i = 0; i < n; ++i) p[i] = 100 + i;
  return p;
}

TEST(PredictionMatcher, FollowsTheOutputWhileItReproducesThePrediction) {
  const std::vector<int32_t> p = Distinct(10);
  PredictionMatcher m(p);
  EXPECT_EQ(Cont(m, 3), (std::vector<int32_t>{100, 101, 102}));
  m.Commit(std::vector<int32_t>{100, 101});
  EXPECT_EQ(Cont(m, 3), (std::vector<int32_t>{102, 103, 104}));
  EXPECT_EQ(m.reproduced(), 2);
  m.Commit(std::vector<int32_t>{102, 103, 104, 105, 106, 107, 108, 109});
  EXPECT_TRUE(Cont(m).empty());  // used up
  EXPECT_EQ(m.reproduced(), 10);
}

// One token replaced: the next cycle drafts from right after it.
TEST(PredictionMatcher, AReplacedTokenIsSteppedOver) {
  PredictionMatcher m(Distinct(10));
  m.Commit(std::vector<int32_t>{100, 101, 7});  // 7 replaces 102
  EXPECT_EQ(Cont(m, 2), (std::vector<int32_t>{103, 104}));
  m.Commit(std::vector<int32_t>{103, 104});
  EXPECT_EQ(m.reproduced(), 4);
}

// One token inserted: after the next token the matcher is back in step.
TEST(PredictionMatcher, AnInsertedTokenCostsOneToken) {
  PredictionMatcher m(Distinct(10));
  m.Commit(std::vector<int32_t>{100, 101, 7});  // 7 inserted before 102 (guessed: replaced)
  m.Commit(std::vector<int32_t>{102});
  EXPECT_EQ(Cont(m, 2), (std::vector<int32_t>{103, 104}));
  EXPECT_EQ(m.reproduced(), 3);
}

// A deleted token: the output's token is found a step ahead at once.
TEST(PredictionMatcher, ADeletedTokenIsFoundAtOnce) {
  PredictionMatcher m(Distinct(10));
  m.Commit(std::vector<int32_t>{100, 101, 103});  // 102 left out
  EXPECT_EQ(Cont(m, 2), (std::vector<int32_t>{104, 105}));
  EXPECT_EQ(m.reproduced(), 3);
}

// A longer rewrite: a suffix of two tokens that occurs far away finds its place; a single
// token far from where the matcher lost its way does not (it would match too easily).
TEST(PredictionMatcher, FindsItsPlaceBySuffixAfterARewrite) {
  PredictionMatcher m(Distinct(100));
  m.Commit(std::vector<int32_t>{100, 101, 1, 2, 3});
  EXPECT_TRUE(Cont(m).empty());
  m.Commit(std::vector<int32_t>{170});  // one token, 69 positions on: not trusted alone
  EXPECT_TRUE(Cont(m).empty());
  m.Commit(std::vector<int32_t>{171});  // "170 171" occurs: in step again
  EXPECT_EQ(Cont(m, 2), (std::vector<int32_t>{172, 173}));
  m.Commit(std::vector<int32_t>{105});  // far behind, alone: taken as replacing 172
  EXPECT_EQ(Cont(m, 1), (std::vector<int32_t>{173}));
}

// Repeated text: of equally long matches the nearest to where the matcher lost its way wins.
TEST(PredictionMatcher, TheNearestOfEqualMatchesWins) {
  // 1 2 3 4 | 9 9 | 1 2 3 5 | 1 2 3 6
  const std::vector<int32_t> p = {1, 2, 3, 4, 9, 9, 1, 2, 3, 5, 1, 2, 3, 6};
  PredictionMatcher m(p);
  m.Commit(std::vector<int32_t>{1, 2, 3, 4, 9, 9, 1, 2, 3, 8, 8});  // lost at position 9 ("5")
  m.Commit(std::vector<int32_t>{1, 2, 3});  // "1" at 0, 6 and 10: 10 is nearest
  EXPECT_EQ(Cont(m, 1), (std::vector<int32_t>{6}));
}

TEST(PredictionMatcher, AnEmptyOrUnrelatedPredictionProposesNothing) {
  PredictionMatcher none;
  none.Commit(std::vector<int32_t>{1, 2, 3});
  EXPECT_TRUE(Cont(none).empty());
  EXPECT_EQ(none.reproduced(), 0);
  PredictionMatcher m(Distinct(10));
  m.Commit(std::vector<int32_t>{1});  // guessed: 1 replaced 100
  EXPECT_EQ(Cont(m, 1), (std::vector<int32_t>{101}));
  m.Commit(std::vector<int32_t>{2, 3, 4});
  EXPECT_TRUE(Cont(m).empty());
  EXPECT_EQ(m.reproduced(), 0);
}

// A prediction the output meets only by chance (short suffixes it shares, as another story
// shares common words) is not drafted from, even right after such a resync; a run of
// kTrustedRun tokens in step makes it a draft source again.
TEST(PredictionMatcher, APredictionMetOnlyByChanceIsNotTrusted) {
  PredictionMatcher m(Distinct(400));
  for (int k = 1; k <= 5; ++k) {  // 4 tokens it lacks, then 2 it has, 40 positions on
    m.Commit(std::vector<int32_t>{1, 2, 3, 4});
    m.Commit(std::vector<int32_t>{110 + 40 * k, 111 + 40 * k});
  }
  EXPECT_EQ(m.reproduced(), 5);
  EXPECT_TRUE(Cont(m).empty()) << "5 of 30 tokens reproduced";
  for (int32_t t = 312; t < 312 + PredictionMatcher::kTrustedRun - 1; ++t) {
    m.Commit(std::vector<int32_t>{t});
  }
  EXPECT_TRUE(Cont(m).empty()) << "a run one token short";
  m.Commit(std::vector<int32_t>{312 + PredictionMatcher::kTrustedRun - 1});
  EXPECT_EQ(Cont(m, 1), (std::vector<int32_t>{320}));
}

// The count never exceeds the prediction, whatever the output (each position counts once),
// and equals the prediction's length when the output is the prediction.
TEST(PredictionMatcher, ReproducedIsBoundedAndExact) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> p(1 + rng() % 60), out(rng() % 120);
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % 6);
    for (int32_t& t : out) t = static_cast<int32_t>(rng() % 6);
    const int64_t r = ReproducedPredictionTokens(p, out);
    EXPECT_GE(r, 0);
    EXPECT_LE(r, static_cast<int64_t>(std::min(p.size(), out.size())));
    EXPECT_EQ(ReproducedPredictionTokens(p, p), static_cast<int64_t>(p.size()));
  }
}

}  // namespace
}  // namespace goose
