// balanced: the isotropic control of GOOSE's Table 1 (docs/methods.md §3.4): a k-ary BFS
// tree (k = 3 by default, +k1..+k10) from the bigram table, same min_score and depth limit as
// GOOSE, a per-request table as GOOSE's reference. One plain step when the table does not know
// the anchor (no context matcher, no chain route).
#include <string>

#include "method/table_drafter.h"
#include "tree/tree_builders.h"

namespace goose {
namespace {

class BalancedDrafter : public TableDrafter {
 public:
  BalancedDrafter(TransitionTable& table, bool keep, int k)
      : TableDrafter(table, keep, /*harvest_whole_prompt=*/true), k_(k) {}
  Proposal Propose(const CycleInput& in) override {
    Proposal p;
    p.tree.Reset(in.anchor);
    if (table_.HasSuccessors(in.anchor, in.anchor_prev)) {
      BalancedParams bp;
      bp.budget = in.budget;
      bp.k = k_;
      p.tree = BuildBalancedTree(in.anchor, in.anchor_prev, table_, bp);
    }
    p.route = p.tree.size() > 1 ? Route::kBranchTree : Route::kAr;
    return p;
  }

 private:
  int k_;
};

class Balanced : public Method {
 public:
  const char* name() const override { return "balanced"; }
  const char* summary() const override {
    return "k-ary BFS tree from the bigram table (+k3 default, +k5 ...)";
  }
  std::vector<std::string> modifiers() const override {
    std::vector<std::string> out;
    for (int k = 1; k <= 10; ++k) out.push_back("k" + std::to_string(k));
    return out;
  }
  std::vector<std::string> variants() const override {
    return {"balanced", "balanced+k5", "balanced+keep"};
  }
  Status Configure(SpecParams* spec) const override {
    int ks = 0;
    for (const std::string& m : spec->modifiers) ks += m[0] == 'k';
    if (ks > 1) return Status::Error("balanced takes one branching modifier (+k1 .. +k10)");
    if (ks == 0) spec->modifiers.push_back("k3");
    return Status::Ok();
  }
  bool uses_table() const override { return true; }
  bool propose_reads_only() const override { return true; }
  std::unique_ptr<Drafter> NewDrafter(const SpecParams& spec, Learned& learned,
                                      const DrafterEnv&) const override {
    return std::make_unique<BalancedDrafter>(*learned.table, KeepsTable(spec), BranchK(spec));
  }
  static int BranchK(const SpecParams& spec) {
    for (const std::string& m : spec.modifiers) {
      if (m[0] == 'k') return std::stoi(m.substr(1));
    }
    return 3;
  }
};

}  // namespace

const Method& BalancedMethod() {
  static const Balanced m;
  return m;
}

}  // namespace goose
