// sequoia: Sequoia's DP tree (docs/methods.md §3.5): the shape that maximises expected
// accepted tokens under per-rank acceptance p_k measured online (blended with a prior), re-solved
// every 16 cycles or when the budget changes, filled from the bigram table.
#include "method/table_drafter.h"
#include "tree/tree_builders.h"

namespace goose {
namespace {

constexpr int kRanks = 10;
constexpr int kMaxDepth = 6;
constexpr int64_t kResolveEvery = 16;  // cycles

// Per-rank acceptance from the variant's statistics, blended with a prior worth kPriorParents
// reached parents so the first trees are sensible.
std::vector<double> RankAcceptance(const SpecStats& s) {
  static constexpr double kPrior[kRanks] = {0.35, 0.12,  0.06, 0.04, 0.03,
                                            0.02, 0.015, 0.01, 0.01, 0.01};
  constexpr double kPriorParents = 20;
  const double n = static_cast<double>(s.branch_parents_reached);
  std::vector<double> p(kRanks);
  for (int k = 0; k < kRanks; ++k) {
    const double hits =
        static_cast<double>(s.accepted_rank[static_cast<int>(NodeSource::kBranch)][k]);
    p[k] = (hits + kPrior[k] * kPriorParents) / (n + kPriorParents);
  }
  return p;
}

struct SequoiaLearned : Learned {
  SequoiaShape shape;
  int64_t shape_cycles = -1;  // stats.cycles when the shape was solved (-1: never)
  int shape_budget = 0;
};

class SequoiaDrafter : public TableDrafter {
 public:
  SequoiaDrafter(SequoiaLearned& learned, bool keep)
      : TableDrafter(*learned.table, keep, /*harvest_whole_prompt=*/true), learned_(learned) {}
  Proposal Propose(const CycleInput& in) override {
    Proposal p;
    p.tree.Reset(in.anchor);
    if (table_.HasSuccessors(in.anchor, in.anchor_prev)) {
      SequoiaLearned& s = learned_;
      const int64_t seen = s.stats.cycles;
      if (s.shape_cycles < 0 || seen - s.shape_cycles >= kResolveEvery ||
          s.shape_budget != in.budget) {
        s.shape = SequoiaDp(RankAcceptance(s.stats), in.budget, kMaxDepth);
        s.shape_cycles = seen;
        s.shape_budget = in.budget;
      }
      p.tree = BuildFromTemplate(in.anchor, in.anchor_prev, s.shape, table_, 0.0f);
    }
    p.route = p.tree.size() > 1 ? Route::kBranchTree : Route::kAr;
    return p;
  }

 private:
  SequoiaLearned& learned_;
};

class Sequoia : public Method {
 public:
  const char* name() const override { return "sequoia"; }
  const char* summary() const override {
    return "Sequoia's DP tree over per-rank acceptance measured online, from the bigram table";
  }
  bool uses_table() const override { return true; }
  std::unique_ptr<Learned> NewLearned(const SpecParams& spec,
                                      const DrafterEnv& env) const override {
    auto learned = std::make_unique<SequoiaLearned>();
    learned->table = std::move(Method::NewLearned(spec, env)->table);
    return learned;
  }
  std::unique_ptr<Drafter> NewDrafter(const SpecParams& spec, Learned& learned,
                                      const DrafterEnv&) const override {
    return std::make_unique<SequoiaDrafter>(static_cast<SequoiaLearned&>(learned),
                                            KeepsTable(spec));
  }
};

}  // namespace

const Method& SequoiaMethod() {
  static const Sequoia m;
  return m;
}

}  // namespace goose
