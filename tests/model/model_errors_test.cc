// Loading and Forward errors: every bad input is a Status naming the file and key/tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model_test_util.h"
#include "util/fp16.h"

namespace goose {
namespace {

// Substring check with the whole message in the failure output (gmock is not linked).
#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' does not contain '" << (needle) << "'"

// What to change when copying the tiny model: metadata edits, and per tensor a callback that
// may rename/reshape/retype it (return false to drop it).
struct Edit {
  std::function<void(GgufWriter&)> metadata = {};
  std::vector<std::string> drop_keys = {};
  std::function<bool(std::string& name, std::vector<int64_t>& dims, DType& dtype,
                     std::vector<uint8_t>& data)>
      tensor = {};
  std::function<void(GgufWriter&)> add_tensors = {};  // extra tensors after the copied ones
};

std::string WriteVariant(const std::string& name, const Edit& edit) {
  auto src = GgufFile::Open(TinyModelPath());
  EXPECT_TRUE(src.ok());
  GgufWriter w;
  for (const auto& [key, value] : (*src)->metadata()) {
    if (std::find(edit.drop_keys.begin(), edit.drop_keys.end(), key) == edit.drop_keys.end()) {
      w.Set(key, value);
    }
  }
  if (edit.metadata) edit.metadata(w);
  for (const GgufTensorInfo& t : (*src)->tensors()) {
    std::string tname = t.name;
    std::vector<int64_t> dims = t.dims;
    DType dtype = t.dtype;
    std::vector<uint8_t> data(t.data, t.data + t.n_bytes);
    if (edit.tensor && !edit.tensor(tname, dims, dtype, data)) continue;
    w.AddTensor(tname, dims, dtype, std::move(data));
  }
  if (edit.add_tensors) edit.add_tensors(w);
  // Per-process names: ctest runs tests of this binary concurrently, and rewriting a file that
  // another process has mapped would kill it with SIGBUS.
  const std::string path =
      ::testing::TempDir() + "/goose_model_" + name + "_" + std::to_string(::getpid()) + ".gguf";
  EXPECT_TRUE(w.Write(path).ok());
  return path;
}

std::string LoadError(const std::string& path) {
  auto m = Model::Load(path);
  EXPECT_FALSE(m.ok()) << path << " loaded but should not";
  if (path.rfind(::testing::TempDir(), 0) == 0) std::remove(path.c_str());
  return m.ok() ? "" : m.status().message();
}

TEST(ModelErrorsTest, MissingFile) {
  const std::string msg = LoadError("/nonexistent/dir/model.gguf");
  EXPECT_CONTAINS(msg, "/nonexistent/dir/model.gguf");
}

TEST(ModelErrorsTest, UnsupportedArchitecture) {
  const std::string path = WriteVariant("arch", {.metadata = [](GgufWriter& w) {
                                          w.Set("general.architecture", GgufValue::String("mamba"));
                                        }});
  const std::string msg = LoadError(path);
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "general.architecture");
  EXPECT_CONTAINS(msg, "unsupported architecture");
  EXPECT_CONTAINS(msg, "mamba");
  // Quoted escaped (util/escape.h).
  const std::string raw = WriteVariant("arch_raw", {.metadata = [](GgufWriter& w) {
                                         w.Set("general.architecture", GgufValue::String("mam\xff"
                                                                                         "ba\n"));
                                       }});
  EXPECT_CONTAINS(LoadError(raw), "'mam\\xFFba\\n'");
}

TEST(ModelErrorsTest, MissingKey) {
  const std::string path = WriteVariant("nokey", {.drop_keys = {"llama.block_count"}});
  const std::string msg = LoadError(path);
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "llama.block_count");
  EXPECT_CONTAINS(msg, "missing");
}

TEST(ModelErrorsTest, InvalidKeys) {
  struct Case {
    std::string key;
    GgufValue value;
    std::string expect;
  };
  const Case cases[] = {
      {"llama.attention.head_count_kv", GgufValue::U32(3), "does not divide"},
      {"llama.embedding_length", GgufValue::U32(0), "invalid value 0"},
      {"llama.embedding_length", GgufValue::String("64"), "expected an integer"},
      {"llama.rope.dimension_count", GgufValue::U32(9), "must be even"},
      {"llama.rope.scaling.type", GgufValue::String("yarn"), "unsupported"},
      {"llama.attention.layer_norm_rms_epsilon", GgufValue::F32(-1.0f), "invalid value"},
  };
  int k = 0;
  for (const Case& c : cases) {
    const std::string path =
        WriteVariant("badkey" + std::to_string(k++),
                     {.metadata = [&](GgufWriter& w) { w.Set(c.key, c.value); }});
    const std::string msg = LoadError(path);
    EXPECT_CONTAINS(msg, c.key);
    EXPECT_CONTAINS(msg, c.expect);
  }
}

