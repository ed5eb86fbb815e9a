// BatchPass: the forward pass over the rows of one or more sequences, top-down as the model
// computes it (BatchPass::Run): embed the tokens; per layer the attention block (norm, Q/K/V
// with bias, head norms and RoPE, the K/V rows into their caches, attention, output projection
// and residual) and the feed-forward block; then the final norm and the logits.
//
// Why every row's logits equal the sequential ones bit for bit: every step below is either per
// row (embedding and its scale, norms, biases, Q/K head norms, RoPE at position n_past + depth
// of its own sequence, the gated activation, soft-capping, residual adds) or a MatMul whose
// rows are batch-invariant (ops.h), and attention for a row visits exactly the keys the
// sequential pass of its sequence would see - committed slots [0, n_past) then its ancestors
// and itself, in increasing order, which is the order they occupy a sequential cache - with
// the same Dot, SoftCap, Softmax and Axpy calls (attention.h). On a sliding-window layer both
// drop the same keys, those at positions <= p - n_swa for a query at position p: a prefix of
// the committed slots, and of the ancestors once the path is deeper than the window. Masked
// keys are never touched. Nothing in a row depends on the other rows of the pass, so neither
// do the other sequences sharing it.
#include <algorithm>
#include <cstring>

#include "model/attention.h"
#include "model/context_state.h"
#include "model/model.h"
#include "util/aligned.h"
#include "util/check.h"

namespace goose {

namespace {
// Below this many elements per-row work runs on the calling thread.
constexpr int64_t kMinParallelElementwise = 1 << 15;

// fn(r) for every row r < n of a pass (independent per-row work: norms, RoPE, residual adds),
// split over the pool's threads when the pass has enough elements (n * width).
template <class F>
void ForRows(ThreadPool* pool, int n, int64_t width, F&& fn) {
  if (pool == nullptr || pool->size() == 1 || int64_t{n} * width < kMinParallelElementwise) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  pool->ParallelFor(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(static_cast<int>(i));
  });
}

// fn(lo, hi) over [0, n) in pieces that are whole vectors of 16 (element-wise ops: any split
// gives the same bits) of at most 2^24 elements (the ops take int counts), split over the
// pool's threads when n is large enough.
template <class F>
void ForElements(ThreadPool* pool, int64_t n, F&& fn) {
  constexpr int64_t kPiece = int64_t{1} << 24;
  auto pieces = [&](int64_t lo, int64_t hi) {
    for (int64_t at = lo; at < hi; at += kPiece) fn(at, std::min(at + kPiece, hi));
  };
  if (pool == nullptr || pool->size() == 1 || n < kMinParallelElementwise) return pieces(0, n);
  pool->ParallelFor((n + 15) / 16,
                    [&](int64_t b, int64_t e) { pieces(16 * b, std::min(16 * e, n)); });
}

// One sequence of a pass.
struct PassSequence {
  Context* ctx = nullptr;
  ContextState* st = nullptr;
  std::span<const int32_t> tokens;
  int row0 = 0, n = 0;  // its rows [row0, row0 + n) of the pass
  int base = 0;         // pending nodes of earlier passes: row i is pending node base + i
  int n_past = 0;
  bool chain = false;    // its pending nodes form one chain after the pass
  size_t logits_at = 0;  // its logits, [n, n_logits], at this offset of the pass's buffer
  int n_logits = 0;
};

// The batch of one sequence is well-formed and fits its context (what Context::Forward checks).
Status ValidateRows(const SequenceRows& s, const std::string& what) {
  const Context& ctx = *s.ctx;
  const int n_vocab = ctx.model().config().n_vocab;
  const int base = s.extend ? ctx.n_pending() : 0;
  if (s.tokens.empty()) return Status::Error(what + ": empty batch");
  if (s.parents.size() != s.tokens.size()) {
    return Status::Error(StrFormat("%s: %zu tokens but %zu parents", what.c_str(), s.tokens.size(),
                                   s.parents.size()));
  }
  if (s.tokens.size() > static_cast<size_t>(ctx.n_ctx() - ctx.n_past() - base)) {
    return Status::Error(
        StrFormat("%s: batch of %zu tokens does not fit: n_past %d + %d pending "
                  "+ %zu > n_ctx %d",
                  what.c_str(), s.tokens.size(), ctx.n_past(), base, s.tokens.size(), ctx.n_ctx()));
  }
  for (int i = 0; i < static_cast<int>(s.tokens.size()); ++i) {
    if (s.tokens[i] < 0 || s.tokens[i] >= n_vocab) {
      return Status::Error(
          StrFormat("%s: token %d at batch index %d is outside the "
                    "vocabulary [0, %d)",
                    what.c_str(), s.tokens[i], i, n_vocab));
    }
    if (s.parents[i] < -1 || s.parents[i] >= base + i) {
      return Status::Error(
          StrFormat("%s: parents[%d] = %d, expected -1 or an earlier pending node (< %d)",
                    what.c_str(), i, s.parents[i], base + i));
    }
  }
  return Status::Ok();
}

// Records the batch's nodes as pending nodes base.. of `st` (parent and depth); returns whether
// all its pending nodes then form one chain.
bool AddPending(ContextState& st, int base, std::span<const int32_t> parents) {
  const int n = static_cast<int>(parents.size());
  if (static_cast<int>(st.parents.size()) < base + n) {
    st.parents.resize(base + n);
    st.depth.resize(base + n);
  }
  bool chain = base == 0 || st.pending_is_chain;
  for (int i = 0; i < n; ++i) {
    st.parents[base + i] = parents[i];
    st.depth[base + i] = parents[i] < 0 ? 0 : st.depth[parents[i]] + 1;
    chain = chain && parents[i] == base + i - 1;
  }
  return chain;
}

}  // namespace

