#include "budget/budget_history.h"

#include <algorithm>

namespace goose {

void BudgetHistory::Record(int budget, int tree_nodes, int committed) {
  Entry& e = at[budget];
  if (e.tree_nodes.empty()) e.tree_nodes.assign(SpecStats::kMaxTreeNodes + 1, 0);
  ++e.cycles;
  e.committed += committed;
  ++e.tree_nodes[std::clamp(tree_nodes, 1, SpecStats::kMaxTreeNodes)];
}

void BudgetHistory::Scale(double f) {
  for (auto& [budget, e] : at) {
    e.cycles = static_cast<int64_t>(static_cast<double>(e.cycles) * f);
    e.committed *= f;
    for (int64_t& n : e.tree_nodes) n = static_cast<int64_t>(static_cast<double>(n) * f);
  }
  calibration_committed *= f;
  calibration_predicted *= f;
  calibration_cycles = static_cast<int64_t>(static_cast<double>(calibration_cycles) * f);
}

}  // namespace goose
