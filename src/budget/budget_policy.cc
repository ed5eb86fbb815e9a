#include "budget/budget_policy.h"

#include <algorithm>
#include <cstdlib>

namespace goose {

namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void BudgetPolicy::SetCostCurve(const std::vector<CostSample>& curve) {
  cost_curve_ = curve;
  observed_ = ObservedCosts(curve);
  observed_.Seed(prior_costs_);
  choosers_.clear();
}

void BudgetPolicy::LearnPassCosts(std::vector<CostSample> prior) {
  learn_costs_ = true;
  prior_costs_ = std::move(prior);
  observed_.Seed(prior_costs_);
}

std::vector<CostSample> BudgetPolicy::CostCurve() const {
  return learn_costs_ ? observed_.Curve(prior_costs_) : cost_curve_;
}

std::vector<CostSample> BudgetPolicy::AtDepth(std::vector<CostSample> curve, int depth) const {
  if (!depth_.known()) return curve;
  for (CostSample& c : curve) {
    c.seconds = std::max(0.1 * c.seconds, c.seconds + depth_.Extra(c.nodes, depth));
  }
  return curve;
}

std::vector<int64_t> BudgetPolicy::ChosenBudgets(const std::string& variant) const {
  const auto it = choosers_.find(variant);
  return it == choosers_.end() ? std::vector<int64_t>{} : it->second.chosen();
}

SequenceBudget BudgetPolicy::Begin(const BudgetRequest& request) {
  SequenceBudget seq;
  seq.request_ = request;
  seq.cost_time = std::chrono::steady_clock::now();
  if (request.auto_budget) {
    seq.chooser = &choosers_.try_emplace(request.variant, cost_curve_).first->second;
    if (learn_costs_) seq.chooser->SetCost(CostCurve());
  }
  return seq;
}

CyclePlan BudgetPolicy::Plan(SequenceBudget& seq, const SpecStats& stats,
                             const BudgetHistory& history, int depth) {
  const BudgetRequest& r = seq.request_;
  CyclePlan plan;
  // Deeper in the context every size costs more, the larger more (attention): the curve of
  // this depth, set again where the chooser's is kDepthStep tokens off (another request's, or
  // this one's some cycles ago).
  if (r.auto_budget && depth_.known() &&
      std::abs(depth - seq.chooser->cost_depth()) >= kDepthStep) {
    seq.chooser->SetCost(AtDepth(CostCurve(), depth), depth);
  }
  seq.depth = depth;
  plan.budget = r.fixed_budget;
  if (r.auto_budget && learn_costs_ && seq.idle.Skip()) {
    plan.ask = plan.draft = false;
    plan.budget = 1;
    if (!r.own_sizes) {
      seq.chooser->CountPlainStep();
      seq.Count(1);
    }
    return plan;
  }
  if (r.own_sizes) {
    plan.budget = seq.chooser->max_budget();
    plan.cost = &seq.chooser->samples();
    if (!learn_costs_) plan.rate = seq.curve_rate_.TokensPerSecond();
    if (++seq.own_cycles % kExploreEvery == 0) {
      const bool up = seq.own_cycles / kExploreEvery % 2 == 1;
      seq.explore = ObservedCosts::ExploreCurve(seq.chooser->samples(), seq.last_size, up);
      plan.cost = &seq.explore;
      plan.exploring = true;
    }
  } else if (r.auto_budget) {
    plan.budget = seq.chooser->Choose(stats, history);
    plan.draft = plan.budget > 1;  // a plain step pays best: nobody drafts
    seq.Count(plan.budget);
  }
  return plan;
}

void BudgetPolicy::Record(SequenceBudget& seq, const CyclePlan& plan, const CycleOutcome& outcome,
                          BudgetHistory* history) {
  const BudgetRequest& r = seq.request_;
  if (r.own_sizes && !learn_costs_) {
    const std::vector<double>& c = seq.chooser->cost();
    seq.curve_rate_.Add(c[std::clamp(outcome.tree_nodes, 1, static_cast<int>(c.size()) - 1)],
                        outcome.committed);
  }
  if (r.auto_budget && !r.own_sizes) {
    seq.chooser->Observe(plan.budget, outcome.tree_nodes, outcome.committed, history);
  }
  if (r.auto_budget && learn_costs_ && observed_.cycles() >= seq.cost_cycles + kCostUpdateEvery &&
      SecondsSince(seq.cost_time) >= kCostUpdateSeconds) {
    seq.chooser->SetCost(AtDepth(CostCurve(), seq.depth), seq.depth);
    seq.cost_cycles = observed_.cycles();
    seq.cost_time = std::chrono::steady_clock::now();
  }
  if (!plan.ask) return;
  // An explored size is the policy's doing, not a sign that the drafter has something now: on
  // the tiny model every eighth asked cycle explored a 2-node tree, which restarted the idle
  // drafter's streak each time.
  if (outcome.tree_nodes == 1) {
    seq.idle.RootOnly(outcome.draft_seconds, outcome.pass_seconds);
  } else if (!plan.exploring) {
    seq.idle.Drafted();
  }
  seq.last_size = outcome.tree_nodes;
}

std::vector<double> BudgetPolicy::NodeValues(const SequenceBudget& seq, int nodes) const {
  if (seq.chooser == nullptr || seq.chooser->expected().empty()) return {};
  const std::vector<double>& e = seq.chooser->expected();
  std::vector<double> v(std::max(nodes, 1), 0.0);
  v[0] = 1;
  for (int i = 1; i < nodes && i + 1 < static_cast<int>(e.size()); ++i) {
    v[i] = std::max(0.0, e[i + 1] - e[i]);
  }
  return v;
}

}  // namespace goose
