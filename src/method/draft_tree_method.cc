// draft-tree: a draft model's dense dynamic tree, EAGLE-2 style (top-k children of the best
// nodes of each depth by cumulative draft probability, fixed depth, the best `budget` nodes
// kept); +prune: the same draft with dynamic-depth pruning (method/graft_tree.h, kPrune).
#include "method/graft_tree.h"
#include "util/check.h"

namespace goose {
namespace {

class DraftTreeDrafter : public Drafter {
 public:
  DraftTreeDrafter(GrowMode mode, const DrafterEnv& env, DraftLearned& learned)
      : grower_(mode, GrowParams{.shortlist = env.draft_shortlist}, *env.draft_ctx, learned,
                nullptr) {}
  void Begin(std::span<const int32_t> prompt) override { grower_.Begin(prompt); }
  void ObservePrefill(std::span<const int32_t> prompt, int i0, int i1, const ScoredRows&) override {
    grower_.ObservePrefill(prompt, i0, i1);
  }
  Proposal Propose(const CycleInput& in) override { return grower_.Propose(in); }
  void Observe(const CycleInput& in, const Proposal& p, const ScoredRows&,
               const AcceptResult& accepted) override {
    grower_.Observe(in, p, accepted);
  }
  void Commit(std::span<const int32_t> tokens) override { grower_.Commit(tokens); }

 private:
  TreeGrower grower_;
};

class DraftTreeMethodImpl : public Method {
 public:
  const char* name() const override { return "draft-tree"; }
  const char* summary() const override {
    return "a draft model's dense tree, EAGLE-2 style: top-k of the best nodes per depth by "
           "cumulative draft probability, fixed depth (+prune: dynamic-depth pruning)";
  }
  std::vector<std::string> modifiers() const override { return {"prune"}; }
  std::vector<std::string> variants() const override { return {"draft-tree", "draft-tree+prune"}; }
  int DefaultBudget(const SpecParams&) const override { return 32; }
  bool needs_draft_model() const override { return true; }
  // +prune values its nodes by calibrated acceptance and sizes its tree on the cost curve; the
  // dense tree leaves --budget auto to the engine's BudgetChooser.
  bool SizesOwnTrees(const SpecParams& spec) const override { return spec.Has("prune"); }
  std::unique_ptr<Learned> NewLearned(const SpecParams&, const DrafterEnv&) const override {
    return std::make_unique<DraftLearned>();
  }
  std::unique_ptr<Drafter> NewDrafter(const SpecParams& spec, Learned& learned,
                                      const DrafterEnv& env) const override {
    GOOSE_CHECK(env.draft_ctx != nullptr);
    return std::make_unique<DraftTreeDrafter>(
        spec.Has("prune") ? GrowMode::kPrune : GrowMode::kDense, env,
        static_cast<DraftLearned&>(learned));
  }
};

}  // namespace

const Method& DraftTreeMethod() {
  static const DraftTreeMethodImpl m;
  return m;
}

}  // namespace goose
