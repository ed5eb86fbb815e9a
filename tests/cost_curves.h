// Made-up verify-cost curves for the --budget auto tests (SessionOptions::cost_curve,
// Engine::SetCostCurve, ServerOptions::cost_curve), so that what auto chooses does not depend on
// the machine: on the gentle one trees of every size pay (a node costs 1% of a plain step, as
// on a model whose passes are bound by reading its weights), on the steep one nothing but a
// plain step does (a tree of n > 1 nodes costs n seconds).
#pragma once

#include <vector>

#include "tree/draft_tree.h"

namespace goose {

inline std::vector<CostSample> GentleCostCurve() {
  std::vector<CostSample> c;
  for (int n : {1, 2, 4, 8, 16, 32, 64}) c.push_back({n, 1e-3 + 1e-5 * n});
  return c;
}

inline std::vector<CostSample> SteepCostCurve() {
  std::vector<CostSample> c;
  for (int n : {1, 2, 4, 8, 16, 32, 64}) c.push_back({n, n == 1 ? 1e-3 : 1.0 * n});
  return c;
}

}  // namespace goose
