// pld: prompt lookup decoding (docs/methods.md §3.2): the earliest earlier occurrence of the last
// 3, 2 or 1 tokens, continued by the 10 tokens that followed it, verified as a chain. With a
// prediction, while the output follows it, the chain is the prediction's (budget - 1 tokens).
#include "draft/context_matcher.h"
#include "draft/prediction_matcher.h"
#include "method/method.h"
#include "tree/tree_builders.h"

namespace goose {
namespace {

class PldDrafter : public Drafter {
 public:
  void Begin(std::span<const int32_t> prompt) override { matcher_.Append(prompt); }
  void SetPrediction(std::span<const int32_t> prediction) override {
    prediction_ = PredictionMatcher(prediction);
  }
  void Commit(std::span<const int32_t> tokens) override {
    matcher_.Append(tokens);
    prediction_.Commit(tokens);
  }
  Proposal Propose(const CycleInput& in) override {
    Proposal p;
    const std::span<const int32_t> predicted = prediction_.Continuation(in.budget - 1);
    if (!predicted.empty()) {
      p.tree = BuildChain(in.anchor, predicted, in.budget, NodeSource::kPrediction);
    } else {
      p.tree = BuildChain(in.anchor, matcher_.ProposePld(3, 1, 10), in.budget);
    }
    p.route = p.tree.size() > 1 ? Route::kChain : Route::kAr;
    return p;
  }

 private:
  ContextMatcher matcher_{MatcherParams{.ngram_sizes = {3, 2, 1}}};  // prompt + committed tokens
  PredictionMatcher prediction_;                                     // empty without a prediction
};

class Pld : public Method {
 public:
  const char* name() const override { return "pld"; }
  const char* summary() const override {
    return "prompt lookup: earliest match of the last 3..1 tokens, 10 tokens, as a chain";
  }
  int DefaultBudget(const SpecParams&) const override { return 11; }  // root + 10 tokens
  bool budget_grows_tree() const override { return false; }
  bool propose_reads_only() const override { return true; }  // (no Learned to write)
  std::unique_ptr<Drafter> NewDrafter(const SpecParams&, Learned&,
                                      const DrafterEnv&) const override {
    return std::make_unique<PldDrafter>();
  }
};

}  // namespace

const Method& PldMethod() {
  static const Pld m;
  return m;
}

}  // namespace goose
