#include "synth/inflate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "ops/quant.h"
#include "util/fp16.h"
#include "util/rng.h"
#include "util/thread_pool.h"

namespace goose {

namespace {

struct Shape {
  const char* name;
  int64_t D, L, H, KV, HD, FF, V;
};
constexpr Shape kShapes[] = {
    {"small-0.5b", 1024, 24, 16, 8, 64, 4096, 32000},  // 0.44B, 32000-token vocabulary
    {"llama-1b", 2048, 16, 32, 8, 64, 8192, 128256},   // Llama-3.2-1B: 1.50B parameters
    {"draft-45m", 512, 4, 8, 4, 64, 1536, 32000},      // a drafter at ~1/20 of small-0.5b
    {"tiny-test", 256, 7, 8, 4, 32, 512, 1000},        // quick checks
};

// The small model: its hyper-parameters and F32 tensors (pointers into the mapping).
struct Small {
  std::unique_ptr<GgufFile> file;
  int64_t d = 0, l = 0, h = 0, kv = 0, ff = 0, v = 0, hd = 0;
  double eps = 0;
  std::map<std::string, const float*> t;
  std::vector<int> layers;  // small layer of each kept layer

  const float* Layer(int i, const char* name) const {
    return t.at("blk." + std::to_string(layers[i]) + "." + name);
  }
};

StatusOr<Small> ReadSmall(const InflateParams& p) {
  Small s;
  GOOSE_ASSIGN_OR_RETURN(s.file, GgufFile::Open(p.source));
  const GgufFile& f = *s.file;
  auto fail = [&](const std::string& what) {
    return Status::Error("inflate " + p.source + ": " + what);
  };
  if (f.GetString("general.architecture").value_or("") != "llama") {
    return fail("not a llama-architecture model");
  }
  auto get = [&](const char* key, int64_t* out) -> Status {
    const auto v = f.GetInt(std::string("llama.") + key);
    if (!v || *v <= 0) return fail(std::string("missing or bad llama.") + key);
    *out = *v;
    return Status::Ok();
  };
  int64_t n_layer = 0;
  GOOSE_RETURN_IF_ERROR(get("embedding_length", &s.d));
  GOOSE_RETURN_IF_ERROR(get("block_count", &n_layer));
  GOOSE_RETURN_IF_ERROR(get("attention.head_count", &s.h));
  GOOSE_RETURN_IF_ERROR(get("feed_forward_length", &s.ff));
  s.kv = f.GetInt("llama.attention.head_count_kv").value_or(s.h);
  s.eps = f.GetFloat("llama.attention.layer_norm_rms_epsilon").value_or(0);
  const GgufValue* tokens = f.GetArray("tokenizer.ggml.tokens");
  if (tokens == nullptr || !(s.eps > 0) || s.kv <= 0 || s.h % s.kv || s.d % s.h) {
    return fail("missing tokens or rms epsilon, or heads that do not divide");
  }
  s.v = static_cast<int64_t>(tokens->size());
  s.hd = s.d / s.h;
  if (f.GetInt("llama.rope.dimension_count").value_or(s.hd) != s.hd) {
    return fail("RoPE over part of the head is not supported");
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.dtype != DType::kF32) return fail("tensor " + t.name + " is not F32");
    s.t[t.name] = reinterpret_cast<const float*>(t.data);
  }
  if (!s.t.count("output.weight") && s.t.count("token_embd.weight")) {
    s.t["output.weight"] = s.t["token_embd.weight"];  // tied
  }
  for (int i = 0; i < n_layer; ++i) {
    if (std::find(p.drop_layers.begin(), p.drop_layers.end(), i) == p.drop_layers.end()) {
      s.layers.push_back(i);
    }
  }
  for (int i : p.drop_layers) {
    if (i < 0 || i >= n_layer) {
      return fail(StrFormat("layer %d to drop does not exist (the model has %lld)", i,
                            static_cast<long long>(n_layer)));
    }
  }
  if (s.layers.empty()) return fail("no layer left after --drop-layers");
  s.l = static_cast<int64_t>(s.layers.size());
  std::vector<std::string> need = {"token_embd.weight", "output.weight", "output_norm.weight"};
  for (int i = 0; i < s.l; ++i) {
    for (const char* n : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                          "ffn_gate", "ffn_up", "ffn_down"}) {
      need.push_back("blk." + std::to_string(s.layers[i]) + "." + n + ".weight");
    }
  }
  for (const std::string& n : need) {
    if (!s.t.count(n)) return fail("missing tensor " + n);
  }
  return s;
}

