#include "method/draft_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "draft/transition_table.h"
#include "ops/ops.h"
#include "util/check.h"
#include "util/thread_pool.h"

namespace goose {

namespace {

// Catch-up chains longer than this are scored in several passes (as a prefill is): a pass
// holds n x n_vocab logits.
constexpr int kCatchUpChunk = 256;

// "'piece'" with control bytes escaped, for error messages.
std::string Quoted(const std::string& piece) {
  std::string out = "'";
  for (unsigned char ch : piece) {
    if (ch < 0x20 || ch == 0x7f) {
      out += StrFormat("\\x%02x", ch);
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "'";
}

}  // namespace

Status CheckDraftModel(const Model& target, const Model& draft, int n_ctx) {
  const Tokenizer& t = target.tokenizer();
  const Tokenizer& d = draft.tokenizer();
  const int nt = t.n_vocab(), nd = d.n_vocab();
  for (int32_t id = 0; id < std::min(nt, nd); ++id) {
    const std::string a = t.TokenToPiece(id), b = d.TokenToPiece(id);
    if (a != b) {
      return Status::Error(StrFormat(
          "the draft model's vocabulary differs from the target's at token %d: draft %s, target "
          "%s (a draft must share the target's token list)",
          id, Quoted(b).c_str(), Quoted(a).c_str()));
    }
  }
  if (nd > nt) {
    return Status::Error(StrFormat(
        "the draft model's vocabulary has %d tokens, the target's %d: draft token %d %s is not in "
        "the target (a draft must share the target's token list, or a prefix of it)",
        nd, nt, nt, Quoted(d.TokenToPiece(nt)).c_str()));
  }
  if (draft.config().n_vocab != nd) {
    return Status::Error(
        StrFormat("the draft model has %d output rows for %d tokens", draft.config().n_vocab, nd));
  }
  const int need =
      std::min(n_ctx, target.config().n_ctx_train > 0 ? target.config().n_ctx_train : n_ctx);
  if (draft.config().n_ctx_train > 0 && draft.config().n_ctx_train < need) {
    return Status::Error(StrFormat(
        "the draft model's context length is %d tokens, shorter than the request's %d (lower -c "
        "to at most %d, or use a draft with a longer context)",
        draft.config().n_ctx_train, need, draft.config().n_ctx_train));
  }
  return Status::Ok();
}

std::string DraftCostWarning(const Model& target, const Model& draft) {
  if (draft.weight_bytes() < target.weight_bytes()) return "";
  return StrFormat(
      "the draft model reads %.1f MB of weights per token, the target %.1f MB: drafting costs "
      "more than it can save (use a smaller draft model)",
      draft.weight_bytes() / 1e6, target.weight_bytes() / 1e6);
}

void DraftTopK(const float* logits, int n_vocab, int k, std::vector<DraftToken>* out) {
  out->clear();
  k = std::min(k, n_vocab);
  if (k <= 0) return;
  std::vector<int32_t> ids(k);
  std::vector<float> scores(k);
  TopK(logits, n_vocab, k, ids.data(), scores.data());
  const float top = logits[ids[0]];
  if (!std::isfinite(top)) return;
  // Normaliser over the logits within 30 of the top, jumped to with a vectorized scan.
  const float floor = top - 30.0f;
  double sum = 0;
  for (int v = FirstAbove(logits, n_vocab, floor); v < n_vocab;
       v += 1 + FirstAbove(logits + v + 1, n_vocab - v - 1, floor)) {
    sum += std::exp(static_cast<double>(logits[v]) - top);
  }
  for (int i = 0; i < k; ++i) {
    if (ids[i] < 0) break;
    out->push_back(
        {ids[i], static_cast<float>(std::exp(static_cast<double>(logits[ids[i]]) - top) / sum)});
  }
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

DraftRunner::DraftRunner(Context& ctx, int shortlist) : ctx_(ctx) {
  const int n_vocab = ctx.model().config().n_vocab;
  if (shortlist == kDefaultShortlist) {
    shortlist = n_vocab >= kShortlistMinVocab ? n_vocab / 4 : 0;
  }
  shortlist_ = (std::max(shortlist, 0) + 15) / 16 * 16;
  if (shortlist_ >= n_vocab) shortlist_ = 0;
}

void DraftRunner::Begin(std::span<const int32_t> prompt) {
  seq_.assign(prompt.begin(), prompt.end());
  ctx_.Truncate(0);
  n_chain_ = n_pending_ = last_pass_pid_ = 0;
  listed_ = 0;
  if (shortlist_ == 0) {
    ctx_.SetLogitTokens({});
    return;
  }
  // The prompt's tokens, then the lowest ids.
  const int n_vocab = ctx_.model().config().n_vocab;
  column_of_.assign(n_vocab, -1);
  std::vector<int32_t> tokens;
  for (int32_t t : prompt) {
    if (static_cast<int>(tokens.size()) == shortlist_) break;
    if (t < 0 || t >= n_vocab || column_of_[t] >= 0) continue;
    column_of_[t] = static_cast<int32_t>(tokens.size());
    tokens.push_back(t);
  }
  listed_ = prompt.size();
  unseen_.clear();
  is_unseen_.assign(shortlist_, 0);
  for (int32_t t = 0; t < n_vocab && static_cast<int>(tokens.size()) < shortlist_; ++t) {
    if (column_of_[t] >= 0) continue;
    column_of_[t] = static_cast<int32_t>(tokens.size());
    unseen_.push_back(column_of_[t]);
    is_unseen_[column_of_[t]] = 1;
    tokens.push_back(t);
  }
  ctx_.SetLogitTokens(tokens);
}

void DraftRunner::ListSeen() {
  const int n_vocab = static_cast<int>(column_of_.size());
  for (; listed_ < seq_.size() && shortlist_ > 0; ++listed_) {
    const int32_t t = seq_[listed_];
    if (t < 0 || t >= n_vocab) continue;
    if (column_of_[t] >= 0) {
      is_unseen_[column_of_[t]] = 0;  // seen now: its column stays
      continue;
    }
    while (!unseen_.empty() && !is_unseen_[unseen_.back()]) unseen_.pop_back();
    if (unseen_.empty()) continue;
    const int32_t j = unseen_.back();
    unseen_.pop_back();
    is_unseen_[j] = 0;
    column_of_[ctx_.logit_token(j)] = -1;
    column_of_[t] = j;
    ctx_.SetLogitToken(j, t);
  }
}

void DraftRunner::TopK(int pid, int k, std::vector<DraftToken>* out) const {
  DraftTopK(logits(pid), ctx_.n_logits(), k, out);
  for (DraftToken& d : *out) d.token = ctx_.logit_token(d.token);
}

void DraftRunner::ObservePrefill(std::span<const int32_t> prompt, int i0, int i1, DraftWork* work) {
  if (ctx_.n_past() != i0) return;  // an earlier chunk failed: the first catch-up feeds it all
  const double t0 = NowSeconds();
  for (int b = i0; b < i1; b += kCatchUpChunk) {
    const int e = std::min(i1, b + kCatchUpChunk);
    if (!ctx_.ForwardChain(prompt.subspan(b, e - b)).ok()) {
      break;
    }
    ctx_.KeepAll();
    if (work) {
      ++work->passes;
      work->rows += e - b;
    }
  }
  if (work) work->seconds += NowSeconds() - t0;
}

void DraftRunner::Commit(std::span<const int32_t> tokens) {
  seq_.insert(seq_.end(), tokens.begin(), tokens.end());
}

bool DraftRunner::BeginCycle(DraftWork* work, std::span<const int32_t> extra,
                             std::span<const int32_t> extra_parents) {
  // Anything still pending (a cycle the engine did not observe) is dropped.
  ctx_.Truncate(ctx_.n_past());
  n_chain_ = n_pending_ = last_pass_pid_ = n_extra_ = 0;
  GOOSE_CHECK(extra.size() == extra_parents.size());
  ListSeen();  // (between cycles: no logits of this cycle are read yet)
  const int n_seq = static_cast<int>(seq_.size());
  if (n_seq == 0) return false;
  if (ctx_.n_past() > n_seq - 1) ctx_.Truncate(n_seq - 1);  // never holds the anchor
  const double t0 = NowSeconds();
  int from = ctx_.n_past();
  bool ok = true;
  while (ok && n_seq - from > kCatchUpChunk) {
    ok = ctx_.ForwardChain(std::span<const int32_t>(seq_.data() + from, kCatchUpChunk)).ok();
    if (ok) {
      ctx_.KeepAll();
      from += kCatchUpChunk;
      ++work->passes;
      work->rows += kCatchUpChunk;
    }
  }
  const int chain = n_seq - from;
  const int n_extra = ok && chain + static_cast<int>(extra.size()) <= ctx_.n_ctx() - from
                          ? static_cast<int>(extra.size())
                          : 0;
  std::vector<int32_t> tokens(seq_.begin() + from, seq_.end()), parents(chain);
  for (int i = 0; i < chain; ++i) parents[i] = i - 1;
  for (int i = 0; i < n_extra; ++i) {
    GOOSE_CHECK(extra_parents[i] >= -1 && extra_parents[i] < i);
    tokens.push_back(extra[i]);
    parents.push_back(extra_parents[i] < 0 ? chain - 1 : chain + extra_parents[i]);
  }
  ok = ok && ctx_.Forward(tokens, parents).ok();
  work->seconds += NowSeconds() - t0;
  if (!ok) {
    ctx_.Truncate(ctx_.n_past());
    return false;
  }
  ++work->passes;
  work->rows += chain + n_extra;
  n_chain_ = chain;
  n_extra_ = n_extra;
  n_pending_ = chain + n_extra;
  last_pass_pid_ = 0;
  return true;
}

int DraftRunner::room() const {
  return n_chain_ > 0 ? ctx_.n_ctx() - ctx_.n_past() - n_pending_ : 0;
}

int DraftRunner::Score(std::span<const int32_t> tokens, std::span<const int32_t> parent_pids,
                       DraftWork* work) {
  const int n = static_cast<int>(tokens.size());
  if (n_chain_ == 0 || n == 0 || n > room()) return -1;
  const double t0 = NowSeconds();
  const Status st = ctx_.ForwardExtend(tokens, parent_pids);
  work->seconds += NowSeconds() - t0;
  if (!st.ok()) return -1;  // pending nodes of earlier passes stay as they were
  ++work->passes;
  work->rows += n;
  last_pass_pid_ = n_pending_;
  n_pending_ += n;
  return last_pass_pid_;
}

const float* DraftRunner::logits(int pid) const {
  GOOSE_CHECK(in_last_pass(pid));
  return ctx_.logits(pid - last_pass_pid_);
}

void DraftRunner::EndCycle(std::span<const int32_t> accepted_pids) {
  if (n_chain_ == 0) return;
  std::vector<int32_t> keep(n_chain_);
  for (int i = 0; i < n_chain_; ++i) keep[i] = i;
  for (int32_t pid : accepted_pids) {
    if (pid < 0) break;
    keep.push_back(pid);
  }
  ctx_.KeepPath(keep);
  n_chain_ = n_pending_ = last_pass_pid_ = 0;
}

}  // namespace goose
