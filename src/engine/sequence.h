// Sequence: one request as a state machine that a scheduler steps (engine/scheduler.h):
//
//   Propose(policy) -> the scheduler scores rows() on context() -> Accept(pass seconds, policy)
//
// until done(). The first proposals are the prompt's prefill chunks (chains of at most
// GenerateParams::prefill_chunk tokens continuing the committed prefix; the drafter observes
// every scored prompt row, and the last row yields generated token 1); then one draft tree per
// cycle, rooted at the last committed token, under the budget the policy plans. Accept walks
// the tree (greedy, or sampling each visited node at its own position), lets the drafter learn
// from every scored row, commits the root and the accepted path in the KV cache and the tokens
// in the output, and reports them to the TokenCallback (false from it ends the request).
// Conventions (docs/methods.md §7): forward passes are counted after the prefill; the last
// cycle may overshoot n_predict and is cut; a stop token ends the request right after it, even
// inside an accepted path (unless ignore_eos); a full context ends it (hit_context_limit).
//
// A request's prompt and parameters must have passed Engine::CheckRequest. The Sequence runs no
// loop and takes no turn on the pool; it locks its variant's Learned (learned.mu) around every
// drafter and policy call, since sequences of other threads may share it. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "budget/budget_policy.h"
#include "engine/request.h"
#include "method/method.h"
#include "model/model.h"
#include "sample/sampler.h"

namespace goose {

class Sequence {
 public:
  // `ctx` (the sequence's KV cache), `learned`, `env` and `policy` outlive the sequence.
  Sequence(Context& ctx, Learned& learned, const DrafterEnv& env, BudgetPolicy& policy,
           std::span<const int32_t> prompt, const GenerateParams& params,
           TokenCallback on_tokens = {});
  ~Sequence();

  // The rows of the next pass: a prefill chunk (of at most max_prefill_rows tokens, 0: the
  // request's prefill_chunk) or the cycle's tree (never empty).
  void Propose(BudgetPolicy& policy, int max_prefill_rows = 0);
  std::span<const int32_t> tokens() const { return rows_tokens_; }
  std::span<const int32_t> parents() const { return rows_parents_; }
  bool prefilling() const { return prefilled_ < static_cast<int>(prompt_.size()); }
  // The proposed tree (decode cycles), its plan, and the tree's first `nodes` nodes only
  // (a prefix of a tree is a tree): before the pass, a scheduler sharing it among sequences.
  const Proposal& proposal() const { return proposal_; }
  const CyclePlan& plan() const { return plan_; }
  void Cut(int nodes);
  // After the scheduler's pass over rows() on context(): the cycle's outcome (decode cycles).
  const CycleOutcome& Accept(double pass_seconds, BudgetPolicy& policy);
  // Ends the request between passes (its client left, the server stops): the result so far.
  void Cancel();
  const BudgetRequest& budget_request() const { return budget_.request(); }
  const SequenceBudget& budget() const { return budget_; }

  bool done() const { return done_; }
  Context& context() { return ctx_; }
  const Context& context() const { return ctx_; }
  // The result so far (tokens, statistics, timings); complete once done().
  const GenerateResult& result() const { return result_; }
  GenerateResult TakeResult() { return std::move(result_); }

 private:
  void ProposePrefill(int max_rows);
  void AcceptPrefill();
  void ProposeTree(BudgetPolicy& policy);
  void AcceptTree(double pass_seconds, BudgetPolicy& policy);
  void Finish();
  // Appends committed tokens (cut at n_predict), tells the callback, decides done.
  void Emit(std::span<const int32_t> tokens, bool stopped);
  bool IsStop(int32_t token) const;

  Context& ctx_;
  Learned& learned_;
  const DrafterEnv& env_;
  std::vector<int32_t> prompt_;
  GenerateParams params_;
  TokenCallback on_tokens_;
  std::unique_ptr<Drafter> drafter_;
  Sampler sampler_;
  SequenceBudget budget_;
  GenerateResult result_;
  bool done_ = false;
  bool begun_ = false;
  int prefilled_ = 0;  // prompt tokens committed so far
  std::chrono::steady_clock::time_point phase_start_;
  // The open cycle.
  std::span<const int32_t> rows_tokens_, rows_parents_;  // the next pass's rows
  std::vector<int32_t> chain_;                           // a prefill chunk's parents: i - 1
  CycleInput in_;
  CyclePlan plan_;
  Proposal proposal_;
  CycleOutcome outcome_;
  double draft_seconds_ = 0;
};

}  // namespace goose