// Rows of a tensor produced one at a time: row(r, out) fills `cols` floats.
using RowFn = std::function<void(int64_t row, float* out)>;

class Writer {
 public:
  Writer(DType dtype, uint64_t seed)
      : dtype_(dtype), seed_(seed), pool_(std::min(ThreadPool::DefaultThreads(), 16)) {}
  GgufWriter w;

  // A matrix [rows, cols] (GGUF dims {cols, rows}) in the matrix dtype, its rows made in
  // parallel while the file is written.
  void Matrix(const std::string& name, int64_t rows, int64_t cols, RowFn fn) {
    const DType dt = cols % GetDTypeInfo(dtype_).block_size == 0 ? dtype_ : DType::kF32;
    w.AddTensorLazy(name, {cols, rows}, dt, [=, this](uint8_t* out) {
      const int64_t bytes = RowBytes(dt, cols);
      pool_.ParallelFor(rows, [&](int64_t begin, int64_t end) {
        std::vector<float> row(cols);
        for (int64_t r = begin; r < end; ++r) {
          fn(r, row.data());
          QuantizeRow(dt, row.data(), cols, out + r * bytes);
        }
      });
    });
  }
  void Vector(const std::string& name, std::vector<float> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    std::vector<uint8_t> bytes(n * sizeof(float));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    w.AddTensor(name, {n}, DType::kF32, std::move(bytes));
  }
  // Row r of a random matrix: N(0, 0.02^2), its own stream per (tensor, row).
  void Random(const std::string& name, int64_t r, float* out, int64_t cols) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a of the name
    for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
    SplitMix64 rng(Mix64(seed_ ^ h) + static_cast<uint64_t>(r));
    for (int64_t i = 0; i < cols; ++i) {
      const uint64_t a = rng.Next();  // Irwin-Hall of two, rescaled: cheap, near enough
      const double u = static_cast<double>(a & 0xffffffffu) + static_cast<double>(a >> 32);
      out[i] = static_cast<float>((u * (1.0 / 4294967296.0) - 1.0) * 2.449489742783178 * 0.02);
    }
  }

 private:
  DType dtype_;
  uint64_t seed_;
  ThreadPool pool_;
};

void CopyTokenizer(const GgufFile& f, int64_t V, GgufWriter* w) {
  const GgufValue* tokens = f.GetArray("tokenizer.ggml.tokens");
  const GgufValue* scores = f.GetArray("tokenizer.ggml.scores");
  const GgufValue* types = f.GetArray("tokenizer.ggml.token_type");
  std::vector<std::string> tok = tokens->strings;
  std::vector<float> sc;
  std::vector<int32_t> ty;
  for (size_t i = 0; i < tok.size(); ++i) {
    sc.push_back(scores && i < scores->size() ? static_cast<float>(scores->At(i).AsDouble()) : 0);
    ty.push_back(types && i < types->size() ? static_cast<int32_t>(types->At(i).AsInt()) : 1);
  }
  for (int64_t i = static_cast<int64_t>(tok.size()); i < V; ++i) {
    tok.push_back("<unused_" + std::to_string(i - static_cast<int64_t>(tokens->size())) + ">");
    sc.push_back(0);
    ty.push_back(3);  // CONTROL: never produced by the tokenizer
  }
  w->Set("tokenizer.ggml.model",
         GgufValue::String(f.GetString("tokenizer.ggml.model").value_or("llama")));
  w->Set("tokenizer.ggml.tokens", GgufValue::StringArray(tok));
  w->Set("tokenizer.ggml.scores", GgufValue::F32Array(sc));
  w->Set("tokenizer.ggml.token_type", GgufValue::I32Array(ty));
  for (const char* k : {"unknown_token_id", "bos_token_id", "eos_token_id"}) {
    const std::string key = std::string("tokenizer.ggml.") + k;
    if (auto v = f.GetInt(key)) w->Set(key, GgufValue::U32(static_cast<uint32_t>(*v)));
  }
}