TEST(ModelErrorsTest, AbsurdBlockCountFailsAtTheFirstMissingLayer) {
  // 2^24 layers claimed, 5 in the file: the error names blk.5, and Load never allocated 2^24
  // layers' weights first (fuzz/regressions/gguf_model/huge-block-count).
  const std::string path = WriteVariant("blocks", {.metadata = [](GgufWriter& w) {
                                          w.Set("llama.block_count", GgufValue::U32(1u << 24));
                                        }});
  const std::string msg = LoadError(path);
  EXPECT_CONTAINS(msg, "blk.5.attn_norm.weight");
  EXPECT_CONTAINS(msg, "missing");
}

TEST(ModelErrorsTest, MissingTensor) {
  const std::string path =
      WriteVariant("notensor", {.tensor = [](std::string& name, auto&, auto&, auto&) {
                     return name != "blk.2.ffn_up.weight";
                   }});
  const std::string msg = LoadError(path);
  EXPECT_CONTAINS(msg, path);
  EXPECT_CONTAINS(msg, "blk.2.ffn_up.weight");
  EXPECT_CONTAINS(msg, "missing");
}

TEST(ModelErrorsTest, WrongShape) {
  const std::string path =
      WriteVariant("shape", {.tensor = [](std::string& name, std::vector<int64_t>& dims, DType&,
                                          std::vector<uint8_t>& data) {
                     if (name == "blk.1.attn_k.weight") {  // [64, 32] -> [64, 64]
                       dims = {64, 64};
                       data.assign(64 * 64 * 4, 0);
                     }
                     return true;
                   }});
  const std::string msg = LoadError(path);
  EXPECT_CONTAINS(msg, "blk.1.attn_k.weight");
  EXPECT_CONTAINS(msg, "shape [64, 64], expected [64, 32]");
}

TEST(ModelErrorsTest, UnsupportedWeightDType) {
  const std::string path =
      WriteVariant("dtype", {.tensor = [](std::string& name, std::vector<int64_t>& dims,
                                          DType& dtype, std::vector<uint8_t>& data) {
                     if (name == "blk.0.ffn_gate.weight") {
                       dtype = DType::kQ4_1;  // a GGML type goose does not compute with
                       data.assign(RowBytes(DType::kQ4_1, dims[0]) * dims[1], 0);
                     }
                     return true;
                   }});
  const std::string msg = LoadError(path);
  EXPECT_CONTAINS(msg, "blk.0.ffn_gate.weight");
  EXPECT_CONTAINS(msg, "q4_1");
}

TEST(ModelErrorsTest, TiedOutputAndF16NormsLoad) {
  // Without output.weight the head is tied to token_embd; the tiny model's output.weight is a
  // copy of token_embd, so the logits must be bit-identical. Norms stored as f16 load as f32.
  const std::string path =
      WriteVariant("tied", {.tensor = [](std::string& name, std::vector<int64_t>&, DType& dtype,
                                         std::vector<uint8_t>& data) {
                     if (name == "output.weight") return false;
                     if (name == "blk.0.attn_norm.weight") {
                       std::vector<uint8_t> half(data.size() / 2);
                       for (size_t i = 0; i < data.size() / 4; ++i) {
                         float f;
                         std::memcpy(&f, data.data() + 4 * i, 4);
                         const uint16_t h = F32ToF16(f);
                         std::memcpy(half.data() + 2 * i, &h, 2);
                       }
                       data = std::move(half);
                       dtype = DType::kF16;
                     }
                     return true;
                   }});
  auto tied = Model::Load(path);
  std::remove(path.c_str());  // the mapping stays valid
  ASSERT_TRUE(tied.ok()) << tied.status().message();
  EXPECT_TRUE((*tied)->config().tied_output);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  Context a(**tied, 64, nullptr), b(TinyModel(), 64, nullptr);
  ASSERT_TRUE(a.ForwardChain(prompt).ok());
  ASSERT_TRUE(b.ForwardChain(prompt).ok());
  const int n_vocab = TinyModel().config().n_vocab;
  for (int v = 0; v < n_vocab; ++v) EXPECT_NEAR(a.logits(4)[v], b.logits(4)[v], 2e-2);
}

std::vector<uint8_t> F32Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

