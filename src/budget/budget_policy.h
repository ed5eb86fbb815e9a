// BudgetPolicy: the node budget of every decode cycle (docs/methods.md §5), for every method
// and both budget modes. The engine asks it before each cycle (Plan) and tells it what the
// cycle did (Record); it never sees a model, a tree or a drafter.
//
// - Fixed (--budget N; 0 = the method's default): every cycle asks the drafter for that budget.
// - Auto (--budget auto), on the cost curve of SetCostCurve:
//   * a method that does not size its own trees gets each cycle's budget from its variant's
//     BudgetChooser (budget_chooser.h), from the curve and what the variant measured; budget 1
//     is a plain step, which the drafter does not propose (it still observes the row);
//   * a method that sizes its own trees (Method::SizesOwnTrees) gets the curve itself as plain
//     data (CyclePlan::cost) and the curve's largest size as its budget, and one cycle in
//     kExploreEvery a curve cut at the size next above or below its last tree
//     (ObservedCosts::ExploreCurve), so that a size once timed in a slow moment is tried again;
//   * with LearnPassCosts (this machine's curve, not another model's: `goose bench --budgets
//     auto-cm`), the curve follows what this policy's cycles take (ObservedCosts), refreshed at
//     most every kCostUpdateSeconds, and the idle drafter (idle_drafter.h) turns long runs of
//     root-only cycles into plain steps the drafter does not see.
// - State: the cost curve, the cycle costs observed, a chooser per variant (what it learns lives
//   in the variant's SpecStats and BudgetHistory, which the caller owns and persists); and per
//   request a SequenceBudget (the idle drafter, the exploration counters). Deterministic given
//   its inputs and the clock. Not thread-safe: one policy per thread of cycles.
// Output never depends on it: a budget only changes what is drafted.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "budget/budget_chooser.h"
#include "budget/budget_history.h"
#include "budget/cycle_rate.h"
#include "budget/idle_drafter.h"
#include "budget/observed_costs.h"
#include "budget/verify_cost.h"
#include "verify/spec_stats.h"

namespace goose {

// What the policy needs to know of a request's method.
struct BudgetRequest {
  std::string variant;       // SpecVariantKey: each variant has its own chooser
  bool auto_budget = false;  // --budget auto
  bool own_sizes = false;    // auto, and the drafter cuts its own trees on the curve
  int fixed_budget = 1;      // the budget when not auto (ResolvedBudget)
};

struct CyclePlan {
  bool ask = true;    // the drafter sees the cycle (it observes the scored rows)
  bool draft = true;  // ... and proposes the tree; false: the cycle is a plain step
  int budget = 1;     // node budget incl. the root
  const std::vector<CostSample>* cost = nullptr;  // own-sized trees: the sizes and their costs
  bool exploring = false;                         // `cost` is an exploration curve
  // With `cost` on a curve that is not this machine's (no LearnPassCosts): the request's tokens
  // per second in the curve's time (CycleInput::rate); 0 otherwise or before its first cycle.
  double rate = 0;
};

struct CycleOutcome {
  int tree_nodes = 1;
  int depth = 0;  // tokens in the cache when the cycle's pass ran
  int committed = 0;
  double pass_seconds = 0;   // the forward pass alone
  double draft_seconds = 0;  // the drafter's work around it: proposing and observing
  // Of draft_seconds, what a drafter that sizes its own trees already charges itself (a draft
  // model's passes, TreeGrower::CostSize): not counted twice in what a pass of this size costs.
  double own_draft_seconds = 0;
  // What this cycle adds to its pass's cost: the drafter's work that is not charged elsewhere.
  double ExtraSeconds(const BudgetRequest& r) const {
    return std::max(0.0, draft_seconds - (r.own_sizes ? own_draft_seconds : 0.0));
  }
};

// A request's state between its cycles.
class SequenceBudget {
 public:
  const BudgetRequest& request() const { return request_; }
  // The cycles this request ran at each budget auto chose (index = budget), plain steps of the
  // idle drafter included; empty unless the engine's chooser picks its budgets.
  const std::vector<int64_t>& chosen() const { return chosen_; }