struct BatchPass::Impl {
  Impl(const Model& m, ThreadPool* p)
      : model(m),
        c(m.config()),
        pool(p),
        q_dim(c.n_head * c.head_dim),
        kv_dim(c.n_head_kv * c.head_dim),
        rope_swa_differs(c.n_swa > 0 && (c.rope_freq_base_swa != c.rope_freq_base ||
                                         c.rope_freq_scale_swa != c.rope_freq_scale)),
        attention(c) {}

  void Grow(size_t n_logits);
  void Positions();
  void Embed();
  void AttentionInput(int l);
  void QkvRow(const LayerWeights& L, int l, int r, const float* rope);
  void Attention(int l);
  void AttentionOutput(int l);
  void FeedForward(int l);
  void Logits();
  void AddResidual(int r, const float* post_norm);
  float* Row(AlignedVector<float>& buf, int r, int width) {
    return buf.data() + static_cast<size_t>(r) * width;
  }

  const Model& model;
  const LlamaConfig& c;
  ThreadPool* pool;
  const int q_dim, kv_dim;
  const bool rope_swa_differs;  // the window layers' RoPE base or scale differs
  // The pass: its sequences and, per row, which one.
  std::vector<PassSequence> seqs;
  std::vector<AttentionSequence> attn_seqs;
  std::vector<int32_t> row_seq;
  int rows = 0;
  PassAttention attention;
  // Scratch for the largest pass so far (grown, never shrunk: steady state allocates nothing).
  int capacity = 0;
  AlignedVector<float> x;         // [rows, n_embd] residual stream
  AlignedVector<float> xn;        // [rows, max(n_embd, q_dim)] normed input / attention output
  AlignedVector<float> q;         // [rows, q_dim]
  AlignedVector<float> k, v;      // [rows, kv_dim] the rows' keys and values before storing
  AlignedVector<float> tmp;       // [rows, n_embd]
  AlignedVector<float> gate;      // [rows, n_ff]
  AlignedVector<float> up;        // [rows, n_ff]
  AlignedVector<float> rope;      // [rows, n_rot]: cos[n_rot/2] then sin[n_rot/2]
  AlignedVector<float> rope_swa;  // [rows, n_rot]: the same for window layers' own base
  AlignedVector<float> logits;    // per sequence [n, n_logits], one after the other
};

