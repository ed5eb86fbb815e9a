// Context::ForwardExtend: a tree scored over several passes (a draft model growing its tree)
// gives every node the logits of one-token decoding after its root path, BITWISE, and KeepPath
// over nodes of several passes leaves the cache as if only that path had ever been seen.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "model/model.h"
#include "model_test_util.h"
#include "sample/sampler.h"
#include "synth/synth.h"
#include "tree_test_lib.h"
#include "util/rng.h"
#include "util/thread_pool.h"

namespace goose {
namespace {

constexpr int kCtx = 320;

// A catch-up chain (nodes 0..chain-1, the last one the tree's root) and a tree below it whose
// later nodes hang off any earlier node: the shape a draft model grows.
std::vector<int32_t> DraftShapedParents(SplitMix64& rng, int chain, int n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (i < chain) {
      p[i] = i - 1;
    } else {
      p[i] = chain - 1 + static_cast<int32_t>(rng.Below(static_cast<uint64_t>(i - chain + 1)));
    }
  }
  return p;
}

void Commit(Context& ctx, const std::vector<int32_t>& prefix) {
  ASSERT_TRUE(ctx.ForwardChain(prefix).ok());
  ctx.KeepAll();
}

// The tokens of node's root path, root first.
std::vector<int32_t> PathTokens(const std::vector<int32_t>& tokens,
                                const std::vector<int32_t>& parents, int node) {
  std::vector<int32_t> out;
  for (int j = node; j >= 0; j = parents[j]) out.insert(out.begin(), tokens[j]);
  return out;
}

// Logits after `seq`, one token at a time in a fresh context.
std::vector<float> OneByOne(const Model& model, const std::vector<int32_t>& seq) {
  Context ctx(model, kCtx, nullptr);
  for (int32_t t : seq) {
    const int32_t parent = -1;
    EXPECT_TRUE(ctx.Forward({&t, 1}, {&parent, 1}).ok());
    ctx.KeepPath(std::vector<int32_t>{0});
  }
  const int nv = model.config().n_vocab;
  return std::vector<float>(ctx.logits(0), ctx.logits(0) + nv);
}

void CheckPassesEqualSequential(const Model& model, int n_threads, uint64_t seed, int trials) {
  const int nv = model.config().n_vocab;
  ThreadPool pool(n_threads);
  SplitMix64 rng(seed);
  for (int trial = 0; trial < trials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const auto prefix = RandomTokens(rng, 1 + static_cast<int>(rng.Below(30)), nv);
    const int chain = 1 + static_cast<int>(rng.Below(6));
    const int n = chain + 1 + static_cast<int>(rng.Below(60));
    const auto tokens = RandomTokens(rng, n, nv);
    const auto parents = DraftShapedParents(rng, chain, n);
    // Pass boundaries: the chain first, then random cuts.
    std::vector<int> cuts = {0, chain};
    while (cuts.back() < n) {
      cuts.push_back(std::min(n, cuts.back() + 1 + static_cast<int>(rng.Below(12))));
    }

    // The whole tree in one pass: the reference the tree tests already tie to one-token decoding.
    Context whole(model, kCtx, &pool);
    Commit(whole, prefix);
    ASSERT_TRUE(whole.Forward(tokens, parents).ok());

    Context passes(model, kCtx, &pool);
    Commit(passes, prefix);
    // Something stale pending first: Forward must drop it, ForwardExtend extend the new tree.
    ASSERT_TRUE(passes.ForwardChain(RandomTokens(rng, 3, nv)).ok());
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      const int b = cuts[k], e = cuts[k + 1];
      const std::span<const int32_t> tok(tokens.data() + b, e - b), par(parents.data() + b, e - b);
      ASSERT_TRUE((k == 0 ? passes.Forward(tok, par) : passes.ForwardExtend(tok, par)).ok());
      ASSERT_EQ(passes.n_batch(), e - b);
      ASSERT_EQ(passes.n_pending(), e);
      for (int i = b; i < e; ++i) {
        ExpectBitwiseEqual(passes.logits(i - b), whole.logits(i), nv,
                           "node " + std::to_string(i) + " of pass " + std::to_string(k));
      }
    }
    // A deep node against one-token decoding directly.
    {
      std::vector<int32_t> seq = prefix;
      const std::vector<int32_t> path = PathTokens(tokens, parents, n - 1);
      seq.insert(seq.end(), path.begin(), path.end());
      ExpectBitwiseEqual(whole.logits(n - 1), OneByOne(model, seq).data(), nv, "last node");
    }

    // Keep the root path of the last node (it spans passes) and decode on: same bits as a
    // context that only ever saw that path.
    std::vector<int32_t> keep;
    for (int j = n - 1; j >= 0; j = parents[j]) keep.insert(keep.begin(), j);
    int32_t next = Argmax(passes.logits(passes.n_batch() - 1), nv);
    passes.KeepPath(keep);
    EXPECT_EQ(passes.n_pending(), 0);
    ASSERT_EQ(passes.n_past(), static_cast<int>(prefix.size() + keep.size()));
    std::vector<int32_t> seen = prefix;
    for (int j : keep) seen.push_back(tokens[j]);
    for (int step = 0; step < 4; ++step) {
      seen.push_back(next);
      const int32_t parent = -1;
      ASSERT_TRUE(passes.Forward({&next, 1}, {&parent, 1}).ok());
      ExpectBitwiseEqual(passes.logits(0), OneByOne(model, seen).data(), nv,
                         "after KeepPath, step " + std::to_string(step));
      passes.KeepPath(std::vector<int32_t>{0});
      next = Argmax(passes.logits(0), nv);
    }
  }
}

