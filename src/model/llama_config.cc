#include "model/llama_config.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "util/escape.h"

namespace goose {

namespace {

// Upper bound on any size read from metadata: keeps products far from int overflow.
constexpr int64_t kMaxDim = 1 << 24;

constexpr const char* kArchitectures[] = {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"};

class KeyReader {
 public:
  KeyReader(const GgufFile& gguf, std::string arch) : gguf_(gguf), arch_(std::move(arch)) {}

  std::string Key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }
  const GgufValue* Find(std::string_view suffix) const { return gguf_.Find(Key(suffix)); }

  Status Error(std::string_view key, const std::string& what) const {
    return Status::Error(StrFormat("%s: key '%.*s' %s", gguf_.path().c_str(),
                                   static_cast<int>(key.size()), key.data(), what.c_str()));
  }

  // An integer in [min, kMaxDim] (min 1: positive; 0: zero allowed); `fallback` < 0 means the
  // key is required.
  Status Int(std::string_view suffix, int64_t fallback, int* out, int64_t min = 1) const {
    const std::string key = Key(suffix);
    const GgufValue* v = gguf_.Find(key);
    if (v == nullptr) {
      if (fallback < 0) return Error(key, "is missing");
      *out = static_cast<int>(fallback);
      return Status::Ok();
    }
    if (!(v->is_integer())) {
      return Error(key, StrFormat("has type %s, expected an integer",
                                  std::string(GgufTypeName(v->type)).c_str()));
    }
    const int64_t x = v->AsInt();
    if (x < min || x > kMaxDim) {
      return Error(key, StrFormat("has invalid value %lld", static_cast<long long>(x)));
    }
    *out = static_cast<int>(x);
    return Status::Ok();
  }

  // A finite number, positive (or >= 0 with allow_zero); `required` says whether absence is an
  // error (then *out keeps its value).
  Status Float(std::string_view suffix, bool required, float* out, bool allow_zero = false) const {
    const std::string key = Key(suffix);
    const GgufValue* v = gguf_.Find(key);
    if (v == nullptr) return required ? Error(key, "is missing") : Status::Ok();
    if (!(v->is_integer() || v->is_float())) {
      return Error(key, StrFormat("has type %s, expected a number",
                                  std::string(GgufTypeName(v->type)).c_str()));
    }
    const double x = v->AsDouble();
    if (!std::isfinite(x) || x < 0 || (x == 0 && !allow_zero)) {
      return Error(key, StrFormat("has invalid value %g", x));
    }
    *out = static_cast<float>(x);
    return Status::Ok();
  }

 private:
  const GgufFile& gguf_;
  std::string arch_;
};

// Keys llama.cpp reads for every architecture whose other values goose does not implement.
Status CheckUnsupportedKeys(const KeyReader& r) {
  if (const GgufValue* v = r.Find("expert_count")) {
    if (!v->is_integer()) return r.Error(r.Key("expert_count"), "is not an integer");
    if (v->AsInt() > 0) {
      return r.Error(r.Key("expert_count"),
                     StrFormat("= %lld: mixture-of-experts models are not supported",
                               static_cast<long long>(v->AsInt())));
    }
  }
  if (const GgufValue* v = r.Find("attention.causal")) {
    if (v->type != GgufType::kBool) return r.Error(r.Key("attention.causal"), "is not a bool");
    if (v->u == 0) {
      return r.Error(r.Key("attention.causal"), "is false: non-causal attention is not supported");
    }
  }
  if (r.Find("rope.dimension_sections") != nullptr) {
    return r.Error(r.Key("rope.dimension_sections"), "is set: multi-section RoPE is not supported");
  }
  return Status::Ok();
}

// RoPE scaling: none, linear (positions divided by the factor), or for phi3 LongRoPE (the
// frequency factor tensors, and an optional linear factor); `rope.scaling.attn_factor` and
// `rope.scaling.original_context_length` for any of them.
Status ReadRopeScaling(const KeyReader& r, LlamaConfig* c) {
  float factor = 1.0f;
  if (const GgufValue* t = r.Find("rope.scaling.type")) {
    if (t->type != GgufType::kString) return r.Error(r.Key("rope.scaling.type"), "is not a string");
    const bool longrope = c->arch == "phi3" && t->str == "longrope";
    if (t->str == "linear") {
      GOOSE_RETURN_IF_ERROR(r.Float("rope.scaling.factor", true, &factor));
    } else if (longrope) {
      GOOSE_RETURN_IF_ERROR(r.Float("rope.scaling.factor", false, &factor));
    } else if (t->str != "none") {
      return r.Error(
          r.Key("rope.scaling.type"),
          StrFormat("is '%s': unsupported (supported: none, linear%s)",
                    EscapeForMessage(t->str).c_str(), c->arch == "phi3" ? ", longrope" : ""));
    }
  } else if (r.Find("rope.scale_linear") != nullptr) {  // older converters
    GOOSE_RETURN_IF_ERROR(r.Float("rope.scale_linear", true, &factor));
  }
  c->rope_freq_scale = 1.0f / factor;
  GOOSE_RETURN_IF_ERROR(r.Float("rope.scaling.attn_factor", false, &c->rope_attn_factor));
  GOOSE_RETURN_IF_ERROR(
      r.Int("rope.scaling.original_context_length", c->n_ctx_train, &c->n_ctx_orig));
  return Status::Ok();
}

// The window pattern as llama.cpp's set_swa_pattern(period): layer l uses the window iff
// l % period < period - 1 (period 0: every layer, 1: none); or one flag per layer.
Status ReadSwaPattern(const KeyReader& r, int default_period, LlamaConfig* c) {
  c->swa_layers.assign(static_cast<size_t>(c->n_layer), 0);
  const std::string key = r.Key("attention.sliding_window_pattern");
  const GgufValue* v = r.Find("attention.sliding_window_pattern");
  if (v != nullptr && v->type == GgufType::kArray) {
    if (v->size() != static_cast<size_t>(c->n_layer) ||
        !(v->elem_type == GgufType::kBool || v->At(0).is_integer())) {
      return r.Error(
          key, StrFormat("is an array of %zu %s, expected %d flags (one per layer)", v->size(),
                         std::string(GgufTypeName(v->elem_type)).c_str(), c->n_layer));
    }
    for (int l = 0; l < c->n_layer; ++l) c->swa_layers[l] = v->At(l).AsInt() != 0;
    return Status::Ok();
  }
  int period = default_period;
  GOOSE_RETURN_IF_ERROR(r.Int("attention.sliding_window_pattern", default_period, &period, 0));
  for (int l = 0; l < c->n_layer; ++l) {
    c->swa_layers[l] = period == 0 || l % period < period - 1;
  }
  return Status::Ok();
}

// What gemma2 / gemma3 add (see the header).
Status ReadGemma(const KeyReader& r, LlamaConfig* c) {
  const bool gemma2 = c->arch == "gemma2";
  c->embd_scale = std::sqrt(static_cast<float>(c->n_embd));
  c->post_norms = true;
  c->ffn_act = FfnActivation::kGeluTanh;
  c->qk_norm = !gemma2;
  const bool size_27b = c->n_layer == (gemma2 ? 46 : 62);
  c->attn_scale =
      1.0f / std::sqrt(static_cast<float>(size_27b ? c->n_embd / c->n_head : c->head_dim));
  if (gemma2) {
    c->attn_softcap = 50.0f;
    c->final_softcap = 30.0f;
    GOOSE_RETURN_IF_ERROR(r.Float("attn_logit_softcapping", false, &c->attn_softcap));
    GOOSE_RETURN_IF_ERROR(r.Float("final_logit_softcapping", false, &c->final_softcap));
    GOOSE_RETURN_IF_ERROR(r.Int("attention.sliding_window", 4096, &c->n_swa));
    GOOSE_RETURN_IF_ERROR(ReadSwaPattern(r, 2, c));
    c->rope_freq_base_swa = c->rope_freq_base;
    c->rope_freq_scale_swa = c->rope_freq_scale;
  } else {
    GOOSE_RETURN_IF_ERROR(r.Float("final_logit_softcapping", false, &c->final_softcap, true));
    GOOSE_RETURN_IF_ERROR(r.Int("attention.sliding_window", 0, &c->n_swa, 0));
    if (c->n_swa > 0) GOOSE_RETURN_IF_ERROR(ReadSwaPattern(r, 6, c));
    c->rope_freq_base_swa = 10000.0f;
    c->rope_freq_scale_swa = 1.0f;
  }
  GOOSE_RETURN_IF_ERROR(r.Float("rope.freq_base_swa", false, &c->rope_freq_base_swa));
  return Status::Ok();
}

}  // namespace

StatusOr<LlamaConfig> LlamaConfig::FromGguf(const GgufFile& gguf) {
  const char* file = gguf.path().c_str();
  const GgufValue* arch_v = gguf.Find("general.architecture");
  if (arch_v == nullptr) {
    return Status::Error(StrFormat("%s: key 'general.architecture' is missing", file));
  }
  if (arch_v->type != GgufType::kString) {
    return Status::Error(StrFormat("%s: key 'general.architecture' is not a string", file));
  }
  LlamaConfig c;
  c.arch = arch_v->str;
  if (std::find(std::begin(kArchitectures), std::end(kArchitectures), c.arch) ==
      std::end(kArchitectures)) {
    return Status::Error(StrFormat(
        "%s: key 'general.architecture' is '%s': unsupported architecture (supported: llama, "
        "qwen2, qwen3, gemma2, gemma3, phi3)",
        file, EscapeForMessage(c.arch).c_str()));
  }
  const KeyReader r(gguf, c.arch);
  GOOSE_RETURN_IF_ERROR(CheckUnsupportedKeys(r));
  GOOSE_RETURN_IF_ERROR(r.Int("embedding_length", -1, &c.n_embd));
  GOOSE_RETURN_IF_ERROR(r.Int("block_count", -1, &c.n_layer));
  GOOSE_RETURN_IF_ERROR(r.Int("attention.head_count", -1, &c.n_head));
  GOOSE_RETURN_IF_ERROR(r.Int("attention.head_count_kv", c.n_head, &c.n_head_kv));
  GOOSE_RETURN_IF_ERROR(r.Int("feed_forward_length", -1, &c.n_ff));
  GOOSE_RETURN_IF_ERROR(r.Int("context_length", -1, &c.n_ctx_train));
  GOOSE_RETURN_IF_ERROR(r.Float("attention.layer_norm_rms_epsilon", true, &c.rms_eps));
  GOOSE_RETURN_IF_ERROR(r.Float("rope.freq_base", false, &c.rope_freq_base));

  if (c.n_embd % c.n_head != 0 && gguf.Find(r.Key("attention.key_length")) == nullptr) {
    return r.Error(r.Key("attention.head_count"),
                   StrFormat("= %d does not divide embedding_length %d", c.n_head, c.n_embd));
  }
  GOOSE_RETURN_IF_ERROR(r.Int("attention.key_length", c.n_embd / c.n_head, &c.head_dim));
  int value_length = 0;
  GOOSE_RETURN_IF_ERROR(r.Int("attention.value_length", c.head_dim, &value_length));
  if (value_length != c.head_dim) {
    return r.Error(
        r.Key("attention.value_length"),
        StrFormat("= %d differs from key_length %d (unsupported)", value_length, c.head_dim));
  }
  if (c.n_head % c.n_head_kv != 0) {
    return r.Error(r.Key("attention.head_count_kv"),
                   StrFormat("= %d does not divide head_count %d", c.n_head_kv, c.n_head));
  }
  GOOSE_RETURN_IF_ERROR(r.Int("rope.dimension_count", c.head_dim, &c.n_rot));
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0) {
    return r.Error(
        r.Key("rope.dimension_count"),
        StrFormat("= %d must be even and at most the head size %d", c.n_rot, c.head_dim));
  }
  if (c.arch == "qwen3" && c.n_rot != c.head_dim) {  // as llama.cpp asserts
    return r.Error(r.Key("rope.dimension_count"),
                   StrFormat("= %d: qwen3 rotates whole heads (%d)", c.n_rot, c.head_dim));
  }
  GOOSE_RETURN_IF_ERROR(ReadRopeScaling(r, &c));

