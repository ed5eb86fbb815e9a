#include "synth/synth.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "ops/quant.h"
#include "util/rng.h"
#include "util/thread_pool.h"

namespace goose {

namespace {

constexpr int32_t kTokenTypeUnused = 5;  // llama.cpp LLAMA_TOKEN_TYPE_UNUSED

// The shared data directory ($GOOSE_SHARED, else the build's), or "" if unknown.
std::string SharedDir() {
  if (const char* env = std::getenv("GOOSE_SHARED")) return env;
#ifdef GOOSE_SHARED_DIR
  return GOOSE_SHARED_DIR;
#else
  return "";
#endif
}

std::string DefaultVocabPath() {
  const std::string dir = SharedDir();
  return dir.empty() ? "" : dir + "/models/stories260K.gguf";
}

constexpr const char* kArchs[] = {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"};

uint64_t HashName(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Approximately N(0,1) and fast: Irwin-Hall sum of four 32-bit uniforms, rescaled to unit
// variance. Exact normality does not matter for random weights; generation speed does.
inline float FastNormal(SplitMix64* r) {
  const uint64_t a = r->Next(), b = r->Next();
  const double s = static_cast<double>(a & 0xffffffffu) + static_cast<double>(a >> 32) +
                   static_cast<double>(b & 0xffffffffu) + static_cast<double>(b >> 32);
  return static_cast<float>((s * (1.0 / 4294967296.0) - 2.0) * 1.7320508075688772);
}

// How a tensor's values are drawn: mean + std * N(0,1).
struct Init {
  float mean = 0;
  float std = 1;
};

// As llama.cpp's quantizer: a K-quant tensor whose rows are not a multiple of 256 falls back
// to a 32-block type (Q4_K/Q5_K -> Q5_0, Q6_K -> Q8_0; llama.cpp uses Q5_1 for Q5_K).
DType RowDType(DType t, int64_t cols) {
  if (GetDTypeInfo(t).block_size != 256 || cols % 256 == 0) return t;
  return t == DType::kQ6_K ? DType::kQ8_0 : DType::kQ5_0;
}

class Synth {
 public:
  Synth(const SynthParams& p) : p_(p), pool_(std::min(ThreadPool::DefaultThreads(), 16)) {}

  // Adds a tensor whose rows (ne[1..] flattened) are generated in parallel while writing.
  void Add(GgufWriter* w, const std::string& name, std::vector<int64_t> dims, DType dtype,
           Init init) {
    const uint64_t tensor_seed = Mix64(p_.seed ^ HashName(name));
    const int64_t cols = dims[0];
    dtype = RowDType(dtype, cols);
    int64_t rows = 1;
    for (size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
    w->AddTensorLazy(name, dims, dtype, [=, this](uint8_t* out) {
      const int64_t row_bytes = RowBytes(dtype, cols);
      pool_.ParallelFor(rows, [&](int64_t begin, int64_t end) {
        std::vector<float> row(cols);
        for (int64_t r = begin; r < end; ++r) {
          SplitMix64 rng(Mix64(tensor_seed + static_cast<uint64_t>(r)));
          for (float& v : row) v = init.mean + init.std * FastNormal(&rng);
          QuantizeRow(dtype, row.data(), cols, out + r * row_bytes);
        }
      });
    });
  }

 private:
  const SynthParams& p_;
  ThreadPool pool_;
};

Status Validate(const SynthParams& p) {
  auto err = [](const std::string& m) { return Status::Error("synth: " + m); };
  if (std::find(std::begin(kArchs), std::end(kArchs), p.arch) == std::end(kArchs)) {
    return err("unknown arch '" + p.arch + "' (llama, qwen2, qwen3, gemma2, gemma3 or phi3)");
  }
  if (p.n_embd <= 0 || p.n_layer <= 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.n_ff <= 0 ||
      p.n_vocab < 0 || p.context_length <= 0 || p.head_dim < 0 || p.sliding_window < 0 ||
      p.swa_pattern < 0) {
    return err(
        StrFormat("sizes must be positive (n_embd %d, n_layer %d, n_head %d, n_head_kv "
                  "%d, head_dim %d, n_ff %d, n_vocab %d, context_length %d, window %d, "
                  "pattern %d)",
                  p.n_embd, p.n_layer, p.n_head, p.n_head_kv, p.head_dim, p.n_ff, p.n_vocab,
                  p.context_length, p.sliding_window, p.swa_pattern));
  }
  if (p.head_dim == 0 && p.n_embd % p.n_head != 0) {
    return err(StrFormat("n_embd %d is not a multiple of n_head %d", p.n_embd, p.n_head));
  }
  const int head_dim = p.head_dim > 0 ? p.head_dim : p.n_embd / p.n_head;
  if (head_dim % 2 != 0) return err(StrFormat("head_dim %d must be even for RoPE", head_dim));
  if (!(p.attn_softcap > 0 && p.final_softcap > 0 && p.rope_freq_base_swa >= 0)) {
    return err("soft-capping values must be positive and rope_freq_base_swa non-negative");
  }
  if (p.n_head % p.n_head_kv != 0) {
    return err(StrFormat("n_head %d is not a multiple of n_head_kv %d", p.n_head, p.n_head_kv));
  }
  if (!QuantizeSupported(p.dtype)) {
    return err("dtype " + std::string(GetDTypeInfo(p.dtype).name) + " is not supported (" +
               DTypeNamesWith(&DTypeSupport::quantize) + ")");
  }
  // K-quants fall back to 32-blocks on rows that are not a multiple of 256 (RowDType).
  const int64_t bs = std::min<int64_t>(32, GetDTypeInfo(p.dtype).block_size);
  const int64_t q_dim = static_cast<int64_t>(p.n_head) * head_dim;
  if (p.n_embd % bs != 0 || p.n_ff % bs != 0 || q_dim % bs != 0) {
    return err(
        StrFormat("n_embd %d, n_ff %d and n_head * head_dim %lld must be multiples of the "
                  "%s block size %lld",
                  p.n_embd, p.n_ff, static_cast<long long>(q_dim),
                  std::string(GetDTypeInfo(p.dtype).name).c_str(), static_cast<long long>(bs)));
  }
  if (!(p.rope_freq_base > 0)) return err("rope_freq_base must be positive");
  return Status::Ok();
}

// llama.cpp's general.file_type (LLAMA_FTYPE_*) for the matrix dtype.
uint32_t FileType(DType t) {
  switch (t) {
    case DType::kF16:
      return 1;
    case DType::kQ8_0:
      return 7;
    case DType::kBF16:
      return 32;
    case DType::kQ4_0:
      return 2;
    case DType::kQ5_0:
      return 8;
    case DType::kQ4_K:
      return 14;  // MOSTLY_Q4_K_S: every matrix Q4_K
    case DType::kQ5_K:
      return 16;  // MOSTLY_Q5_K_S
    case DType::kQ6_K:
      return 18;
    default:
      return 0;
  }
}

// Copies tokenizer.* from `src`, padding the per-token arrays to n_vocab.
Status CopyVocab(const GgufFile& src, int n_vocab, GgufWriter* w) {
  const size_t n_src = src.GetArray("tokenizer.ggml.tokens")->size();
  for (const auto& [key, value] : src.metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    GgufValue v = value;
    const size_t pad = static_cast<size_t>(n_vocab) - n_src;
    if (key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.scores" ||
        key == "tokenizer.ggml.token_type") {
      if (v.type != GgufType::kArray || v.size() != n_src) {
        return Status::Error(StrFormat("%s: %s has %zu entries, expected %zu (one per token)",
                                       src.path().c_str(), key.c_str(), v.size(), n_src));
      }
      for (size_t i = 0; i < pad; ++i) {
        const size_t id = n_src + i;
        if (key == "tokenizer.ggml.tokens") {
          v.Append(GgufValue::String(StrFormat("<pad_%zu>", id)));
        } else if (key == "tokenizer.ggml.scores") {
          v.Append(GgufValue::F32(-1e9f));  // never preferred by SPM merging
        } else {
          v.Append(GgufValue::I32(kTokenTypeUnused));
        }
      }
    }
    w->Set(key, std::move(v));
  }
  return Status::Ok();
}

}  // namespace

namespace {

struct Preset {
  const char* name;
  const char* arch;
  int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
  float rope_freq_base;
  bool tied_output;
  int sliding_window, swa_pattern;
  const char* vocab;  // shared/ vocabulary with the model's own tokenizer, or null
};

// Shapes of the published models (their config.json / GGUF metadata).
constexpr Preset kPresets[] = {
    {"qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 0, 4864, 151936, 1000000, true, 0, 0, nullptr},
    // Llama-3.2-1B ties the output head to token_embd.
    {"llama-1b", "llama", 2048, 16, 32, 8, 0, 8192, 128256, 500000, true, 0, 0, nullptr},
    {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 151936, 1000000, true, 0, 0, nullptr},
    {"gemma2-2b", "gemma2", 2304, 26, 8, 4, 256, 9216, 256000, 10000, true, 4096, 0, nullptr},
    {"gemma3-1b", "gemma3", 1152, 26, 4, 1, 256, 6912, 262144, 1000000, true, 512, 6, nullptr},
    {"phi3-mini", "phi3", 3072, 32, 32, 32, 0, 8192, 32064, 10000, false, 2047, 0,
     "vocab/ggml-vocab-phi-3.gguf"},
    // Mistral-7B-v0.1: a llama-architecture file (its own 32000-token SPM vocabulary).
    {"mistral-7b", "llama", 4096, 32, 32, 8, 0, 14336, 32000, 10000, false, 0, 0, nullptr},
};

}  // namespace

std::string PresetNames() {
  std::string names;
  for (const Preset& q : kPresets) names += std::string(names.empty() ? "" : " | ") + q.name;
  return names;
}

Status ApplyPreset(std::string_view like, SynthParams* p) {
  for (const Preset& q : kPresets) {
    if (like != q.name) continue;
    p->arch = q.arch;
    p->n_embd = q.n_embd;
    p->n_layer = q.n_layer;
    p->n_head = q.n_head;
    p->n_head_kv = q.n_head_kv;
    p->head_dim = q.head_dim;
    p->n_ff = q.n_ff;
    p->n_vocab = q.n_vocab;
    p->rope_freq_base = q.rope_freq_base;
    p->tied_output = q.tied_output;
    p->sliding_window = q.sliding_window;
    p->swa_pattern = q.swa_pattern;
    if (std::string_view(q.arch) == "gemma3") p->rope_freq_base_swa = 10000;
    if (q.vocab != nullptr && p->vocab_from.empty() && !SharedDir().empty()) {
      const std::string path = SharedDir() + "/" + q.vocab;
      if (std::ifstream(path).good()) p->vocab_from = path;
    }
    return Status::Ok();
  }
  return Status::Error("synth: unknown preset '" + std::string(like) +
                       "' (known: " + PresetNames() + ")");
}

Status SynthesizeModel(const SynthParams& p, const std::string& out_path) {
  GOOSE_RETURN_IF_ERROR(Validate(p));
  const std::string vocab_path = p.vocab_from.empty() ? DefaultVocabPath() : p.vocab_from;
  if (vocab_path.empty()) {
    return Status::Error("synth: no vocab_from given and GOOSE_SHARED is not set");
  }
  GOOSE_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, GgufFile::Open(vocab_path));
  const auto* tokens = vocab->GetArray("tokenizer.ggml.tokens");
  if (!tokens || tokens->empty()) {
    return Status::Error(vocab_path + ": no tokenizer.ggml.tokens array to copy the vocab from");
  }
  const int n_src = static_cast<int>(tokens->size());
  const int n_vocab = p.n_vocab == 0 ? n_src : p.n_vocab;
  if (n_vocab < n_src) {
    return Status::Error(StrFormat("synth: n_vocab %d is smaller than the %d tokens of %s", n_vocab,
                                   n_src, vocab_path.c_str()));
  }

  const std::string& a = p.arch;
  const bool qwen2 = a == "qwen2";
  const bool gemma = a == "gemma2" || a == "gemma3";
  const bool qk_norm = a == "qwen3" || a == "gemma3";
  const bool phi3 = a == "phi3";
  const bool tied = p.tied_output || a == "gemma2";
  const int head_dim = p.head_dim > 0 ? p.head_dim : p.n_embd / p.n_head;
  const int64_t q_dim = static_cast<int64_t>(p.n_head) * head_dim;
  const int64_t kv_dim = static_cast<int64_t>(p.n_head_kv) * head_dim;

  GgufWriter w;
  w.Set("general.architecture", GgufValue::String(a));
  w.Set("general.name", GgufValue::String("goose-synth-" + a));
  w.Set("general.alignment", GgufValue::U32(32));
  w.Set("general.file_type", GgufValue::U32(FileType(p.dtype)));
  w.Set(a + ".vocab_size", GgufValue::U32(static_cast<uint32_t>(n_vocab)));
  w.Set(a + ".context_length", GgufValue::U32(static_cast<uint32_t>(p.context_length)));
  w.Set(a + ".embedding_length", GgufValue::U32(static_cast<uint32_t>(p.n_embd)));
  w.Set(a + ".block_count", GgufValue::U32(static_cast<uint32_t>(p.n_layer)));
  w.Set(a + ".feed_forward_length", GgufValue::U32(static_cast<uint32_t>(p.n_ff)));
  w.Set(a + ".attention.head_count", GgufValue::U32(static_cast<uint32_t>(p.n_head)));
  w.Set(a + ".attention.head_count_kv", GgufValue::U32(static_cast<uint32_t>(p.n_head_kv)));
  const bool eps6 = qwen2 || a == "qwen3" || gemma;
  w.Set(a + ".attention.layer_norm_rms_epsilon", GgufValue::F32(eps6 ? 1e-6f : 1e-5f));
  w.Set(a + ".rope.freq_base", GgufValue::F32(p.rope_freq_base));
  w.Set(a + ".rope.dimension_count", GgufValue::U32(static_cast<uint32_t>(head_dim)));
  if (head_dim * p.n_head != p.n_embd) {
    w.Set(a + ".attention.key_length", GgufValue::U32(static_cast<uint32_t>(head_dim)));
    w.Set(a + ".attention.value_length", GgufValue::U32(static_cast<uint32_t>(head_dim)));
  }
  if (a == "gemma2") {
    w.Set(a + ".attn_logit_softcapping", GgufValue::F32(p.attn_softcap));
    w.Set(a + ".final_logit_softcapping", GgufValue::F32(p.final_softcap));
  }
  if ((gemma || phi3) && p.sliding_window > 0) {
    w.Set(a + ".attention.sliding_window", GgufValue::U32(static_cast<uint32_t>(p.sliding_window)));
  }
  if (gemma && p.swa_pattern > 0) {
    w.Set(a + ".attention.sliding_window_pattern",
          GgufValue::U32(static_cast<uint32_t>(p.swa_pattern)));
  }
  if (a == "gemma3" && p.rope_freq_base_swa > 0) {
    w.Set(a + ".rope.freq_base_swa", GgufValue::F32(p.rope_freq_base_swa));
  }
  const bool longrope = phi3 && p.rope_orig_context > 0;
  if (longrope) {
    const double scale = static_cast<double>(p.context_length) / p.rope_orig_context;
    const double attn_factor =
        scale > 1 ? std::sqrt(1 + std::log(scale) / std::log(double(p.rope_orig_context))) : 1.0;
    w.Set(a + ".rope.scaling.original_context_length",
          GgufValue::U32(static_cast<uint32_t>(p.rope_orig_context)));
    w.Set(a + ".rope.scaling.attn_factor", GgufValue::F32(static_cast<float>(attn_factor)));
  }
  GOOSE_RETURN_IF_ERROR(CopyVocab(*vocab, n_vocab, &w));
  vocab.reset();

  // Scales (see header): logits = output(norm(h)) get std ~2 whether or not the output is tied.
  const float inv_sqrt_embd = 1.0f / std::sqrt(static_cast<float>(p.n_embd));
  const Init norm{1.0f, 0.05f}, bias{0.0f, 0.02f};
  auto matrix = [](int64_t fan_in) { return Init{0.0f, 1.0f / std::sqrt(float(fan_in))}; };
  // (Gemma multiplies the embeddings by sqrt(n_embd): a tied one's rows are small enough.)
  const Init embd{0.0f, tied ? std::min(0.75f, 2.0f * inv_sqrt_embd) : 0.75f};

  Synth s(p);
  const DType dt = p.dtype;
  s.Add(&w, "token_embd.weight", {p.n_embd, n_vocab}, dt, embd);
  s.Add(&w, "output_norm.weight", {p.n_embd}, DType::kF32, norm);
  if (longrope) {
    const int half = head_dim / 2;
    for (const auto& [name, top] : {std::pair{"rope_factors_long.weight", 8.0f},
                                    std::pair{"rope_factors_short.weight", 1.5f}}) {
      std::vector<uint8_t> bytes(static_cast<size_t>(half) * 4);
      for (int i = 0; i < half; ++i) {
        const float v = 1.0f + (top - 1.0f) * static_cast<float>(i) / std::max(1, half - 1);
        std::memcpy(bytes.data() + 4 * i, &v, 4);
      }
      w.AddTensor(name, {half}, DType::kF32, std::move(bytes));
    }
  }
  if (!tied) {
    s.Add(&w, "output.weight", {p.n_embd, n_vocab}, dt, Init{0.0f, 2.0f * inv_sqrt_embd});
  }
  for (int l = 0; l < p.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    s.Add(&w, b + "attn_norm.weight", {p.n_embd}, DType::kF32, norm);
    if (phi3) {
      s.Add(&w, b + "attn_qkv.weight", {p.n_embd, q_dim + 2 * kv_dim}, dt, matrix(p.n_embd));
    } else {
      s.Add(&w, b + "attn_q.weight", {p.n_embd, q_dim}, dt, matrix(p.n_embd));
      s.Add(&w, b + "attn_k.weight", {p.n_embd, kv_dim}, dt, matrix(p.n_embd));
      s.Add(&w, b + "attn_v.weight", {p.n_embd, kv_dim}, dt, matrix(p.n_embd));
    }
    if (qwen2) {
      s.Add(&w, b + "attn_q.bias", {q_dim}, DType::kF32, bias);
      s.Add(&w, b + "attn_k.bias", {kv_dim}, DType::kF32, bias);
      s.Add(&w, b + "attn_v.bias", {kv_dim}, DType::kF32, bias);
    }
    if (qk_norm) {
      s.Add(&w, b + "attn_q_norm.weight", {head_dim}, DType::kF32, norm);
      s.Add(&w, b + "attn_k_norm.weight", {head_dim}, DType::kF32, norm);
    }
    s.Add(&w, b + "attn_output.weight", {q_dim, p.n_embd}, dt, matrix(q_dim));
    if (gemma) s.Add(&w, b + "post_attention_norm.weight", {p.n_embd}, DType::kF32, norm);
    s.Add(&w, b + "ffn_norm.weight", {p.n_embd}, DType::kF32, norm);
    if (phi3) {  // gate rows, then up rows
      s.Add(&w, b + "ffn_up.weight", {p.n_embd, 2 * p.n_ff}, dt, matrix(p.n_embd));
    } else {
      s.Add(&w, b + "ffn_gate.weight", {p.n_embd, p.n_ff}, dt, matrix(p.n_embd));
      s.Add(&w, b + "ffn_up.weight", {p.n_embd, p.n_ff}, dt, matrix(p.n_embd));
    }
    s.Add(&w, b + "ffn_down.weight", {p.n_ff, p.n_embd}, dt, matrix(p.n_ff));
    if (gemma) s.Add(&w, b + "post_ffw_norm.weight", {p.n_embd}, DType::kF32, norm);
  }
  return w.Write(out_path);
}

}  // namespace goose