void BatchPass::Impl::Grow(size_t n_logits) {
  if (logits.size() < n_logits) logits.resize(n_logits);
  if (rows <= capacity) return;
  const size_t n = static_cast<size_t>(rows);
  x.resize(n * c.n_embd);
  xn.resize(n * std::max(c.n_embd, q_dim));
  q.resize(n * q_dim);
  k.resize(n * kv_dim);
  v.resize(n * kv_dim);
  tmp.resize(n * c.n_embd);
  gate.resize(n * c.n_ff);
  up.resize(n * c.n_ff);
  rope.resize(n * c.n_rot);
  if (rope_swa_differs) rope_swa.resize(n * c.n_rot);
  capacity = rows;
}

// cos and sin of each row's RoPE angles at its position n_past + depth, for the model's base
// and scale (and the window layers' own), times rope.scaling.attn_factor as ggml scales both.
void BatchPass::Impl::Positions() {
  const int half = c.n_rot / 2;
  auto angles = [&](int pos, const float* factors, float base, float scale, float* cs) {
    RopeCosSin(pos, c.n_rot, base, scale, factors, cs, cs + half);
    if (c.rope_attn_factor != 1.0f) {
      for (int d = 0; d < c.n_rot; ++d) cs[d] *= c.rope_attn_factor;
    }
  };
  for (int r = 0; r < rows; ++r) {
    const PassSequence& s = seqs[row_seq[r]];
    const int pos = s.n_past + s.st->depth[s.base + r - s.row0];
    const float* factors = s.st->rope_factors;
    angles(pos, factors, c.rope_freq_base, c.rope_freq_scale, Row(rope, r, c.n_rot));
    if (rope_swa_differs) {
      angles(pos, factors, c.rope_freq_base_swa, c.rope_freq_scale_swa, Row(rope_swa, r, c.n_rot));
    }
  }
}

void BatchPass::Impl::Embed() {
  for (int r = 0; r < rows; ++r) {
    const PassSequence& s = seqs[row_seq[r]];
    float* xr = Row(x, r, c.n_embd);
    GetRow(model.token_embd(), s.tokens[r - s.row0], xr);
    if (c.embd_scale != 1.0f) {
      for (int e = 0; e < c.n_embd; ++e) xr[e] *= c.embd_scale;
    }
  }
}

// Norm, then Q, K and V of every row (one thread run over the three matrices), then per row
// its biases, head norms and RoPE; each row's K and V go into its sequence's pending slot.
void BatchPass::Impl::AttentionInput(int l) {
  const LayerWeights& L = model.layers()[l];
  ForRows(pool, rows, c.n_embd, [&](int r) {
    RmsNorm(Row(x, r, c.n_embd), L.attn_norm, c.n_embd, c.rms_eps, Row(xn, r, c.n_embd));
  });
  const WeightMatrix* w[] = {&L.wq, &L.wk, &L.wv};
  float* out[] = {q.data(), k.data(), v.data()};
  MatMulShared(w, 3, xn.data(), rows, out, pool);
  const float* angles = c.is_swa(l) && rope_swa_differs ? rope_swa.data() : rope.data();
  ForRows(pool, rows, q_dim + 2 * kv_dim, [&](int r) { QkvRow(L, l, r, angles); });
}

void BatchPass::Impl::QkvRow(const LayerWeights& L, int l, int r, const float* angles) {
  const int hd = c.head_dim, half = c.n_rot / 2;
  float* qr = Row(q, r, q_dim);
  float* kr = Row(k, r, kv_dim);
  float* vr = Row(v, r, kv_dim);
  if (L.bq != nullptr) {
    for (int d = 0; d < q_dim; ++d) qr[d] += L.bq[d];
    for (int d = 0; d < kv_dim; ++d) kr[d] += L.bk[d];
    for (int d = 0; d < kv_dim; ++d) vr[d] += L.bv[d];
  }
  if (L.q_norm != nullptr) {  // per-head RMS norms before RoPE (qwen3, gemma3)
    for (int h = 0; h < c.n_head; ++h) RmsNorm(qr + h * hd, L.q_norm, hd, c.rms_eps, qr + h * hd);
    for (int h = 0; h < c.n_head_kv; ++h) {
      RmsNorm(kr + h * hd, L.k_norm, hd, c.rms_eps, kr + h * hd);
    }
  }
  const bool neox = c.rope_style == RopeStyle::kNeox;
  const float* cs = angles + static_cast<size_t>(r) * c.n_rot;
  for (int h = 0; h < c.n_head; ++h) RopeApply(qr + h * hd, c.n_rot, cs, cs + half, neox);
  for (int h = 0; h < c.n_head_kv; ++h) RopeApply(kr + h * hd, c.n_rot, cs, cs + half, neox);
  const PassSequence& s = seqs[row_seq[r]];
  const int slot = s.n_past + s.base + (r - s.row0);
  if (s.st->kv_type == KvType::kF16) {  // rounded once, here: every later read sees these bits
    ConvertToF16(kr, kv_dim, reinterpret_cast<uint16_t*>(s.st->k_row(l, slot)));
    ConvertToF16(vr, kv_dim, reinterpret_cast<uint16_t*>(s.st->v_row(l, slot)));
  } else {
    std::memcpy(s.st->k_row(l, slot), kr, s.st->row_bytes);
    std::memcpy(s.st->v_row(l, slot), vr, s.st->row_bytes);
  }
}

