// Model::Load: maps the GGUF, reads the config, validates every tensor (name, shape, dtype),
// rejects tensors it does not use, and builds the tokenizer. Weight matrices stay in the
// mapping; norms and biases become f32.
#include "model/model.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <unordered_set>
#include <utility>

#include "ops/cpu_features.h"
#include "ops/qmatmul.h"
#include "util/escape.h"
#include "util/fp16.h"

namespace goose {

namespace {

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

class TensorReader {
 public:
  TensorReader(const GgufFile& gguf, std::vector<std::vector<float>>* owned)
      : gguf_(gguf), owned_(owned) {}

  // The first tensor of the file that no Find consumed: a tensor goose does not implement.
  // Ignoring it would silently give wrong logits, so it is an error.
  Status CheckAllConsumed() const {
    for (const GgufTensorInfo& t : gguf_.tensors()) {
      if (used_.count(t.name)) continue;
      return Status::Error(StrFormat(
          "%s: unsupported tensor '%s' (goose does not implement it for %s; ignoring it would "
          "change the logits)",
          gguf_.path().c_str(), EscapeForMessage(t.name).c_str(),
          EscapeForMessage(gguf_.GetString("general.architecture").value_or("this architecture"))
              .c_str()));
    }
    return Status::Ok();
  }

  Status Error(const std::string& name, const std::string& what) const {
    return Status::Error(
        StrFormat("%s: tensor '%s' %s", gguf_.path().c_str(), name.c_str(), what.c_str()));
  }

  StatusOr<const GgufTensorInfo*> Find(const std::string& name, const std::vector<int64_t>& dims) {
    const GgufTensorInfo* t = gguf_.FindTensor(name);
    if (t == nullptr) return Error(name, "is missing");
    used_.insert(name);
    if (t->dims != dims) {
      return Error(name, StrFormat("has shape %s, expected %s", DimsString(t->dims).c_str(),
                                   DimsString(dims).c_str()));
    }
    return t;
  }

  // A matrix [rows, cols] (GGUF dims {cols, rows}) in a dtype the kernels implement.
  StatusOr<WeightMatrix> Matrix(const std::string& name, int64_t rows, int64_t cols) {
    GOOSE_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name, {cols, rows}));
    if (!DTypeSupported(t->dtype)) {
      return Error(name, StrFormat("has dtype %s, supported: %s",
                                   std::string(GetDTypeInfo(t->dtype).name).c_str(),
                                   DTypeNamesWith(&DTypeSupport::compute).c_str()));
    }
    if (cols % GetDTypeInfo(t->dtype).block_size != 0) {
      return Error(name, StrFormat("row length %lld is not a multiple of the %s block size",
                                   static_cast<long long>(cols),
                                   std::string(GetDTypeInfo(t->dtype).name).c_str()));
    }
    WeightMatrix w;
    w.dtype = t->dtype;
    w.data = t->data;
    w.rows = rows;
    w.cols = cols;
    if (static_cast<uint64_t>(w.row_bytes() * rows) != t->n_bytes) {
      return Error(name, "has a byte size inconsistent with its shape");
    }
    if (w.dtype == DType::kF32 && reinterpret_cast<uintptr_t>(t->data) % alignof(float) != 0) {
      return Error(name, "data is not 4-byte aligned");
    }
    return w;
  }

  // A vector [n] as f32 (converted into owned storage if stored as f16/bf16 or misaligned).
  StatusOr<const float*> Vector(const std::string& name, int64_t n) {
    GOOSE_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name, {n}));
    if (t->dtype == DType::kF32 && reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0) {
      return reinterpret_cast<const float*>(t->data);
    }
    std::vector<float> v(static_cast<size_t>(n));
    if (t->dtype == DType::kF32) {
      std::memcpy(v.data(), t->data, static_cast<size_t>(n) * 4);
    } else if (t->dtype == DType::kF16 || t->dtype == DType::kBF16) {
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t->data + 2 * i, 2);
        v[i] = t->dtype == DType::kF16 ? F16ToF32(h) : BF16ToF32(h);
      }
    } else {
      return Error(name, StrFormat("has dtype %s, expected f32 or f16",
                                   std::string(GetDTypeInfo(t->dtype).name).c_str()));
    }
    owned_->push_back(std::move(v));
    return static_cast<const float*>(owned_->back().data());
  }

 private:
  const GgufFile& gguf_;
  std::vector<std::vector<float>>* owned_;
  std::unordered_set<std::string> used_;  // names Find returned
};

}  // namespace

