// Context::Forward against a plain, scalar, double-precision forward pass written from
// llama.cpp's graphs (src/models/{qwen3,gemma2,gemma3,phi3}.cpp), on small F32 synthesized
// models whose features are strong enough to matter: a 6-token sliding window on alternate
// layers (with its own RoPE base on gemma3), an attention soft-cap of 2 and a final cap of 4
// (gemma2), prompts three times the window, and phi3's LongRoPE (long factors: the context
// exceeds the original one; cos and sin scaled by attn_factor). The reference models from
// llama.cpp cannot show a soft-cap of 50 (their scores are far below it) nor LongRoPE; this can.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/model.h"
#include "model_test_util.h"
#include "synth/synth.h"

namespace goose {
namespace {

using Vec = std::vector<double>;

constexpr int kCtx = 64;  // the Context's size, and the synthesized files' context length

// out = W x for every row of W (rows read through GetRow, the exact f32 weights).
Vec Apply(const WeightMatrix& w, const Vec& x) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  Vec out(static_cast<size_t>(w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    GetRow(w, r, row.data());
    double s = 0;
    for (int64_t c = 0; c < w.cols; ++c) s += row[c] * x[c];
    out[r] = s;
  }
  return out;
}

void NormInPlace(double* x, int n, const float* w, double eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const double scale = 1.0 / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) x[i] = x[i] * scale * w[i];
}

Vec Norm(const Vec& x, const float* w, double eps) {
  Vec y = x;
  NormInPlace(y.data(), static_cast<int>(y.size()), w, eps);
  return y;
}

// Rotates one head at position pos (llama.cpp's rope_ext without YaRN).
void Rope(double* v, const LlamaConfig& c, int pos, double base, double scale,
          const float* factors) {
  const int half = c.n_rot / 2;
  for (int i = 0; i < half; ++i) {
    double theta = pos * std::pow(base, -2.0 * i / c.n_rot);
    if (factors != nullptr) theta /= factors[i];
    theta *= scale;
    const double cs = std::cos(theta) * c.rope_attn_factor;
    const double sn = std::sin(theta) * c.rope_attn_factor;
    const int a = c.rope_style == RopeStyle::kNeox ? i : 2 * i;
    const int b = c.rope_style == RopeStyle::kNeox ? i + half : 2 * i + 1;
    const double x0 = v[a], x1 = v[b];
    v[a] = x0 * cs - x1 * sn;
    v[b] = x0 * sn + x1 * cs;
  }
}

// Logits [n][n_vocab] of every position of `tokens`.
std::vector<Vec> ReferenceForward(const Model& m, const std::vector<int32_t>& tokens) {
  const LlamaConfig& c = m.config();
  const int n = static_cast<int>(tokens.size()), hd = c.head_dim;
  const int group = c.n_head / c.n_head_kv;
  std::vector<Vec> x(n, Vec(c.n_embd));
  std::vector<float> row(c.n_embd);
  for (int p = 0; p < n; ++p) {
    GetRow(m.token_embd(), tokens[p], row.data());
    for (int e = 0; e < c.n_embd; ++e) x[p][e] = row[e] * static_cast<double>(c.embd_scale);
  }
  const float* factors = m.rope_factors(kCtx);
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = m.layers()[l];
    const bool swa = c.is_swa(l);
    std::vector<Vec> q(n), k(n), v(n);
    for (int p = 0; p < n; ++p) {
      const Vec xn = Norm(x[p], L.attn_norm, c.rms_eps);
      q[p] = Apply(L.wq, xn), k[p] = Apply(L.wk, xn), v[p] = Apply(L.wv, xn);
      for (int h = 0; h < c.n_head; ++h) {
        if (L.q_norm) NormInPlace(&q[p][h * hd], hd, L.q_norm, c.rms_eps);
        Rope(&q[p][h * hd], c, p, swa ? c.rope_freq_base_swa : c.rope_freq_base,
             swa ? c.rope_freq_scale_swa : c.rope_freq_scale, factors);
      }
      for (int h = 0; h < c.n_head_kv; ++h) {
        if (L.k_norm) NormInPlace(&k[p][h * hd], hd, L.k_norm, c.rms_eps);
        Rope(&k[p][h * hd], c, p, swa ? c.rope_freq_base_swa : c.rope_freq_base,
             swa ? c.rope_freq_scale_swa : c.rope_freq_scale, factors);
      }
    }
    for (int p = 0; p < n; ++p) {
      Vec attn(static_cast<size_t>(c.n_head) * hd, 0.0);
      for (int h = 0; h < c.n_head; ++h) {
        const int g = h / group;
        const int first = swa ? std::max(0, p - c.n_swa + 1) : 0;
        Vec s;
        for (int j = first; j <= p; ++j) {
          double d = 0;
          for (int e = 0; e < hd; ++e) d += q[p][h * hd + e] * k[j][g * hd + e];
          d *= c.attn_scale;
          if (c.attn_softcap > 0) d = c.attn_softcap * std::tanh(d / c.attn_softcap);
          s.push_back(d);
        }
        double mx = s[0], sum = 0;
        for (double e : s) mx = std::max(mx, e);
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int j = first; j <= p; ++j) {
          for (int e = 0; e < hd; ++e) attn[h * hd + e] += s[j - first] / sum * v[j][g * hd + e];
        }
      }
      Vec o = Apply(L.wo, attn);
      if (L.attn_post_norm) o = Norm(o, L.attn_post_norm, c.rms_eps);
      for (int e = 0; e < c.n_embd; ++e) x[p][e] += o[e];
      const Vec xn = Norm(x[p], L.ffn_norm, c.rms_eps);
      const Vec gate = Apply(L.w_gate, xn), up = Apply(L.w_up, xn);
      Vec a(c.n_ff);
      for (int f = 0; f < c.n_ff; ++f) {
        const double g = gate[f];
        const double gelu =
            0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
        const double act = c.ffn_act == FfnActivation::kGeluTanh ? gelu : g / (1 + std::exp(-g));
        a[f] = act * up[f];
      }
      Vec d = Apply(L.w_down, a);
      if (L.ffn_post_norm) d = Norm(d, L.ffn_post_norm, c.rms_eps);
      for (int e = 0; e < c.n_embd; ++e) x[p][e] += d[e];
    }
  }
  std::vector<Vec> logits(n);
  for (int p = 0; p < n; ++p) {
    logits[p] = Apply(m.output(), Norm(x[p], m.output_norm(), c.rms_eps));
    if (c.final_softcap > 0) {
      for (double& z : logits[p]) z = c.final_softcap * std::tanh(z / c.final_softcap);
    }
  }
  return logits;
}