void SetHyper(const GgufFile& f, int64_t D, int64_t L, int64_t H, int64_t KV, int64_t FF,
              int64_t rope_dims, double eps, int n_ctx, GgufWriter* w) {
  w->Set("general.architecture", GgufValue::String("llama"));
  w->Set("general.alignment", GgufValue::U32(32));
  const int64_t ctx = n_ctx > 0 ? n_ctx : f.GetInt("llama.context_length").value_or(2048);
  w->Set("llama.context_length", GgufValue::U32(static_cast<uint32_t>(ctx)));
  w->Set("llama.embedding_length", GgufValue::U32(static_cast<uint32_t>(D)));
  w->Set("llama.feed_forward_length", GgufValue::U32(static_cast<uint32_t>(FF)));
  w->Set("llama.attention.head_count", GgufValue::U32(static_cast<uint32_t>(H)));
  w->Set("llama.attention.head_count_kv", GgufValue::U32(static_cast<uint32_t>(KV)));
  w->Set("llama.block_count", GgufValue::U32(static_cast<uint32_t>(L)));
  w->Set("llama.rope.dimension_count", GgufValue::U32(static_cast<uint32_t>(rope_dims)));
  w->Set("llama.rope.freq_base",
         GgufValue::F32(static_cast<float>(f.GetFloat("llama.rope.freq_base").value_or(10000))));
  w->Set("llama.attention.layer_norm_rms_epsilon", GgufValue::F32(static_cast<float>(eps)));
}

// The (layer-dropped) small model as it is.
Status WriteSmall(const Small& s, const InflateParams& p, const std::string& out_path) {
  Writer out(p.dtype, p.seed);
  SetHyper(*s.file, s.d, s.l, s.h, s.kv, s.ff, s.hd, s.eps, p.n_ctx, &out.w);
  CopyTokenizer(*s.file, s.v, &out.w);
  auto matrix = [&](const std::string& name, const float* src, int64_t rows, int64_t cols) {
    out.Matrix(name, rows, cols, [=](int64_t r, float* row) {
      std::copy(src + r * cols, src + (r + 1) * cols, row);
    });
  };
  auto vec = [&](const std::string& name, const float* src, int64_t n) {
    out.Vector(name, std::vector<float>(src, src + n));
  };
  matrix("token_embd.weight", s.t.at("token_embd.weight"), s.v, s.d);
  vec("output_norm.weight", s.t.at("output_norm.weight"), s.d);
  matrix("output.weight", s.t.at("output.weight"), s.v, s.d);
  const int64_t q = s.h * s.hd, kvd = s.kv * s.hd;
  for (int i = 0; i < s.l; ++i) {
    const std::string p_ = "blk." + std::to_string(i) + ".";
    vec(p_ + "attn_norm.weight", s.Layer(i, "attn_norm.weight"), s.d);
    matrix(p_ + "attn_q.weight", s.Layer(i, "attn_q.weight"), q, s.d);
    matrix(p_ + "attn_k.weight", s.Layer(i, "attn_k.weight"), kvd, s.d);
    matrix(p_ + "attn_v.weight", s.Layer(i, "attn_v.weight"), kvd, s.d);
    matrix(p_ + "attn_output.weight", s.Layer(i, "attn_output.weight"), s.d, q);
    vec(p_ + "ffn_norm.weight", s.Layer(i, "ffn_norm.weight"), s.d);
    matrix(p_ + "ffn_gate.weight", s.Layer(i, "ffn_gate.weight"), s.ff, s.d);
    matrix(p_ + "ffn_up.weight", s.Layer(i, "ffn_up.weight"), s.ff, s.d);
    matrix(p_ + "ffn_down.weight", s.Layer(i, "ffn_down.weight"), s.d, s.ff);
  }
  return out.w.Write(out_path);
}

}  // namespace

