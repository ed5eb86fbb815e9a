// Context: KV cache + scratch, and the tree-batched forward pass.
//
// Why the tree logits equal the sequential ones bit for bit: every op below is either per token
// (embedding and its scale, norms, bias, Q/K head norms, RoPE at position n_past + depth, the
// gated activation, soft-capping, residual adds) or a MatMul whose rows are batch-invariant
// (ops.h), and attention for query i visits exactly the keys the sequential pass would see -
// committed slots [0, n_past) then i's ancestors and i itself, in increasing order, which is
// the order they occupy a sequential cache - with the same Dot, SoftCap, Softmax and Axpy
// calls. On a sliding-window layer both drop the same keys, those at positions <= p - n_swa
// for a query at position p: a prefix of the committed slots, and of the ancestors once the
// path is deeper than the window. Masked keys are never touched.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/model.h"
#include "ops/row_subset.h"
#include "util/aligned.h"
#include "util/check.h"
#include "util/large_buffer.h"

namespace goose {

namespace {
// Below this many multiply-adds attention runs on the calling thread.
constexpr int64_t kMinParallelAttention = 1 << 17;
// Below this many elements SwiGLU runs on the calling thread.
constexpr int64_t kMinParallelElementwise = 1 << 15;

// fn(i) for every token i < n of a batch (independent per-token work: norms, RoPE, residual
// adds), split over the pool's threads when the batch has enough elements (n * width).
template <class F>
void ForTokens(ThreadPool* pool, int n, int64_t width, F&& fn) {
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
// Prefix keys scored (and values accumulated) per step for all queries of a task: a tile of
// K or V rows stays in L1 while every query of the block uses it.
constexpr int kKeyTile = 64;
// Query rows (queries x heads sharing a KV head) per attention task.
constexpr int kRowsPerTask = 32;
}  // namespace

struct Context::Impl {
  int q_dim = 0, kv_dim = 0;
  // [n_layer, n_ctx, kv_dim] floats each, in mappings of their own: a slot is always written
  // before it is read, so nothing is zero-filled up front, and the pages of a context's unused
  // tail are never touched (a 4096-token cache costs a short prompt nothing).
  std::unique_ptr<LargeBuffer> k_buf, v_buf;
  float* k_cache = nullptr;
  float* v_cache = nullptr;

