// Context: a sequence's KV cache, its pending tree and its commits (KeepPath, KeepAll,
// Truncate). Its passes are one-sequence BatchPasses (forward_pass.cc), which fill the state
// kept here (context_state.h).
#include <cstring>

#include "model/context_state.h"
#include "model/model.h"
#include "util/check.h"
#include "util/large_buffer.h"

namespace goose {

Context::Context(const Model& model, int n_ctx, ThreadPool* pool, KvType kv)
    : model_(model), pool_(pool), state_(std::make_unique<ContextState>()) {
  const LlamaConfig& c = model.config();
  GOOSE_CHECK(n_ctx >= 0);
  n_ctx_ = ContextSize(c, n_ctx);
  ContextState& st = *state_;
  st.kv_type = kv;
  st.kv_dim = c.n_head_kv * c.head_dim;
  st.layer_stride = static_cast<size_t>(n_ctx_) * st.kv_dim;
  st.row_bytes = static_cast<size_t>(st.kv_dim) * KvTypeBytes(kv);
  const size_t bytes = KvCacheBytes(c, n_ctx_, kv) / 2;
  st.k_buf = std::make_unique<LargeBuffer>(bytes);
  st.v_buf = std::make_unique<LargeBuffer>(bytes);
  st.k_cache = static_cast<uint8_t*>(st.k_buf->data());
  st.v_cache = static_cast<uint8_t*>(st.v_buf->data());
  st.rope_factors = model.rope_factors(n_ctx_);
}

KvType Context::kv_type() const { return state_->kv_type; }

Context::~Context() = default;

int Context::n_batch() const { return state_->LogitsReadable() ? n_batch_ : 0; }

const float* Context::logits(int i) const {
  GOOSE_CHECK(i >= 0 && i < n_batch());
  return state_->logits + static_cast<size_t>(i) * n_logits();
}

void Context::SetLogitTokens(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) GOOSE_CHECK(t >= 0 && t < model_.config().n_vocab);
  state_->logit_tokens.assign(tokens.begin(), tokens.end());
  if (tokens.empty()) {
    state_->output_rows = RowSubset();  // (the whole output matrix: no copy)
  } else {
    state_->output_rows.Assign(model_.output(), tokens);
  }
  n_batch_ = 0;  // the last pass's logits no longer read as these columns
}

void Context::SetLogitToken(int j, int32_t token) {
  GOOSE_CHECK(j >= 0 && j < static_cast<int>(state_->logit_tokens.size()));
  GOOSE_CHECK(token >= 0 && token < model_.config().n_vocab);
  state_->logit_tokens[j] = token;
  state_->output_rows.Set(j, token);
  n_batch_ = 0;
}

int Context::n_logits() const {
  return state_->logit_tokens.empty() ? model_.config().n_vocab
                                      : static_cast<int>(state_->logit_tokens.size());
}

int32_t Context::logit_token(int j) const {
  return state_->logit_tokens.empty() ? j : state_->logit_tokens[j];
}

Status Context::ForwardChain(std::span<const int32_t> tokens) {
  std::vector<int32_t>& chain = state_->chain;
  if (chain.size() < tokens.size()) {
    const size_t old = chain.size();
    chain.resize(tokens.size());
    for (size_t i = old; i < chain.size(); ++i) chain[i] = static_cast<int32_t>(i) - 1;
  }
  return Forward(tokens, std::span<const int32_t>(chain.data(), tokens.size()));
}

Status Context::Forward(std::span<const int32_t> tokens, std::span<const int32_t> parents) {
  return ForwardOwn(tokens, parents, /*extend=*/false);
}

Status Context::ForwardExtend(std::span<const int32_t> tokens, std::span<const int32_t> parents) {
  return ForwardOwn(tokens, parents, /*extend=*/true);
}

Status Context::ForwardOwn(std::span<const int32_t> tokens, std::span<const int32_t> parents,
                           bool extend) {
  if (!state_->own_pass) state_->own_pass = std::make_unique<BatchPass>(model_, pool_);
  const SequenceRows rows{this, tokens, parents, extend};
  return state_->own_pass->Run({&rows, 1}, extend ? "ForwardExtend" : "Forward");
}

int Context::n_pending() const { return state_->pending ? state_->n_pending : 0; }

void Context::KeepPath(std::span<const int32_t> path) {
  ContextState& s = *state_;
  GOOSE_CHECK(s.pending);
  GOOSE_CHECK(path.size() <= static_cast<size_t>(s.n_pending));
  for (size_t j = 0; j < path.size(); ++j) {
    GOOSE_CHECK(path[j] >= 0 && path[j] < s.n_pending);
    GOOSE_CHECK(s.parents[path[j]] == (j == 0 ? -1 : path[j - 1]));
  }
  // In place, increasing j: each source slot n_past + path[j] >= its destination n_past + j,
  // and no later source has been overwritten yet (path[k] >= k > j) - docs/methods.md §4.5.
  const int n_layer = model_.config().n_layer;
  const size_t row_bytes = s.row_bytes;
  for (size_t j = 0; j < path.size(); ++j) {
    if (static_cast<size_t>(path[j]) == j) continue;
    const int src = n_past_ + path[j], dst = n_past_ + static_cast<int>(j);
    for (int l = 0; l < n_layer; ++l) {
      std::memcpy(s.k_row(l, dst), s.k_row(l, src), row_bytes);
      std::memcpy(s.v_row(l, dst), s.v_row(l, src), row_bytes);
    }
  }
  n_past_ += static_cast<int>(path.size());
  s.pending = false;
}

void Context::KeepAll() {
  GOOSE_CHECK(state_->pending && state_->pending_is_chain);
  n_past_ += state_->n_pending;
  state_->pending = false;
}

void Context::Truncate(int n_past) {
  GOOSE_CHECK(n_past >= 0 && n_past <= n_past_);
  n_past_ = n_past;
  state_->pending = false;
}

}  // namespace goose
