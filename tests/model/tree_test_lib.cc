#include "tree_test_lib.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>

#include "sample/sampler.h"
#include "util/rng.h"
#include "util/thread_pool.h"

namespace goose {

std::vector<int32_t> RandomTokens(SplitMix64& rng, int n, int n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = static_cast<int32_t>(rng.Below(static_cast<uint64_t>(n_vocab)));
  return t;
}

namespace {

constexpr int kCtx = 320;

// What the contexts of the check being run are made with (set by the public checks, which run
// on the test's thread): room for its prefixes and trees, and the KV cache asked for.
struct ContextSettings {
  int n_ctx = kCtx;
  KvType kv = KvType::kF16;
};
ContextSettings g_ctx;

// Random parents: several roots, mixed deep chains and bushy levels.
std::vector<int32_t> RandomParents(SplitMix64& rng, int n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  const int style = static_cast<int>(rng.Below(3));
  for (int i = 0; i < n; ++i) {
    if (i == 0) {
      p[i] = -1;
    } else if (style == 0) {  // uniform over [-1, i)
      p[i] = static_cast<int32_t>(rng.Below(static_cast<uint64_t>(i) + 1)) - 1;
    } else if (style == 1) {  // mostly chains
      p[i] = rng.Below(8) == 0 ? static_cast<int32_t>(rng.Below(i)) : i - 1;
    } else {  // a spine with branches off recent nodes
      p[i] = static_cast<int32_t>(std::max<int64_t>(0, i - 1 - static_cast<int64_t>(rng.Below(4))));
    }
  }
  return p;
}

// Commits `prefix`: a chain Forward then KeepPath of the whole chain.
void CommitPrefix(Context& ctx, const std::vector<int32_t>& prefix) {
  ASSERT_TRUE(ctx.ForwardChain(prefix).ok());
  std::vector<int32_t> path(prefix.size());
  for (size_t i = 0; i < path.size(); ++i) path[i] = static_cast<int32_t>(i);
  ctx.KeepPath(path);
}

// Feeds tokens one at a time, committing each; returns with the last one's logits in row 0.
void FeedOneByOne(Context& ctx, const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens) {
    const int32_t parent = -1;
    ASSERT_TRUE(ctx.Forward({&t, 1}, {&parent, 1}).ok());
    ctx.KeepPath(std::vector<int32_t>{0});
  }
}

std::vector<int32_t> RootPath(const std::vector<int32_t>& parents, int node) {
  std::vector<int32_t> path;
  for (int j = node; j >= 0; j = parents[j]) path.insert(path.begin(), j);
  return path;
}

// A random length in [lo, hi].
int Between(SplitMix64& rng, int lo, int hi) {
  return lo + static_cast<int>(rng.Below(static_cast<uint64_t>(hi - lo + 1)));
}

}  // namespace

void ExpectBitwiseEqual(const float* a, const float* b, int n, const std::string& what) {
  if (std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0) return;
  int i = 0;
  while (std::memcmp(a + i, b + i, sizeof(float)) == 0) ++i;
  ADD_FAILURE() << what << ": logits differ first at index " << i << ": " << a[i] << " vs " << b[i];
}