  // Scratch for the largest batch seen so far (grown, never shrunk: steady state allocates
  // nothing).
  int capacity = 0;
  AlignedVector<float> x;       // [N, n_embd] residual stream
  AlignedVector<float> xn;      // [N, max(n_embd, q_dim)] normed input / attention output
  AlignedVector<float> q;       // [N, q_dim]
  AlignedVector<float> tmp;     // [N, n_embd]
  AlignedVector<float> gate;    // [N, n_ff]
  AlignedVector<float> up;      // [N, n_ff]
  AlignedVector<float> logits;  // [N, n_vocab], of which [N, n_logits] used
  // SetLogitTokens: the tokens of the logit columns and the output matrix's rows for them
  // (empty: all).
  std::vector<int32_t> logit_tokens;
  RowSubset output_rows;
  AlignedVector<float> rope;    // [N, n_rot]: cos[n_rot/2] then sin[n_rot/2]
  AlignedVector<float> rope_swa;  // [N, n_rot]: the same for window layers with their own base
  bool rope_swa_differs = false;  // the window layers' RoPE base or scale differs
  const float* rope_factors = nullptr;  // [n_rot/2] frequency factors for this n_ctx, or null
  // Per pending node (all passes since the last commit, see ForwardExtend): [n_pending].
  std::vector<int32_t> parents, depth;
  std::vector<int32_t> chain;           // [N] ForwardChain's parents
  int block = 1;                        // queries per attention task
  size_t scores_per_thread = 0;         // block * group rows of n_ctx scores
  AlignedVector<float> scores;          // [n_threads, scores_per_thread]
  // [n_threads, anc_capacity]: a query's ancestor K or V rows (at most n_pending of them).
  std::vector<const float*> ancestors;
  int anc_capacity = 0;
  bool pending = false;                 // KV entries of n_pending nodes are not yet committed
  bool pending_is_chain = false;        // ... and they form one chain (KeepAll may commit it)
  int n_pending = 0;                    // pending nodes, in slots [n_past, n_past + n_pending)
};

Context::Context(const Model& model, int n_ctx, ThreadPool* pool)
    : model_(model), pool_(pool), impl_(std::make_unique<Impl>()) {
  const LlamaConfig& c = model.config();
  GOOSE_CHECK(n_ctx >= 0);
  n_ctx_ = ContextSize(c, n_ctx);
  impl_->q_dim = c.n_head * c.head_dim;
  impl_->kv_dim = c.n_head_kv * c.head_dim;
  const size_t kv = static_cast<size_t>(c.n_layer) * n_ctx_ * impl_->kv_dim;
  impl_->k_buf = std::make_unique<LargeBuffer>(kv * sizeof(float));
  impl_->v_buf = std::make_unique<LargeBuffer>(kv * sizeof(float));
  impl_->k_cache = reinterpret_cast<float*>(impl_->k_buf->data());
  impl_->v_cache = reinterpret_cast<float*>(impl_->v_buf->data());
  const int n_threads = pool_ ? pool_->size() : 1;
  const int group = c.n_head / c.n_head_kv;
  impl_->block = std::max(1, kRowsPerTask / group);
  impl_->scores_per_thread = static_cast<size_t>(impl_->block) * group * n_ctx_;
  impl_->scores.assign(static_cast<size_t>(n_threads) * impl_->scores_per_thread, 0.0f);
  impl_->rope_factors = model.rope_factors(n_ctx_);
  impl_->rope_swa_differs =
      c.n_swa > 0 && (c.rope_freq_base_swa != c.rope_freq_base ||
                      c.rope_freq_scale_swa != c.rope_freq_scale);
}

Context::~Context() = default;

const float* Context::logits(int i) const {
  GOOSE_CHECK(i >= 0 && i < n_batch_);
  return impl_->logits.data() + static_cast<size_t>(i) * n_logits();
}

void Context::SetLogitTokens(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) GOOSE_CHECK(t >= 0 && t < model_.config().n_vocab);
  impl_->logit_tokens.assign(tokens.begin(), tokens.end());
  if (tokens.empty()) {
    impl_->output_rows = RowSubset();  // (the whole output matrix: no copy)
  } else {
    impl_->output_rows.Assign(model_.output(), tokens);
  }
  n_batch_ = 0;  // the last pass's logits no longer read as these columns
}

void Context::SetLogitToken(int j, int32_t token) {
  GOOSE_CHECK(j >= 0 && j < static_cast<int>(impl_->logit_tokens.size()));
  GOOSE_CHECK(token >= 0 && token < model_.config().n_vocab);
  impl_->logit_tokens[j] = token;
  impl_->output_rows.Set(j, token);
  n_batch_ = 0;
}

int Context::n_logits() const {
  return impl_->logit_tokens.empty() ? model_.config().n_vocab
                                     : static_cast<int>(impl_->logit_tokens.size());
}

int32_t Context::logit_token(int j) const {
  return impl_->logit_tokens.empty() ? j : impl_->logit_tokens[j];
}

Status Context::ForwardChain(std::span<const int32_t> tokens) {
  std::vector<int32_t>& chain = impl_->chain;
  if (chain.size() < tokens.size()) {
    const size_t old = chain.size();
    chain.resize(tokens.size());
    for (size_t i = old; i < chain.size(); ++i) chain[i] = static_cast<int32_t>(i) - 1;
  }
  return Forward(tokens, std::span<const int32_t>(chain.data(), tokens.size()));
}

Status Context::Forward(std::span<const int32_t> tokens, std::span<const int32_t> parents) {
  return ForwardPending(tokens, parents, /*extend=*/false);
}

Status Context::ForwardExtend(std::span<const int32_t> tokens, std::span<const int32_t> parents) {
  return ForwardPending(tokens, parents, /*extend=*/true);
}

Status Context::ForwardPending(std::span<const int32_t> tokens, std::span<const int32_t> parents,
                               bool extend) {
  const LlamaConfig& c = model_.config();
  Impl& s = *impl_;
  const int n = static_cast<int>(tokens.size());
  // Nodes of earlier passes this batch extends; batch row i is pending node base + i.
  const int base = extend && s.pending ? s.n_pending : 0;
  const char* what = extend ? "ForwardExtend" : "Forward";
  if (tokens.empty()) return Status::Error(StrFormat("%s: empty batch", what));
  if (parents.size() != tokens.size()) {
    return Status::Error(StrFormat("%s: %zu tokens but %zu parents", what, tokens.size(),
                                   parents.size()));
  }
  if (tokens.size() > static_cast<size_t>(n_ctx_ - n_past_ - base)) {
    return Status::Error(StrFormat("%s: batch of %zu tokens does not fit: n_past %d + %d pending "
                                   "+ %zu > n_ctx %d",
                                   what, tokens.size(), n_past_, base, tokens.size(), n_ctx_));
  }
  bool chain = base == 0 || s.pending_is_chain;
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab) {
      return Status::Error(StrFormat("%s: token %d at batch index %d is outside the "
                                     "vocabulary [0, %d)",
                                     what, tokens[i], i, c.n_vocab));
    }
    if (parents[i] < -1 || parents[i] >= base + i) {
      return Status::Error(StrFormat(
          "%s: parents[%d] = %d, expected -1 or an earlier pending node (< %d)", what, i,
          parents[i], base + i));
    }
    chain = chain && parents[i] == base + i - 1;
  }

  // Grow scratch to this batch size.
  if (n > s.capacity) {
    const size_t N = static_cast<size_t>(n);
    s.x.resize(N * c.n_embd);
    s.xn.resize(N * std::max(c.n_embd, s.q_dim));
    s.q.resize(N * s.q_dim);
    s.tmp.resize(N * c.n_embd);
    s.gate.resize(N * c.n_ff);
    s.up.resize(N * c.n_ff);
    s.logits.resize(N * c.n_vocab);
    s.rope.resize(N * c.n_rot);
    if (s.rope_swa_differs) s.rope_swa.resize(N * c.n_rot);
    s.capacity = n;
  }
  if (base + n > s.anc_capacity) {
    const int nt = pool_ ? pool_->size() : 1;
    s.anc_capacity = base + n;
    s.parents.resize(s.anc_capacity);
    s.depth.resize(s.anc_capacity);
    s.ancestors.resize(static_cast<size_t>(s.anc_capacity) * nt);
  }
  n_batch_ = 0;  // logits are invalid until this pass completes (nothing fails past here)
  s.pending = false;
  s.n_pending = base;

  const int half_rot = c.n_rot / 2;
  // cos and sin of pending node g's angles for a RoPE base and scale (times rope.scaling.attn_factor,
  // as ggml scales both).
  auto rope_angles = [&](int g, float base, float scale, float* cs) {
    RopeCosSin(n_past_ + s.depth[g], c.n_rot, base, scale, s.rope_factors, cs, cs + half_rot);
    if (c.rope_attn_factor != 1.0f) {
      for (int d = 0; d < c.n_rot; ++d) cs[d] *= c.rope_attn_factor;
    }
  };
  for (int i = 0; i < n; ++i) {
    const int g = base + i;
    s.parents[g] = parents[i];
    s.depth[g] = parents[i] < 0 ? 0 : s.depth[parents[i]] + 1;
    const size_t at = static_cast<size_t>(i) * c.n_rot;
    rope_angles(g, c.rope_freq_base, c.rope_freq_scale, s.rope.data() + at);
    if (s.rope_swa_differs) {
      rope_angles(g, c.rope_freq_base_swa, c.rope_freq_scale_swa, s.rope_swa.data() + at);
    }
    float* x = s.x.data() + static_cast<size_t>(i) * c.n_embd;
    GetRow(model_.token_embd(), tokens[i], x);
    if (c.embd_scale != 1.0f) {
      for (int e = 0; e < c.n_embd; ++e) x[e] *= c.embd_scale;
    }
  }

  const int hd = c.head_dim;
  const int group = c.n_head / c.n_head_kv;
  const float kq_scale = c.attn_scale;
  const bool neox = c.rope_style == RopeStyle::kNeox;
  const size_t layer_kv = static_cast<size_t>(n_ctx_) * s.kv_dim;

  // x += tmp for token i, after normalising tmp by `post_norm` if given (Gemma's sandwich).
  auto add_residual = [&](int i, const float* post_norm) {
    float* x = s.x.data() + static_cast<size_t>(i) * c.n_embd;
    float* t = s.tmp.data() + static_cast<size_t>(i) * c.n_embd;
    if (post_norm != nullptr) RmsNorm(t, post_norm, c.n_embd, c.rms_eps, t);
    for (int e = 0; e < c.n_embd; ++e) x[e] += t[e];
  };
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = model_.layers()[l];
    // Sliding window of this layer (0: none) and the RoPE angles it uses.
    const int window = c.is_swa(l) ? c.n_swa : 0;
    const float* rope = window > 0 && s.rope_swa_differs ? s.rope_swa.data() : s.rope.data();
    float* k_layer = s.k_cache + l * layer_kv;
    float* v_layer = s.v_cache + l * layer_kv;
    // The batch's K/V rows go straight into their (pending) cache slots n_past + base + i.
    float* k_new = k_layer + static_cast<size_t>(n_past_ + base) * s.kv_dim;
    float* v_new = v_layer + static_cast<size_t>(n_past_ + base) * s.kv_dim;

    ForTokens(pool_, n, c.n_embd, [&](int i) {
      RmsNorm(s.x.data() + i * c.n_embd, L.attn_norm, c.n_embd, c.rms_eps,
              s.xn.data() + i * c.n_embd);
    });
    {
      const WeightMatrix* w[] = {&L.wq, &L.wk, &L.wv};
      float* out[] = {s.q.data(), k_new, v_new};
      MatMulShared(w, 3, s.xn.data(), n, out, pool_);
    }
    ForTokens(pool_, n, s.q_dim + 2 * s.kv_dim, [&](int i) {
      float* qi = s.q.data() + static_cast<size_t>(i) * s.q_dim;
      float* ki = k_new + static_cast<size_t>(i) * s.kv_dim;
      float* vi = v_new + static_cast<size_t>(i) * s.kv_dim;
      if (L.bq != nullptr) {
        for (int d = 0; d < s.q_dim; ++d) qi[d] += L.bq[d];
        for (int d = 0; d < s.kv_dim; ++d) ki[d] += L.bk[d];
        for (int d = 0; d < s.kv_dim; ++d) vi[d] += L.bv[d];
      }
      if (L.q_norm != nullptr) {  // per-head RMS norms before RoPE (qwen3, gemma3)
        for (int h = 0; h < c.n_head; ++h) {
          RmsNorm(qi + h * hd, L.q_norm, hd, c.rms_eps, qi + h * hd);
        }
        for (int h = 0; h < c.n_head_kv; ++h) {
          RmsNorm(ki + h * hd, L.k_norm, hd, c.rms_eps, ki + h * hd);
        }
      }
      const float* cs = rope + static_cast<size_t>(i) * c.n_rot;
      for (int h = 0; h < c.n_head; ++h) RopeApply(qi + h * hd, c.n_rot, cs, cs + half_rot, neox);
      for (int h = 0; h < c.n_head_kv; ++h) {
        RopeApply(ki + h * hd, c.n_rot, cs, cs + half_rot, neox);
      }
    });

    // Attention: one task per (KV head, block of queries); threads split tasks, never a
    // reduction. A task scores the block's queries of every head sharing that KV head against
    // one tile of prefix keys at a time (each key row is loaded once per tile, not once per
    // query), then accumulates values tile by tile; per query the keys and values still go in
    // increasing order through the same Dot / Softmax / Axpy operations.
    float* attn = s.xn.data();  // [N, q_dim]; xn is free until the next norm
    const int n_blocks = (n + s.block - 1) / s.block;
    const int n_tasks = n_blocks * c.n_head_kv;
    auto attend = [&](int t0, int t1, int thread_idx) {
      float* scores = s.scores.data() + static_cast<size_t>(thread_idx) * s.scores_per_thread;
      const float** anc = s.ancestors.data() + static_cast<size_t>(thread_idx) * s.anc_capacity;
      for (int task = t0; task < t1; ++task) {
        const int g = task % c.n_head_kv;
        const int i0 = (task / c.n_head_kv) * s.block, i1 = std::min(n, i0 + s.block);
        const size_t kv_off = static_cast<size_t>(g) * hd;
        const float* k_head = k_layer + kv_off;
        const float* v_head = v_layer + kv_off;
        // Row m of `scores` (n_ctx wide) belongs to query i0 + m / group, head
        // g * group + m % group.
        auto row = [&](int m) { return scores + static_cast<size_t>(m) * n_ctx_; };
        auto query = [&](int m) {
          return s.q.data() + static_cast<size_t>(i0 + m / group) * s.q_dim +
                 (g * group + m % group) * hd;
        };
        auto output = [&](int m) {
          return attn + static_cast<size_t>(i0 + m / group) * s.q_dim +
                 (g * group + m % group) * hd;
        };
        const int rows = (i1 - i0) * group;
        // The keys query i sees: committed positions [first_key(i), n_past), then its
        // ancestors from depth first_anc(i) on (with a window of w, the positions > p - w for
        // the query's position p = n_past + depth; without one, all of them). Key tiles start
        // at the block's first visible key; each row takes its part of a tile.
        auto first_key = [&](int i) {
          return window == 0 ? 0
                             : std::clamp(n_past_ + s.depth[base + i] - window + 1, 0, n_past_);
        };
        auto first_anc = [&](int i) {
          return window == 0 ? 0 : std::max(0, s.depth[base + i] + 1 - window);
        };
        auto row_first_key = [&](int m) { return first_key(i0 + m / group); };
        int block_first_key = n_past_;
        for (int i = i0; i < i1; ++i) block_first_key = std::min(block_first_key, first_key(i));
        for (int j0 = block_first_key; j0 < n_past_; j0 += kKeyTile) {
          const int j1 = std::min(j0 + kKeyTile, n_past_);
          for (int m = 0; m < rows; ++m) {
            const int j = std::max(j0, row_first_key(m));
            if (j >= j1) continue;
            DotBatch(query(m), k_head + static_cast<size_t>(j) * s.kv_dim, s.kv_dim, j1 - j, hd,
                     kq_scale, row(m) + j);
          }
        }
        // Row i's pending ancestors and itself, root first: their K / V rows (depth order is
        // position order, whichever pass and slot each came from).
        auto ancestors = [&](int i, const float* head) {
          const int n_anc = s.depth[base + i] + 1;
          for (int j = base + i, k = n_anc - 1; j >= 0; j = s.parents[j], --k) {
            anc[k] = head + static_cast<size_t>(n_past_ + j) * s.kv_dim;
          }
          return n_anc;
        };
        for (int i = i0; i < i1; ++i) {
          const int skip = first_anc(i);
          const int n_anc = ancestors(i, k_head) - skip;
          const int fk = first_key(i);
          for (int m = (i - i0) * group; m < (i - i0 + 1) * group; ++m) {
            float* sc = row(m);
            DotGather(query(m), anc + skip, n_anc, hd, kq_scale, sc + n_past_);
            if (c.attn_softcap > 0) SoftCap(sc + fk, n_past_ - fk + n_anc, c.attn_softcap);
            Softmax(sc + fk, n_past_ - fk + n_anc);
            float* out = output(m);
            std::fill(out, out + hd, 0.0f);
          }
        }
        for (int j0 = block_first_key; j0 < n_past_; j0 += kKeyTile) {
          const int j1 = std::min(j0 + kKeyTile, n_past_);
          for (int m = 0; m < rows; ++m) {
            const int j = std::max(j0, row_first_key(m));
            if (j >= j1) continue;
            AxpyRows(row(m) + j, v_head + static_cast<size_t>(j) * s.kv_dim, s.kv_dim, j1 - j, hd,
                     output(m));
          }
        }
        for (int i = i0; i < i1; ++i) {
          const int skip = first_anc(i);
          const int n_anc = ancestors(i, v_head) - skip;
          for (int m = (i - i0) * group; m < (i - i0 + 1) * group; ++m) {
            AxpyGather(row(m) + n_past_, anc + skip, n_anc, hd, output(m));
          }
        }
      }
    };
    const int64_t attn_work = static_cast<int64_t>(n) * c.n_head * (n_past_ + 1) * hd;
    if (pool_ == nullptr || pool_->size() == 1 || attn_work < kMinParallelAttention) {
      attend(0, n_tasks, 0);
    } else {
      pool_->Run([&](int t, int nt) {
        attend(static_cast<int>(static_cast<int64_t>(n_tasks) * t / nt),
               static_cast<int>(static_cast<int64_t>(n_tasks) * (t + 1) / nt), t);
      });
    }

    MatMul(L.wo, attn, n, s.tmp.data(), pool_);
    ForTokens(pool_, n, c.n_embd, [&](int i) { add_residual(i, L.attn_post_norm); });

    ForTokens(pool_, n, c.n_embd, [&](int i) {
      RmsNorm(s.x.data() + i * c.n_embd, L.ffn_norm, c.n_embd, c.rms_eps,
              s.xn.data() + i * c.n_embd);
    });
    {
      const WeightMatrix* w[] = {&L.w_gate, &L.w_up};
      float* out[] = {s.gate.data(), s.up.data()};
      MatMulShared(w, 2, s.xn.data(), n, out, pool_);
    }
    // Element-wise, so any split gives the same bits; split in whole vectors of 16.
    const auto glu = c.ffn_act == FfnActivation::kGeluTanh ? GeluGlu : SwiGlu;
    ForElements(pool_, static_cast<int64_t>(n) * c.n_ff, [&](int64_t lo, int64_t hi) {
      glu(s.gate.data() + lo, s.up.data() + lo, static_cast<int>(hi - lo), s.gate.data() + lo);
    });
    MatMul(L.w_down, s.gate.data(), n, s.tmp.data(), pool_);
    ForTokens(pool_, n, c.n_embd, [&](int i) { add_residual(i, L.ffn_post_norm); });
  }

  ForTokens(pool_, n, c.n_embd, [&](int i) {
    RmsNorm(s.x.data() + i * c.n_embd, model_.output_norm(), c.n_embd, c.rms_eps,
            s.xn.data() + i * c.n_embd);
  });
  MatMul(s.logit_tokens.empty() ? model_.output() : s.output_rows.matrix(), s.xn.data(), n,
         s.logits.data(), pool_);
  if (c.final_softcap > 0) {
    ForElements(pool_, static_cast<int64_t>(n) * n_logits(), [&](int64_t lo, int64_t hi) {
      SoftCap(s.logits.data() + lo, static_cast<int>(hi - lo), c.final_softcap);
    });
  }
  n_batch_ = n;
  s.pending = true;
  s.pending_is_chain = chain;
  s.n_pending = base + n;
  return Status::Ok();
}

