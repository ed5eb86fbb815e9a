// The synthesizer writes loadable GGUFs with llama.cpp's names, shapes, dtypes and a padded vocab.
#include "synth/synth.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "ops/quant.h"
#include "test_temp.h"

namespace goose {
namespace {

std::string SharedDir() {
  if (const char* env = std::getenv("GOOSE_SHARED")) return env;
  return GOOSE_SHARED_DIR;
}
std::string TinyModel() { return SharedDir() + "/models/stories260K.gguf"; }
// In this process's own temp dir: ctest runs this binary's tests in parallel processes.
std::string TmpPath(const std::string& name) { return ProcessTempPath(name); }

SynthParams TinyLlama() {
  SynthParams p;
  p.arch = "llama";
  p.n_embd = 64;
  p.n_layer = 2;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.n_ff = 96;
  p.n_vocab = 600;
  p.dtype = DType::kQ8_0;
  p.vocab_from = TinyModel();
  return p;
}

std::unique_ptr<GgufFile> Synthesize(const SynthParams& p, const std::string& path) {
  Status s = SynthesizeModel(p, path);
  EXPECT_TRUE(s.ok()) << s.message();
  auto f = GgufFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? std::move(f).value() : nullptr;
}

void ExpectTensor(const GgufFile& g, const std::string& name, std::vector<int64_t> dims,
                  DType dtype) {
  const GgufTensorInfo* t = g.FindTensor(name);
  ASSERT_NE(t, nullptr) << name;
  EXPECT_EQ(t->dims, dims) << name;
  EXPECT_EQ(t->dtype, dtype) << name;
}

// Mean and standard deviation of a whole tensor, dequantized.
std::pair<double, double> Stats(const GgufTensorInfo& t) {
  const int64_t cols = t.dims[0], rows = t.n_elements() / cols;
  std::vector<float> row(cols);
  double s = 0, s2 = 0;
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(t.dtype, t.data + r * RowBytes(t.dtype, cols), cols, row.data());
    for (float v : row) {
      EXPECT_TRUE(std::isfinite(v));
      s += v;
      s2 += double(v) * v;
    }
  }
  const double n = double(t.n_elements()), mean = s / n;
  return {mean, std::sqrt(std::max(0.0, s2 / n - mean * mean))};
}

TEST(SynthTest, TinyLlamaQ8) {
  const std::string path = TmpPath("synth_llama.gguf");
  auto g = Synthesize(TinyLlama(), path);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->GetString("general.architecture"), "llama");
  EXPECT_EQ(g->GetInt("general.alignment"), 32);
  EXPECT_EQ(g->GetInt("llama.embedding_length"), 64);
  EXPECT_EQ(g->GetInt("llama.block_count"), 2);
  EXPECT_EQ(g->GetInt("llama.feed_forward_length"), 96);
  EXPECT_EQ(g->GetInt("llama.attention.head_count"), 4);
  EXPECT_EQ(g->GetInt("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(g->GetInt("llama.context_length"), 2048);
  EXPECT_EQ(g->GetInt("llama.rope.dimension_count"), 16);
  EXPECT_FLOAT_EQ(static_cast<float>(*g->GetFloat("llama.rope.freq_base")), 10000.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(*g->GetFloat("llama.attention.layer_norm_rms_epsilon")),
                  1e-5f);
  EXPECT_EQ(g->Find("llama.attention.layer_norm_rms_epsilon")->type, GgufType::kFloat32);
  EXPECT_EQ(g->Find("llama.block_count")->type, GgufType::kUint32);

  // Vocab: copied from the tiny model, padded to 600 with UNUSED placeholders.
  auto src = GgufFile::Open(TinyModel());
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(g->GetString("tokenizer.ggml.model"), (*src)->GetString("tokenizer.ggml.model"));
  EXPECT_EQ(g->GetInt("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(g->GetInt("tokenizer.ggml.eos_token_id"), 2);
  const auto& toks = *g->GetArray("tokenizer.ggml.tokens");
  const auto& src_toks = *(*src)->GetArray("tokenizer.ggml.tokens");
  ASSERT_EQ(toks.size(), 600u);
  for (size_t i = 0; i < src_toks.size(); ++i) {
    ASSERT_EQ(toks.strings[i], src_toks.strings[i]) << i;
  }
  EXPECT_EQ(toks.strings[512], "<pad_512>");
  EXPECT_EQ(toks.strings[599], "<pad_599>");
  const auto& types = *g->GetArray("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 600u);
  EXPECT_EQ(types.At(1).AsInt(), 3);    // <s> stays CONTROL
  EXPECT_EQ(types.At(599).AsInt(), 5);  // UNUSED
  EXPECT_EQ(types.elem_type, (*src)->GetArray("tokenizer.ggml.token_type")->elem_type);
  const auto& scores = *g->GetArray("tokenizer.ggml.scores");
  ASSERT_EQ(scores.size(), 600u);
  EXPECT_EQ(scores.At(3).f, (*src)->GetArray("tokenizer.ggml.scores")->At(3).f);
  EXPECT_EQ(scores.At(599).f, -1e9f);

  // Tensors: llama.cpp names, GGUF dims (ne[0] = input), F32 norms, Q8_0 matrices.
  const DType q = DType::kQ8_0, f = DType::kF32;
  ExpectTensor(*g, "token_embd.weight", {64, 600}, q);
  ExpectTensor(*g, "output.weight", {64, 600}, q);
  ExpectTensor(*g, "output_norm.weight", {64}, f);
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    ExpectTensor(*g, b + "attn_norm.weight", {64}, f);
    ExpectTensor(*g, b + "attn_q.weight", {64, 64}, q);
    ExpectTensor(*g, b + "attn_k.weight", {64, 32}, q);
    ExpectTensor(*g, b + "attn_v.weight", {64, 32}, q);
    ExpectTensor(*g, b + "attn_output.weight", {64, 64}, q);
    ExpectTensor(*g, b + "ffn_norm.weight", {64}, f);
    ExpectTensor(*g, b + "ffn_gate.weight", {64, 96}, q);
    ExpectTensor(*g, b + "ffn_up.weight", {64, 96}, q);
    ExpectTensor(*g, b + "ffn_down.weight", {96, 64}, q);
    EXPECT_EQ(g->FindTensor(b + "attn_q.bias"), nullptr);
  }
  EXPECT_EQ(g->tensors().size(), 3u + 2 * 9);
  EXPECT_EQ(g->FindTensor("blk.2.attn_q.weight"), nullptr);

  // Value scales: matrices ~ N(0, 1/fan_in), norms ~ 1, embeddings ~ 0.75.
  auto [qm, qs] = Stats(*g->FindTensor("blk.0.attn_q.weight"));
  EXPECT_NEAR(qm, 0.0, 0.01);
  EXPECT_NEAR(qs, 1.0 / 8, 0.01);
  auto [dm, ds] = Stats(*g->FindTensor("blk.1.ffn_down.weight"));
  EXPECT_NEAR(ds, 1.0 / std::sqrt(96.0), 0.01);
  auto [nm, ns] = Stats(*g->FindTensor("blk.1.ffn_norm.weight"));
  EXPECT_NEAR(nm, 1.0, 0.03);
  EXPECT_GT(ns, 0.01);
  EXPECT_LT(ns, 0.1);
  auto [em, es] = Stats(*g->FindTensor("token_embd.weight"));
  EXPECT_NEAR(es, 0.75, 0.03);
  // Different tensors get different values.
  const GgufTensorInfo* k0 = g->FindTensor("blk.0.attn_k.weight");
  const GgufTensorInfo* v0 = g->FindTensor("blk.0.attn_v.weight");
  EXPECT_NE(std::memcmp(k0->data, v0->data, k0->n_bytes), 0);
  std::remove(path.c_str());
}

// Every quantized dtype: matrices and embeddings in it, norms F32, values at the intended
// scale after dequantization (within the format's coarseness), general.file_type as llama.cpp.
TEST(SynthTest, QuantizedDTypes) {
  struct Case {
    DType dtype;
    int file_type;
  };
  for (const Case c : {Case{DType::kQ4_0, 2}, Case{DType::kQ4_K, 14}, Case{DType::kQ5_K, 16},
                       Case{DType::kQ6_K, 18}}) {
    const std::string name(GetDTypeInfo(c.dtype).name);
    SynthParams p = TinyLlama();
    p.dtype = c.dtype;
    p.n_embd = 256;
    p.n_head = 16;
    p.n_ff = 512;
    const std::string path = TmpPath("synth_" + name + ".gguf");
    auto g = Synthesize(p, path);
    ASSERT_NE(g, nullptr) << name;
    EXPECT_EQ(g->GetInt("general.file_type"), c.file_type) << name;
    ExpectTensor(*g, "token_embd.weight", {256, 600}, c.dtype);
    ExpectTensor(*g, "blk.1.ffn_down.weight", {512, 256}, c.dtype);
    ExpectTensor(*g, "blk.1.ffn_norm.weight", {256}, DType::kF32);
    auto [qm, qs] = Stats(*g->FindTensor("blk.0.attn_q.weight"));
    EXPECT_NEAR(qm, 0.0, 0.01) << name;
    EXPECT_NEAR(qs, 1.0 / 16, 0.006) << name;
    auto [es_m, es] = Stats(*g->FindTensor("token_embd.weight"));
    EXPECT_NEAR(es, 0.75, 0.06) << name;
    std::remove(path.c_str());
  }
  // Rows that are not a multiple of 256 fall back as llama.cpp does.
  SynthParams p = TinyLlama();  // n_embd 64, n_ff 96
  for (const auto& [k, fallback] :
       {std::pair{DType::kQ4_K, DType::kQ5_0}, std::pair{DType::kQ6_K, DType::kQ8_0}}) {
    p.dtype = k;
    const std::string path = TmpPath("synth_fallback.gguf");
    auto g = Synthesize(p, path);
    ASSERT_NE(g, nullptr);
    ExpectTensor(*g, "blk.0.ffn_down.weight", {96, 64}, fallback);
    ExpectTensor(*g, "token_embd.weight", {64, 600}, fallback);
    auto [qm, qs] = Stats(*g->FindTensor("blk.0.attn_q.weight"));
    EXPECT_NEAR(qs, 1.0 / 8, 0.01);
    std::remove(path.c_str());
  }
}

TEST(SynthTest, TinyQwen2TiedF16WithBiases) {
  SynthParams p = TinyLlama();
  p.arch = "qwen2";
  p.n_vocab = 0;  // source size
  p.tied_output = true;
  p.dtype = DType::kF16;
  p.rope_freq_base = 1e6f;
  p.context_length = 4096;
  const std::string path = TmpPath("synth_qwen.gguf");
  auto g = Synthesize(p, path);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->GetString("general.architecture"), "qwen2");
  EXPECT_EQ(g->GetInt("qwen2.context_length"), 4096);
  EXPECT_EQ(g->GetFloat("qwen2.rope.freq_base"), 1e6);
  EXPECT_FLOAT_EQ(static_cast<float>(*g->GetFloat("qwen2.attention.layer_norm_rms_epsilon")),
                  1e-6f);
  EXPECT_FALSE(g->GetInt("llama.block_count").has_value());
  EXPECT_EQ(g->GetArray("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(g->FindTensor("output.weight"), nullptr);
  ExpectTensor(*g, "token_embd.weight", {64, 512}, DType::kF16);
  ExpectTensor(*g, "blk.1.attn_q.bias", {64}, DType::kF32);
  ExpectTensor(*g, "blk.1.attn_k.bias", {32}, DType::kF32);
  ExpectTensor(*g, "blk.1.attn_v.bias", {32}, DType::kF32);
  ExpectTensor(*g, "blk.0.ffn_down.weight", {96, 64}, DType::kF16);
  auto [bm, bs] = Stats(*g->FindTensor("blk.0.attn_q.bias"));
  EXPECT_LT(bs, 0.05);
  EXPECT_GT(bs, 0.005);
  // Tied: embeddings are scaled so logits = h . e have std ~2 (2/sqrt(64) = 0.25).
  auto [em, es] = Stats(*g->FindTensor("token_embd.weight"));
  EXPECT_NEAR(es, 0.25, 0.02);
  std::remove(path.c_str());
}

// qwen3, gemma2, gemma3 and phi3 at a tiny size: llama.cpp's tensor names and shapes for each,
// the keys that select their features, and a file that loads with those features on.
TEST(SynthTest, NewArchitecturesWriteLlamaCppTensorsAndLoad) {
  const DType q = DType::kQ8_0, f = DType::kF32;
  for (const std::string arch : {"qwen3", "gemma2", "gemma3", "phi3"}) {
    SCOPED_TRACE(arch);
    SynthParams p = TinyLlama();  // n_embd 64, 4 heads (2 KV), n_ff 96, vocab 600
    p.arch = arch;
    p.head_dim = 32;  // Q is 128 wide, twice n_embd (as Qwen3 and Gemma have it)
    p.sliding_window = 16;
    p.swa_pattern = arch == "gemma3" ? 2 : 0;
    p.rope_freq_base_swa = arch == "gemma3" ? 20000.0f : 0.0f;
    p.attn_softcap = 20.0f;
    const std::string path = TmpPath("synth_" + arch + "_" + std::to_string(::getpid()) + ".gguf");
    auto g = Synthesize(p, path);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->GetInt(arch + ".attention.key_length"), 32);
    EXPECT_EQ(g->GetInt(arch + ".attention.value_length"), 32);
    const bool gemma = arch == "gemma2" || arch == "gemma3";
    const std::string b = "blk.1.";
    if (arch == "phi3") {
      ExpectTensor(*g, b + "attn_qkv.weight", {64, 128 + 2 * 64}, q);
      ExpectTensor(*g, b + "ffn_up.weight", {64, 2 * 96}, q);
      EXPECT_EQ(g->FindTensor(b + "attn_q.weight"), nullptr);
      EXPECT_EQ(g->FindTensor(b + "ffn_gate.weight"), nullptr);
      EXPECT_EQ(g->GetInt("phi3.attention.sliding_window"), 16);
    } else {
      ExpectTensor(*g, b + "attn_q.weight", {64, 128}, q);
      ExpectTensor(*g, b + "attn_k.weight", {64, 64}, q);
      ExpectTensor(*g, b + "ffn_gate.weight", {64, 96}, q);
    }
    ExpectTensor(*g, b + "attn_output.weight", {128, 64}, q);
    if (arch == "qwen3" || arch == "gemma3") {
      ExpectTensor(*g, b + "attn_q_norm.weight", {32}, f);
      ExpectTensor(*g, b + "attn_k_norm.weight", {32}, f);
    } else {
      EXPECT_EQ(g->FindTensor(b + "attn_q_norm.weight"), nullptr);
    }
    if (gemma) {
      ExpectTensor(*g, b + "post_attention_norm.weight", {64}, f);
      ExpectTensor(*g, b + "post_ffw_norm.weight", {64}, f);
      EXPECT_EQ(g->GetInt(arch + ".attention.sliding_window"), 16);
    }
    EXPECT_EQ(g->FindTensor(b + "attn_q.bias"), nullptr);
    // gemma2 never has an output.weight (llama.cpp ties it), whatever tied_output says.
    EXPECT_EQ(g->FindTensor("output.weight") == nullptr, arch == "gemma2");
    if (arch == "gemma2") {
      EXPECT_EQ(g->GetFloat("gemma2.attn_logit_softcapping"), 20.0);
      EXPECT_EQ(g->GetFloat("gemma2.final_logit_softcapping"), 30.0);
    }
    if (arch == "gemma3") {
      EXPECT_EQ(g->GetInt("gemma3.attention.sliding_window_pattern"), 2);
      EXPECT_EQ(g->GetFloat("gemma3.rope.freq_base_swa"), 20000.0);
    }

    auto m = Model::Load(path);
    std::remove(path.c_str());
    ASSERT_TRUE(m.ok()) << m.status().message();
    const LlamaConfig& c = (*m)->config();
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_EQ(c.qk_norm, arch == "qwen3" || arch == "gemma3");
    EXPECT_EQ(c.post_norms, gemma);
    EXPECT_EQ(c.n_swa, gemma ? 16 : 0);
    if (arch == "gemma2") {
      EXPECT_EQ(c.swa_layers, (std::vector<uint8_t>{1, 0}));
    }
    if (arch == "gemma3") {
      EXPECT_EQ(c.rope_freq_base_swa, 20000.0f);
    }
    EXPECT_EQ(c.attn_softcap, arch == "gemma2" ? 20.0f : 0.0f);
    Context ctx(**m, 64, nullptr);
    const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
    ASSERT_TRUE(ctx.ForwardChain(prompt).ok());
    for (int v = 0; v < c.n_vocab; ++v) ASSERT_TRUE(std::isfinite(ctx.logits(4)[v])) << v;
  }
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(SynthTest, Llama1bPresetIsTiedAndLoads) {
  SynthParams p;
  ASSERT_TRUE(ApplyPreset("llama-1b", &p).ok());
  // The preset's architecture and tying at a tiny size.
  p.n_embd = 64, p.n_layer = 1, p.n_head = 4, p.n_head_kv = 2, p.n_ff = 64, p.n_vocab = 0;
  p.vocab_from = TinyModel();
  const std::string path = TmpPath("synth_llama1b_tied_" + std::to_string(::getpid()) + ".gguf");
  auto g = Synthesize(p, path);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->FindTensor("output.weight"), nullptr);
  auto m = Model::Load(path);
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE((*m)->config().tied_output);
  EXPECT_EQ((*m)->output().data, (*m)->token_embd().data);
}

TEST(SynthTest, DeterministicPerSeed) {
  SynthParams p = TinyLlama();
  p.dtype = DType::kBF16;
  const std::string a = TmpPath("synth_a.gguf"), b = TmpPath("synth_b.gguf");
  ASSERT_TRUE(SynthesizeModel(p, a).ok());
  ASSERT_TRUE(SynthesizeModel(p, b).ok());
  const std::string bytes_a = ReadAll(a);
  EXPECT_GT(bytes_a.size(), 100000u);
  EXPECT_EQ(bytes_a, ReadAll(b));
  p.seed = 2;
  ASSERT_TRUE(SynthesizeModel(p, b).ok());
  const std::string bytes_c = ReadAll(b);
  ASSERT_EQ(bytes_a.size(), bytes_c.size());
  EXPECT_NE(bytes_a, bytes_c);
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST(SynthTest, RejectsBadParams) {
  const std::string path = TmpPath("synth_bad.gguf");
  struct Bad {
    const char* label;
    std::function<void(SynthParams*)> edit;
    const char* want;
  };
  const Bad cases[] = {
      {"arch", [](SynthParams* p) { p->arch = "gpt2"; }, "unknown arch 'gpt2'"},
      {"heads", [](SynthParams* p) { p->n_head = 3; }, "not a multiple of n_head 3"},
      {"gqa", [](SynthParams* p) { p->n_head_kv = 3; }, "n_head_kv 3"},
      {"zero", [](SynthParams* p) { p->n_layer = 0; }, "n_layer 0"},
      {"block", [](SynthParams* p) { p->n_ff = 100; }, "block size 32"},
      {"dtype", [](SynthParams* p) { p->dtype = DType::kQ2_K; }, "q2_k"},
      {"k block", [](SynthParams* p) { p->dtype = DType::kQ4_K, p->n_ff = 100; }, "block size 32"},
      {"vocab small", [](SynthParams* p) { p->n_vocab = 100; }, "n_vocab 100 is smaller"},
      {"vocab file", [](SynthParams* p) { p->vocab_from = "/nonexistent.gguf"; },
       "/nonexistent.gguf"},
  };
  for (const Bad& c : cases) {
    SynthParams p = TinyLlama();
    c.edit(&p);
    Status s = SynthesizeModel(p, path);
    ASSERT_FALSE(s.ok()) << c.label;
    EXPECT_NE(s.message().find(c.want), std::string::npos) << c.label << ": " << s.message();
  }
  Status s = SynthesizeModel(TinyLlama(), "/nonexistent_dir/x.gguf");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent_dir/x.gguf"), std::string::npos);
}

TEST(SynthTest, Presets) {
  SynthParams p;
  p.dtype = DType::kQ8_0;
  ASSERT_TRUE(ApplyPreset("qwen2.5-0.5b", &p).ok());
  EXPECT_EQ(p.arch, "qwen2");
  EXPECT_EQ(p.n_embd, 896);
  EXPECT_EQ(p.n_layer, 24);
  EXPECT_EQ(p.n_head, 14);
  EXPECT_EQ(p.n_head_kv, 2);
  EXPECT_EQ(p.n_ff, 4864);
  EXPECT_EQ(p.n_vocab, 151936);
  EXPECT_EQ(p.rope_freq_base, 1e6f);
  EXPECT_TRUE(p.tied_output);
  EXPECT_EQ(p.dtype, DType::kQ8_0);  // untouched
  ASSERT_TRUE(ApplyPreset("llama-1b", &p).ok());
  EXPECT_EQ(p.arch, "llama");
  EXPECT_EQ(p.n_embd, 2048);
  EXPECT_EQ(p.n_layer, 16);
  EXPECT_EQ(p.n_head, 32);
  EXPECT_EQ(p.n_head_kv, 8);
  EXPECT_EQ(p.n_ff, 8192);
  EXPECT_EQ(p.n_vocab, 128256);
  EXPECT_EQ(p.rope_freq_base, 500000.0f);
  EXPECT_TRUE(p.tied_output);  // as Llama-3.2-1B
  ASSERT_TRUE(ApplyPreset("qwen3-0.6b", &p).ok());
  EXPECT_EQ(p.arch, "qwen3");
  EXPECT_EQ(p.n_embd, 1024);
  EXPECT_EQ(p.head_dim, 128);
  EXPECT_EQ(p.n_head, 16);
  EXPECT_EQ(p.n_head_kv, 8);
  EXPECT_EQ(p.n_layer, 28);
  EXPECT_EQ(p.n_ff, 3072);
  EXPECT_TRUE(p.tied_output);
  ASSERT_TRUE(ApplyPreset("gemma2-2b", &p).ok());
  EXPECT_EQ(p.arch, "gemma2");
  EXPECT_EQ(p.n_embd, 2304);
  EXPECT_EQ(p.head_dim, 256);
  EXPECT_EQ(p.n_vocab, 256000);
  EXPECT_EQ(p.sliding_window, 4096);
  ASSERT_TRUE(ApplyPreset("gemma3-1b", &p).ok());
  EXPECT_EQ(p.arch, "gemma3");
  EXPECT_EQ(p.n_embd, 1152);
  EXPECT_EQ(p.n_head, 4);
  EXPECT_EQ(p.n_head_kv, 1);
  EXPECT_EQ(p.head_dim, 256);
  EXPECT_EQ(p.n_layer, 26);
  EXPECT_EQ(p.sliding_window, 512);
  EXPECT_EQ(p.swa_pattern, 6);
  EXPECT_EQ(p.rope_freq_base_swa, 10000.0f);
  EXPECT_EQ(p.n_vocab, 262144);
  ASSERT_TRUE(ApplyPreset("mistral-7b", &p).ok());
  EXPECT_EQ(p.arch, "llama");
  EXPECT_EQ(p.n_ff, 14336);
  EXPECT_EQ(p.n_head_kv, 8);
  EXPECT_EQ(p.head_dim, 0);  // presets reset what an earlier one set
  EXPECT_EQ(p.sliding_window, 0);
  // phi3-mini brings its own tokenizer from the shared vocabularies unless one is given.
  SynthParams phi;
  ASSERT_TRUE(ApplyPreset("phi3-mini", &phi).ok());
  EXPECT_EQ(phi.arch, "phi3");
  EXPECT_EQ(phi.n_embd, 3072);
  EXPECT_EQ(phi.n_vocab, 32064);
  EXPECT_FALSE(phi.tied_output);
  EXPECT_EQ(phi.vocab_from, SharedDir() + "/vocab/ggml-vocab-phi-3.gguf");
  phi.vocab_from = TinyModel();
  ASSERT_TRUE(ApplyPreset("phi3-mini", &phi).ok());
  EXPECT_EQ(phi.vocab_from, TinyModel());
  Status s = ApplyPreset("gpt-5", &p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("gpt-5"), std::string::npos);
  EXPECT_NE(s.message().find("gemma3-1b"), std::string::npos);
}

// phi3-mini's file at a tiny width carries the real Phi-3 tokenizer (32064 tokens) and loads.
TEST(SynthTest, Phi3MiniPresetUsesThePhi3Tokenizer) {
  SynthParams p;
  ASSERT_TRUE(ApplyPreset("phi3-mini", &p).ok());
  p.n_embd = 64, p.n_layer = 1, p.n_head = 4, p.n_head_kv = 4, p.n_ff = 64;
  p.dtype = DType::kQ8_0;
  const std::string path = TmpPath("synth_phi3mini_" + std::to_string(::getpid()) + ".gguf");
  auto g = Synthesize(p, path);
  ASSERT_NE(g, nullptr);
  auto m = Model::Load(path);
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ((*m)->config().n_vocab, 32064);
  EXPECT_EQ((*m)->tokenizer().n_vocab(), 32064);
  EXPECT_EQ((*m)->tokenizer().Encode("Hello world", false),
            (std::vector<int32_t>{15043, 3186}));  // phi-3 SPM ids, as llama.cpp's vectors
}

}  // namespace
}  // namespace goose