void CheckTreesEqualSequential(const Model& model, int n_threads, uint64_t seed, int n_trees,
                               int min_prefix, int max_prefix, KvType kv) {
  g_ctx = {std::max(kCtx, max_prefix + 130), kv};
  const int n_vocab = model.config().n_vocab;
  ThreadPool pool(n_threads);
  SplitMix64 rng(seed);
  for (int trial = 0; trial < n_trees; ++trial) {
    const auto prefix = RandomTokens(rng, Between(rng, min_prefix, max_prefix), n_vocab);
    const int n = trial == 0 ? 128 : 1 + static_cast<int>(rng.Below(128));
    const auto tokens = RandomTokens(rng, n, n_vocab);
    const auto parents = RandomParents(rng, n);

    Context tree(model, g_ctx.n_ctx, &pool, g_ctx.kv);
    CommitPrefix(tree, prefix);
    ASSERT_TRUE(tree.Forward(tokens, parents).ok());
    ASSERT_EQ(tree.n_batch(), n);

    // Depth-first, one token at a time: evaluate a node, commit it, visit its children, then
    // truncate back. Each node is evaluated once, after exactly its root path.
    Context seq(model, g_ctx.n_ctx, nullptr, g_ctx.kv);
    FeedOneByOne(seq, prefix);
    std::vector<std::vector<int>> children(static_cast<size_t>(n));
    std::vector<int> roots;
    for (int i = 0; i < n; ++i) (parents[i] < 0 ? roots : children[parents[i]]).push_back(i);
    std::function<void(int)> visit = [&](int node) {
      const int32_t parent = -1;
      ASSERT_TRUE(seq.Forward({&tokens[node], 1}, {&parent, 1}).ok());
      ExpectBitwiseEqual(tree.logits(node), seq.logits(0), n_vocab,
                         "trial " + std::to_string(trial) + " node " + std::to_string(node));
      seq.KeepPath(std::vector<int32_t>{0});
      const int n_past = seq.n_past();
      for (int child : children[node]) {
        visit(child);
        seq.Truncate(n_past);
      }
    };
    for (int root : roots) {
      visit(root);
      seq.Truncate(static_cast<int>(prefix.size()));
    }

    // A few nodes again in a brand-new context that never saw anything else.
    for (int k = 0; k < 2; ++k) {
      const int node = static_cast<int>(rng.Below(static_cast<uint64_t>(n)));
      Context fresh(model, g_ctx.n_ctx, nullptr, g_ctx.kv);
      std::vector<int32_t> seq_tokens = prefix;
      for (int j : RootPath(parents, node)) seq_tokens.push_back(tokens[j]);
      FeedOneByOne(fresh, seq_tokens);
      ExpectBitwiseEqual(tree.logits(node), fresh.logits(0), n_vocab,
                         "fresh context, node " + std::to_string(node));
    }
  }
}

void CheckKeepPathContinuation(const Model& model, int n_threads, uint64_t seed, int n_trials,
                               int min_prefix, int max_prefix) {
  g_ctx = ContextSettings();
  const int n_vocab = model.config().n_vocab;
  ThreadPool pool(n_threads);
  SplitMix64 rng(seed);
  for (int trial = 0; trial < n_trials; ++trial) {
    const auto prefix = RandomTokens(rng, Between(rng, min_prefix, max_prefix), n_vocab);
    const int n = 2 + static_cast<int>(rng.Below(100));
    const auto tokens = RandomTokens(rng, n, n_vocab);
    const auto parents = RandomParents(rng, n);
    // The deepest-numbered node's path usually skips slots, so compaction really moves rows.
    const int node = n - 1 - static_cast<int>(rng.Below(std::min(n, 5)));
    const auto path = RootPath(parents, node);

    Context tree(model, g_ctx.n_ctx, &pool, g_ctx.kv);
    CommitPrefix(tree, prefix);
    ASSERT_TRUE(tree.Forward(tokens, parents).ok());
    int32_t next = Argmax(tree.logits(node), n_vocab);
    tree.KeepPath(path);
    ASSERT_EQ(tree.n_past(), static_cast<int>(prefix.size() + path.size()));

    Context fresh(model, g_ctx.n_ctx, nullptr, g_ctx.kv);
    std::vector<int32_t> seen = prefix;
    for (int j : path) seen.push_back(tokens[j]);
    FeedOneByOne(fresh, seen);
    ASSERT_EQ(Argmax(fresh.logits(0), n_vocab), next);
    for (int step = 0; step < 8; ++step) {
      FeedOneByOne(tree, {next});
      FeedOneByOne(fresh, {next});
      ExpectBitwiseEqual(tree.logits(0), fresh.logits(0), n_vocab,
                         "trial " + std::to_string(trial) + " step " + std::to_string(step));
      next = Argmax(tree.logits(0), n_vocab);
    }
  }
}

