// Speculation methods: one Method (what it is called, accepts and defaults to) and one Drafter
// (what it does each cycle) per method, found by name in a registry (registry.cc).
//
// A cycle, as the engine runs it (engine/engine.h):
//   Propose(anchor, budget) -> Proposal{tree, route}   the method's sources and builder
//   Context::Forward(tree)                              the target scores every node
//   WalkTree                                            the verifier accepts a root path + bonus
//   Observe(proposal, rows, accepted)                   the method learns (harvest, acceptance)
//   Commit(tokens)                                      the committed tokens join its context
// A plain step is the one-node tree (route kAr). Whatever a drafter proposes, the output is
// plain decoding's: the walk only accepts what the target itself emits.
//
// Learned: what a variant learns across requests (its transition table, its cycle statistics,
// method extras such as tuned GOOSE's acceptance model). One per (model, variant key); the
// engine holds `mu` around every Drafter call that reads or writes it, so variants that keep
// their tables can be shared by every Engine of a model (server slots). The drafter on its own
// (capi/) instead lets the Propose of several requests run together where the method says
// Propose only reads its Learned (Method::propose_reads_only).
// Drafters see the target's scores only as each row's top-k (ScoredRows): from goose's own
// Context, or from a host engine that verifies goose's trees with its own model.
// Drafters are per request; they are not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "budget/budget_history.h"
#include "draft/transition_table.h"
#include "model/model.h"
#include "tree/draft_tree.h"
#include "util/status.h"
#include "util/thread_pool.h"
#include "verify/spec_stats.h"
#include "verify/verifier.h"

namespace goose {

// Which method a request runs, by name: METHOD[+MODIFIER...] (ParseSpecVariant), plus the budget.
struct SpecParams {
  std::string method = "none";
  // Modifiers the method accepts (Method::modifiers()), e.g. "paper", "k5", "noextras"; kept in
  // the order given. keep / cold are not here but in keep_table.
  std::vector<std::string> modifiers;
  // Keep transition tables across requests (hot start). -1 = the method's default.
  int keep_table = -1;
  int budget = 0;  // node budget incl. root; 0 = the method's default
  // Cost-aware budget (--budget auto): the engine chooses every cycle's budget from its verify
  // cost curve (Engine::SetCostCurve) and what the variant measured; a budget of 1 is a plain
  // step (no method drafts then). Methods that size their own trees get the curve instead.
  bool auto_budget = false;
  // Draft-model methods: ModelFingerprint of the draft model, set by the engine. What such a
  // variant learns (acceptance, statistics, budget history) holds for one (target, draft) pair,
  // so it is part of LearnedKey. 0 otherwise.
  uint64_t draft_fingerprint = 0;

  bool Has(std::string_view modifier) const;
};

// What a drafter may use besides its Learned: the target model and, for draft-model methods,
// the draft model with its own context. Owned by the engine; outlives every drafter.
struct DrafterEnv {
  const Model* target = nullptr;
  uint64_t target_fingerprint = 0;  // ModelFingerprint(*target): stamped into saved tables
  ThreadPool* pool = nullptr;
  // The draft model (-md) and its KV cache, as large as the target's; null without one. Its
  // vocabulary is the target's (or a prefix of it: CheckDraftModel, method/draft_model.h). One
  // drafter uses draft_ctx at a time (the engine runs one request at a time); whatever it left
  // there, the next drafter starts by truncating.
  const Model* draft = nullptr;
  uint64_t draft_fingerprint = 0;  // ModelFingerprint(*draft)
  Context* draft_ctx = nullptr;
  // The draft's vocabulary shortlist (DraftRunner, method/draft_model.h); -1: its default.
  int draft_shortlist = -1;
  // The target's vocabulary size when there is no `target` (the drafter on its own, capi/).
  int n_vocab = 0;

