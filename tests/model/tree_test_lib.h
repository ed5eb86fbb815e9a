// Property checks shared by the tiny-model and synthesized-model tests (tree_test_lib.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"
#include "util/rng.h"

namespace goose {

// n token ids drawn uniformly from [0, n_vocab).
std::vector<int32_t> RandomTokens(SplitMix64& rng, int n, int n_vocab);

// memcmp of two logits rows; on mismatch reports the first differing index.
void ExpectBitwiseEqual(const float* a, const float* b, int n, const std::string& what);

// Random trees (up to 128 nodes, several roots) after random committed prefixes of
// min_prefix..max_prefix tokens; each node's logits must equal, bit for bit, its root path
// evaluated one token at a time (depth-first with Truncate, and for some nodes in a brand-new
// Context). The tree runs on `n_threads`, the sequential reference on 1 thread. (Prefixes and
// paths longer than a model's sliding window exercise the window's edge in both parts.) Every
// context has a KV cache of `kv` elements.
void CheckTreesEqualSequential(const Model& model, int n_threads, uint64_t seed, int n_trees,
                               int min_prefix = 1, int max_prefix = 40, KvType kv = KvType::kF16);

// After a tree pass, KeepPath(root path of a random node) and greedy decoding continue with
// the same logits bits as a context that only ever saw that path.
void CheckKeepPathContinuation(const Model& model, int n_threads, uint64_t seed, int n_trials,
                               int min_prefix = 1, int max_prefix = 30);

// Truncate(n) then decoding == a context that only saw the first n tokens.
void CheckTruncateContinuation(const Model& model, int n_threads, uint64_t seed);

// Multi-sequence passes (BatchPass on `n_threads`): 2-4 sequences at different committed
// depths (min_prefix..max_prefix), each a random tree, a prefill chunk (a chain continuing its
// prefix) or one token, scored in one pass; every row's logits must equal, bit for bit, its
// sequence's own Context::Forward (1 thread), and some rows one-token decoding of their root
// path; the same pass with the sequences in reverse order gives the same bits; then each
// sequence keeps a random node's path and a decoding pass of one token per sequence equals
// fresh contexts fed that history one token at a time.
void CheckBatchEqualsSingle(const Model& model, int n_threads, uint64_t seed, int n_passes,
                            int min_prefix = 1, int max_prefix = 40, KvType kv = KvType::kF16);

}  // namespace goose
