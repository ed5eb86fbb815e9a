// Engine: one sequence's KV cache (and a draft model's), the variants' learned state and a
// budget policy; Generate() runs one request to its end, as a Sequence stepped by a Scheduler
// (engine/sequence.h, engine/scheduler.h). Plain decoding and every speculative method run the
// same cycle: the method's Drafter proposes a DraftTree rooted at the last committed token ->
// Context::Forward scores it -> WalkTree accepts (greedy or position-keyed sampling) -> the
// drafter observes the scored rows -> KeepPath and the output commit the accepted path. A plain
// step is the one-node tree, so every method emits exactly the tokens plain decoding emits (the
// model's tree logits are bit-identical to one-token logits). Methods live in method/
// (method.h); the engine knows none of them by name.
//
// What a variant learns across requests (its Learned) is kept per LearnedKey, so interleaved
// variants never feed each other's drafts. Variants that keep their tables (TR and the tuned
// GOOSE by default) live in a LearnedStore that several Engines of one model may share (a
// Session's engines, server slots); per-request (cold) variants stay private to the engine.
// An Engine itself is not thread-safe: one per thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "budget/budget_policy.h"
#include "engine/learned_store.h"
#include "engine/request.h"
#include "engine/sequence.h"
#include "method/method.h"
#include "model/model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace goose {

class Engine {
 public:
  // n_ctx = 0: min(model context, 4096). `shared`: the store of kept variants to share with
  // other engines of the same model (null: the engine's own). `policy`: the budget policy to
  // share with other engines whose sequences run in the same passes (null: the engine's own).
  // `kv`: its contexts' KV cache (model.h).
  Engine(const Model& model, int n_ctx, ThreadPool* pool,
         std::shared_ptr<LearnedStore> shared = nullptr,
         std::shared_ptr<BudgetPolicy> policy = nullptr, KvType kv = KvType::kF16);
  ~Engine();

  // Checks the request (CheckRequest), then runs it to its end.
  StatusOr<GenerateResult> Generate(std::span<const int32_t> prompt, const GenerateParams& params,
                                    const TokenCallback& on_tokens = {});
  // Checks the request and makes its Sequence on this engine's context, for a scheduler to
  // step (one sequence of an engine at a time: they share its context). The sequence must not
  // outlive the engine.
  StatusOr<std::unique_ptr<Sequence>> Start(std::span<const int32_t> prompt,
                                            const GenerateParams& params,
                                            TokenCallback on_tokens = {});
  // What a request must satisfy: a non-empty prompt of vocabulary ids shorter than the
  // context, stop tokens in the vocabulary, a known method, a draft model for the methods that
  // need one, a cost curve for --budget auto. The one check every front end relies on.
  Status CheckRequest(std::span<const int32_t> prompt, const GenerateParams& params) const;

  // Gives the draft-model methods (Method::needs_draft_model) a draft model, with a KV cache of
  // this engine's context size. Errors (CheckDraftModel, method/draft_model.h): another
  // vocabulary, a context shorter than this engine's. `draft` must outlive the engine.
  // shortlist: the draft's logit columns (DraftRunner, method/draft_model.h; -1: its default).
  Status SetDraftModel(const Model& draft, int shortlist = -1);
  const Model* draft_model() const { return env_.draft; }

  // --budget auto (budget/budget_policy.h): the verify-cost curve to choose on, and, on this
  // machine's curve, what its cycles take with `prior` (earlier runs' medians) until then.
  // Requests with SpecParams::auto_budget fail without a curve.
  void SetCostCurve(const std::vector<CostSample>& curve) { policy_->SetCostCurve(curve); }
  void LearnPassCosts(std::vector<CostSample> prior) { policy_->LearnPassCosts(std::move(prior)); }
  std::vector<CostSample> CostCurve() const { return policy_->CostCurve(); }
  std::vector<CostSample> ObservedPassCosts() const { return policy_->ObservedPassCosts(); }
  // The budgets auto chose for `spec` so far in this engine (index = budget; empty if none).
  std::vector<int64_t> ChosenBudgets(const SpecParams& spec) const {
    return policy_->ChosenBudgets(SpecVariantKey(spec));
  }
  BudgetPolicy& budget_policy() { return *policy_; }

  const Model& model() const { return model_; }
  int n_ctx() const;
  // The engine's KV cache, for a front end that scores rows itself between requests (the C
  // API's goose_session_score); a request starts by emptying it.
  Context& context() { return *ctx_; }
  // Cumulative statistics over all requests since construction.
  const SpecStats& total_stats() const { return total_; }
  // What the variant of `spec` has learned so far (its table is null for methods without one).
  // For --tr-cache save/load: load the table, then run a variant that keeps it (a variant that
  // does not clears it at the start of every request). Not to be used while another engine
  // sharing the store generates.
  Learned& learned(const SpecParams& spec);
  TransitionTable* table(const SpecParams& spec) { return learned(spec).table.get(); }
  const SpecStats& variant_stats(const SpecParams& spec) { return learned(spec).stats; }
  // Saves what every variant this engine ran has learned to the store's cache (the shared
  // variants and this engine's per-request ones); Ok without a cache.
  Status SaveLearned();
  // Identity of the model (config, tensor directory, a sample of every tensor's bytes); stored
  // in saved tables so a table never loads into another model's engine.
  uint64_t model_fingerprint() const { return env_.target_fingerprint; }

 private:
  const Model& model_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Context> draft_ctx_;  // the draft model's KV cache (SetDraftModel)
  DrafterEnv env_;
  std::shared_ptr<LearnedStore> shared_;
  // Variants that do not keep their tables, by LearnedKey.
  std::map<std::string, std::pair<SpecParams, std::unique_ptr<Learned>>> private_;
  std::shared_ptr<BudgetPolicy> policy_;
  SpecStats total_;
};

// See Engine::model_fingerprint().
uint64_t ModelFingerprint(const Model& model);

}  // namespace goose
