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
//   budget allowed. BudgetChooser reads from the statistics how large each cycle's tree came out
//   and charges budget B what it would have built in the cycles that tell: those run at a
//   budget >= B, whose tree of n nodes means min(B, n) nodes at B (BestBudgetForTreeSizes).
// - Only budgets at which the curve was measured are chosen: between samples the cost is a
//   guess (a batch kernel's cost steps at its tile sizes, which the interpolation smooths out).
// - The model's E is checked against what the cycles commit. A budget run for at least
//   kMinMeasuredCycles cycles is judged on the tokens its cycles committed over the cost of the
//   trees they built; the others on the model's E with its drafted part (E - 1) scaled by the
//   ratio of committed to predicted drafted tokens over all observed cycles, once there are
//   kMinMeasuredCycles of them. (The positional model values the best tree of B nodes, which
//   a builder does not always build: on the bench's GOOSE trees it rated 48 nodes above 16,
//   which then committed 3.8 tokens at 3.9x the cost of one token against 2.9 at 1.8x.)
// - BudgetChooser never lets speculation lose to plain decoding: when no B > 1 beats
//   1 / c(1) it returns 1, probing with a cheap budget (the largest measured B with
//   c(B) <= probe_cost * c(1), at least 2) after probe_every calls, the interval doubling after
//   each fruitless probe up to max_probe_every, so exploration costs ~nothing on long runs.
//   The first cycles (nothing drafted yet) use the same cheap budget.
// Pure and deterministic given its inputs; one chooser per (engine, method).
#pragma once

#include <cstdint>
#include <vector>

#include "verify/spec_stats.h"

namespace goose {

struct CostSample {
  int nodes = 0;
  double seconds = 0;
};

// cost[B] for B = 0..max_nodes (cost[0] unused = 0): interpolated, non-decreasing. max_nodes is
// the largest measured B. Empty if `samples` is empty or holds no positive time.
std::vector<double> ExpandCostCurve(const std::vector<CostSample>& samples);

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
  double probe_cost = 1.25;   // exploration budget: largest B with c(B) <= probe_cost * c(1)
  int probe_every = 16;       // calls at budget 1 before the first exploration cycle
  int max_probe_every = 1024;
};

class BudgetChooser {
 public:
  BudgetChooser(const std::vector<CostSample>& cost, BudgetChooserOptions opt = {});
  // The hook for SpecParams::choose_budget.
  int operator()(const SpecStats& history);
  int max_budget() const { return static_cast<int>(cost_.size()) - 1; }
  int probe_budget() const { return probe_budget_; }
  // Histogram of the budgets returned so far (index = budget).
  const std::vector<int64_t>& chosen() const { return chosen_; }
  // tree_sizes()[b][n]: cycles run at budget b whose tree had n nodes (n clamped to the largest
  // budget).
  const std::vector<std::vector<int64_t>>& tree_sizes() const { return sizes_; }

 private:
  int Choose(const SpecStats& history);
  // Attributes the tree size of the cycle that ran since the last call to the budget returned.
  void ObserveLastTree(const SpecStats& history);
  std::vector<double> cost_;
  BudgetChooserOptions opt_;
  int probe_budget_ = 1;
  int64_t calls_at_one_ = 0;
  int64_t interval_ = 0;  // current exploration interval
  int64_t estimated_at_drafted_ = -1;  // drafted-node total when best_ was computed
  int best_ = 1;
  std::vector<int64_t> chosen_;
  std::vector<std::vector<int64_t>> sizes_;  // [max_budget + 1][max_budget + 1]
  int last_budget_ = 0;            // returned by the last call (0 = none yet)
  int64_t last_cycles_ = -1, last_tree_nodes_ = 0, last_committed_ = 0;
  std::vector<bool> sampled_;  // [b]: the curve was measured at b
  std::vector<double> committed_;  // [b]: tokens committed by the cycles counted in sizes_[b]
  // Over the cycles observed with a model estimate: committed and predicted tokens (E of the
  // tree size built), for the calibration of E.
  int64_t cal_cycles_ = 0;
  double cal_tokens_ = 0, cal_predicted_ = 0;
  std::vector<double> expected_;  // the model's E at the last estimate (empty: none yet)
};

}  // namespace goose