std::vector<std::string> InflateShapes() {
  std::vector<std::string> out;
  for (const Shape& s : kShapes) out.push_back(s.name);
  return out;
}

Status InflateModel(const InflateParams& p, const std::string& out_path) {
  const DType dt = p.dtype;
  if (dt != DType::kF32 && dt != DType::kF16 && dt != DType::kBF16 && dt != DType::kQ8_0) {
    return Status::Error("inflate: dtype " + std::string(GetDTypeInfo(dt).name) +
                         " is not supported (f32, f16, bf16, q8_0: a block must not mix the "
                         "small model's weights with the random ones)");
  }
  GOOSE_ASSIGN_OR_RETURN(Small s, ReadSmall(p));
  if (p.shape == "keep") return WriteSmall(s, p, out_path);
  const Shape* shape = nullptr;
  for (const Shape& x : kShapes) {
    if (p.shape == x.name) shape = &x;
  }
  if (shape == nullptr) {
    std::string names;
    for (const std::string& n : InflateShapes()) names += n + ", ";
    return Status::Error("inflate: unknown shape '" + p.shape + "' (" + names + "keep)");
  }
  const int64_t D = shape->D, L = shape->L, H = shape->H, KV = shape->KV, HD = shape->HD,
                FF = shape->FF, V = shape->V;
  const int64_t d = s.d, l = s.l, h = s.h, kv = s.kv, ff = s.ff, v = s.v, hd = s.hd;
  const int64_t g = h / kv, G = H / KV;
  if (G < g || KV < kv || L < l || FF < ff || V < v || HD % hd || D <= d + 1) {
    return Status::Error("inflate " + p.source + ": shape " + p.shape +
                         " is smaller than the model in some dimension");
  }
  const int64_t sc = HD / hd, K = d;                                 // K: the constant dimension
  const double c = std::sqrt(0.5 * static_cast<double>(d) * s.eps);  // c^2 = half of d eps
  const double eps2 = (static_cast<double>(d) * s.eps - c * c) / static_cast<double>(D);
  const float wscale = static_cast<float>(std::sqrt(static_cast<double>(d) / D));
  const float qscale = static_cast<float>(std::sqrt(static_cast<double>(HD) / hd));
  // Small dim j of a head -> dim within the big head; and back (-1: not mapped).
  auto big_dim = [=](int64_t j) { return 2 * sc * (j / 2) + j % 2; };
  auto small_dim = [=](int64_t b) {
    return b % (2 * sc) < 2 ? 2 * (b / (2 * sc)) + b % (2 * sc) : -1;
  };
  // Big query head -> small head (-1: none); small kv head kk sits in big kv head kk.
  auto small_head = [=](int64_t bh) { return bh % G < g ? (bh / G) * g + bh % G : -1; };

  Writer out(dt, p.seed);
  SetHyper(*s.file, D, L, H, KV, FF, HD, eps2, p.n_ctx, &out.w);
  out.w.Set("general.name", GgufValue::String(s.file->GetString("general.name").value_or("small") +
                                              "-inflated-" + p.shape));
  out.w.Set("llama.vocab_size", GgufValue::U32(static_cast<uint32_t>(V)));
  CopyTokenizer(*s.file, V, &out.w);

  const float* emb = s.t.at("token_embd.weight");
  out.Matrix("token_embd.weight", V, D, [=](int64_t r, float* row) {
    std::fill(row, row + D, 0.0f);
    if (r < v) std::copy(emb + r * d, emb + (r + 1) * d, row);
    row[K] = static_cast<float>(c);
  });
  std::vector<float> onorm(D, 0.0f);
  for (int64_t i = 0; i < d; ++i) onorm[i] = s.t.at("output_norm.weight")[i] * wscale;
  onorm[K] = static_cast<float>(1.0 / c);  // normalised dim K = 1 / rms'
  out.Vector("output_norm.weight", onorm);
  const float* sout = s.t.at("output.weight");
  out.Matrix("output.weight", V, D, [=, &out](int64_t r, float* row) {
    out.Random("output.weight", r, row, D);
    row[K] = 0;
    std::fill(row, row + d, 0.0f);
    if (r < v) {
      std::copy(sout + r * d, sout + (r + 1) * d, row);
    } else {
      row[K] = -1000.0f;
    }
  });
  for (int64_t i = 0; i < L; ++i) {
    const std::string pre = "blk." + std::to_string(i) + ".";
    const bool real = i < l;
    std::vector<float> norm(D, 0.0f), fnorm(D, 0.0f);
    for (int64_t j = 0; j < d; ++j) {
      norm[j] = real ? s.Layer(static_cast<int>(i), "attn_norm.weight")[j] * wscale : 1.0f;
      fnorm[j] = real ? s.Layer(static_cast<int>(i), "ffn_norm.weight")[j] * wscale : 1.0f;
    }
    out.Vector(pre + "attn_norm.weight", norm);
    const float* sq = real ? s.Layer(static_cast<int>(i), "attn_q.weight") : nullptr;
    const float* sk = real ? s.Layer(static_cast<int>(i), "attn_k.weight") : nullptr;
    const float* sv = real ? s.Layer(static_cast<int>(i), "attn_v.weight") : nullptr;
    const float* so = real ? s.Layer(static_cast<int>(i), "attn_output.weight") : nullptr;
    out.Matrix(pre + "attn_q.weight", H * HD, D, [=, &out](int64_t r, float* row) {
      out.Random(pre + "attn_q.weight", r, row, D);
      const int64_t hh = real ? small_head(r / HD) : -1;
      if (hh < 0) return;
      std::fill(row, row + d, 0.0f);  // a mapped head reads only its mapped dims
      const int64_t j = small_dim(r % HD);
      if (j < 0) return;
      for (int64_t k = 0; k < d; ++k) row[k] = sq[(hh * hd + j) * d + k] * qscale;
    });
    for (const char* kvn : {"attn_k.weight", "attn_v.weight"}) {
      const float* src = std::string(kvn) == "attn_k.weight" ? sk : sv;
      out.Matrix(pre + kvn, KV * HD, D, [=, &out](int64_t r, float* row) {
        out.Random(pre + kvn, r, row, D);
        const int64_t kk = r / HD, j = small_dim(r % HD);
        if (!real || kk >= kv || j < 0) return;
        for (int64_t k = 0; k < d; ++k) row[k] = src[(kk * hd + j) * d + k];
      });
    }
    out.Matrix(pre + "attn_output.weight", D, H * HD, [=](int64_t r, float* row) {
      std::fill(row, row + H * HD, 0.0f);
      if (!real || r >= d) return;
      for (int64_t hh = 0; hh < h; ++hh) {
        const int64_t bh = (hh / g) * G + hh % g;
        for (int64_t j = 0; j < hd; ++j) row[bh * HD + big_dim(j)] = so[r * (h * hd) + hh * hd + j];
      }
    });
    out.Vector(pre + "ffn_norm.weight", fnorm);
    for (const char* fn : {"ffn_gate.weight", "ffn_up.weight"}) {
      const float* src = real ? s.Layer(static_cast<int>(i), fn) : nullptr;
      out.Matrix(pre + fn, FF, D, [=, &out](int64_t r, float* row) {
        out.Random(pre + fn, r, row, D);
        if (real && r < ff) std::copy(src + r * d, src + (r + 1) * d, row);
      });
    }
    const float* sd = real ? s.Layer(static_cast<int>(i), "ffn_down.weight") : nullptr;
    out.Matrix(pre + "ffn_down.weight", D, FF, [=](int64_t r, float* row) {
      std::fill(row, row + FF, 0.0f);
      if (real && r < d) std::copy(sd + r * ff, sd + (r + 1) * ff, row);
    });
  }
  return out.w.Write(out_path);
}

}  // namespace goose
