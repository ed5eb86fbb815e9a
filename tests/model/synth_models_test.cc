// The tree == sequential property on small synthesized llama (GQA) and qwen2 (biases, NeoX
// RoPE) models in every weight dtype, and on qwen3, gemma2, gemma3 and phi3 models (with an
// 8-token sliding window and a strong attention soft-cap, so that trees cross the window's
// edge and the cap bends every score) in several, plus basic sanity of their logits.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "model_test_util.h"
#include "ops/cpu_features.h"
#include "ops/qmatmul.h"
#include "synth/synth.h"
#include "tree_test_lib.h"

namespace goose {
namespace {

struct SynthCase {
  std::string arch;
  DType dtype;
};

std::string CaseName(const SynthCase& c) {
  return c.arch + "_" + std::string(GetDTypeInfo(c.dtype).name);
}

// Synthesized and loaded once per (arch, dtype) for the whole binary.
const Model& SynthModel(const SynthCase& c) {
  static std::map<std::string, std::unique_ptr<Model>> cache;
  std::unique_ptr<Model>& slot = cache[CaseName(c)];
  if (!slot) {
    SynthParams p;
    p.arch = c.arch;
    p.dtype = c.dtype;
    p.vocab_from = TinyModelPath();
    p.n_layer = 2;
    p.n_vocab = 640;
    p.context_length = 512;
    p.seed = 7;
    const bool k_quant = GetDTypeInfo(c.dtype).block_size == 256;
    const bool new_arch = c.arch != "llama" && c.arch != "qwen2";
    if (new_arch) {  // windows of 8 on every other layer, a cap of 5 (gemma2)
      p.sliding_window = 8;
      p.swa_pattern = 2;
      p.attn_softcap = 5.0f;
      p.final_softcap = 10.0f;
      p.rope_freq_base_swa = 30000.0f;
      p.rope_orig_context = 64;  // phi3: LongRoPE, the long factors (contexts of 320)
    }
    if (k_quant) {  // K-quants need rows that are multiples of 256; head_dim stays 16
      p.n_embd = 256, p.n_head = 16, p.n_head_kv = 2, p.n_ff = 256;
      if (c.arch == "qwen2") {
        p.rope_freq_base = 1000000.0f;
        p.tied_output = true;
      }
    } else if (new_arch) {  // GQA 4:2, head_dim 32 (Q wider than n_embd, as Qwen3 and Gemma)
      p.n_embd = 64, p.n_head = 4, p.n_head_kv = 2, p.head_dim = c.arch == "phi3" ? 0 : 32;
      p.n_ff = 128;
      p.tied_output = c.arch != "phi3";
    } else if (c.arch == "llama") {  // GQA 4:2, head_dim 16
      p.n_embd = 64, p.n_head = 4, p.n_head_kv = 2, p.n_ff = 192;
    } else {  // qwen2: GQA 6:2, head_dim 16, rope base as Qwen
      p.n_embd = 96, p.n_head = 6, p.n_head_kv = 2, p.n_ff = 160;
      p.rope_freq_base = 1000000.0f;
      p.tied_output = true;
    }
    // Per-process name, unlinked once mapped: several test binaries (other build dirs, the
    // sanitizer build) run at once, and rewriting a file another process has mapped kills that
    // process with SIGBUS.
    const std::string path = ::testing::TempDir() + "/goose_synth_" + CaseName(c) + "_" +
                             std::to_string(::getpid()) + ".gguf";
    const Status s = SynthesizeModel(p, path);
    EXPECT_TRUE(s.ok()) << s.message();
    auto m = Model::Load(path);
    EXPECT_TRUE(m.ok()) << m.status().message();
    std::remove(path.c_str());
    if (m.ok()) slot = std::move(m).value();
  }
  return *slot;
}

class SynthModelTest : public ::testing::TestWithParam<SynthCase> {};

TEST_P(SynthModelTest, ConfigMatchesArchitecture) {
  const LlamaConfig& c = SynthModel(GetParam()).config();
  const std::string& arch = GetParam().arch;
  const bool k_quant = GetDTypeInfo(GetParam().dtype).block_size == 256;
  const bool new_arch = arch != "llama" && arch != "qwen2";
  EXPECT_EQ(c.arch, arch);
  EXPECT_EQ(c.n_vocab, 640);
  EXPECT_EQ(c.head_dim, new_arch && !k_quant && arch != "phi3" ? 32 : 16);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.rope_style, arch == "llama" ? RopeStyle::kNormal : RopeStyle::kNeox);
  EXPECT_EQ(c.has_qkv_bias, arch == "qwen2");
  EXPECT_EQ(c.tied_output,
            arch == "qwen2" || arch == "gemma2" || (new_arch && !k_quant && arch != "phi3"));
  EXPECT_EQ(c.n_swa, arch == "gemma2" || arch == "gemma3" ? 8 : 0);
  EXPECT_EQ(SynthModel(GetParam()).token_embd().dtype, GetParam().dtype);
}

TEST_P(SynthModelTest, LogitsAreFiniteAndNotConstant) {
  const Model& m = SynthModel(GetParam());
  Context ctx(m, 64, nullptr);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  ASSERT_TRUE(ctx.ForwardChain(prompt).ok());
  for (int i = 0; i < ctx.n_batch(); ++i) {
    const float* l = ctx.logits(i);
    float lo = l[0], hi = l[0];
    for (int v = 0; v < m.config().n_vocab; ++v) {
      ASSERT_TRUE(std::isfinite(l[v])) << "row " << i << " id " << v;
      lo = std::min(lo, l[v]);
      hi = std::max(hi, l[v]);
    }
    EXPECT_GT(hi - lo, 1.0f) << "row " << i;
  }
  // Different contexts give different distributions.
  EXPECT_NE(std::memcmp(ctx.logits(3), ctx.logits(4), m.config().n_vocab * 4), 0);
}

TEST_P(SynthModelTest, TreeEqualsSequentialBitwise) {
  const Model& m = SynthModel(GetParam());
  CheckTreesEqualSequential(m, 1, /*seed=*/11, /*n_trees=*/2);
  CheckTreesEqualSequential(m, 2, /*seed=*/12, /*n_trees=*/1);
  // An odd thread count: chunks of row tiles end at odd places (the sequential side's single
  // tokens run the direct few-token kernels, the tree the tile kernels).
  CheckTreesEqualSequential(m, 3, /*seed=*/15, /*n_trees=*/1);
}

// Every narrower kernel path the CPU has, forced in turn (both sides of the comparison run on
// the forced level); the widest one is the default that the other tests use.
TEST_P(SynthModelTest, TreeEqualsSequentialOnEveryCpuLevel) {
  const Model& m = SynthModel(GetParam());
  for (int level = 0; level < static_cast<int>(DetectCpuLevel()); ++level) {
    SetCpuLevelCap(static_cast<CpuLevel>(level));
    CheckTreesEqualSequential(m, 2, /*seed=*/20 + level, /*n_trees=*/1);
  }
  SetCpuLevelCap(kMaxCpuLevel);
}

// Several sequences at different depths (beyond the gemmas' 8-token window too) in one pass.
TEST_P(SynthModelTest, BatchOfSequencesEqualsEachOnItsOwn) {
  const Model& m = SynthModel(GetParam());
  CheckBatchEqualsSingle(m, 1, /*seed=*/16, /*n_passes=*/1);
  CheckBatchEqualsSingle(m, 2, /*seed=*/17, /*n_passes=*/1);
}

TEST_P(SynthModelTest, KeepPathAndTruncateContinueBitwise) {
  const Model& m = SynthModel(GetParam());
  CheckKeepPathContinuation(m, 2, /*seed=*/13, /*n_trials=*/2);
  CheckTruncateContinuation(m, 1, /*seed=*/14);
}

// Q8_0 and Q4_K weights stored as the AVX-512 kernel's tiles (what Model::Load makes on a
// VNNI CPU) give the logits of the same file loaded as rows, for a prompt pass, single tokens
// and a tree; and every matrix of a tiled dtype is tiled (token_embd only when tied to the
// output).
TEST(SynthModelLayoutTest, TilesGiveTheLogitsOfRows) {
  if (DetectCpuLevel() < CpuLevel::kAvx512 ||
      IntKernelFor(CpuLevel::kAvx512) != IntKernel::kAvx512Vnni) {
    GTEST_SKIP() << "no AVX-512 VNNI: weights are never tiled here";
  }
  for (const DType dtype : {DType::kQ8_0, DType::kQ4_K})
    for (const char* arch : {"llama", "qwen2", "phi3", "gemma3"}) {
      SynthParams p;
      p.arch = arch;
      p.dtype = dtype;
      p.vocab_from = TinyModelPath();
      p.n_layer = 2, p.n_vocab = 640, p.context_length = 512, p.seed = 8;
      if (dtype == DType::kQ8_0) {
        p.n_embd = 96, p.n_head = 6, p.n_head_kv = 2, p.n_ff = 160;  // 160 rows: a partial tile
      } else {
        // Q4_K needs rows of 256: n_ff 288 gives down Q5_0 rows (not tiled), 648 words a partial
        // tile of the output matrix.
        p.n_embd = 256, p.n_head = 8, p.n_head_kv = 2, p.n_ff = 288, p.n_vocab = 648;
      }
      p.tied_output = std::string(arch) == "qwen2";
      p.sliding_window = 4;  // (phi3: a key llama.cpp ignores; gemma3: windows of 4)
      const std::string path = ::testing::TempDir() + "/goose_synth_tiles_" + arch + "_" +
                               std::string(GetDTypeInfo(dtype).name) + "_" +
                               std::to_string(::getpid()) + ".gguf";
      const Status made = SynthesizeModel(p, path);
      ASSERT_TRUE(made.ok()) << made.message();
      SetCpuLevelCap(CpuLevel::kAvx512);  // (on an AMX CPU too: the level that tiles)
      auto tiled = Model::Load(path);
      SetCpuLevelCap(CpuLevel::kAvx2);
      auto rows = Model::Load(path);
      SetCpuLevelCap(kMaxCpuLevel);
      std::remove(path.c_str());
      ASSERT_TRUE(tiled.ok() && rows.ok());
      const Model& mt = **tiled;
      const Model& mr = **rows;
      EXPECT_EQ(mt.output().layout, WeightLayout::kTiles);
      // (A tied head's embedding reads the output's tiles; an untied one keeps its rows.)
      EXPECT_EQ(mt.token_embd().layout, p.tied_output ? WeightLayout::kTiles : WeightLayout::kRows);
      for (const LayerWeights& L : mt.layers()) {
        EXPECT_EQ(L.wq.dtype, dtype);
        for (const WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
          EXPECT_EQ(w->layout, HasTiles(w->dtype) ? WeightLayout::kTiles : WeightLayout::kRows);
        }
      }
      EXPECT_EQ(mr.output().layout, WeightLayout::kRows);
      ThreadPool pool(2);
      Context ct(mt, 0, &pool), cr(mr, 0, &pool);
      const int n_vocab = mt.config().n_vocab;
      auto same = [&](const char* what) {
        ASSERT_EQ(ct.n_batch(), cr.n_batch());
        for (int i = 0; i < ct.n_batch(); ++i) {
          ASSERT_EQ(std::memcmp(ct.logits(i), cr.logits(i), n_vocab * 4), 0)
              << arch << " " << what << " row " << i;
        }
      };
      const std::vector<int32_t> prompt = {1, 5,  9,  200, 3, 77, 14, 600, 2, 31,
                                           8, 99, 45, 6,   7, 10, 11, 300, 12};
      for (Context* c : {&ct, &cr}) ASSERT_TRUE(c->ForwardChain(prompt).ok());
      same("prompt");
      for (Context* c : {&ct, &cr}) c->KeepAll();
      const std::vector<int32_t> one = {42};
      for (Context* c : {&ct, &cr}) ASSERT_TRUE(c->ForwardChain(one).ok());
      same("one token");
      for (Context* c : {&ct, &cr}) c->KeepAll();
      const std::vector<int32_t> tree = {4, 5, 6, 7, 8, 9, 10, 11, 12};
      const std::vector<int32_t> parents = {-1, 0, 0, 1, 1, 2, 3, 3, 7};
      for (Context* c : {&ct, &cr}) ASSERT_TRUE(c->Forward(tree, parents).ok());
      same("tree");
    }
}

INSTANTIATE_TEST_SUITE_P(
    AllDTypes, SynthModelTest,
    ::testing::Values(SynthCase{"llama", DType::kF32}, SynthCase{"llama", DType::kF16},
                      SynthCase{"llama", DType::kBF16}, SynthCase{"llama", DType::kQ8_0},
                      SynthCase{"qwen2", DType::kF32}, SynthCase{"qwen2", DType::kF16},
                      SynthCase{"qwen2", DType::kBF16}, SynthCase{"qwen2", DType::kQ8_0},
                      SynthCase{"llama", DType::kQ4_0}, SynthCase{"qwen2", DType::kQ4_0},
                      SynthCase{"llama", DType::kQ4_K}, SynthCase{"qwen2", DType::kQ4_K},
                      SynthCase{"llama", DType::kQ5_K}, SynthCase{"qwen2", DType::kQ6_K},
                      SynthCase{"llama", DType::kQ5_0}, SynthCase{"llama", DType::kQ6_K},
                      SynthCase{"qwen2", DType::kQ5_K}, SynthCase{"qwen2", DType::kQ5_0},
                      SynthCase{"qwen3", DType::kF16}, SynthCase{"qwen3", DType::kQ8_0},
                      SynthCase{"gemma2", DType::kF32}, SynthCase{"gemma2", DType::kQ8_0},
                      SynthCase{"gemma2", DType::kQ4_K}, SynthCase{"gemma3", DType::kBF16},
                      SynthCase{"gemma3", DType::kQ8_0}, SynthCase{"gemma3", DType::kQ4_0},
                      SynthCase{"phi3", DType::kF32}, SynthCase{"phi3", DType::kQ8_0},
                      SynthCase{"phi3", DType::kQ4_K}),
    [](const ::testing::TestParamInfo<SynthCase>& info) { return CaseName(info.param); });

}  // namespace
}  // namespace goose
