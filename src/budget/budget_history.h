// BudgetHistory: what --budget auto's chosen budgets delivered, kept with a variant's learned
// state (method/method.h Learned) and persisted with it (engine/learned_cache.h).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "verify/spec_stats.h"

namespace goose {

// What the cycles run at each budget chosen by --budget auto delivered: the cycles, the tokens
// they committed and the sizes their trees came out at (a tree may stop short of its budget).
// Plain data, kept with a variant's learned state and persisted with it.
struct BudgetHistory {
  struct Entry {
    int64_t cycles = 0;
    double committed = 0;
    std::vector<int64_t> tree_nodes;  // [n]: cycles whose tree had n nodes (n <= kMaxTreeNodes)
  };
  std::map<int, Entry> at;  // by budget
  // The chooser's calibration of its acceptance model: over the cycles it predicted, the tokens
  // they committed and the tokens it had predicted.
  double calibration_committed = 0, calibration_predicted = 0;
  int64_t calibration_cycles = 0;

  void Record(int budget, int tree_nodes, int committed);
  void Scale(double factor);
};

}  // namespace goose
