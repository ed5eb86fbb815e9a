// Cost-aware node budget (`--budget auto`, docs/methods.md §5): Sequoia's hardware-aware criterion
// applied online, every cycle: choose B maximizing E[tokens(B)] / c(B).
//
// Contract
// - c(B) is a measured verify-cost curve (seconds of one pass over B nodes at a few B),
//   expanded to every B in 1..max by linear interpolation and made non-decreasing (a bigger
//   pass never costs less than a smaller one: a smaller tree could be padded).
// - E[tokens(B)] comes from a positional acceptance model (Sequoia's, docs/methods.md §3.5)
//   extended by depth: a node of rank k at depth d whose parent is on the accepted path is accepted
//   with probability q(d, k) = min(1, rank_p[k] * depth_factor[d]). E is the value of the best tree
//   of B nodes under that model: 1 (bonus) + the sum of the B-1 largest path products, which
//   for q <= 1 and rank_p non-increasing is exactly the best B-node subtree.
// - EstimateAcceptance() reads rank_p from the per-rank counts and depth_factor from the
//   per-depth counts of SpecStats (all sources pooled), shrunk towards 0 on little data.
// - Trees can come out smaller than their budget (PLD's chain is at most 11 nodes, TR's template
//   81, a builder may run out of candidates), and a pass costs what its tree has, not what the
//   budget allowed. The BudgetHistory (spec_stats.h) says how large each budget's trees came
//   out, and budget B is charged what it would have built in the cycles that tell: those run at
//   a budget >= B, whose tree of n nodes means min(B, n) nodes at B (BestBudgetForTreeSizes).
// - Only budgets at which the curve was measured are chosen: between samples the cost is a
//   guess (a batch kernel's cost steps at its tile sizes, which the interpolation smooths out).
// - The model's E is checked against what the cycles commit. A budget run for at least
//   kMinMeasuredCycles cycles is judged on the tokens its cycles committed over the cost of the
//   trees they built; the others on the model's E with its drafted part (E - 1) scaled by the
//   ratio of committed to predicted drafted tokens over all observed cycles, once there are
//   kMinMeasuredCycles of them. (The positional model values the best tree of B nodes, which
//   a builder does not always build: on the bench's GOOSE trees it rated 48 nodes above 16,
//   which then committed 3.8 tokens at 3.9x the cost of one token against 2.9 at 1.8x.)
// - Exploration: the measured budgets decide, so the measured budgets next to the best one
//   (the neighbouring sampled budgets) are run now and then (one cycle in explore_every) until
//   each has kMinMeasuredCycles cycles: a hill climb on measured rates, which persisted history
//   (engine/learned_cache.h) carries from one run to the next.
// - BudgetChooser never lets speculation lose to plain decoding: when no B > 1 beats
//   1 / c(1) it returns 1, probing with a cheap budget (the largest measured B with
//   c(B) <= probe_cost * c(1), at least 2) after probe_every calls, the interval doubling after
//   each fruitless probe up to max_probe_every, so exploration costs ~nothing on long runs.
//   The first cycles (nothing drafted and no history) use the same cheap budget.
// - The chooser keeps only transient state (the exploration counters, the last estimate);
//   what it learns lives in the variant's SpecStats and BudgetHistory, shared and persisted.
// Deterministic given its inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "budget/budget_history.h"
#include "verify/spec_stats.h"