void CheckTruncateContinuation(const Model& model, int n_threads, uint64_t seed) {
  g_ctx = ContextSettings();
  const int n_vocab = model.config().n_vocab;
  ThreadPool pool(n_threads);
  SplitMix64 rng(seed);
  const auto tokens = RandomTokens(rng, 60, n_vocab);
  const int keep = 23;
  Context ctx(model, g_ctx.n_ctx, &pool, g_ctx.kv);
  ASSERT_TRUE(ctx.ForwardChain(tokens).ok());
  ctx.KeepAll();
  ctx.Truncate(keep);
  ASSERT_EQ(ctx.n_past(), keep);
  Context fresh(model, g_ctx.n_ctx, nullptr, g_ctx.kv);
  FeedOneByOne(fresh, std::vector<int32_t>(tokens.begin(), tokens.begin() + keep));
  int32_t next = tokens[keep];  // a different token than the one truncated would not matter
  for (int step = 0; step < 8; ++step) {
    FeedOneByOne(ctx, {next});
    FeedOneByOne(fresh, {next});
    ExpectBitwiseEqual(ctx.logits(0), fresh.logits(0), n_vocab, "step " + std::to_string(step));
    next = Argmax(ctx.logits(0), n_vocab);
  }
}

namespace {

// One sequence of a multi-sequence pass: its committed prefix, its rows and its Context.
struct BatchCase {
  std::vector<int32_t> prefix, tokens, parents;
  std::unique_ptr<Context> ctx;
};

// kind 0: a random tree of up to 48 nodes; 1: a prefill chunk (a chain continuing the prefix)
// of up to 40 tokens; 2: one token (a decoding step).
BatchCase RandomBatchCase(const Model& model, SplitMix64& rng, int min_prefix, int max_prefix) {
  const int n_vocab = model.config().n_vocab;
  BatchCase b;
  b.prefix = RandomTokens(rng, Between(rng, min_prefix, max_prefix), n_vocab);
  const int kind = static_cast<int>(rng.Below(3));
  const int n = kind == 2 ? 1 : Between(rng, 1, kind == 0 ? 48 : 40);
  b.tokens = RandomTokens(rng, n, n_vocab);
  b.parents = RandomParents(rng, n);
  if (kind == 1) {
    for (int i = 0; i < n; ++i) b.parents[i] = i - 1;
  }
  b.ctx = std::make_unique<Context>(model, g_ctx.n_ctx, nullptr, g_ctx.kv);
  CommitPrefix(*b.ctx, b.prefix);
  return b;
}

std::vector<float> CopyLogits(const Context& ctx) {
  std::vector<float> out;
  for (int i = 0; i < ctx.n_batch(); ++i) {
    out.insert(out.end(), ctx.logits(i), ctx.logits(i) + ctx.n_logits());
  }
  return out;
}

// Each sequence's rows == its own one-sequence Forward, all rows; its last row == one-token
// decoding of the prefix and that row's root path in a fresh context.
void ExpectEachEqualsItsOwnPass(const Model& model, const std::vector<BatchCase>& cases,
                                const std::string& what) {
  const int n_vocab = model.config().n_vocab;
  for (size_t s = 0; s < cases.size(); ++s) {
    const BatchCase& b = cases[s];
    const std::string name = what + " sequence " + std::to_string(s);
    Context own(model, g_ctx.n_ctx, nullptr, g_ctx.kv);
    CommitPrefix(own, b.prefix);
    ASSERT_TRUE(own.Forward(b.tokens, b.parents).ok());
    ASSERT_EQ(b.ctx->n_batch(), static_cast<int>(b.tokens.size())) << name;
    for (int i = 0; i < own.n_batch(); ++i) {
      ExpectBitwiseEqual(b.ctx->logits(i), own.logits(i), n_vocab,
                         name + " row " + std::to_string(i));
    }
    const int last = static_cast<int>(b.tokens.size()) - 1;
    Context fresh(model, g_ctx.n_ctx, nullptr, g_ctx.kv);
    std::vector<int32_t> seen = b.prefix;
    for (int j : RootPath(b.parents, last)) seen.push_back(b.tokens[j]);
    FeedOneByOne(fresh, seen);
    ExpectBitwiseEqual(b.ctx->logits(last), fresh.logits(0), n_vocab,
                       name + " last row vs one-token decoding");
  }
}

// The pass again with the sequences in reverse order: the same bits.
void ExpectOrderDoesNotMatter(BatchPass& pass, const std::vector<BatchCase>& cases,
                              const std::string& what) {
  std::vector<std::vector<float>> before;
  std::vector<SequenceRows> rows;
  for (const BatchCase& b : cases) before.push_back(CopyLogits(*b.ctx));
  for (auto it = cases.rbegin(); it != cases.rend(); ++it) {
    rows.push_back({it->ctx.get(), it->tokens, it->parents});
  }
  ASSERT_TRUE(pass.Forward(rows).ok());
  for (size_t s = 0; s < cases.size(); ++s) {
    const std::vector<float> after = CopyLogits(*cases[s].ctx);
    ASSERT_EQ(after.size(), before[s].size());
    ExpectBitwiseEqual(after.data(), before[s].data(), static_cast<int>(after.size()),
                       what + " reversed order, sequence " + std::to_string(s));
  }
}

// Each sequence keeps a random node's root path; then passes of one token per sequence (all
// in one pass) == fresh contexts fed the same history one token at a time.
void ExpectKeepPathThenBatchedDecoding(const Model& model, BatchPass& pass, SplitMix64& rng,
                                       std::vector<BatchCase>& cases, const std::string& what) {
  const int n_vocab = model.config().n_vocab;
  std::vector<std::unique_ptr<Context>> fresh;
  std::vector<int32_t> next(cases.size());
  for (size_t s = 0; s < cases.size(); ++s) {
    BatchCase& b = cases[s];
    const int node = static_cast<int>(rng.Below(b.tokens.size()));
    const auto path = RootPath(b.parents, node);
    next[s] = Argmax(b.ctx->logits(node), n_vocab);
    b.ctx->KeepPath(path);
    std::vector<int32_t> seen = b.prefix;
    for (int j : path) seen.push_back(b.tokens[j]);
    fresh.push_back(std::make_unique<Context>(model, g_ctx.n_ctx, nullptr, g_ctx.kv));
    FeedOneByOne(*fresh.back(), seen);
  }
  const int32_t root = -1;
  for (int step = 0; step < 3; ++step) {
    std::vector<SequenceRows> rows;
    for (size_t s = 0; s < cases.size(); ++s) {
      rows.push_back({cases[s].ctx.get(), {&next[s], 1}, {&root, 1}});
    }
    ASSERT_TRUE(pass.Forward(rows).ok());
    for (size_t s = 0; s < cases.size(); ++s) {
      cases[s].ctx->KeepPath(std::vector<int32_t>{0});
      FeedOneByOne(*fresh[s], {next[s]});
      ExpectBitwiseEqual(
          cases[s].ctx->logits(0), fresh[s]->logits(0), n_vocab,
          what + " decoding step " + std::to_string(step) + ", sequence " + std::to_string(s));
      next[s] = Argmax(cases[s].ctx->logits(0), n_vocab);
    }
  }
}

}  // namespace

