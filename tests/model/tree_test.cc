// Tree batches == sequential one-token evaluation, BITWISE; KeepPath and Truncate leave the
// cache exactly as if only the kept tokens had ever been seen.
#include "tree_test_lib.h"

#include <gtest/gtest.h>

#include "model_test_util.h"

namespace goose {
namespace {

TEST(TreeTest, TinyModelTreeEqualsSequentialOneThread) {
  CheckTreesEqualSequential(TinyModel(), 1, /*seed=*/1, /*n_trees=*/3);
}

TEST(TreeTest, TinyModelTreeEqualsSequentialTwoThreads) {
  CheckTreesEqualSequential(TinyModel(), 2, /*seed=*/2, /*n_trees=*/3);
}

TEST(TreeTest, TinyModelKeepPathThenDecodeEqualsFreshContext) {
  CheckKeepPathContinuation(TinyModel(), 1, /*seed=*/3, /*n_trials=*/4);
  CheckKeepPathContinuation(TinyModel(), 2, /*seed=*/4, /*n_trials=*/2);
}

TEST(TreeTest, TinyModelTruncateThenDecodeEqualsFreshContext) {
  CheckTruncateContinuation(TinyModel(), 1, /*seed=*/5);
  CheckTruncateContinuation(TinyModel(), 2, /*seed=*/6);
}

TEST(TreeTest, ChainBatchEqualsTokenByToken) {
  // The prefill shape: one chain batch vs feeding the same tokens one by one.
  const Model& m = TinyModel();
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 300, 17, 42};
  Context batch(m, 64, nullptr), single(m, 64, nullptr);
  ASSERT_TRUE(batch.ForwardChain(tokens).ok());
  for (size_t i = 0; i < tokens.size(); ++i) {
    ASSERT_TRUE(single.ForwardChain({&tokens[i], 1}).ok());
    single.KeepAll();
    ExpectBitwiseEqual(batch.logits(static_cast<int>(i)), single.logits(0), m.config().n_vocab,
                       "chain row " + std::to_string(i));
  }
}

}  // namespace
}  // namespace goose