// Each row against its own sequence's cache; the output goes to xn (free until the next norm).
void BatchPass::Impl::Attention(int l) {
  attention.Run(l, c.is_swa(l) ? c.n_swa : 0, q.data(), xn.data(), pool);
}

// x += tmp for row r, after normalising tmp by `post_norm` if given (Gemma's sandwich).
void BatchPass::Impl::AddResidual(int r, const float* post_norm) {
  float* xr = Row(x, r, c.n_embd);
  float* t = Row(tmp, r, c.n_embd);
  if (post_norm != nullptr) RmsNorm(t, post_norm, c.n_embd, c.rms_eps, t);
  for (int e = 0; e < c.n_embd; ++e) xr[e] += t[e];
}

void BatchPass::Impl::AttentionOutput(int l) {
  const LayerWeights& L = model.layers()[l];
  MatMul(L.wo, xn.data(), rows, tmp.data(), pool);
  ForRows(pool, rows, c.n_embd, [&](int r) { AddResidual(r, L.attn_post_norm); });
}

void BatchPass::Impl::FeedForward(int l) {
  const LayerWeights& L = model.layers()[l];
  ForRows(pool, rows, c.n_embd, [&](int r) {
    RmsNorm(Row(x, r, c.n_embd), L.ffn_norm, c.n_embd, c.rms_eps, Row(xn, r, c.n_embd));
  });
  const WeightMatrix* w[] = {&L.w_gate, &L.w_up};
  float* out[] = {gate.data(), up.data()};
  MatMulShared(w, 2, xn.data(), rows, out, pool);
  const auto glu = c.ffn_act == FfnActivation::kGeluTanh ? GeluGlu : SwiGlu;
  ForElements(pool, static_cast<int64_t>(rows) * c.n_ff, [&](int64_t lo, int64_t hi) {
    glu(gate.data() + lo, up.data() + lo, static_cast<int>(hi - lo), gate.data() + lo);
  });
  MatMul(L.w_down, gate.data(), rows, tmp.data(), pool);
  ForRows(pool, rows, c.n_embd, [&](int r) { AddResidual(r, L.ffn_post_norm); });
}

// The final norm, then the logits: one MatMul over each run of sequences that score the whole
// vocabulary (their rows are contiguous, and so are their logits), one per sequence scoring a
// subset (SetLogitTokens: its own rows of the output matrix).
void BatchPass::Impl::Logits() {
  ForRows(pool, rows, c.n_embd, [&](int r) {
    RmsNorm(Row(x, r, c.n_embd), model.output_norm(), c.n_embd, c.rms_eps, Row(xn, r, c.n_embd));
  });
  for (size_t s = 0, e = 1; s < seqs.size(); s = e, e = s + 1) {
    const bool whole = seqs[s].st->logit_tokens.empty();
    while (whole && e < seqs.size() && seqs[e].st->logit_tokens.empty()) ++e;
    const int row0 = seqs[s].row0, n = seqs[e - 1].row0 + seqs[e - 1].n - row0;
    float* out = logits.data() + seqs[s].logits_at;
    MatMul(whole ? model.output() : seqs[s].st->output_rows.matrix(), Row(xn, row0, c.n_embd), n,
           out, pool);
    if (c.final_softcap > 0) {
      ForElements(pool, static_cast<int64_t>(n) * seqs[s].n_logits, [&](int64_t lo, int64_t hi) {
        SoftCap(out + lo, static_cast<int>(hi - lo), c.final_softcap);
      });
    }
  }
}