void CheckBatchEqualsSingle(const Model& model, int n_threads, uint64_t seed, int n_passes,
                            int min_prefix, int max_prefix, KvType kv) {
  g_ctx = {std::max(kCtx, max_prefix + 130), kv};
  ThreadPool pool(n_threads);
  BatchPass pass(model, &pool);
  SplitMix64 rng(seed);
  for (int trial = 0; trial < n_passes; ++trial) {
    const std::string what = "pass " + std::to_string(trial);
    std::vector<BatchCase> cases;
    std::vector<SequenceRows> rows;
    const int n_seqs = 2 + static_cast<int>(rng.Below(3));
    for (int s = 0; s < n_seqs; ++s) {
      cases.push_back(RandomBatchCase(model, rng, min_prefix, max_prefix));
    }
    int n_rows = 0;
    for (const BatchCase& b : cases) {
      rows.push_back({b.ctx.get(), b.tokens, b.parents});
      n_rows += static_cast<int>(b.tokens.size());
    }
    ASSERT_TRUE(pass.Forward(rows).ok());
    ASSERT_EQ(pass.n_rows(), n_rows);
    ExpectEachEqualsItsOwnPass(model, cases, what);
    ExpectOrderDoesNotMatter(pass, cases, what);
    ExpectKeepPathThenBatchedDecoding(model, pass, rng, cases, what);
  }
}

}  // namespace goose