TEST(ModelErrorsTest, UnusedTensorsAreErrorsNamingTheFirst) {
  struct Case {
    std::string tensor;
    int64_t n;
    std::string expect;
  };
  const Case cases[] = {
      {"blk.0.attn_output.bias", 64, "unsupported tensor 'blk.0.attn_output.bias'"},
      {"blk.4.ffn_down.bias", 64, "unsupported tensor 'blk.4.ffn_down.bias'"},
      {"blk.5.attn_norm.weight", 64, "unsupported tensor 'blk.5.attn_norm.weight'"},  // 6th layer
  };
  int k = 0;
  for (const Case& c : cases) {
    const std::string path = WriteVariant(
        "unused" + std::to_string(k++), {.add_tensors = [&](GgufWriter& w) {
          w.AddTensor(c.tensor, {c.n}, DType::kF32, F32Bytes(std::vector<float>(c.n, 1.0f)));
          w.AddTensor("zz_second_unused.weight", {4}, DType::kF32, F32Bytes({1, 2, 3, 4}));
        }});
    const std::string msg = LoadError(path);
    EXPECT_CONTAINS(msg, path);
    EXPECT_CONTAINS(msg, c.expect);
    EXPECT_EQ(msg.find("zz_second_unused"), std::string::npos) << msg;
  }
}

// Llama 3.1+ rope_freqs.weight divides each rotation frequency: factors of 1 leave the logits
// bitwise unchanged, others change them, a wrong length is a shape error.
TEST(ModelErrorsTest, RopeFreqsScaleTheRotation) {
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  const int n_vocab = TinyModel().config().n_vocab;
  const int half = TinyModel().config().n_rot / 2;
  Context plain(TinyModel(), 64, nullptr);
  ASSERT_TRUE(plain.ForwardChain(prompt).ok());
  auto with_factors = [&](const std::string& name, std::vector<float> f) {
    return WriteVariant(name, {.add_tensors = [=](GgufWriter& w) {
                          w.AddTensor("rope_freqs.weight", {static_cast<int64_t>(f.size())},
                                      DType::kF32, F32Bytes(f));
                        }});
  };
  for (float last : {1.0f, 8.0f}) {
    std::vector<float> f(half, 1.0f);
    f.back() = last;
    const std::string path = with_factors("ropefreqs" + std::to_string(last > 1), f);
    auto m = Model::Load(path);
    std::remove(path.c_str());
    ASSERT_TRUE(m.ok()) << m.status().message();
    ASSERT_NE((*m)->rope_freqs(), nullptr);
    Context ctx(**m, 64, nullptr);
    ASSERT_TRUE(ctx.ForwardChain(prompt).ok());
    int n_diff = 0;
    for (int v = 0; v < n_vocab; ++v) n_diff += ctx.logits(4)[v] != plain.logits(4)[v];
    if (last == 1.0f) {
      EXPECT_EQ(n_diff, 0);
    } else {
      EXPECT_GT(n_diff, n_vocab / 2);
    }
  }
  const std::string bad = with_factors("ropefreqs_bad", std::vector<float>(half + 1, 1.0f));
  const std::string msg = LoadError(bad);
  EXPECT_CONTAINS(msg, "rope_freqs.weight");
  EXPECT_CONTAINS(msg, "has shape");
}

// llama.cpp's llama architecture may carry Q/K/V biases; they must be applied, not dropped.
std::string WriteWithQkvBiases(const std::string& name, float scale, bool only_q = false) {
  return WriteVariant(
      name, {.add_tensors = [=](GgufWriter& w) {
        const LlamaConfig& c = TinyModel().config();
        const int64_t q_dim = c.n_head * c.head_dim, kv_dim = c.n_head_kv * c.head_dim;
        for (int l = 0; l < c.n_layer; ++l) {
          const std::string p = "blk." + std::to_string(l) + ".";
          const std::pair<const char*, int64_t> biases[] = {
              {"attn_q.bias", q_dim}, {"attn_k.bias", kv_dim}, {"attn_v.bias", kv_dim}};
          for (const auto& [suffix, n] : biases) {
            if (only_q && std::string(suffix) != "attn_q.bias") continue;
            std::vector<float> b(n);
            for (int64_t i = 0; i < n; ++i) b[i] = scale * std::sin(0.7f * i + l);
            w.AddTensor(p + suffix, {n}, DType::kF32, F32Bytes(b));
          }
        }
      }});
}

