// Engine: the decoding loop. Plain decoding and every speculative method run the same cycle:
//   the method's Drafter proposes a DraftTree rooted at the anchor -> Context::Forward scores it
//   -> WalkTree accepts (greedy or position-keyed sampling) -> KeepPath commits the accepted KV
//   entries -> the drafter observes the scored rows and what was accepted -> the tokens commit.
// A plain step is the one-node tree, so every method emits exactly the tokens plain decoding
// emits (the model's tree logits are bit-identical to one-token logits). Methods live in
// method/ (method.h); the engine knows none of them by name.
//
// Conventions follow docs/methods.md §7: the prompt is prefilled in passes whose last
// row yields generated token 1; forward passes are counted after prefill (MAT = generated /
// passes); the last cycle may overshoot n_predict and is cut; stop tokens (the model's
// end-of-generation tokens and GenerateParams::stop_tokens) end generation unless ignore_eos,
// right after the first one committed, even inside an accepted path.
//
// What a variant learns across requests (its Learned: table, statistics, acceptance model) is
// kept per LearnedKey, so interleaved variants never feed each other's drafts. Variants that
// keep their tables (TR and the tuned GOOSE by default) live in a LearnedStore that several
// Engines of one model may share (server slots): the engine holds the variant's mutex around
// every drafter call that touches it, never during a forward pass. Per-request (cold) variants
// stay private to the engine. An Engine itself is not thread-safe: one per thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/budget_chooser.h"
#include "engine/learned_cache.h"
#include "engine/observed_costs.h"
#include "method/method.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "util/status.h"
#include "util/thread_pool.h"
#include "verify/spec_stats.h"

namespace goose {

// Called after every verified cycle (after the drafter observed it, before the commit) with the
// scored proposal and what the walk accepted; for tests and tracing.
using CycleCallback = std::function<void(const Proposal& proposal, const AcceptResult& accepted)>;

struct GenerateParams {
  int n_predict = 128;
  // The prompt is scored in passes of at most this many tokens (0: one pass). A pass keeps the
  // logits of every row it scores, n x n_vocab floats (2.5 GB for 4096 tokens of a 152k
  // vocabulary); every row's logits equal a one-token pass's, so the split changes no bit.
  int prefill_chunk = 256;
  SamplingParams sampling;
  bool ignore_eos = false;
  // Extra stop tokens, honoured like the model's end-of-generation tokens (unless ignore_eos).
  std::vector<int32_t> stop_tokens;
  SpecParams spec;  // must have come through ParseSpecVariant (or name a method with defaults)
  CycleCallback on_cycle;
};

// Tokens in the largest prefill pass over a prompt of n_prompt tokens.
inline int PrefillPassTokens(const GenerateParams& p, int n_prompt) {
  return p.prefill_chunk > 0 ? std::min(p.prefill_chunk, n_prompt) : n_prompt;
}

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (prompt excluded)
  SpecStats stats;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  bool hit_context_limit = false;
};

// Called with the newly committed tokens after every cycle; return false to stop early.
using TokenCallback = std::function<bool(std::span<const int32_t>)>;

// Learned state of the variants that keep it across requests, by LearnedKey; thread-safe.
// With a cache, a variant starts from what earlier runs saved (engine/learned_cache.h).
class LearnedStore {
 public:
  explicit LearnedStore(std::shared_ptr<LearnedCache> cache = nullptr)
      : cache_(std::move(cache)) {}
  // The variant's Learned, created on first use (loaded from the cache). Never removed.
  Learned& Get(const SpecParams& spec, const DrafterEnv& env);
  // Saves every variant that ran a cycle to the cache (none: Ok). Not while requests run.
  Status Save();
  LearnedCache* cache() const { return cache_.get(); }

 private:
  std::shared_ptr<LearnedCache> cache_;
  std::mutex mu_;
  std::map<std::string, std::pair<SpecParams, std::unique_ptr<Learned>>> learned_;
};