  int vocab_size() const { return target != nullptr ? target->config().n_vocab : n_vocab; }
};

// The target's scores of a pass's rows as drafters read them: each row's best tokens. From a
// Context (ContextRows) or from a host engine's top-k (capi/), the same ids and scores.
class ScoredRows {
 public:
  virtual ~ScoredRows() = default;
  virtual int n_rows() const = 0;
  // Row i's k best tokens, logit descending (ties: lower id first), with the softmax over those
  // k logits (TopK, draft/transition_table.h); where fewer are known, id -1 and score 0.
  virtual void TopK(int row, int k, int32_t* ids, float* scores) const = 0;
};

// The rows of a Context's last pass.
class ContextRows : public ScoredRows {
 public:
  explicit ContextRows(const Context& ctx) : ctx_(ctx) {}
  int n_rows() const override { return ctx_.n_batch(); }
  void TopK(int row, int k, int32_t* ids, float* scores) const override {
    goose::TopK(ctx_.logits(row), ctx_.model().config().n_vocab, k, ids, scores);
  }

 private:
  const Context& ctx_;
};

struct Learned {
  virtual ~Learned() = default;
  std::mutex mu;
  SpecStats stats;                         // every verified cycle of this variant so far
  BudgetHistory budgets;                   // what the cycles at each auto-chosen budget delivered
  std::unique_ptr<TransitionTable> table;  // null for methods without one
  // A method's own learned state beyond these, as bytes (engine/learned_cache.h persists it).
  // LoadExtra gets what SaveExtra wrote, possibly by another build: it checks everything and
  // returns an error (leaving the state as it was) rather than trusting it.
  virtual std::string SaveExtra() const { return {}; }
  virtual Status LoadExtra(std::string_view bytes) { return Status::Ok(); }
  // Every count times `factor` < 1: older evidence weighs less.
  virtual void Decay(double factor) {
    stats.Scale(factor);
    budgets.Scale(factor);
  }
};

// One cycle's input.
struct CycleInput {
  int32_t anchor = -1;       // last committed token, not yet in the KV cache: the tree's root
  int32_t anchor_prev = -1;  // the committed token before it
  int budget = 1;            // node budget incl. the root
  // --budget auto for a method that sizes its own trees (Method::SizesOwnTrees): the measured
  // verify costs (sizes a tree may take, smallest first, cost non-decreasing), to choose the
  // size that maximises expected tokens per second; budget is then the largest one. Else null.
  const std::vector<CostSample>* cost = nullptr;
  // With `cost`: the run's tokens per second in the curve's time, when the curve is not this
  // machine's (`goose bench --budgets auto-cm`, a given curve), for the cut's Dinkelbach rate:
  // a rate timed on this machine would price another machine's seconds. 0: the drafter's own
  // (its cycles' wall time, which here is the curve's time too).
  double rate = 0;
};

struct Proposal {
  DraftTree tree;
  Route route = Route::kAr;  // how the tree was built (statistics, and what Observe learns)
  DraftWork work;            // what a draft model spent on it (statistics; zero otherwise)
  // [n] for the drafters that value their nodes: the tokens node i is expected to add (its
  // calibrated P(root path accepted); root 1), in tree order, so that a scheduler sharing one
  // pass among several trees can cut each where its nodes are worth least. Empty otherwise.
  std::vector<double> values;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // The request's prompt (BOS included), before its prefill.
  virtual void Begin(std::span<const int32_t> prompt) {}
  // The request's predicted output (the text it expects the generation to reproduce, as tokens
  // without BOS), after Begin; only requests that give one call it. The methods that draft
  // from context (tuned goose, pld, graft) draft from it too (draft/prediction_matcher.h);
  // the others, and goose's paper preset, ignore it.
  virtual void SetPrediction(std::span<const int32_t> prediction) {}
  // Prefill pass over prompt[i0, i1) just scored: rows.TopK(i - i0) is prompt row i.
  virtual void ObservePrefill(std::span<const int32_t> prompt, int i0, int i1,
                              const ScoredRows& rows) {}
  virtual Proposal Propose(const CycleInput& in) = 0;
  // After the walk: `p` as scored (possibly cut to the context's room, or the engine's plain
  // step), rows.TopK(i) = node i's row (a host engine may give fewer rows than nodes, or none),
  // `accepted` what the walk accepted.
  virtual void Observe(const CycleInput& in, const Proposal& p, const ScoredRows& rows,
                       const AcceptResult& accepted) {}
  // Tokens committed since the last call: the first generated token after the prefill, then
  // each cycle's accepted tokens and bonus (all of them, also past a stop token or n_predict).
  virtual void Commit(std::span<const int32_t> tokens) {}
};

class Method {
 public:
  virtual ~Method() = default;
  virtual const char* name() const = 0;
  virtual const char* summary() const = 0;  // one line: what it drafts and how it shapes trees
  // Modifiers accepted besides keep / cold, which every method with a table takes.
  virtual std::vector<std::string> modifiers() const { return {}; }
  // Named variants worth running (tests run every one of them; help lists them). Default: the
  // method, and with a table the form with the other table lifetime (+keep or +cold).
  virtual std::vector<std::string> variants() const;
  // Checks the combination and fills in defaults (e.g. balanced's k3), after parsing.
  virtual Status Configure(SpecParams* spec) const { return Status::Ok(); }
  virtual int DefaultBudget(const SpecParams& spec) const { return 60; }
  // False when a budget cannot grow the tree past the default (PLD's 10-token chain, TR's
  // template): a benchmark runs such a method once.
  virtual bool budget_grows_tree() const { return true; }
  virtual bool uses_table() const { return false; }
  // True when the method drafts with a draft model (DrafterEnv::draft): the engine refuses a
  // request without one.
  virtual bool needs_draft_model() const { return false; }
  virtual bool KeepsTableByDefault(const SpecParams& spec) const { return false; }
  // True when the drafter values its nodes and, under --budget auto, cuts its own tree where
  // expected tokens per second peak (CycleInput::cost); otherwise the engine's BudgetChooser
  // picks each cycle's budget.
  virtual bool SizesOwnTrees(const SpecParams& spec) const { return false; }
  // True when its drafters' Propose and Commit only read their Learned (never write it, nor
  // anything else shared), so that the drafter on its own (capi/) may run those of several
  // requests at once under a shared lock. False: one at a time.
  virtual bool propose_reads_only() const { return false; }
  // The variant's learned state; the default holds the stats and, for table methods, a table.
  virtual std::unique_ptr<Learned> NewLearned(const SpecParams& spec, const DrafterEnv& env) const;
  virtual std::unique_ptr<Drafter> NewDrafter(const SpecParams& spec, Learned& learned,
                                              const DrafterEnv& env) const = 0;

