// Tree batches == sequential one-token evaluation, BITWISE, on the qwen3, gemma2, gemma3 and phi3
// reference models: Q/K head norms, sandwich norms, GELU, soft-capping, fused tensors, and the
// 64-token sliding window of the gemmas, with committed prefixes and root paths both shorter
// and longer than the window (a node's window counts from its own position along its own path).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "model/model.h"
#include "model_test_util.h"
#include "tree_test_lib.h"

namespace goose {
namespace {

const Model& RefModel(const std::string& arch) {
  static std::map<std::string, std::unique_ptr<Model>> cache;
  std::unique_ptr<Model>& slot = cache[arch];
  if (!slot) {
    auto m = Model::Load(SharedPath("reference/archs/ref-" + arch + ".gguf"));
    if (!m.ok()) {
      ADD_FAILURE() << m.status().message();
      std::abort();
    }
    slot = std::move(m).value();
  }
  return *slot;
}

class ArchTreeTest : public testing::TestWithParam<const char*> {};

TEST_P(ArchTreeTest, TreeEqualsSequentialShortPrefixes) {
  const Model& m = RefModel(GetParam());
  CheckTreesEqualSequential(m, 1, /*seed=*/31, /*n_trees=*/3);
  CheckTreesEqualSequential(m, 2, /*seed=*/32, /*n_trees=*/2);
}

// Prefixes of 50..150 tokens: the window's edge falls inside the committed prefix for every
// node, and deep paths (up to 128 nodes) push it past the root too.
TEST_P(ArchTreeTest, TreeEqualsSequentialPrefixesLongerThanTheWindow) {
  const Model& m = RefModel(GetParam());
  CheckTreesEqualSequential(m, 1, /*seed=*/33, /*n_trees=*/3, 50, 150);
  CheckTreesEqualSequential(m, 2, /*seed=*/34, /*n_trees=*/2, 60, 150);
}

// A prefill longer than the window, on 2 threads: a chain reads its ancestors as one run of the
// cache (attention.h), and each row's window edge moves with it.
TEST_P(ArchTreeTest, ChainLongerThanTheWindowEqualsTokenByToken) {
  const Model& m = RefModel(GetParam());
  const int n_vocab = m.config().n_vocab;
  SplitMix64 rng(40);
  const std::vector<int32_t> tokens = RandomTokens(rng, 150, n_vocab);
  ThreadPool pool(2);
  Context chain(m, 256, &pool), single(m, 256, nullptr);
  ASSERT_TRUE(chain.ForwardChain(tokens).ok());
  for (size_t i = 0; i < tokens.size(); ++i) {
    ASSERT_TRUE(single.ForwardChain({&tokens[i], 1}).ok());
    single.KeepAll();
    ExpectBitwiseEqual(chain.logits(static_cast<int>(i)), single.logits(0), n_vocab,
                       "chain row " + std::to_string(i));
  }
}

TEST_P(ArchTreeTest, KeepPathAndTruncateContinueBitwise) {
  const Model& m = RefModel(GetParam());
  CheckKeepPathContinuation(m, 2, /*seed=*/35, /*n_trials=*/3);
  CheckKeepPathContinuation(m, 1, /*seed=*/36, /*n_trials=*/3, 60, 140);
  CheckTruncateContinuation(m, 2, /*seed=*/37);
}

// Several sequences in one pass, with committed depths on both sides of the 64-token window.
TEST_P(ArchTreeTest, BatchOfSequencesEqualsEachOnItsOwn) {
  const Model& m = RefModel(GetParam());
  CheckBatchEqualsSingle(m, 1, /*seed=*/38, /*n_passes=*/1, 1, 120);
  CheckBatchEqualsSingle(m, 2, /*seed=*/39, /*n_passes=*/2, 30, 150);
}

INSTANTIATE_TEST_SUITE_P(Archs, ArchTreeTest, testing::Values("qwen3", "gemma2", "gemma3", "phi3"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace goose
