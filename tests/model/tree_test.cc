// Tree batches == sequential one-token evaluation, BITWISE; KeepPath and Truncate leave the
// cache exactly as if only the kept tokens had ever been seen.
#include "tree_test_lib.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>

#include "model_test_util.h"
#include "synth/synth.h"

namespace goose {
namespace {

TEST(TreeTest, TinyModelTreeEqualsSequentialOneThread) {
  CheckTreesEqualSequential(TinyModel(), 1, /*seed=*/1, /*n_trees=*/3);
}

TEST(TreeTest, TinyModelTreeEqualsSequentialTwoThreads) {
  CheckTreesEqualSequential(TinyModel(), 2, /*seed=*/2, /*n_trees=*/3);
}

// The f32 cache (--kv-type f32) keeps the same property.
TEST(TreeTest, TinyModelTreeEqualsSequentialF32Cache) {
  CheckTreesEqualSequential(TinyModel(), 2, /*seed=*/7, /*n_trees=*/2, 1, 40, KvType::kF32);
  CheckBatchEqualsSingle(TinyModel(), 2, /*seed=*/8, /*n_passes=*/2, 1, 40, KvType::kF32);
}

// Past the first thousand tokens, with both KV caches: the long committed prefix goes through
// the attention's key tiles many times over, in trees and in multi-sequence passes.
TEST(TreeTest, DeepPrefixesStayBitwiseWithBothCaches) {
  SynthParams p;
  p.dtype = DType::kQ8_0;
  p.vocab_from = TinyModelPath();
  p.n_layer = 2, p.n_embd = 64, p.n_head = 4, p.n_head_kv = 2, p.n_ff = 128;
  p.context_length = 1536;
  const std::string path =
      ::testing::TempDir() + "/goose_deep_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(SynthesizeModel(p, path).ok());
  auto m = Model::Load(path);
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  for (KvType kv : {KvType::kF16, KvType::kF32}) {
    SCOPED_TRACE(KvTypeName(kv));
    CheckTreesEqualSequential(**m, 2, /*seed=*/9, /*n_trees=*/1, 1000, 1200, kv);
    CheckBatchEqualsSingle(**m, 2, /*seed=*/10, /*n_passes=*/1, 1000, 1200, kv);
  }
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