  bool KeepsTable(const SpecParams& spec) const;
};

// Every registered method, in registry order (none first).
const std::vector<const Method*>& Methods();
// nullptr if no method has that name.
const Method* FindMethod(std::string_view name);
// "none|pld|tr|..."
std::string MethodNames();
// Every registered method's variants(), in registry order: the names tests and help run over.
std::vector<std::string> AllVariants();

// METHOD[+MOD...]: e.g. "goose+paper+keep", "balanced+k5", "goose+cold". Validates the
// modifiers against the method and applies its defaults (Configure). Leaves the budget alone.
Status ParseSpecVariant(std::string_view name, SpecParams* out);
// The canonical name of what `spec` learns across requests: the method, its modifiers in the
// method's order, and for table methods the table lifetime ("balanced+k3+cold", "goose+keep",
// "goose+paper+cold", "pld"). Budget and auto_budget are not part of it. ParseSpecVariant
// reads it back.
std::string SpecVariantKey(const SpecParams& spec);
// The key of what `spec` learns, in memory and in the learned cache: SpecVariantKey, and for a
// draft-model method its draft's fingerprint ("graft+keep@draft-0123456789abcdef").
std::string LearnedKey(const SpecParams& spec);
// The method of a parsed spec (never null after ParseSpecVariant succeeded).
const Method& MethodOf(const SpecParams& spec);
// spec.budget, else the method's default.
int ResolvedBudget(const SpecParams& spec);

}  // namespace goose
