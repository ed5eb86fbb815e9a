// graft: "Draft Less, Retrieve More" (docs/methods.md §3.9). A draft model's tree with
// dynamic-depth pruning, whose freed verify slots go to retrieved tokens (context match and
// transition table), as one best-first tree over the three sources valued by acceptance
// measured per source, depth and confidence (method/graft_tree.h, kGraft); +paper: the paper's
// sequential prune-then-graft (kGraftPaper). The table is harvested from every target pass like
// the GOOSE methods' and kept across requests by default.
#include "method/graft_tree.h"
#include "method/table_drafter.h"
#include "util/check.h"

namespace goose {
namespace {

class GraftDrafter : public TableDrafter {
 public:
  GraftDrafter(GrowMode mode, const DrafterEnv& env, DraftLearned& learned, bool keep)
      : TableDrafter(*learned.table, keep, /*harvest_whole_prompt=*/true),
        grower_(mode, GrowParams{.shortlist = env.draft_shortlist}, *env.draft_ctx, learned,
                learned.table.get()) {}
  void Begin(std::span<const int32_t> prompt) override {
    TableDrafter::Begin(prompt);
    grower_.Begin(prompt);
  }
  void ObservePrefill(std::span<const int32_t> prompt, int i0, int i1,
                      const ScoredRows& rows) override {
    TableDrafter::ObservePrefill(prompt, i0, i1, rows);
    grower_.ObservePrefill(prompt, i0, i1);
  }
  Proposal Propose(const CycleInput& in) override { return grower_.Propose(in); }
  void Observe(const CycleInput& in, const Proposal& p, const ScoredRows& rows,
               const AcceptResult& accepted) override {
    grower_.Observe(in, p, accepted);  // first: its cycle clock stops here
    TableDrafter::Observe(in, p, rows, accepted);
  }
  void SetPrediction(std::span<const int32_t> prediction) override {
    grower_.SetPrediction(prediction);
  }
  void Commit(std::span<const int32_t> tokens) override { grower_.Commit(tokens); }

 private:
  TreeGrower grower_;
};

class Graft : public Method {
 public:
  const char* name() const override { return "graft"; }
  const char* summary() const override {
    return "a draft model's pruned tree, freed slots grafted with context-match and table "
           "tokens, best-first over measured acceptance (+paper: sequential prune-then-graft)";
  }
  std::vector<std::string> modifiers() const override { return {"paper"}; }
  std::vector<std::string> variants() const override { return {"graft", "graft+paper"}; }
  int DefaultBudget(const SpecParams&) const override { return 32; }
  bool needs_draft_model() const override { return true; }
  bool SizesOwnTrees(const SpecParams&) const override { return true; }
  bool uses_table() const override { return true; }
  bool KeepsTableByDefault(const SpecParams&) const override { return true; }
  std::unique_ptr<Learned> NewLearned(const SpecParams& spec,
                                      const DrafterEnv& env) const override {
    auto learned = std::make_unique<DraftLearned>();
    learned->table = std::move(Method::NewLearned(spec, env)->table);
    return learned;
  }
  std::unique_ptr<Drafter> NewDrafter(const SpecParams& spec, Learned& learned,
                                      const DrafterEnv& env) const override {
    GOOSE_CHECK(env.draft_ctx != nullptr);
    return std::make_unique<GraftDrafter>(
        spec.Has("paper") ? GrowMode::kGraftPaper : GrowMode::kGraft, env,
        static_cast<DraftLearned&>(learned), KeepsTable(spec));
  }
};

}  // namespace

const Method& GraftMethod() {
  static const Graft m;
  return m;
}

}  // namespace goose
