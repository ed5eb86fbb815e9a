#include "budget/budget_chooser.h"

#include <algorithm>
#include <cmath>
#include <queue>

#include "budget/verify_cost.h"
#include "util/check.h"

namespace goose {

std::vector<double> ExpandCostCurve(const std::vector<CostSample>& samples) {
  std::vector<CostSample> pts;
  for (const CostSample& s : samples) {
    if (s.nodes >= 1 && s.seconds > 0) pts.push_back(s);
  }
  if (pts.empty()) return {};
  std::sort(pts.begin(), pts.end(),
            [](const CostSample& a, const CostSample& b) { return a.nodes < b.nodes; });
  const int max_nodes = pts.back().nodes;
  std::vector<double> cost(max_nodes + 1, 0.0);
  for (int b = 1; b <= max_nodes; ++b) {
    // Linear between the neighbouring samples; flat below the first one.
    auto hi = std::lower_bound(pts.begin(), pts.end(), b,
                               [](const CostSample& s, int n) { return s.nodes < n; });
    if (hi->nodes == b || hi == pts.begin()) {
      cost[b] = hi->seconds;
    } else {
      auto lo = hi - 1;
      const double t = static_cast<double>(b - lo->nodes) / (hi->nodes - lo->nodes);
      cost[b] = lo->seconds + t * (hi->seconds - lo->seconds);
    }
  }
  // Timing noise can make a bigger pass look cheaper; the cheaper figure is achievable for
  // every smaller B too (pad the tree), so take the running minimum from the right.
  for (int b = max_nodes - 1; b >= 1; --b) cost[b] = std::min(cost[b], cost[b + 1]);
  return cost;
}

std::vector<CostSample> CorrectCostCurve(const std::vector<CostSample>& calibrated,
                                         const std::vector<CostSample>& observed) {
  std::vector<CostSample> out = calibrated;
  std::sort(out.begin(), out.end(),
            [](const CostSample& a, const CostSample& b) { return a.nodes < b.nodes; });
  // seen[i] / ratio[i]: the observed time at out[i] and its ratio to the calibrated one (0: none).
  std::vector<double> seen(out.size(), 0.0), ratio(out.size(), 0.0);
  for (size_t i = 0; i < out.size(); ++i) {
    for (const CostSample& o : observed) {
      if (o.nodes != out[i].nodes || !(o.seconds > 0) || !(out[i].seconds > 0)) continue;
      const double r = o.seconds / out[i].seconds;
      if (std::isfinite(o.seconds) && std::isfinite(r) && r > 0) {
        seen[i] = o.seconds;
        ratio[i] = r;
      }
    }
  }
  // An unobserved size scales like the nearest observed one below it (with none below, like the
  // nearest one above it). Not capped at its calibrated time: when the machine is slower than at
  // calibration, a capped size looked cheaper than its neighbours, was tried in every run
  // (1.5B-cost model: 12- and 16-node trees at 1.4x an 8-node cycle), never timed enough.
  for (size_t i = 0; i < out.size(); ++i) {
    if (seen[i] > 0) {
      out[i].seconds = seen[i];
      continue;
    }
    double r = 0;
    for (size_t k = 0; k < i; ++k) r = ratio[k] > 0 ? ratio[k] : r;
    for (size_t k = i + 1; r == 0 && k < out.size(); ++k) r = ratio[k];
    // (Absurd times, from a hand-edited cache, could overflow or underflow: then as calibrated.)
    const double scaled = out[i].seconds * r;
    if (r > 0 && std::isfinite(scaled) && scaled > 0) out[i].seconds = scaled;
  }
  // Non-decreasing, as the calibration: a size never costs more than a larger one, whatever the
  // timing noise of a few passes said (1.5B: observed medians c(4) 47.1 ms, c(8) 42.3).
  MakeMonotone(&out);
  return out;
}

std::vector<double> ExpectedTokens(const AcceptanceModel& m, int max_budget) {
  std::vector<double> e(std::max(max_budget, 0) + 1, 0.0);
  if (max_budget < 1) return e;
  // Siblings must be ordered by value for the best-first expansion below to be exact.
  std::vector<double> p = m.rank_p;
  for (size_t k = 0; k < p.size(); ++k) {
    p[k] = std::clamp(p[k], 0.0, 1.0);
    if (k > 0) p[k] = std::min(p[k], p[k - 1]);
  }
  auto factor = [&](int d) {
    if (m.depth_factor.empty()) return 1.0;
    const size_t i = std::min<size_t>(d, m.depth_factor.size() - 1);
    return std::max(0.0, m.depth_factor[i]);
  };
  auto q = [&](int d, int k) {
    return k < static_cast<int>(p.size()) ? std::min(1.0, p[k] * factor(d)) : 0.0;
  };
  struct Cand {
    double value, parent_value;
    int depth, rank;
    bool operator<(const Cand& o) const { return value < o.value; }
  };
  // Best-first growth: a node's value (product of q on its root path) never exceeds its
  // parent's nor its better-ranked sibling's, so the B-1 largest values form a tree.
  std::priority_queue<Cand> heap;
  heap.push({q(1, 0), 1.0, 1, 0});
  e[1] = 1.0;
  for (int b = 2; b <= max_budget; ++b) {
    e[b] = e[b - 1];
    if (heap.empty() || heap.top().value <= 0) continue;
    const Cand c = heap.top();
    heap.pop();
    e[b] += c.value;
    heap.push({c.value * q(c.depth + 1, 0), c.value, c.depth + 1, 0});
    heap.push({c.parent_value * q(c.depth, c.rank + 1), c.parent_value, c.depth, c.rank + 1});
  }
  return e;
}

int BestRate(const std::vector<double>& rate) {
  int best = 1;
  for (int b = 2; b < static_cast<int>(rate.size()); ++b) {
    if (rate[b] > rate[best] * (1 + 1e-12)) best = b;
  }
  return best;
}

int BestBudget(const std::vector<double>& expected, const std::vector<double>& cost) {
  const size_t n = std::min(expected.size(), cost.size());
  std::vector<double> rate(n, -1);
  for (size_t b = 1; b < n; ++b) {
    if (cost[b] > 0) rate[b] = expected[b] / cost[b];
  }
  return BestRate(rate);
}

std::vector<double> TreeSizeRates(const std::vector<double>& expected,
                                  const std::vector<double>& cost,
                                  const std::vector<std::vector<int64_t>>& sizes) {
  const int n_max = static_cast<int>(std::min(expected.size(), cost.size())) - 1;
  // count[n] = cycles at budgets >= B whose tree had n nodes, accumulated as B falls.
  std::vector<int64_t> count(std::max(n_max, 0) + 1, 0);
  std::vector<double> rate(std::max(n_max, 0) + 1, -1);
  for (int b = n_max; b >= 1; --b) {
    if (b < static_cast<int>(sizes.size())) {
      for (size_t n = 1; n < sizes[b].size(); ++n) count[std::min<int>(n, n_max)] += sizes[b][n];
    }
    double tokens = 0, seconds = 0;
    int64_t cycles = 0;
    for (int n = 1; n <= n_max; ++n) {
      if (count[n] == 0) continue;
      const int built = std::min(b, n);
      tokens += count[n] * expected[built];
      seconds += count[n] * cost[built];
      cycles += count[n];
    }
    if (cycles == 0) {
      tokens = expected[b];
      seconds = cost[b];
    }
    rate[b] = seconds > 0 ? tokens / seconds : -1;
  }
  return rate;
}

int BestBudgetForTreeSizes(const std::vector<double>& expected, const std::vector<double>& cost,
                           const std::vector<std::vector<int64_t>>& sizes) {
  return BestRate(TreeSizeRates(expected, cost, sizes));
}

AcceptanceModel EstimateAcceptance(const SpecStats& s, int64_t min_reached) {
  AcceptanceModel m;
  // Shrink towards 0 by two pseudo-misses: a rank seen once and accepted is not a certainty.
  constexpr double kPseudo = 2.0;
  int last_rank = -1;
  for (int k = 0; k < SpecStats::kMaxRank; ++k) {
    int64_t r = 0;
    for (int src = 1; src < kNumSources; ++src) r += s.reached_rank[src][k];
    if (r > 0) last_rank = k;
  }
  for (int k = 0; k <= last_rank; ++k) {
    int64_t r = 0, a = 0;
    for (int src = 1; src < kNumSources; ++src) {
      r += s.reached_rank[src][k];
      a += s.accepted_rank[src][k];
    }
    m.rank_p.push_back(a / (r + kPseudo));
  }
  // Depth factor: conditional acceptance at depth d relative to depth 1 (pooled over ranks).
  auto rate = [&](int d, int64_t* reached) {
    int64_t r = 0, a = 0;
    for (int src = 1; src < kNumSources; ++src) {
      r += s.reached_depth[src][d];
      a += s.accepted_depth[src][d];
    }
    *reached = r;
    return a / (r + kPseudo);
  };
  int64_t r1 = 0;
  const double a1 = rate(1, &r1);
  m.depth_factor.push_back(1.0);  // index 0 unused
  m.depth_factor.push_back(1.0);
  if (a1 <= 0 || r1 < min_reached) return m;
  for (int d = 2; d <= SpecStats::kMaxDepth; ++d) {
    int64_t r = 0;
    const double a = rate(d, &r);
    if (r < min_reached) break;  // later depths reuse the last reliable factor
    m.depth_factor.push_back(a / a1);
  }
  return m;
}

BudgetChooser::BudgetChooser(const std::vector<CostSample>& cost, BudgetChooserOptions opt)
    : opt_(opt) {
  SetCost(cost);
  chosen_.assign(cost_.size(), 0);
  interval_ = std::max(1, opt_.probe_every);
}

void BudgetChooser::SetCost(const std::vector<CostSample>& cost, int depth) {
  cost_depth_ = depth;
  const size_t old_size = cost_.size();
  cost_ = ExpandCostCurve(cost);
  if (cost_.empty()) cost_ = {0.0, 1.0};  // no curve: only plain decoding is known to be safe
  // (A curve over other sizes would leave chosen_ and best_ pointing past its end.)
  GOOSE_CHECK(old_size == 0 || cost_.size() == old_size);
  sampled_.assign(cost_.size(), cost_.size() <= 2);  // (no curve: budget 1 only)
  samples_.clear();
  estimated_drafted_ = -1;  // the rates change with the curve: estimate again at the next call
  for (const CostSample& c : cost) {
    if (c.nodes >= 1 && c.nodes <= max_budget() && c.seconds > 0) sampled_[c.nodes] = true;
  }
  for (int b = 1; b <= max_budget(); ++b) {
    if (sampled_[b]) samples_.push_back({b, cost_[b]});
  }
  probe_budget_ = std::min(2, max_budget());
  for (int b = 2; b <= max_budget(); ++b) {
    if (sampled_[b] && cost_[b] <= opt_.probe_cost * cost_[1]) probe_budget_ = b;
  }
}

int BudgetChooser::Choose(const SpecStats& stats, const BudgetHistory& history) {
  const int b = std::clamp(Decide(stats, history), 1, max_budget());
  ++chosen_[b];
  ++calls_;
  return b;
}

void BudgetChooser::Observe(int budget, int tree_nodes, int committed,
                            BudgetHistory* history) const {
  if (budget <= 1 || tree_nodes < 1) return;  // a plain step says nothing about budgets
  const int n = std::min(tree_nodes, max_budget());
  history->Record(budget, n, committed);
  if (!expected_.empty()) {
    ++history->calibration_cycles;
    history->calibration_committed += committed;
    history->calibration_predicted += expected_[n];
  }
}

std::vector<double> BudgetChooser::Rates(const SpecStats& stats, const BudgetHistory& history) {
  expected_ = ExpectedTokens(EstimateAcceptance(stats), max_budget());
  // The drafted part of E scaled to what the observed cycles committed (see the contract).
  std::vector<double> e = expected_;
  const double cycles = static_cast<double>(history.calibration_cycles);
  if (history.calibration_cycles >= kMinMeasuredCycles && history.calibration_predicted > cycles) {
    const double f = std::clamp(
        (history.calibration_committed - cycles) / (history.calibration_predicted - cycles), 0.0,
        2.0);
    for (size_t b = 1; b < e.size(); ++b) e[b] = 1 + f * (e[b] - 1);
  }
  std::vector<std::vector<int64_t>> sizes(cost_.size());
  for (const auto& [b, entry] : history.at) {
    if (b >= 1 && b < static_cast<int>(sizes.size())) sizes[b] = entry.tree_nodes;
  }
  std::vector<double> rate = TreeSizeRates(e, cost_, sizes);
  for (size_t b = 2; b < rate.size(); ++b) {
    if (!sampled_[b]) {
      rate[b] = -1;
      continue;
    }
    // The cycles run at b and what their trees cost.
    const auto it = history.at.find(static_cast<int>(b));
    if (it == history.at.end() || it->second.cycles < kMinMeasuredCycles) continue;
    double seconds = 0;
    for (size_t n = 1; n < it->second.tree_nodes.size(); ++n) {
      seconds += static_cast<double>(it->second.tree_nodes[n]) *
                 cost_[std::min<size_t>(n, cost_.size() - 1)];
    }
    if (seconds > 0) rate[b] = it->second.committed / seconds;
  }
  return rate;
}

int BudgetChooser::Decide(const SpecStats& stats, const BudgetHistory& history) {
  int64_t drafted = 0;
  for (int src = 1; src < kNumSources; ++src) drafted += stats.drafted[src];
  if (drafted == 0 && history.at.empty() && calls_at_one_ == 0) return probe_budget_;
  // The estimate moves only when something new was drafted or recorded (plain steps do
  // neither), so it is recomputed only then: at budget 1 the chooser must cost next to nothing.
  int64_t recorded = history.calibration_cycles;
  for (const auto& [b, entry] : history.at) recorded += entry.cycles;
  if (drafted != estimated_drafted_ || recorded != estimated_recorded_) {
    best_ = BestRate(Rates(stats, history));
    estimated_drafted_ = drafted;
    estimated_recorded_ = recorded;
  }
  const int best = best_;
  if (best > 1) {
    calls_at_one_ = 0;
    interval_ = std::max(1, opt_.probe_every);
    // Now and then, a sampled neighbour of the best that has not been measured enough.
    if (opt_.explore_every > 0 && calls_ % opt_.explore_every == opt_.explore_every - 1) {
      const bool up = (calls_ / opt_.explore_every) % 2 == 0;
      for (int pass = 0; pass < 2; ++pass) {
        const int step = (up == (pass == 0)) ? 1 : -1;
        int b = best + step;
        while (b >= 2 && b <= max_budget() && !sampled_[b]) b += step;
        if (b < 2 || b > max_budget()) continue;
        const auto it = history.at.find(b);
        if (it == history.at.end() || it->second.cycles < kMinMeasuredCycles) return b;
      }
    }
    return best;
  }
  // Plain decoding wins under the current estimate. Explore now and then so the estimate can
  // recover when the text turns repetitive, backing off while probes keep failing.
  if (++calls_at_one_ < interval_) return 1;
  calls_at_one_ = 0;
  interval_ = std::min<int64_t>(interval_ * 2, std::max(opt_.max_probe_every, 1));
  return probe_budget_;
}

}  // namespace goose
