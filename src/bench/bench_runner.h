// `goose bench`: Spec-Bench-style evaluation of every method on one loaded model.
//
// Contract
// - Configs: `none` (always, the baseline), methods whose budget cannot grow their tree
//   (Method::budget_grows_tree: PLD's 10-token chain, TR's 81-node template) once at their
//   default, every other method once per budget; budget kAutoBudget = `--budget auto`
//   (BudgetChooser on the calibrated cost curve).
// - Every config has its own Engine (own KV cache, tables and statistics) over the one Model, so
//   configs never warm each other up; prompts run in file order and, per prompt, the configs
//   run in an order rotated by one per prompt so machine drift hits them alike.
// - Equality: each config's generated ids must equal `none`'s for the same prompt; FirstMismatch
//   is the check. Mismatches are counted per cell and in total.
// - Timing: tokens/s = (generated - 1) / decode seconds (the first token comes from prefill);
//   speedup = tokens/s of the config / tokens/s of none over the same prompts.
// - Projection: with a cost-model curve c, projected speedup = (MAT / r) / MAT_none, where
//   r = MeanRelativeCost = the mean of c(n_i)/c(1) over the passes actually made, n_i the node
//   count of the tree pass i scored (PLD's chains average a few nodes, not its budget of 11). It
//   combines this model's acceptance with the other model's verify cost; not a measurement.
// - Per-prompt speedup spread: "speedup_per_prompt" {median, min, max} of the tokens/s ratios
//   against none on each prompt, next to the aggregate "speedup".
// - Fault injection for tests of the CLI's exit code: with GOOSE_BENCH_INJECT_MISMATCH set to a
//   config label (e.g. "tr") and no ResultHook, one generated id of that config is flipped.
// - Prompts longer than context - max_tokens - 1 are cut to their head (counted in the output).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/datasets.h"
#include "budget/verify_cost.h"
#include "engine/engine.h"
#include "engine/session.h"

namespace goose {

// Budget --budget auto ("auto_budgets" in the results: the budgets chosen, or, for a method
// that sizes its own trees, the tree sizes it chose).
constexpr int kAutoBudget = -1;
// `auto-cm`: the same chooser on the cost model's curve (--cost-model): the budgets it would
// pick on that machine-and-model, so that its projected speedup is the honest one for auto.
constexpr int kAutoCostModelBudget = -2;

struct BenchConfig {
  std::string variant = "none";  // the ParseSpecVariant name as given ("goose+paper")
  SpecParams spec;               // the parsed variant
  int budget = 0;  // 0 = method default, kAutoBudget = auto, kAutoCostModelBudget = auto-cm
  std::string Label() const;        // "goose@32", "tr", "goose@auto"
  std::string BudgetLabel() const;  // "32", "auto", "auto-cm", "default"
};

// none first, then the requested variants (method/method.h ParseSpecVariant names: "goose",
// "goose+paper", "balanced+k5", ...) as described above, duplicates dropped.
StatusOr<std::vector<BenchConfig>> MakeConfigs(const std::vector<std::string>& variants,
                                               const std::vector<int>& budgets);

// Mean c(n)/c(1) over the passes counted in s.tree_nodes, under the expanded curve `cost`
// (cost[n] for n = 1..max; larger trees are charged c(max)). 0 when unknown.
double MeanRelativeCost(const SpecStats& s, const std::vector<double>& cost);

// Index of the first differing token (or the shorter length if one is a prefix of the other);
// -1 when equal.
int FirstMismatch(const std::vector<int32_t>& baseline, const std::vector<int32_t>& got);

struct BenchOptions {
  int max_tokens = 128;
  float temp = 0.0f;
  uint64_t seed = 0;
  bool ignore_eos = true;
  bool quiet = false;
  // Cost curves (seconds per pass); the model's drives --budget auto and c(B)/c(1).
  std::vector<VerifyCostPoint> model_cost;
  std::vector<VerifyCostPoint> cost_model_cost;  // empty: no projection
};

// Called after each generation (tests inject mismatches here): config index, prompt, ids.
using ResultHook = std::function<void(int config, const BenchPrompt&, std::vector<int32_t>*)>;

// Runs everything and returns results.json's "results", "summary", "equality" and
// "verify_cost" members; the caller adds machine/model/settings.
// One engine per config from `session` (its model, pool and draft model, which every config's
// engine drafts with; a config that needs one without it is an error), each learning on its own.
StatusOr<nlohmann::json> RunBench(Session& session, const std::vector<DataSet>& sets,
                                  const std::vector<BenchConfig>& configs, const BenchOptions& opt,
                                  const ResultHook& hook = {});

}  // namespace goose
