// Bad qwen3 / gemma2 / gemma3 / phi3 files: a missing or mis-shaped tensor or key, a tensor the
// architecture does not use, a key whose meaning goose does not implement - each one Status
// naming the file and the key or tensor. Variants of the reference models, written with the
// GGUF writer into the test's temp dir.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model_test_util.h"

namespace goose {
namespace {

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' does not contain '" << (needle) << "'"

std::string RefPath(const std::string& arch) {
  return SharedPath("reference/archs/ref-" + arch + ".gguf");
}

// A copy of the reference model of `arch` with metadata `set` (a value, or absent: dropped),
// tensor `drop` left out, tensor `reshape` given new dims (zero bytes of its dtype), and
// tensor `add` (a [n] f32 vector) added.
struct Variant {
  std::string arch;
  std::vector<std::pair<std::string, std::optional<GgufValue>>> set = {};
  std::string drop = {};
  std::string reshape = {};
  std::vector<int64_t> dims = {};
  std::string add = {};
  int64_t add_n = 0;
};

std::string Write(const Variant& v, const std::string& label) {
  auto src = GgufFile::Open(RefPath(v.arch));
  EXPECT_TRUE(src.ok());
  GgufWriter w;
  for (const auto& [key, value] : (*src)->metadata()) {
    auto it =
        std::find_if(v.set.begin(), v.set.end(), [&](const auto& s) { return s.first == key; });
    if (it == v.set.end()) w.Set(key, value);
  }
  for (const auto& [key, value] : v.set) {
    if (value) w.Set(key, *value);
  }
  for (const GgufTensorInfo& t : (*src)->tensors()) {
    if (t.name == v.drop) continue;
    if (t.name == v.reshape) {
      int64_t n = 1;
      for (int64_t d : v.dims) n *= d;
      w.AddTensor(t.name, v.dims, t.dtype, std::vector<uint8_t>(static_cast<size_t>(n) * 4, 0));
      continue;
    }
    w.AddTensor(t.name, t.dims, t.dtype, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  if (!v.add.empty()) {
    w.AddTensor(v.add, {v.add_n}, DType::kF32,
                std::vector<uint8_t>(static_cast<size_t>(v.add_n) * 4, 0));
  }
  const std::string path = ::testing::TempDir() + "/goose_arch_" + v.arch + "_" + label + "_" +
                           std::to_string(::getpid()) + ".gguf";
  EXPECT_TRUE(w.Write(path).ok());
  return path;
}

// Load error of the variant (the load must fail), with the file's path checked in it.
std::string LoadError(const Variant& v, const std::string& label) {
  const std::string path = Write(v, label);
  auto m = Model::Load(path);
  std::remove(path.c_str());
  EXPECT_FALSE(m.ok()) << v.arch << " " << label << " loaded but should not";
  if (m.ok()) return "";
  EXPECT_CONTAINS(m.status().message(), path);
  return m.status().message();
}

TEST(ArchErrorsTest, UnmodifiedCopiesLoad) {
  for (const char* arch : {"qwen3", "gemma2", "gemma3", "phi3"}) {
    const std::string path = Write({arch}, "copy");
    auto m = Model::Load(path);
    std::remove(path.c_str());
    EXPECT_TRUE(m.ok()) << arch << ": " << m.status().message();
  }
}

TEST(ArchErrorsTest, MissingTensorIsNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"qwen3", "blk.1.attn_k_norm.weight"},
      {"gemma2", "blk.2.post_ffw_norm.weight"},
      {"gemma2", "blk.0.post_attention_norm.weight"},
      {"gemma3", "blk.3.attn_q_norm.weight"},
      {"gemma3", "blk.1.post_ffw_norm.weight"},
      {"phi3", "blk.3.attn_qkv.weight"},
      {"phi3", "blk.0.ffn_up.weight"},
  };
  for (const auto& [arch, tensor] : cases) {
    const std::string msg = LoadError({.arch = arch, .drop = tensor}, "drop");
    EXPECT_CONTAINS(msg, tensor);
    EXPECT_CONTAINS(msg, "missing");
  }
}

TEST(ArchErrorsTest, MisShapedTensorIsNamedWithBothShapes) {
  struct Case {
    const char* arch;
    const char* tensor;
    std::vector<int64_t> dims;
    const char* expect;
  };
  const Case cases[] = {
      {"qwen3", "blk.0.attn_q_norm.weight", {16}, "shape [16], expected [32]"},
      {"gemma2", "blk.1.post_attention_norm.weight", {64}, "shape [64], expected [128]"},
      {"gemma3", "blk.2.attn_k_norm.weight", {33}, "shape [33], expected [32]"},
      // phi3's ffn_up must hold gate and up: 2 x n_ff rows.
      {"phi3", "blk.1.ffn_up.weight", {128, 256}, "shape [128, 256], expected [128, 512]"},
      {"phi3", "blk.2.attn_qkv.weight", {128, 128}, "shape [128, 128], expected [128, 256]"},
  };
  for (const Case& c : cases) {
    const std::string msg =
        LoadError({.arch = c.arch, .reshape = c.tensor, .dims = c.dims}, "shape");
    EXPECT_CONTAINS(msg, c.tensor);
    EXPECT_CONTAINS(msg, c.expect);
  }
}

// Tensors an architecture does not use would be silently ignored: an error instead.
TEST(ArchErrorsTest, TensorsTheArchitectureDoesNotUseAreErrors) {
  const std::tuple<const char*, const char*, int64_t> cases[] = {
      {"gemma2", "output.weight", 128},   // gemma2's head is always the embedding
      {"phi3", "rope_freqs.weight", 16},  // Llama 3.1's factors; phi3 has its own
      {"qwen3", "blk.0.attn_output.bias", 128},
      {"gemma3", "blk.1.ffn_gate.bias", 256},
      {"qwen3", "blk.0.post_attention_norm.weight", 128},  // gemma's, not qwen3's
      {"phi3", "blk.0.ffn_gate.weight", 128},              // phi3's gate lives in ffn_up
  };
  for (const auto& [arch, tensor, n] : cases) {
    const std::string msg = LoadError({.arch = arch, .add = tensor, .add_n = n}, "extra");
    EXPECT_CONTAINS(msg, std::string("unsupported tensor '") + tensor + "'");
  }
}

TEST(ArchErrorsTest, MissingOrBadKeyIsNamed) {
  struct Case {
    const char* arch;
    const char* key;
    std::optional<GgufValue> value;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"qwen3", "qwen3.attention.layer_norm_rms_epsilon", std::nullopt, "is missing"},
      {"gemma2", "gemma2.block_count", std::nullopt, "is missing"},
      {"phi3", "phi3.embedding_length", GgufValue::String("128"), "expected an integer"},
      {"gemma2", "gemma2.attention.sliding_window", GgufValue::String("64"), "expected an integer"},
      {"gemma2", "gemma2.attention.sliding_window", GgufValue::U32(0), "invalid value 0"},
      {"gemma2", "gemma2.attn_logit_softcapping", GgufValue::F32(0.0f), "invalid value 0"},
      {"gemma2", "gemma2.final_logit_softcapping", GgufValue::F32(-30.0f), "invalid value"},
      {"gemma3", "gemma3.rope.freq_base_swa", GgufValue::String("1e4"), "expected a number"},
      {"gemma3", "gemma3.attention.sliding_window_pattern",
       GgufValue::Array(GgufType::kBool, {GgufValue::Bool(true), GgufValue::Bool(false)}),
       "expected 4 flags (one per layer)"},
      {"gemma3", "gemma3.attention.sliding_window_pattern", GgufValue::String("2"),
       "expected an integer"},
      // Keys whose meaning goose does not implement.
      {"qwen3", "qwen3.expert_count", GgufValue::U32(8), "mixture-of-experts"},
      {"gemma3", "gemma3.attention.causal", GgufValue::Bool(false), "non-causal"},
      {"phi3", "phi3.rope.scaling.type", GgufValue::String("yarn"), "'yarn': unsupported"},
      {"qwen3", "qwen3.rope.scaling.type", GgufValue::String("longrope"), "unsupported"},
      {"qwen3", "qwen3.rope.dimension_count", GgufValue::U32(16), "rotates whole heads"},
      {"gemma2", "gemma2.rope.dimension_sections", GgufValue::I32Array({16, 0, 0, 0}),
       "multi-section RoPE"},
      {"phi3", "phi3.rope.scaling.attn_factor", GgufValue::F32(0.0f), "invalid value 0"},
  };
  int k = 0;
  for (const Case& c : cases) {
    const std::string msg =
        LoadError({.arch = c.arch, .set = {{c.key, c.value}}}, "key" + std::to_string(k++));
    EXPECT_CONTAINS(msg, c.key);
    EXPECT_CONTAINS(msg, c.expect);
  }
}

// The keys llama.cpp reads with defaults: absent, they take llama.cpp's defaults; set, their
// values reach the config.
TEST(ArchErrorsTest, OptionalKeysTakeLlamaCppDefaults) {
  auto config = [](const Variant& v, const std::string& label) {
    const std::string path = Write(v, label);
    auto m = Model::Load(path);
    std::remove(path.c_str());
    EXPECT_TRUE(m.ok()) << m.status().message();
    return m.ok() ? (*m)->config() : LlamaConfig{};
  };
  const LlamaConfig g2 = config({.arch = "gemma2",
                                 .set = {{"gemma2.attention.sliding_window", std::nullopt},
                                         {"gemma2.attn_logit_softcapping", std::nullopt},
                                         {"gemma2.final_logit_softcapping", std::nullopt}}},
                                "defaults");
  EXPECT_EQ(g2.n_swa, 4096);
  EXPECT_EQ(g2.attn_softcap, 50.0f);
  EXPECT_EQ(g2.final_softcap, 30.0f);
  EXPECT_EQ(g2.swa_layers, (std::vector<uint8_t>{1, 0, 1, 0}));
  const LlamaConfig g3 = config({.arch = "gemma3",
                                 .set = {{"gemma3.attention.sliding_window_pattern", std::nullopt},
                                         {"gemma3.rope.freq_base_swa", std::nullopt},
                                         {"gemma3.final_logit_softcapping", GgufValue::F32(20)}}},
                                "defaults");
  EXPECT_EQ(g3.swa_layers, (std::vector<uint8_t>{1, 1, 1, 1}));  // period 6: layers 0-4
  EXPECT_EQ(g3.rope_freq_base_swa, 10000.0f);
  EXPECT_EQ(g3.final_softcap, 20.0f);
  const LlamaConfig g3_no_window = config(
      {.arch = "gemma3", .set = {{"gemma3.attention.sliding_window", std::nullopt}}}, "nowin");
  EXPECT_EQ(g3_no_window.n_swa, 0);
  const GgufValue flags =
      GgufValue::Array(GgufType::kBool, {GgufValue::Bool(false), GgufValue::Bool(true),
                                         GgufValue::Bool(true), GgufValue::Bool(false)});
  const LlamaConfig g3_flags = config(
      {.arch = "gemma3", .set = {{"gemma3.attention.sliding_window_pattern", flags}}}, "flags");
  EXPECT_EQ(g3_flags.swa_layers, (std::vector<uint8_t>{0, 1, 1, 0}));
  // phi3's window key is read and ignored, as llama.cpp does.
  const LlamaConfig p3 = config(
      {.arch = "phi3", .set = {{"phi3.attention.sliding_window", GgufValue::U32(16)}}}, "swa");
  EXPECT_EQ(p3.n_swa, 0);
}

}  // namespace
}  // namespace goose