  c.rope_style = c.arch == "llama" ? RopeStyle::kNormal : RopeStyle::kNeox;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.qk_norm = c.arch == "qwen3";
  if (c.arch == "gemma2" || c.arch == "gemma3") GOOSE_RETURN_IF_ERROR(ReadGemma(r, &c));
  if (c.arch == "phi3") {  // read and ignored, as llama.cpp does (see the header)
    int ignored = 0;
    GOOSE_RETURN_IF_ERROR(r.Int("attention.sliding_window", 0, &ignored, 0));
  }
  // qwen2 always has Q/K/V biases; the other architectures may have them (optional).
  c.has_qkv_bias = c.arch == "qwen2" || gguf.FindTensor("blk.0.attn_q.bias") != nullptr ||
                   gguf.FindTensor("blk.0.attn_qkv.bias") != nullptr;

  // Vocabulary size: the tokenizer's token list, else `<arch>.vocab_size`, else the embedding.
  if (const GgufValue* tokens = gguf.GetArray("tokenizer.ggml.tokens")) {
    c.n_vocab = static_cast<int>(std::min<size_t>(tokens->size(), kMaxDim + 1));
  } else if (gguf.Find(r.Key("vocab_size")) != nullptr) {
    GOOSE_RETURN_IF_ERROR(r.Int("vocab_size", -1, &c.n_vocab));
  } else if (const GgufTensorInfo* e = gguf.FindTensor("token_embd.weight");
             e != nullptr && e->dims.size() == 2) {
    c.n_vocab = static_cast<int>(std::min<int64_t>(e->dims[1], kMaxDim + 1));
  }
  if (c.n_vocab <= 0 || c.n_vocab > kMaxDim) {
    return Status::Error(
        StrFormat("%s: key 'tokenizer.ggml.tokens': cannot determine a valid vocabulary size (%d)",
                  file, c.n_vocab));
  }
  // gemma2's head is always the embedding (llama.cpp reads no output.weight for it: a file
  // with one is refused as an unused tensor).
  c.tied_output = c.arch == "gemma2" || gguf.FindTensor("output.weight") == nullptr;
  return c;
}

}  // namespace goose