BatchPass::BatchPass(const Model& model, ThreadPool* pool)
    : model_(model),
      serial_(std::make_shared<uint64_t>(0)),
      impl_(std::make_unique<Impl>(model, pool)) {}

BatchPass::~BatchPass() = default;

Status BatchPass::Forward(std::span<const SequenceRows> seqs) { return Run(seqs, nullptr); }

Status BatchPass::Run(std::span<const SequenceRows> seqs, const char* single) {
  GOOSE_RETURN_IF_ERROR(Validate(seqs, single));  // nothing fails past here
  ++*serial_;
  Plan(seqs);
  Impl& p = *impl_;
  p.Embed();
  for (int l = 0; l < model_.config().n_layer; ++l) {
    p.AttentionInput(l);
    p.Attention(l);
    p.AttentionOutput(l);
    p.FeedForward(l);
  }
  p.Logits();
  Publish();
  return Status::Ok();
}

Status BatchPass::Validate(std::span<const SequenceRows> seqs, const char* single) const {
  if (seqs.empty()) return Status::Error("BatchPass: a pass of no sequences");
  for (size_t s = 0; s < seqs.size(); ++s) {
    const std::string what = single != nullptr ? single : StrFormat("BatchPass: sequence %zu", s);
    const Context* ctx = seqs[s].ctx;
    if (ctx == nullptr) return Status::Error(what + ": no Context");
    if (&ctx->model() != &model_) {
      return Status::Error(what +
                           ": its Context is of another model than the pass's (a pass "
                           "runs one model)");
    }
    for (size_t t = 0; t < s; ++t) {
      if (seqs[t].ctx == ctx) {
        return Status::Error(
            StrFormat("%s: its Context is also sequence %zu's (a sequence "
                      "appears at most once per pass)",
                      what.c_str(), t));
      }
    }
    GOOSE_RETURN_IF_ERROR(ValidateRows(seqs[s], what));
  }
  return Status::Ok();
}

// The pass's rows, sequence after sequence: their pending nodes recorded, their positions and
// the attention tasks planned, the scratch grown to fit.
void BatchPass::Plan(std::span<const SequenceRows> seqs) {
  Impl& p = *impl_;
  p.seqs.clear();
  p.attn_seqs.clear();
  p.row_seq.clear();
  int rows = 0;
  size_t n_logits = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    Context& ctx = *seqs[s].ctx;
    ContextState& st = *ctx.state_;
    const int n = static_cast<int>(seqs[s].tokens.size());
    const int base = seqs[s].extend ? ctx.n_pending() : 0;
    const bool chain = AddPending(st, base, seqs[s].parents);
    p.seqs.push_back(
        {&ctx, &st, seqs[s].tokens, rows, n, base, ctx.n_past_, chain, n_logits, ctx.n_logits()});
    p.attn_seqs.push_back({st.k_cache, st.v_cache, st.kv_type, st.layer_stride, st.parents.data(),
                           st.depth.data(), ctx.n_past_, base, n, rows, chain});
    p.row_seq.insert(p.row_seq.end(), n, static_cast<int32_t>(s));
    rows += n;
    n_logits += static_cast<size_t>(n) * ctx.n_logits();
  }
  p.rows = n_rows_ = rows;
  p.Grow(n_logits);
  p.Positions();
  p.attention.Plan(p.attn_seqs, p.pool != nullptr ? p.pool->size() : 1);
}

// Each Context as its own Forward leaves it: the rows pending, their logits readable.
void BatchPass::Publish() {
  for (const PassSequence& s : impl_->seqs) {
    s.st->pending = true;
    s.st->pending_is_chain = s.chain;
    s.st->n_pending = s.base + s.n;
    s.st->logits = impl_->logits.data() + s.logits_at;
    s.st->logits_owner = serial_;
    s.st->logits_serial = *serial_;
    s.ctx->n_batch_ = s.n;
  }
}

}  // namespace goose