TEST(ModelErrorsTest, LlamaQkvBiasesLoadAndChangeTheLogits) {
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  const int n_vocab = TinyModel().config().n_vocab;
  Context plain(TinyModel(), 64, nullptr);
  ASSERT_TRUE(plain.ForwardChain(prompt).ok());
  for (float scale : {0.0f, 0.5f}) {
    const std::string path = WriteWithQkvBiases("bias" + std::to_string(scale > 0), scale);
    auto m = Model::Load(path);
    std::remove(path.c_str());
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_TRUE((*m)->config().has_qkv_bias);
    for (const LayerWeights& L : (*m)->layers()) {
      ASSERT_NE(L.bq, nullptr);
      ASSERT_NE(L.bk, nullptr);
      ASSERT_NE(L.bv, nullptr);
    }
    Context ctx(**m, 64, nullptr);
    ASSERT_TRUE(ctx.ForwardChain(prompt).ok());
    int n_diff = 0;
    for (int v = 0; v < n_vocab; ++v) n_diff += ctx.logits(4)[v] != plain.logits(4)[v];
    if (scale == 0.0f) {
      EXPECT_EQ(n_diff, 0) << "zero biases must not change the logits";
    } else {
      EXPECT_GT(n_diff, n_vocab / 2) << "biases were not applied";
    }
  }
  // Q bias without K and V: the missing one is named.
  const std::string msg = LoadError(WriteWithQkvBiases("qbias", 0.5f, /*only_q=*/true));
  EXPECT_CONTAINS(msg, "blk.0.attn_k.bias' is missing");
}

TEST(ModelErrorsTest, KvCacheBytesFollowsTheCacheLayout) {
  const LlamaConfig& c = TinyModel().config();  // 5 layers, 4 KV heads of 8
  EXPECT_EQ(ContextSize(c, 0), 512);
  EXPECT_EQ(ContextSize(c, 100), 100);
  EXPECT_EQ(KvCacheBytes(c, 100), 2u * 5 * 100 * 32 * 2);  // f16 unless told
  EXPECT_EQ(KvCacheBytes(c, 100, KvType::kF32), 2u * 5 * 100 * 32 * 4);
  EXPECT_EQ(KvCacheBytes(c, 0), 2u * 5 * 512 * 32 * 2);
  EXPECT_EQ(KvCacheBytes(c, 1 << 20, KvType::kF32), 2ull * 5 * (1 << 20) * 32 * 4);  // no overflow
  EXPECT_EQ(ForwardScratchBytes(c, 0), 0u);
  // At least the logits and the two FFN rows per token.
  EXPECT_GE(ForwardScratchBytes(c, 10), 10u * (512 + 2 * 172) * 4);
  EXPECT_EQ(ForwardScratchBytes(c, 20), 2 * ForwardScratchBytes(c, 10));
}

TEST(ModelErrorsTest, BadBatchesReturnStatus) {
  const Model& m = TinyModel();
  Context ctx(m, 8, nullptr);
  EXPECT_EQ(ctx.n_ctx(), 8);
  const std::vector<int32_t> nine(9, 5);
  Status s = ctx.ForwardChain(nine);
  EXPECT_FALSE(s.ok());
  EXPECT_CONTAINS(s.message(), "n_ctx 8");
  EXPECT_FALSE(ctx.ForwardChain({}).ok());
  const std::vector<int32_t> tokens = {1, 2, 3};
  EXPECT_CONTAINS(ctx.Forward(tokens, std::vector<int32_t>{-1, 0, 2}).message(), "parents[2] = 2");
  EXPECT_CONTAINS(ctx.Forward(tokens, std::vector<int32_t>{-1, -2, 0}).message(),
                  "parents[1] = -2");
  EXPECT_FALSE(ctx.Forward(tokens, std::vector<int32_t>{-1, 0}).ok());
  EXPECT_CONTAINS(ctx.Forward(std::vector<int32_t>{1, 512}, std::vector<int32_t>{-1, 0}).message(),
                  "outside the vocabulary");
  // Fill the context exactly, then one more token does not fit.
  const std::vector<int32_t> eight(8, 5);
  ASSERT_TRUE(ctx.ForwardChain(eight).ok());
  ctx.KeepAll();
  EXPECT_EQ(ctx.n_past(), 8);
  const int32_t one = 5;
  EXPECT_FALSE(ctx.ForwardChain({&one, 1}).ok());
  ctx.Truncate(7);
  EXPECT_TRUE(ctx.ForwardChain({&one, 1}).ok());
}

TEST(ModelErrorsTest, DefaultContextSize) {
  Context ctx(TinyModel(), 0, nullptr);
  EXPECT_EQ(ctx.n_ctx(), 512);  // min(context_length 512, 4096)
}

}  // namespace
}  // namespace goose