TEST(TreeExtendTest, TinyModelPassesEqualOnePassAndSequential) {
  CheckPassesEqualSequential(TinyModel(), 1, /*seed=*/11, /*trials=*/6);
  CheckPassesEqualSequential(TinyModel(), 2, /*seed=*/12, /*trials=*/3);
}

TEST(TreeExtendTest, SynthGqaModelPassesEqualOnePassAndSequential) {
  SynthParams p;
  p.dtype = DType::kQ8_0;
  p.vocab_from = TinyModelPath();
  p.n_layer = 2, p.n_embd = 64, p.n_head = 4, p.n_head_kv = 2, p.n_ff = 128;
  p.context_length = 512;
  const std::string path =
      ::testing::TempDir() + "/goose_extend_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(SynthesizeModel(p, path).ok());
  auto m = Model::Load(path);
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  CheckPassesEqualSequential(**m, 2, /*seed=*/13, /*trials=*/3);
}

TEST(TreeExtendTest, ChainOverSeveralPassesCommitsWithKeepAll) {
  const Model& m = TinyModel();
  const int nv = m.config().n_vocab;
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 300, 17, 42};
  Context ctx(m, 64, nullptr);
  ASSERT_TRUE(ctx.ForwardChain(std::span<const int32_t>(tokens.data(), 3)).ok());
  const std::vector<int32_t> parents = {2, 3, 4, 5, 6};
  ASSERT_TRUE(ctx.ForwardExtend(std::span<const int32_t>(tokens.data() + 3, 5), parents).ok());
  ctx.KeepAll();
  EXPECT_EQ(ctx.n_past(), 8);
  const int32_t next = 50, parent = -1;
  ASSERT_TRUE(ctx.Forward({&next, 1}, {&parent, 1}).ok());
  std::vector<int32_t> seq = tokens;
  seq.push_back(next);
  ExpectBitwiseEqual(ctx.logits(0), OneByOne(m, seq).data(), nv, "after KeepAll");
}

TEST(TreeExtendTest, MalformedExtensionsAreErrors) {
  const Model& m = TinyModel();
  Context ctx(m, 16, nullptr);
  const std::vector<int32_t> three = {1, 2, 3};
  ASSERT_TRUE(ctx.ForwardChain(three).ok());
  // Parent 5 is neither pending (0..2) nor an earlier row of this batch (3).
  Status st = ctx.ForwardExtend(std::vector<int32_t>{4, 5}, std::vector<int32_t>{2, 5});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ForwardExtend: parents[1] = 5"), std::string::npos) << st.message();
  // 3 pending + 14 > 16.
  st = ctx.ForwardExtend(std::vector<int32_t>(14, 7), std::vector<int32_t>(14, 0));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("3 pending"), std::string::npos) << st.message();
  // A failed extension leaves nothing half-done: the pending chain still commits.
  ctx.KeepAll();
  EXPECT_EQ(ctx.n_past(), 3);
}

}  // namespace
}  // namespace goose