namespace goose {

// cost[B] for B = 0..max_nodes (cost[0] unused = 0): interpolated, non-decreasing. max_nodes is
// the largest measured B. Empty if `samples` is empty or holds no positive time.
std::vector<double> ExpandCostCurve(const std::vector<CostSample>& samples);

// The calibrated curve corrected by pass times measured in real use (medians per tree size):
// a calibrated size with an observed time takes it; one without is scaled like the nearest
// observed size below it, or with no observed size below, like the nearest one above; then made
// non-decreasing (each size at most any larger size's time). Same sizes
// as `calibrated`, sorted; observed sizes the curve lacks are ignored (only calibrated sizes are
// chosen). Why: a calibration is a few passes at one moment, and on a machine whose memory
// bandwidth is shared, small passes (memory-bound) are slowed by neighbours more than big ones
// (compute-bound) (docs/methods.md §5.1).
std::vector<CostSample> CorrectCostCurve(const std::vector<CostSample>& calibrated,
                                         const std::vector<CostSample>& observed);

struct AcceptanceModel {
  std::vector<double> rank_p;        // [k], rank 0 first; probability per reached node
  std::vector<double> depth_factor;  // [d], d >= 1; missing depths use the last entry (1 if none)
};

// E[tokens(B)] for B = 0..max_budget (index 0 unused = 0; E[1] = 1: plain step).
std::vector<double> ExpectedTokens(const AcceptanceModel& m, int max_budget);

// argmax_B expected[B] / cost[B] over 1..min(sizes)-1; ties go to the smaller B.
int BestBudget(const std::vector<double>& expected, const std::vector<double>& cost);

// The same when trees may stop short of their budget: sizes[b][n] counts the cycles run at budget
// b whose tree had n nodes. Budget B is judged on the cycles run at budgets b >= B, where it
// would have built min(B, n) nodes: rate(B) = sum E[min(B, n)] / sum c(min(B, n)) over them
// (cycles at b < B say nothing about B). A budget no cycle tells about gets E[B] / c(B).
int BestBudgetForTreeSizes(const std::vector<double>& expected, const std::vector<double>& cost,
                           const std::vector<std::vector<int64_t>>& sizes);
// Those rates, [B] for B = 0..max (index 0 unused).
std::vector<double> TreeSizeRates(const std::vector<double>& expected,
                                  const std::vector<double>& cost,
                                  const std::vector<std::vector<int64_t>>& sizes);
// argmax over B >= 1 of rate[B]; ties go to the smaller B.
int BestRate(const std::vector<double>& rate);

// Cycles after which a budget's measured rate replaces the model's, and after which the
// model's E is calibrated.
constexpr int64_t kMinMeasuredCycles = 32;

// min_reached: depths with fewer reached nodes reuse the previous depth's factor.
AcceptanceModel EstimateAcceptance(const SpecStats& s, int64_t min_reached = 16);

struct BudgetChooserOptions {
  double probe_cost = 1.25;  // exploration budget: largest B with c(B) <= probe_cost * c(1)
  int probe_every = 16;      // calls at budget 1 before the first exploration cycle
  int max_probe_every = 1024;
  int explore_every = 8;  // one cycle in this many tries an unmeasured neighbour of the best
};

class BudgetChooser {
 public:
  explicit BudgetChooser(const std::vector<CostSample>& cost, BudgetChooserOptions opt = {});
  // A new curve over the same largest size (the engine's corrected one, as it costs `depth`
  // tokens into a context), keeping what was learned and counted.
  static constexpr int kUnknownDepth = -(1 << 30);
  void SetCost(const std::vector<CostSample>& cost, int depth = kUnknownDepth);
  int cost_depth() const { return cost_depth_; }
  // The budget of the next cycle, from the variant's statistics and budget history.
  int Choose(const SpecStats& stats, const BudgetHistory& history);
  // The cycle run at `budget` (the last Choose) built `tree_nodes` nodes and committed
  // `committed` tokens: recorded in `history`.
  void Observe(int budget, int tree_nodes, int committed, BudgetHistory* history) const;
  // The expanded curve: cost()[B] for B = 1..max_budget() (cost()[0] unused).
  const std::vector<double>& cost() const { return cost_; }
  // The measured points of the curve (monotone), smallest first: the sizes a tree may take.
  const std::vector<CostSample>& samples() const { return samples_; }
  int max_budget() const { return static_cast<int>(cost_.size()) - 1; }
  int probe_budget() const { return probe_budget_; }
  // A plain step the engine ran without asking (its idle drafter): counted in chosen(), and
  // towards the next probe as if Choose had returned 1, so probes keep their pace in cycles.
  void CountPlainStep() {
    ++chosen_[1];
    if (best_ <= 1) ++calls_at_one_;
  }
  // Histogram of the budgets the cycles ran at (index = budget): those returned so far and the
  // engine's plain steps.
  const std::vector<int64_t>& chosen() const { return chosen_; }
  // The acceptance model's expected tokens E[B] of a tree of B nodes (index = B), as of the
  // last estimate; empty before the first.
  const std::vector<double>& expected() const { return expected_; }

 private:
  int Decide(const SpecStats& stats, const BudgetHistory& history);
  // The rates (tokens per second) of every budget under the current estimate and history.
  std::vector<double> Rates(const SpecStats& stats, const BudgetHistory& history);
  std::vector<double> cost_;
  BudgetChooserOptions opt_;
  std::vector<bool> sampled_;  // [b]: the curve was measured at b
  std::vector<CostSample> samples_;
  int probe_budget_ = 1;
  int64_t calls_at_one_ = 0;
  int64_t interval_ = 0;  // current probe interval at budget 1
  int64_t calls_ = 0;
  std::vector<int64_t> chosen_;
  std::vector<double> expected_;    // the model's E at the last estimate (empty: none yet)
  int best_ = 1;                    // the best budget at the last estimate
  int cost_depth_ = kUnknownDepth;  // the depth the curve is for
  int64_t estimated_drafted_ = -1, estimated_recorded_ = -1;  // what that estimate saw
};

}  // namespace goose
