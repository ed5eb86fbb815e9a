// Multi-sequence passes (BatchPass): the rows of several sequences scored in one pass equal,
// BITWISE, each sequence's own Context::Forward and one-token decoding; a prefill chunk sharing
// passes with other sequences' trees; ForwardExtend's semantics in a pass; logit subsets mixed
// with whole vocabularies; the logits' lifetime; and the errors.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "model_test_util.h"
#include "sample/sampler.h"
#include "tree_test_lib.h"
#include "util/rng.h"
#include "util/thread_pool.h"

namespace goose {
namespace {

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' does not contain '" << (needle) << "'"

constexpr int kCtx = 320;

std::vector<int32_t> Iota(int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[i] = i - 1;
  return v;
}

void Commit(Context& ctx, const std::vector<int32_t>& tokens) {
  ASSERT_TRUE(ctx.ForwardChain(tokens).ok());
  ctx.KeepAll();
}

void ExpectRowsEqual(const Context& a, const Context& b, const std::string& what) {
  ASSERT_EQ(a.n_batch(), b.n_batch()) << what;
  ASSERT_EQ(a.n_logits(), b.n_logits()) << what;
  for (int i = 0; i < a.n_batch(); ++i) {
    ExpectBitwiseEqual(a.logits(i), b.logits(i), a.n_logits(), what + " row " + std::to_string(i));
  }
}

TEST(BatchTest, TinyModelBatchEqualsSingleOneThread) {
  CheckBatchEqualsSingle(TinyModel(), 1, /*seed=*/41, /*n_passes=*/4);
}

TEST(BatchTest, TinyModelBatchEqualsSingleTwoThreads) {
  CheckBatchEqualsSingle(TinyModel(), 2, /*seed=*/42, /*n_passes=*/4);
  CheckBatchEqualsSingle(TinyModel(), 2, /*seed=*/43, /*n_passes=*/2, 100, 250);
}

// A 200-token prompt prefilled in chunks of 48, each chunk sharing its pass with two other
// sequences' trees (which are re-scored each pass and never kept): every chunk's rows equal
// the prompt prefilled alone, and decoding after it continues with the same bits.
TEST(BatchTest, PrefillChunkSharesPassesWithOtherSequencesTrees) {
  const Model& m = TinyModel();
  const int n_vocab = m.config().n_vocab;
  SplitMix64 rng(44);
  ThreadPool pool(2);
  BatchPass pass(m, &pool);
  const auto prompt = RandomTokens(rng, 200, n_vocab);
  Context chunked(m, kCtx, nullptr), alone(m, kCtx, nullptr), b(m, kCtx, nullptr),
      c(m, kCtx, nullptr);
  Commit(b, RandomTokens(rng, 70, n_vocab));
  Commit(c, RandomTokens(rng, 5, n_vocab));
  const auto b_tokens = RandomTokens(rng, 30, n_vocab);
  const auto c_tokens = RandomTokens(rng, 9, n_vocab);
  const std::vector<int32_t> b_parents = {-1, 0,  0,  1,  1,  2,  3,  3,  7,  -1,
                                          9,  10, 10, 12, 0,  14, 15, 16, 17, 18,
                                          19, 20, 21, 22, 23, 24, 25, 0,  27, 4};
  const std::vector<int32_t> c_parents = {-1, 0, 1, 1, 3, 3, 0, 6, 7};
  for (int at = 0; at < 200; at += 48) {
    const int len = std::min(48, 200 - at);
    const std::span<const int32_t> chunk(prompt.data() + at, len);
    const auto chain = Iota(len);
    const std::vector<SequenceRows> rows = {
        {&b, b_tokens, b_parents}, {&chunked, chunk, chain}, {&c, c_tokens, c_parents}};
    ASSERT_TRUE(pass.Forward(rows).ok());
    ASSERT_TRUE(alone.ForwardChain(chunk).ok());
    ExpectRowsEqual(chunked, alone, "chunk at " + std::to_string(at));
    chunked.KeepAll();
    alone.KeepAll();
  }
  int32_t next = Argmax(chunked.logits(chunked.n_batch() - 1), n_vocab);
  for (int step = 0; step < 4; ++step) {
    const int32_t root = -1;
    const std::vector<SequenceRows> rows = {{&chunked, {&next, 1}, {&root, 1}},
                                            {&c, c_tokens, c_parents}};
    ASSERT_TRUE(pass.Forward(rows).ok());
    ASSERT_TRUE(alone.ForwardChain({&next, 1}).ok());
    ExpectRowsEqual(chunked, alone, "decoding step " + std::to_string(step));
    chunked.KeepAll();
    alone.KeepAll();
    next = Argmax(alone.logits(0), n_vocab);
  }
}

// A sequence extending its pending tree inside a pass (a drafter's next level) == Forward then
// ForwardExtend on its own; KeepPath then takes a path across both passes.
TEST(BatchTest, ExtendInsideAPassEqualsForwardExtend) {
  const Model& m = TinyModel();
  const int n_vocab = m.config().n_vocab;
  SplitMix64 rng(45);
  BatchPass pass(m, nullptr);
  const auto prefix = RandomTokens(rng, 20, n_vocab);
  const std::vector<int32_t> t1 = {5, 6, 7}, p1 = {-1, 0, 0};
  const std::vector<int32_t> t2 = {8, 9, 10, 11}, p2 = {1, 2, 3, 0};
  Context a(m, kCtx, nullptr), ref(m, kCtx, nullptr), other(m, kCtx, nullptr);
  Commit(a, prefix);
  Commit(ref, prefix);
  Commit(other, RandomTokens(rng, 33, n_vocab));
  ASSERT_TRUE(a.Forward(t1, p1).ok());
  ASSERT_TRUE(ref.Forward(t1, p1).ok());
  const auto other_tokens = RandomTokens(rng, 6, n_vocab);
  const auto other_parents = Iota(6);
  const std::vector<SequenceRows> rows = {{&other, other_tokens, other_parents},
                                          {&a, t2, p2, /*extend=*/true}};
  ASSERT_TRUE(pass.Forward(rows).ok());
  ASSERT_TRUE(ref.ForwardExtend(t2, p2).ok());
  ExpectRowsEqual(a, ref, "extended");
  EXPECT_EQ(a.n_pending(), 7);
  const std::vector<int32_t> path = {0, 1, 3, 5};  // tokens 5, 6, 8, 10
  a.KeepPath(path);
  ref.KeepPath(path);
  const int32_t next = 12;
  ASSERT_TRUE(a.ForwardChain({&next, 1}).ok());
  ASSERT_TRUE(ref.ForwardChain({&next, 1}).ok());
  ExpectRowsEqual(a, ref, "after KeepPath");
}

// Sequences scoring a subset of the vocabulary (SetLogitTokens) beside ones scoring all of it.
TEST(BatchTest, LogitSubsetsAndWholeVocabulariesInOnePass) {
  const Model& m = TinyModel();
  SplitMix64 rng(46);
  ThreadPool pool(2);
  BatchPass pass(m, &pool);
  std::vector<std::unique_ptr<Context>> ctxs, refs;
  std::vector<std::vector<int32_t>> tokens, parents;
  const std::vector<std::vector<int32_t>> subsets = {{}, {3, 1, 4, 1, 5}, {}, {}, {9, 2, 6}};
  for (size_t s = 0; s < subsets.size(); ++s) {
    const auto prefix = RandomTokens(rng, 10 + 7 * static_cast<int>(s), m.config().n_vocab);
    tokens.push_back(RandomTokens(rng, 3 + static_cast<int>(s), m.config().n_vocab));
    parents.push_back(Iota(3 + static_cast<int>(s)));
    for (auto* list : {&ctxs, &refs}) {
      list->push_back(std::make_unique<Context>(m, kCtx, nullptr));
      Commit(*list->back(), prefix);
      list->back()->SetLogitTokens(subsets[s]);
    }
  }
  std::vector<SequenceRows> rows;
  for (size_t s = 0; s < subsets.size(); ++s) {
    rows.push_back({ctxs[s].get(), tokens[s], parents[s]});
  }
  ASSERT_TRUE(pass.Forward(rows).ok());
  for (size_t s = 0; s < subsets.size(); ++s) {
    ASSERT_TRUE(refs[s]->ForwardChain(tokens[s]).ok());
    ExpectRowsEqual(*ctxs[s], *refs[s], "sequence " + std::to_string(s));
  }
}

// A Context's logits live in the pass that scored it until that pass runs again or is gone.
TEST(BatchTest, LogitsLastUntilTheNextPass) {
  const Model& m = TinyModel();
  BatchPass pass(m, nullptr);
  Context a(m, 64, nullptr), b(m, 64, nullptr);
  const std::vector<int32_t> t = {1, 2, 3}, p = {-1, 0, 0};
  ASSERT_TRUE(pass.Forward(std::vector<SequenceRows>{{&a, t, p}, {&b, t, p}}).ok());
  EXPECT_EQ(a.n_batch(), 3);
  EXPECT_EQ(b.n_batch(), 3);
  ASSERT_TRUE(pass.Forward(std::vector<SequenceRows>{{&b, t, p}}).ok());
  EXPECT_EQ(a.n_batch(), 0);    // gone with the pass's buffer
  EXPECT_EQ(a.n_pending(), 3);  // its nodes still pending: KeepPath works
  a.KeepPath(std::vector<int32_t>{0, 2});
  EXPECT_EQ(a.n_past(), 2);
  ASSERT_TRUE(a.Forward(t, p).ok());  // its own pass again
  EXPECT_EQ(a.n_batch(), 3);
  EXPECT_EQ(b.n_batch(), 3);
  {
    BatchPass short_lived(m, nullptr);
    ASSERT_TRUE(short_lived.Forward(std::vector<SequenceRows>{{&b, t, p}}).ok());
    EXPECT_EQ(b.n_batch(), 3);
  }
  EXPECT_EQ(b.n_batch(), 0);  // gone with the pass
  EXPECT_EQ(a.n_batch(), 3);
}

TEST(BatchTest, BadPassesReturnStatusAndChangeNothing) {
  const Model& m = TinyModel();
  auto other_model = Model::Load(TinyModelPath());
  ASSERT_TRUE(other_model.ok());
  BatchPass pass(m, nullptr);
  Context a(m, 16, nullptr), b(m, 16, nullptr), foreign(**other_model, 16, nullptr);
  const std::vector<int32_t> t = {1, 2, 3}, p = {-1, 0, 0}, bad = {-1, 0, 2};
  ASSERT_TRUE(pass.Forward(std::vector<SequenceRows>{{&a, t, p}}).ok());
  const std::vector<float> before(a.logits(2), a.logits(2) + a.n_logits());
  auto error = [&](std::vector<SequenceRows> rows) { return pass.Forward(rows).message(); };
  EXPECT_CONTAINS(error({}), "no sequences");
  EXPECT_CONTAINS(error({{&b, t, p}, {nullptr, t, p}}), "sequence 1: no Context");
  EXPECT_CONTAINS(error({{&b, t, p}, {&b, t, p}}), "sequence 1: its Context is also sequence 0's");
  EXPECT_CONTAINS(error({{&b, t, p}, {&foreign, t, p}}), "sequence 1: its Context is of another");
  EXPECT_CONTAINS(error({{&b, t, p}, {&a, t, bad}}), "sequence 1: parents[2] = 2");
  EXPECT_CONTAINS(error({{&b, t, p}, {&a, t, p}, {&b, t, p}}), "sequence 2: its Context is also");
  EXPECT_CONTAINS(error({{&b, std::vector<int32_t>{1, 999}, std::vector<int32_t>{-1, 0}}}),
                  "sequence 0: token 999 at batch index 1 is outside the vocabulary");
  EXPECT_CONTAINS(error({{&b, t, std::vector<int32_t>{-1, 0}}}), "3 tokens but 2 parents");
  EXPECT_CONTAINS(error({{&b, t, p}, {&a, std::vector<int32_t>{}, std::vector<int32_t>{}}}),
                  "sequence 1: empty batch");
  Commit(b, std::vector<int32_t>(14, 7));
  EXPECT_CONTAINS(
      error({{&a, t, p}, {&b, t, p}}),
      "sequence 1: batch of 3 tokens does not fit: n_past 14 + 0 pending + 3 > n_ctx 16");
  // Extending a's 3 pending nodes: parents may name them (< 3 + i).
  EXPECT_CONTAINS(error({{&a, t, std::vector<int32_t>{2, 3, 6}, /*extend=*/true}}),
                  "sequence 0: parents[2] = 6, expected -1 or an earlier pending node (< 5)");
  // Nothing changed: a's pass is still the last one, its logits and pending nodes intact.
  ASSERT_EQ(a.n_batch(), 3);
  ExpectBitwiseEqual(a.logits(2), before.data(), a.n_logits(), "after the errors");
  EXPECT_EQ(a.n_pending(), 3);
  EXPECT_EQ(b.n_past(), 14);
}

}  // namespace
}  // namespace goose
