// Made-up verify-cost curves for the --budget auto tests (SessionOptions::cost_curve,
// Engine::SetCostCurve, ServerOptions::cost_curve), so that what auto chooses does not depend on
// the machine: on the gentle one trees of every size pay (a node costs 1% of a plain step, as
// on a model whose passes are bound by reading its weights), on the steep one nothing but a
// plain step does (a tree of n > 1 nodes costs n seconds). AutoSweepVariants: what those
// tests run on them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "method/method.h"
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

// The registered variants but plain decoding and the table-lifetime forms (+keep, +cold); the
// draft-model ones only `with_draft`.
inline std::vector<std::string> AutoSweepVariants(bool with_draft) {
  std::vector<std::string> out;
  for (const std::string& v : AllVariants()) {
    const auto ends_with = [&](std::string_view s) {
      return v.size() >= s.size() && v.compare(v.size() - s.size(), s.size(), s) == 0;
    };
    SpecParams spec;
    if (v == "none" || ends_with("+keep") || ends_with("+cold") ||
        !ParseSpecVariant(v, &spec).ok() || (MethodOf(spec).needs_draft_model() && !with_draft)) {
      continue;
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace goose
