// Fuzz target cost_cache: a `--budget auto` cost cache file (~/.cache/goose/cost-*.json) through
// ParseCostCache, then the curve through BudgetChooser, which is what goose does with it.
//
// The text is checked against a fixed key and, when it is JSON with a "key" object, against its
// own key (so that the curve's checks are reached whatever key the fuzzer writes).
// Properties once a file is accepted: the curve starts at 1 node, its nodes increase within
// 1..SpecStats::kMaxTreeNodes (the largest tree goose builds and sizes its context for), its
// times are finite, positive and non-decreasing; the observed pass times are within the same
// bounds; BudgetChooser, on the curve corrected by them and fed cycles that commit tokens,
// returns budgets within the curve. Errors are one clean line.
// run-fuzz flags: -max_len=4096
#include <cmath>
#include <cstdint>
#include <string>

#include "budget/cost_cache.h"
#include "fuzz_util.h"

namespace goose::fuzz {
namespace {

const nlohmann::json& FixedKey() {
  static const nlohmann::json key = {{"model", "0f1e2d3c4b5a6978-1185376"},
                                     {"threads", 2},
                                     {"cpu", "AMD EPYC 9B45"},
                                     {"isa", "avx512+vnni"},
                                     {"build", "4066432-1735689600.123456789"}};
  return key;
}

void Check(std::string_view text, const nlohmann::json& key) {
  auto curve = ParseCostCache(text, key);
  if (!curve.ok()) {
    FUZZ_CHECK(IsOneCleanLine(curve.status().message()), "error is not one clean line: %s",
               curve.status().message().c_str());
    return;
  }
  const std::vector<VerifyCostPoint>& c = curve->curve;
  FUZZ_CHECK(curve->calibrations >= 0 && curve->calibrations <= kMaxCalibrations, "calibrations %d",
             curve->calibrations);
  FUZZ_CHECK(!c.empty() && c.front().nodes == 1, "curve does not start at 1 node");
  for (size_t i = 0; i < c.size(); ++i) {
    FUZZ_CHECK(c[i].nodes >= 1 && c[i].nodes <= SpecStats::kMaxTreeNodes, "nodes %d", c[i].nodes);
    FUZZ_CHECK(std::isfinite(c[i].seconds) && c[i].seconds > 0, "seconds %g", c[i].seconds);
    FUZZ_CHECK(i == 0 || (c[i - 1].nodes <= c[i].nodes && c[i - 1].seconds <= c[i].seconds),
               "curve not monotone at %zu", i);
  }
  for (const CostSample& o : curve->observed) {
    FUZZ_CHECK(o.nodes >= 1 && o.nodes <= SpecStats::kMaxTreeNodes, "observed nodes %d", o.nodes);
    FUZZ_CHECK(std::isfinite(o.seconds) && o.seconds > 0, "observed seconds %g", o.seconds);
  }
  BudgetChooser chooser(ToCostSamples(c));
  FUZZ_CHECK(chooser.max_budget() >= 1 && chooser.max_budget() <= SpecStats::kMaxTreeNodes,
             "max budget %d", chooser.max_budget());
  // As the engine does with a run's pass times (Engine::LearnPassCosts): same sizes, times
  // finite and positive.
  const int max_budget = chooser.max_budget();
  chooser.SetCost(CorrectCostCurve(ToCostSamples(c), curve->observed));
  FUZZ_CHECK(chooser.max_budget() == max_budget, "corrected max budget %d", chooser.max_budget());
  for (int b = 1; b <= max_budget; ++b) {
    FUZZ_CHECK(std::isfinite(chooser.cost()[b]) && chooser.cost()[b] > 0, "corrected c(%d) %g", b,
               chooser.cost()[b]);
  }
  SpecStats stats;
  BudgetHistory history;
  for (int cycle = 0; cycle < 40; ++cycle) {
    const int b = chooser.Choose(stats, history);
    FUZZ_CHECK(b >= 1 && b <= chooser.max_budget(), "budget %d outside 1..%d", b,
               chooser.max_budget());
    // A cycle at budget b: a tree of b nodes whose first few are accepted.
    ++stats.cycles;
    stats.tree_nodes_total += b;
    ++stats.tree_nodes[b];
    const int accepted = std::min(b - 1, cycle % 4);
    stats.committed += accepted + 1;
    chooser.Observe(b, b, accepted + 1, &history);
    for (int d = 1; d < b && d <= 8; ++d) {
      ++stats.drafted[1];
      ++stats.reached[1];
      ++stats.drafted_depth[1][d];
      ++stats.reached_depth[1][d];
      ++stats.reached_rank[1][0];
      if (d <= accepted) {
        ++stats.accepted[1];
        ++stats.accepted_depth[1][d];
        ++stats.accepted_rank[1][0];
      }
    }
  }
}

}  // namespace
}  // namespace goose::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace goose;
  using namespace goose::fuzz;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Check(text, FixedKey());
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("key") && j["key"].is_object()) Check(text, j["key"]);
  return 0;
}
