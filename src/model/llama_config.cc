#include "model/llama_config.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "util/escape.h"

namespace goose {

namespace {

// Upper bound on any size read from metadata: keeps products far from int overflow.
constexpr int64_t kMaxDim = 1 << 24;

class KeyReader {
 public:
  KeyReader(const GgufFile& gguf, std::string arch) : gguf_(gguf), arch_(std::move(arch)) {}

  std::string Key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }

  Status Error(std::string_view key, const std::string& what) const {
    return Status::Error(
        StrFormat("%s: key '%.*s' %s", gguf_.path().c_str(), static_cast<int>(key.size()),
                  key.data(), what.c_str()));
  }

  // A positive integer; `fallback` < 0 means the key is required.
  Status Int(std::string_view suffix, int64_t fallback, int* out) const {
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
    if (x <= 0 || x > kMaxDim) {
      return Error(key, StrFormat("has invalid value %lld", static_cast<long long>(x)));
    }
    *out = static_cast<int>(x);
    return Status::Ok();
  }

  // A finite positive float; `required` says whether absence is an error.
  Status Float(std::string_view suffix, bool required, float* out) const {
    const std::string key = Key(suffix);
    const GgufValue* v = gguf_.Find(key);
    if (v == nullptr) return required ? Error(key, "is missing") : Status::Ok();
    if (!(v->is_integer() || v->is_float())) {
      return Error(key, StrFormat("has type %s, expected a number",
                                  std::string(GgufTypeName(v->type)).c_str()));
    }
    const double x = v->AsDouble();
    if (!std::isfinite(x) || x <= 0) return Error(key, StrFormat("has invalid value %g", x));
    *out = static_cast<float>(x);
    return Status::Ok();
  }

 private:
  const GgufFile& gguf_;
  std::string arch_;
};

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
  if (c.arch != "llama" && c.arch != "qwen2") {
    return Status::Error(StrFormat(
        "%s: key 'general.architecture' is '%s': unsupported architecture (supported: llama, "
        "qwen2)",
        file, EscapeForMessage(c.arch).c_str()));
  }
  const KeyReader r(gguf, c.arch);
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
    return r.Error(r.Key("attention.value_length"),
                   StrFormat("= %d differs from key_length %d (unsupported)", value_length,
                             c.head_dim));
  }
  if (c.n_head % c.n_head_kv != 0) {
    return r.Error(r.Key("attention.head_count_kv"),
                   StrFormat("= %d does not divide head_count %d", c.n_head_kv, c.n_head));
  }
  GOOSE_RETURN_IF_ERROR(r.Int("rope.dimension_count", c.head_dim, &c.n_rot));
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0) {
    return r.Error(r.Key("rope.dimension_count"),
                   StrFormat("= %d must be even and at most the head size %d", c.n_rot,
                             c.head_dim));
  }

  // RoPE scaling: none, or linear (positions divided by the factor).
  float factor = 1.0f;
  if (const GgufValue* t = gguf.Find(r.Key("rope.scaling.type"))) {
    if (t->type != GgufType::kString) return r.Error(r.Key("rope.scaling.type"), "is not a string");
    if (t->str == "linear") {
      GOOSE_RETURN_IF_ERROR(r.Float("rope.scaling.factor", true, &factor));
    } else if (t->str != "none") {
      return r.Error(r.Key("rope.scaling.type"),
                     StrFormat("is '%s': unsupported (supported: none, linear)",
                               EscapeForMessage(t->str).c_str()));
    }
  } else if (gguf.Find(r.Key("rope.scale_linear")) != nullptr) {  // older converters
    GOOSE_RETURN_IF_ERROR(r.Float("rope.scale_linear", true, &factor));
  }
  c.rope_freq_scale = 1.0f / factor;
  c.rope_style = c.arch == "qwen2" ? RopeStyle::kNeox : RopeStyle::kNormal;
  // qwen2 always has Q/K/V biases; llama.cpp's llama architecture may have them (optional).
  c.has_qkv_bias = c.arch == "qwen2" || gguf.FindTensor("blk.0.attn_q.bias") != nullptr;

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
    return Status::Error(StrFormat(
        "%s: key 'tokenizer.ggml.tokens': cannot determine a valid vocabulary size (%d)", file,
        c.n_vocab));
  }
  c.tied_output = gguf.FindTensor("output.weight") == nullptr;
  return c;
}

}  // namespace goose
