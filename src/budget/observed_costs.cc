#include "budget/observed_costs.h"

#include <algorithm>

#include "budget/budget_chooser.h"

namespace goose {

ObservedCosts::ObservedCosts(const std::vector<CostSample>& calibrated) : calibrated_(calibrated) {
  for (const CostSample& c : calibrated) max_nodes_ = std::max(max_nodes_, c.nodes);
}

void ObservedCosts::Record(int nodes, double seconds) {
  if (nodes < 1 || nodes > max_nodes_ || !(seconds > 0)) return;
  if (seconds_.size() <= static_cast<size_t>(nodes)) seconds_.resize(nodes + 1);
  Ring& r = seconds_[nodes];
  if (r.t.size() < kKept) {
    r.t.push_back(static_cast<float>(seconds));
  } else {
    r.t[r.next] = static_cast<float>(seconds);  // over the oldest
  }
  r.next = (r.next + 1) % kKept;
  ++cycles_;
}

void ObservedCosts::Seed(const std::vector<CostSample>& prior) {
  for (const CostSample& p : prior) Record(p.nodes, p.seconds);
}

std::vector<CostSample> ObservedCosts::Medians() const {
  std::vector<CostSample> out;
  for (size_t n = 1; n < seconds_.size(); ++n) {
    if (seconds_[n].t.size() < kMinCycles) continue;
    std::vector<float> t = seconds_[n].t;
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    out.push_back({static_cast<int>(n), t[t.size() / 2]});
  }
  return out;
}

std::vector<CostSample> ObservedCosts::Curve(const std::vector<CostSample>& prior) const {
  std::vector<CostSample> observed = Medians();
  for (const CostSample& p : prior) {
    auto same = [&](const CostSample& o) { return o.nodes == p.nodes; };
    if (std::none_of(observed.begin(), observed.end(), same)) observed.push_back(p);
  }
  return CorrectCostCurve(calibrated_, observed);
}

std::vector<CostSample> ObservedCosts::ExploreCurve(const std::vector<CostSample>& curve,
                                                    int last_size, bool up) {
  std::vector<CostSample> out;
  double below = 0;  // the cost of the largest size up to last_size
  for (const CostSample& c : curve) {
    if (up && c.nodes > last_size) {
      if (below <= 0) return curve;
      out.push_back({c.nodes, below});
      return out;
    }
    if (c.nodes <= last_size) below = c.seconds;
    out.push_back(c);
  }
  if (up) return curve;
  while (!out.empty() && out.back().nodes >= last_size) out.pop_back();
  return !out.empty() && out.back().nodes >= 2 ? out : curve;
}

}  // namespace goose