 private:
  friend class BudgetPolicy;
  BudgetRequest request_;
  BudgetChooser* chooser = nullptr;  // auto only
  IdleDrafter idle;
  int own_cycles = 0, last_size = 1;
  std::vector<CostSample> explore;  // the exploration curve of the current cycle
  size_t cost_cycles = 0;           // observed cycles at the last curve refresh
  int depth = 0;                    // tokens in the cache at the last Plan
  std::chrono::steady_clock::time_point cost_time;
  std::vector<int64_t> chosen_;
  CycleRate curve_rate_;  // own-sized trees on a foreign curve: committed per curve second
  void Count(int budget) {
    if (chosen_.size() <= static_cast<size_t>(budget)) chosen_.resize(budget + 1, 0);
    ++chosen_[budget];
  }
};

class BudgetPolicy {
 public:
  // Own-sized trees explore one cycle in this many; the curve is refreshed every
  // kCostUpdateEvery cycles and at most every kCostUpdateSeconds (medians of <= 16 times, ~3 us,
  // which on the tiny model was 1% of its 70 us cycles).
  static constexpr int kExploreEvery = 8;
  static constexpr size_t kCostUpdateEvery = 4;
  static constexpr double kCostUpdateSeconds = 0.01;
  static constexpr int kDepthStep = 64;

  // The verify-cost curve auto chooses on (budget/cost_cache.h measures and caches it). Resets
  // the choosers: not while a request runs.
  void SetCostCurve(const std::vector<CostSample>& curve);
  // Corrects the curve by this policy's cycles, per size from Medians() once it has the size,
  // else from `prior` (medians of earlier runs, kept by the cost cache).
  void LearnPassCosts(std::vector<CostSample> prior);
  // How passes grow dearer with the tokens in the cache (the calibration's, cost_cache.h): each
  // request's curve is then the one for its depth (moved again every kDepthStep tokens), and
  // observed passes are brought back to the curve's depth before they correct it.
  void SetDepthCost(const DepthCost& depth) { depth_ = depth; }
  const DepthCost& depth_cost() const { return depth_; }
  // `curve` as it costs `depth` tokens deep.
  std::vector<CostSample> AtDepth(std::vector<CostSample> curve, int depth) const;
  bool has_curve() const { return !cost_curve_.empty(); }
  // The curve auto chooses on now: the set one, corrected as above if learning.
  std::vector<CostSample> CostCurve() const;
  // What this policy's cycles took per tree size (ObservedCosts::Medians), for the cost cache.
  std::vector<CostSample> ObservedPassCosts() const { return observed_.Medians(); }
  // The budgets auto chose for `variant` so far (index = budget; empty if none).
  std::vector<int64_t> ChosenBudgets(const std::string& variant) const;

  // A request starts: auto needs a curve (the caller checks has_curve()).
  SequenceBudget Begin(const BudgetRequest& request);
  // The next cycle, `depth` tokens into its context, from the variant's statistics and budget
  // history.
  CyclePlan Plan(SequenceBudget& seq, const SpecStats& stats, const BudgetHistory& history,
                 int depth = 0);
  // What the planned cycle did; the chooser records it in the variant's `history`.
  void Record(SequenceBudget& seq, const CyclePlan& plan, const CycleOutcome& outcome,
              BudgetHistory* history);
  // What a pass of `rows` rows took, with the work of the cycles it served (their passes and
  // the drafters' work around them, CycleOutcome::ExtraSeconds): what a cycle of this size costs.
  // On the tiny model a cycle's drafting is a sizeable share of an 86 us pass, and auto built
  // 2-node trees that paid by the pass times alone (0.92-0.96x plain decoding).
  // `depth_extra`: what the depth of its sequences added to it (DepthCost::Extra each), which
  // comes off before the time corrects the curve.
  void RecordPass(int rows, double seconds, double depth_extra = 0) {
    observed_.Record(rows, std::max(0.1 * seconds, seconds - depth_extra));
  }
  // The tokens each node of a tree of `nodes` nodes is expected to add, by the variant's
  // acceptance model ([i] for node i; [0] = 1, the root); empty without one (not auto, or
  // before its first estimate). For trees whose drafter values no node itself.
  std::vector<double> NodeValues(const SequenceBudget& seq, int nodes) const;

 private:
  std::vector<CostSample> cost_curve_;
  bool learn_costs_ = false;
  std::vector<CostSample> prior_costs_;
  DepthCost depth_;
  ObservedCosts observed_;
  std::map<std::string, BudgetChooser> choosers_;  // auto, by variant
};

}  // namespace goose