int Context::n_pending() const { return impl_->pending ? impl_->n_pending : 0; }

void Context::KeepPath(std::span<const int32_t> path) {
  Impl& s = *impl_;
  GOOSE_CHECK(s.pending);
  GOOSE_CHECK(path.size() <= static_cast<size_t>(s.n_pending));
  for (size_t j = 0; j < path.size(); ++j) {
    GOOSE_CHECK(path[j] >= 0 && path[j] < s.n_pending);
    GOOSE_CHECK(s.parents[path[j]] == (j == 0 ? -1 : path[j - 1]));
  }
  // In place, increasing j: each source slot n_past + path[j] >= its destination n_past + j,
  // and no later source has been overwritten yet (path[k] >= k > j) - docs/methods.md §4.5.
  const LlamaConfig& c = model_.config();
  const size_t layer_kv = static_cast<size_t>(n_ctx_) * s.kv_dim;
  const size_t row_bytes = static_cast<size_t>(s.kv_dim) * sizeof(float);
  for (size_t j = 0; j < path.size(); ++j) {
    if (static_cast<size_t>(path[j]) == j) continue;
    const size_t src = static_cast<size_t>(n_past_ + path[j]) * s.kv_dim;
    const size_t dst = (n_past_ + j) * s.kv_dim;
    for (int l = 0; l < c.n_layer; ++l) {
      std::memcpy(s.k_cache + l * layer_kv + dst, s.k_cache + l * layer_kv + src, row_bytes);
      std::memcpy(s.v_cache + l * layer_kv + dst, s.v_cache + l * layer_kv + src, row_bytes);
    }
  }
  n_past_ += static_cast<int>(path.size());
  s.pending = false;
}

void Context::KeepAll() {
  GOOSE_CHECK(impl_->pending && impl_->pending_is_chain);
  n_past_ += impl_->n_pending;
  impl_->pending = false;
}

void Context::Truncate(int n_past) {
  GOOSE_CHECK(n_past >= 0 && n_past <= n_past_);
  n_past_ = n_past;
  impl_->pending = false;
}

}  // namespace goose
