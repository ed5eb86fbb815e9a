// Draft-model plumbing shared by the draft-model methods (draft, draft-tree, graft): the checks a
// draft model must pass, and DraftRunner, which keeps the draft model's KV cache in step with
// the target's commits and scores what a drafter asks for (docs/methods.md §3.9).
//
// Contract
// - CheckDraftModel(target, draft, n_ctx): the draft's token list must be the target's or a
//   prefix of it (every id the draft can emit then means the same token in the target);
//   otherwise an error naming the first differing token. Its trained context must hold the
//   request: at least min(n_ctx, the target's trained context) tokens.
// - DraftCostWarning: non-empty when the draft reads as many weight bytes per token as the
//   target or more (drafting would then cost more than it saves).
// - DraftRunner keeps `seq`, every token the target has committed (prompt, then each cycle's
//   accepted tokens and bonus). Its context holds a prefix of seq; the rest (tokens it did not
//   draft: grafted ones, the bonus, plain steps) is fed at the start of the next cycle as one
//   chain, whose last token is the anchor: BeginCycle. Nodes are then scored on top of it with
//   Score (one draft pass each, Context::ForwardExtend), addressed by pending id (pid): the
//   catch-up chain is pids 0..c-1, its last one the anchor (root_pid()). EndCycle keeps the
//   catch-up chain plus the accepted path's leading nodes that the draft scored (KeepPath over
//   all pending nodes); the rest of the committed tokens wait for the next catch-up.
// - A failed draft pass (it cannot: room is checked first) or a cycle the engine ran without
//   the drafter (a plain step) loses nothing: the cache is cut back to what it holds for sure
//   and the next BeginCycle feeds the rest.
// - Timing: every pass's wall time goes into the cycle's DraftWork (passes, rows, seconds).
// - Vocabulary shortlist (FR-Spec's idea): the draft's logits cover `shortlist` tokens only
//   (Context::SetLogitTokens), at first the prompt's tokens and then the lowest ids (BPE and
//   SentencePiece vocabularies number frequent pieces first); every token the target commits
//   takes the column of the highest-id token not seen in the request, while there is one.
//   TopK is over those columns: the draft never proposes another token (drafts are only
//   proposals: the output does not change). Default: a quarter of the vocabulary when it has
//   kShortlistMinVocab tokens or more, else all of it. Why: a small draft's output matrix is
//   most of what it reads per token (45M-cost drafter of a 32000-token vocabulary: 17 of 28
//   MB), read again every cycle after the target's pass has evicted it.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "util/status.h"
#include "verify/spec_stats.h"

namespace goose {

Status CheckDraftModel(const Model& target, const Model& draft, int n_ctx);
std::string DraftCostWarning(const Model& target, const Model& draft);

struct DraftToken {
  int32_t token;
  float p;  // the draft's probability for it (softmax over the whole vocabulary)
};

// The k most likely tokens of a logits row with their probabilities, most likely first (ties:
// lower id). Logits more than 30 below the top are left out of the normaliser (< 1e-13 each).
void DraftTopK(const float* logits, int n_vocab, int k, std::vector<DraftToken>* out);

// Monotonic seconds, for timing draft work (DraftWork::seconds).
double NowSeconds();

class DraftRunner {
 public:
  static constexpr int kShortlistMinVocab = 4096;
  static constexpr int kDefaultShortlist = -1;
  // shortlist: tokens the logits cover (rounded up to a multiple of 16; 0 or >= the vocabulary:
  // all of it; kDefaultShortlist: see the contract).
  explicit DraftRunner(Context& ctx, int shortlist = kDefaultShortlist);

  // The request's prompt, before its prefill; ObservePrefill scores prompt[i0, i1) into the
  // draft cache as the target's prefill does (errors leave the rest to the first catch-up).
  void Begin(std::span<const int32_t> prompt);
  void ObservePrefill(std::span<const int32_t> prompt, int i0, int i1, DraftWork* work);
  void Commit(std::span<const int32_t> tokens);

  // Scores the tokens the cache lacks (the last is the anchor, seq's last token). False if the
  // draft could not score it (then draft nothing this cycle). logits(root_pid()) is the root's.
  // `extra` rows ride along in the same pass (guesses below the root, before the draft's own
  // opinion of the root is known): extra_parents[i] is -1 (the root) or an earlier extra row;
  // extra row i gets pid root_pid() + 1 + i. Extras that do not fit are dropped (all of them).
  bool BeginCycle(DraftWork* work, std::span<const int32_t> extra = {},
                  std::span<const int32_t> extra_parents = {});
  // How many extra rows the last BeginCycle scored.
  int n_extra() const { return n_extra_; }
  int root_pid() const { return n_chain_ - 1; }
  // The pid the next pass's first token will get.
  int next_pid() const { return n_pending_; }
  // One draft pass over `tokens`, whose parents are pids (earlier pending nodes, or nodes of
  // this pass before them). Returns the pid of tokens[0], or -1 if there is no room for it.
  int Score(std::span<const int32_t> tokens, std::span<const int32_t> parent_pids, DraftWork* work);
  // Logits of a pid scored by the last pass (BeginCycle or Score): [n_logits()], column j
  // scoring token ctx.logit_token(j).
  const float* logits(int pid) const;
  // DraftTopK of that row, as token ids.
  void TopK(int pid, int k, std::vector<DraftToken>* out) const;
  int shortlist() const { return shortlist_; }  // 0: the whole vocabulary
  bool in_last_pass(int pid) const { return pid >= last_pass_pid_ && pid < n_pending_; }
  // Free slots for more pending nodes.
  int room() const;
  // Keeps the catch-up chain and the leading `accepted_pids` (root path below the anchor, in
  // order, as far as they are scored: -1 ends it).
  void EndCycle(std::span<const int32_t> accepted_pids);

  const Model& model() const { return ctx_.model(); }
  const std::vector<int32_t>& seq() const { return seq_; }

 private:
  void ListSeen();  // seq's tokens since the last call into the shortlist
  Context& ctx_;
  std::vector<int32_t> seq_;
  int shortlist_ = 0;
  std::vector<int32_t> column_of_;  // [n_vocab]: a token's logit column, -1: none
  std::vector<int32_t> unseen_;     // columns of tokens not seen, the highest id last (lazily:
  std::vector<uint8_t> is_unseen_;  // a column in unseen_ whose flag is 0 was seen since)
  size_t listed_ = 0;               // seq_ tokens already in the shortlist
  int n_chain_ = 0;                 // catch-up chain of the current cycle (0: no cycle open)
  int n_pending_ = 0;               // pending nodes of the current cycle
  int last_pass_pid_ = 0;           // first pid of the last pass
  int n_extra_ = 0;
};

}  // namespace goose
