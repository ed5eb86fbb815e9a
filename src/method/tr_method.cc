// tr: Token Recycling (docs/methods.md §3.3): TR's static 81-node template filled from a
// unigram-only successor table, harvested from the last prompt row and every verified row, kept
// across requests (hot start) as TR's reference does.
#include "method/table_drafter.h"
#include "tree/tree_builders.h"

namespace goose {
namespace {

constexpr int kTemplateNodes = 81;  // root + TR's 80 template nodes (convention 16)

class TrDrafter : public TableDrafter {
 public:
  using TableDrafter::TableDrafter;
  Proposal Propose(const CycleInput& in) override {
    Proposal p;
    p.tree = BuildTrTree(in.anchor, table_);
    p.tree.Truncate(in.budget);  // a budget below the template cuts it
    p.route = p.tree.size() > 1 ? Route::kBranchTree : Route::kAr;
    return p;
  }
};

class Tr : public Method {
 public:
  const char* name() const override { return "tr"; }
  const char* summary() const override {
    return "Token Recycling: top-k successors recycled from every pass, fixed 81-node template";
  }
  int DefaultBudget(const SpecParams&) const override { return kTemplateNodes; }
  bool budget_grows_tree() const override { return false; }
  bool uses_table() const override { return true; }
  bool propose_reads_only() const override { return true; }
  bool KeepsTableByDefault(const SpecParams&) const override { return true; }  // convention 6
  std::unique_ptr<Learned> NewLearned(const SpecParams&, const DrafterEnv& env) const override {
    auto learned = std::make_unique<Learned>();
    // TR's reference table is unigram-only.
    learned->table =
        std::make_unique<TransitionTable>(env.vocab_size(), 10, 16,
                                          /*use_bigram=*/false, env.target_fingerprint);
    return learned;
  }
  std::unique_ptr<Drafter> NewDrafter(const SpecParams& spec, Learned& learned,
                                      const DrafterEnv&) const override {
    // Convention 4: TR harvests only the last prompt row.
    return std::make_unique<TrDrafter>(*learned.table, KeepsTable(spec),
                                       /*harvest_whole_prompt=*/false);
  }
};

}  // namespace

const Method& TrMethod() {
  static const Tr m;
  return m;
}

}  // namespace goose