int ContextSize(const LlamaConfig& config, int n_ctx) {
  return n_ctx > 0 ? n_ctx : std::min(config.n_ctx_train, 4096);
}

const char* KvTypeName(KvType t) { return t == KvType::kF16 ? "f16" : "f32"; }

bool ParseKvType(const std::string& name, KvType* out) {
  for (KvType t : {KvType::kF16, KvType::kF32}) {
    if (name == KvTypeName(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

size_t KvTypeBytes(KvType t) { return t == KvType::kF16 ? sizeof(uint16_t) : sizeof(float); }

uint64_t KvCacheBytes(const LlamaConfig& config, int n_ctx, KvType kv) {
  const uint64_t n = static_cast<uint64_t>(ContextSize(config, n_ctx));
  const uint64_t kv_dim = static_cast<uint64_t>(config.n_head_kv) * config.head_dim;
  return 2 * static_cast<uint64_t>(config.n_layer) * n * kv_dim * KvTypeBytes(kv);
}

uint64_t ForwardScratchBytes(const LlamaConfig& config, int n_batch) {
  const uint64_t q_dim = static_cast<uint64_t>(config.n_head) * config.head_dim;
  const uint64_t kv_dim = static_cast<uint64_t>(config.n_head_kv) * config.head_dim;
  // Per row (forward_pass.cc's BatchPass::Impl): x, tmp [n_embd]; xn [max(n_embd, q_dim)];
  // q [q_dim]; k, v [kv_dim]; gate, up [n_ff]; logits [n_vocab]; rope, rope_swa [n_rot]; and
  // a few int32 indices.
  const uint64_t floats = 2ull * config.n_embd + std::max<uint64_t>(config.n_embd, q_dim) + q_dim +
                          2 * kv_dim + 2ull * config.n_ff + config.n_vocab + 2ull * config.n_rot;
  return static_cast<uint64_t>(std::max(n_batch, 0)) * (floats * sizeof(float) + 16);
}

void Model::TileMatrices() {
  if (IntKernelFor(ActiveCpuLevel()) != IntKernel::kAvx512Vnni) return;
  // A tied output head shares token_embd's data: the embedding then reads its rows from the
  // output's tiles too (GetRow rebuilds a row), so that the file's copy can go as well.
  const bool tied = token_embd_.data == output_.data;
  std::vector<WeightMatrix*> ms = {&output_};
  for (LayerWeights& L : layers_) {
    for (WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
      ms.push_back(w);
    }
  }
  std::erase_if(ms, [](const WeightMatrix* w) {
    return !HasTiles(w->dtype) || w->layout != WeightLayout::kRows;
  });
  // One buffer for all of them (each matrix 64-byte aligned: tile sizes are multiples of 64).
  uint64_t total = 0;
  for (const WeightMatrix* w : ms) total += TiledBytes(w->dtype, w->rows, w->cols);
  if (total == 0) return;
  tiles_ = std::make_unique<LargeBuffer>(total);
  std::vector<uint8_t*> dst;
  uint8_t* at = tiles_->data();
  for (const WeightMatrix* w : ms) {
    dst.push_back(at);
    at += TiledBytes(w->dtype, w->rows, w->cols);
  }
  // On every core: the repack is most of a process's start-up, half of it the kernel zeroing
  // the fresh pages, which happens in whichever thread first writes them.
  std::atomic<size_t> next{0};
  auto repack = [&] {
    for (size_t i = next++; i < ms.size(); i = next++) {
      RepackTiles(*ms[i], dst[i]);
      gguf_->ReleasePages(static_cast<const uint8_t*>(ms[i]->data),
                          static_cast<uint64_t>(ms[i]->row_bytes() * ms[i]->rows));
    }
  };
  const size_t n_threads =
      std::clamp<size_t>(std::thread::hardware_concurrency(), 1, std::min<size_t>(ms.size(), 16));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(repack);
  repack();
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < ms.size(); ++i) {
    ms[i]->data = dst[i];
    ms[i]->layout = WeightLayout::kTiles;
  }
  if (tied && output_.layout == WeightLayout::kTiles) token_embd_ = output_;
}

namespace {

// Rows [first, first + n) of a row-major matrix: a fused tensor's part (attn_qkv's Q, K, V;
// phi3's ffn_up's gate and up).
WeightMatrix RowRange(const WeightMatrix& w, int64_t first, int64_t n) {
  WeightMatrix r = w;
  r.data = static_cast<const uint8_t*>(w.data) + first * w.row_bytes();
  r.rows = n;
  return r;
}

// Q, K, V (and their biases) of layer prefix `p`: separate tensors, or one attn_qkv.
Status LoadQkv(const GgufFile& gguf, const LlamaConfig& c, const std::string& p, TensorReader& r,
               LayerWeights* L) {
  const int64_t q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  if (gguf.FindTensor(p + "attn_qkv.weight") != nullptr) {
    GOOSE_ASSIGN_OR_RETURN(WeightMatrix qkv,
                           r.Matrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, c.n_embd));
    L->wq = RowRange(qkv, 0, q_dim);
    L->wk = RowRange(qkv, q_dim, kv_dim);
    L->wv = RowRange(qkv, q_dim + kv_dim, kv_dim);
    if (c.has_qkv_bias) {
      GOOSE_ASSIGN_OR_RETURN(const float* b, r.Vector(p + "attn_qkv.bias", q_dim + 2 * kv_dim));
      L->bq = b;
      L->bk = b + q_dim;
      L->bv = b + q_dim + kv_dim;
    }
    return Status::Ok();
  }
  if (gguf.FindTensor(p + "attn_q.weight") == nullptr) {
    return r.Error(p + "attn_q.weight",
                   "is missing (and there is no fused " + p + "attn_qkv.weight either)");
  }
  GOOSE_ASSIGN_OR_RETURN(L->wq, r.Matrix(p + "attn_q.weight", q_dim, c.n_embd));
  GOOSE_ASSIGN_OR_RETURN(L->wk, r.Matrix(p + "attn_k.weight", kv_dim, c.n_embd));
  GOOSE_ASSIGN_OR_RETURN(L->wv, r.Matrix(p + "attn_v.weight", kv_dim, c.n_embd));
  if (c.has_qkv_bias) {
    GOOSE_ASSIGN_OR_RETURN(L->bq, r.Vector(p + "attn_q.bias", q_dim));
    GOOSE_ASSIGN_OR_RETURN(L->bk, r.Vector(p + "attn_k.bias", kv_dim));
    GOOSE_ASSIGN_OR_RETURN(L->bv, r.Vector(p + "attn_v.bias", kv_dim));
  }
  return Status::Ok();
}

Status LoadLayer(const GgufFile& gguf, const LlamaConfig& c, int l, TensorReader& r,
                 LayerWeights* L) {
  const int64_t q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
  const std::string p = "blk." + std::to_string(l) + ".";
  GOOSE_ASSIGN_OR_RETURN(L->attn_norm, r.Vector(p + "attn_norm.weight", c.n_embd));
  GOOSE_RETURN_IF_ERROR(LoadQkv(gguf, c, p, r, L));
  if (c.qk_norm) {
    GOOSE_ASSIGN_OR_RETURN(L->q_norm, r.Vector(p + "attn_q_norm.weight", c.head_dim));
    GOOSE_ASSIGN_OR_RETURN(L->k_norm, r.Vector(p + "attn_k_norm.weight", c.head_dim));
  }
  GOOSE_ASSIGN_OR_RETURN(L->wo, r.Matrix(p + "attn_output.weight", c.n_embd, q_dim));
  if (c.post_norms) {
    GOOSE_ASSIGN_OR_RETURN(L->attn_post_norm, r.Vector(p + "post_attention_norm.weight", c.n_embd));
    GOOSE_ASSIGN_OR_RETURN(L->ffn_post_norm, r.Vector(p + "post_ffw_norm.weight", c.n_embd));
  }
  GOOSE_ASSIGN_OR_RETURN(L->ffn_norm, r.Vector(p + "ffn_norm.weight", c.n_embd));
  if (c.arch == "phi3") {  // ffn_up holds gate (first half) and up, as ggml_swiglu splits it
    GOOSE_ASSIGN_OR_RETURN(WeightMatrix gate_up,
                           r.Matrix(p + "ffn_up.weight", 2 * int64_t{c.n_ff}, c.n_embd));
    L->w_gate = RowRange(gate_up, 0, c.n_ff);
    L->w_up = RowRange(gate_up, c.n_ff, c.n_ff);
  } else {
    GOOSE_ASSIGN_OR_RETURN(L->w_gate, r.Matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd));
    GOOSE_ASSIGN_OR_RETURN(L->w_up, r.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd));
  }
  GOOSE_ASSIGN_OR_RETURN(L->w_down, r.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff));
  return Status::Ok();
}

}  // namespace