class Engine {
 public:
  // n_ctx = 0: min(model context, 4096). `shared`: the store of kept variants to share with
  // other engines of the same model (null: the engine's own).
  Engine(const Model& model, int n_ctx, ThreadPool* pool,
         std::shared_ptr<LearnedStore> shared = nullptr);
  ~Engine();

  StatusOr<GenerateResult> Generate(std::span<const int32_t> prompt, const GenerateParams& params,
                                    const TokenCallback& on_tokens = {});

  // Gives the draft-model methods (Method::needs_draft_model) a draft model, with a KV cache of
  // this engine's context size. Errors (CheckDraftModel, method/draft_model.h): another
  // vocabulary, a context shorter than this engine's. `draft` must outlive the engine.
  // shortlist: the draft's logit columns (DraftRunner, method/draft_model.h; -1: its default).
  Status SetDraftModel(const Model& draft, int shortlist = -1);
  const Model* draft_model() const { return env_.draft; }

  // The verify-cost curve --budget auto chooses on (engine/cost_cache.h measures and caches
  // it). Requests with SpecParams::auto_budget fail without one.
  void SetCostCurve(const std::vector<CostSample>& curve);
  // The budgets auto chose for `spec` so far in this engine (index = budget; empty if none).
  std::vector<int64_t> ChosenBudgets(const SpecParams& spec) const;
  // --budget auto on this machine's curve: the choosers' curve is the set one corrected by
  // what this engine's cycles take (ObservedCosts::Curve, engine/observed_costs.h), per size from
  // ObservedPassCosts once it has the size, else from `prior` (medians of earlier runs,
  // engine/cost_cache.h keeps them). Not for a curve of another machine or model (`goose bench
  // --cost-model`), about which this machine's passes say nothing.
  void LearnPassCosts(std::vector<CostSample> prior);
  // The curve --budget auto chooses on now: the set one, corrected as above if learning.
  std::vector<CostSample> CostCurve() const;
  // What this engine's decode cycles (the pass and the drafter's work around it) take per tree
  // size: the median of its last 16 cycles, for the sizes passed at least 4 times
  // (ObservedCosts::Medians; kept in the cost cache for the next run, engine/cost_cache.h
  // RecordObservedCosts).
  std::vector<CostSample> ObservedPassCosts() const { return observed_.Medians(); }

  const Model& model() const { return model_; }
  int n_ctx() const;
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

  // Engines that share one ThreadPool (server slots) take turns on it: ThreadPool::Run is not
  // reentrant, so when set, the engine holds *mu around every Context forward pass (prefill
  // passes and tree passes) and its draft-model drafters around every draft pass, and only then;
  // the rest of drafting and verification run outside it. Null (the default): no lock. Set
  // before Generate; `mu` must outlive the engine's calls.
  void set_pool_mutex(std::mutex* mu) { env_.pool_mu = mu; }

 private:
  Status CheckRequest(std::span<const int32_t> prompt, const GenerateParams& params) const;
  StatusOr<int32_t> Prefill(std::span<const int32_t> prompt, const GenerateParams& params,
                            Drafter& drafter, std::mutex& learned_mu, Sampler& sampler);
  const Model& model_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Context> draft_ctx_;  // the draft model's KV cache (SetDraftModel)
  DrafterEnv env_;
  std::shared_ptr<LearnedStore> shared_;
  // Variants that do not keep their tables, by LearnedKey.
  std::map<std::string, std::pair<SpecParams, std::unique_ptr<Learned>>> private_;
  std::vector<CostSample> cost_curve_;
  bool learn_costs_ = false;             // LearnPassCosts
  std::vector<CostSample> prior_costs_;  // LearnPassCosts' prior
  ObservedCosts observed_;               // what this engine's decode cycles take
  std::map<std::string, BudgetChooser> choosers_;  // --budget auto, by SpecVariantKey
  SpecStats total_;
};

// See Engine::model_fingerprint().
uint64_t ModelFingerprint(const Model& model);

}  // namespace goose