class ArchForwardTest : public testing::TestWithParam<const char*> {};

TEST_P(ArchForwardTest, ForwardEqualsPlainReferenceImplementation) {
  const std::string name = GetParam();
  const bool longrope = name == "phi3_longrope";
  const std::string arch = longrope ? "phi3" : name;
  SynthParams p;
  p.arch = arch;
  p.context_length = kCtx;
  p.rope_orig_context = longrope ? 16 : 0;
  p.n_embd = 64, p.n_layer = 3, p.n_head = 4, p.n_head_kv = 2, p.n_ff = 96;
  p.head_dim = arch == "phi3" ? 0 : 32;
  p.n_vocab = 0;
  p.dtype = DType::kF32;
  p.vocab_from = TinyModelPath();
  p.seed = 5;
  p.sliding_window = 6;
  p.swa_pattern = 2;
  p.rope_freq_base_swa = 500.0f;
  p.attn_softcap = 2.0f;
  p.final_softcap = 4.0f;
  p.rope_freq_base = 1000.0f;
  const std::string path =
      ::testing::TempDir() + "/goose_fwd_" + name + "_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(SynthesizeModel(p, path).ok());
  auto m = Model::Load(path);
  std::remove(path.c_str());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const LlamaConfig& c = (*m)->config();
  if (longrope) {  // the long factors for a context above 16 tokens, the short ones up to it
    ASSERT_NE((*m)->rope_factors(kCtx), nullptr);
    EXPECT_EQ((*m)->rope_factors(kCtx)[c.n_rot / 2 - 1], 8.0f);
    EXPECT_EQ((*m)->rope_factors(16)[c.n_rot / 2 - 1], 1.5f);
    EXPECT_NEAR(c.rope_attn_factor, std::sqrt(1 + std::log(4.0) / std::log(16.0)), 1e-6);
  }
  std::vector<int32_t> tokens;
  for (int i = 0; i < 18; ++i) tokens.push_back((37 * i + 11) % c.n_vocab);
  const std::vector<Vec> want = ReferenceForward(**m, tokens);
  // In passes of 7, 1, 5 and 5 tokens, so that the window's edge falls in the committed
  // prefix as well as in the batch.
  Context ctx(**m, kCtx, nullptr, KvType::kF32);  // (the reference keeps f32 keys and values)
  double max_diff = 0, spread = 0;
  int at = 0;
  for (int len : {7, 1, 5, 5}) {
    ASSERT_TRUE(ctx.ForwardChain({tokens.data() + at, static_cast<size_t>(len)}).ok());
    for (int i = 0; i < len; ++i) {
      for (int v = 0; v < c.n_vocab; ++v) {
        max_diff = std::max(max_diff, std::fabs(ctx.logits(i)[v] - want[at + i][v]));
        spread = std::max(spread, std::fabs(want[at + i][v]));
      }
    }
    ctx.KeepAll();
    at += len;
  }
  ASSERT_EQ(at, static_cast<int>(tokens.size()));
  EXPECT_LT(max_diff, 2e-4) << arch << ": logits up to " << spread;
  EXPECT_GT(spread, 1.0);
}

INSTANTIATE_TEST_SUITE_P(Archs, ArchForwardTest,
                         testing::Values("qwen3", "gemma2", "gemma3", "phi3", "phi3_longrope"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace goose