const float* Model::rope_factors(int n_ctx) const {
  if (rope_freqs_ != nullptr) return rope_freqs_;
  return n_ctx > config_.n_ctx_orig ? rope_long_ : rope_short_;
}

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  GOOSE_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
  return FromGguf(std::move(gguf));
}

StatusOr<std::unique_ptr<Model>> Model::FromGguf(std::unique_ptr<GgufFile> file) {
  std::unique_ptr<Model> m(new Model());
  m->gguf_ = std::move(file);
  const std::string& path = m->gguf_->path();
  GOOSE_ASSIGN_OR_RETURN(m->config_, LlamaConfig::FromGguf(*m->gguf_));
  const LlamaConfig& c = m->config_;
  const GgufFile& gguf = *m->gguf_;
  TensorReader r(gguf, &m->owned_f32_);

  const int64_t q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  GOOSE_ASSIGN_OR_RETURN(m->token_embd_, r.Matrix("token_embd.weight", c.n_vocab, c.n_embd));
  if (c.tied_output) {
    m->output_ = m->token_embd_;
  } else {
    GOOSE_ASSIGN_OR_RETURN(m->output_, r.Matrix("output.weight", c.n_vocab, c.n_embd));
  }
  GOOSE_ASSIGN_OR_RETURN(m->output_norm_, r.Vector("output_norm.weight", c.n_embd));
  const bool llama_like = c.arch == "llama" || c.arch == "qwen2";
  if (llama_like && gguf.FindTensor("rope_freqs.weight") != nullptr) {
    // Llama 3.1+ rope scaling: per-frequency divisors of the rotation angles.
    GOOSE_ASSIGN_OR_RETURN(m->rope_freqs_, r.Vector("rope_freqs.weight", c.n_rot / 2));
  }
  if (c.arch == "phi3" && (gguf.FindTensor("rope_factors_long.weight") != nullptr ||
                           gguf.FindTensor("rope_factors_short.weight") != nullptr)) {
    GOOSE_ASSIGN_OR_RETURN(m->rope_long_, r.Vector("rope_factors_long.weight", c.n_rot / 2));
    GOOSE_ASSIGN_OR_RETURN(m->rope_short_, r.Vector("rope_factors_short.weight", c.n_rot / 2));
  }

  uint64_t bytes = static_cast<uint64_t>(m->token_embd_.row_bytes()) +
                   m->output_.row_bytes() * m->output_.rows + c.n_embd * 4ull;
  // One layer at a time, as its tensors are found: block_count comes from the file (up to
  // 2^24), and a file that claims millions of layers must fail at the first missing one, not
  // allocate them all first.
  m->layers_.reserve(std::min<size_t>(c.n_layer, m->gguf_->tensors().size()));
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = m->layers_.emplace_back();
    GOOSE_RETURN_IF_ERROR(LoadLayer(gguf, c, l, r, &L));
    for (const WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
      bytes += static_cast<uint64_t>(w->row_bytes() * w->rows);
    }
    bytes += (c.post_norms ? 4ull : 2ull) * c.n_embd * 4 +
             (c.has_qkv_bias ? (q_dim + 2 * kv_dim) * 4ull : 0) +
             (c.qk_norm ? 2ull * c.head_dim * 4 : 0);
  }
  m->weight_bytes_ = bytes;
  GOOSE_RETURN_IF_ERROR(r.CheckAllConsumed());
  m->TileMatrices();

  GOOSE_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::FromGguf(*m->gguf_));
  if (m->tokenizer_->n_vocab() != c.n_vocab) {
    return Status::Error(StrFormat("%s: tokenizer has %d tokens but the model's vocabulary is %d",
                                   path.c_str(), m->tokenizer_->n_vocab(), c.n_vocab));
  }
  return m;
}

}  // namespace goose
