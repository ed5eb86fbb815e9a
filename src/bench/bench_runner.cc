#include "bench/bench_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>

#include "budget/budget_chooser.h"
#include "budget/cost_cache.h"
#include "engine/report.h"

namespace goose {

namespace {

using nlohmann::json;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Cell {
  int prompts = 0, mismatches = 0, truncated = 0;
  int64_t generated = 0, decode_tokens = 0;  // decode_tokens = generated - 1 per prompt
  double decode_seconds = 0;
  SpecStats stats;
  std::vector<int64_t> chosen;     // auto: budgets used (index = budget)
  std::vector<double> prompt_tps;  // tokens/s of each prompt, in run order

  void Merge(const Cell& o) {
    prompts += o.prompts;
    mismatches += o.mismatches;
    truncated += o.truncated;
    generated += o.generated;
    decode_tokens += o.decode_tokens;
    decode_seconds += o.decode_seconds;
    stats.Merge(o.stats);
    if (chosen.size() < o.chosen.size()) chosen.resize(o.chosen.size());
    for (size_t i = 0; i < o.chosen.size(); ++i) chosen[i] += o.chosen[i];
    prompt_tps.insert(prompt_tps.end(), o.prompt_tps.begin(), o.prompt_tps.end());
  }
  double Tps() const { return decode_seconds > 0 ? decode_tokens / decode_seconds : 0.0; }
  double Mat() const { return MeanAcceptedTokens(generated, stats.cycles); }
};

class Progress {
 public:
  Progress(int64_t total, bool quiet) : total_(total), quiet_(quiet), start_(Now()) {}
  void Step(const std::string& what) {
    ++done_;
    const double now = Now();
    if (quiet_ || (now - last_ < 0.2 && done_ < total_)) return;
    last_ = now;
    const double el = now - start_;
    const double eta = done_ > 0 ? el / done_ * (total_ - done_) : 0;
    const int width = 30, fill = static_cast<int>(width * done_ / std::max<int64_t>(total_, 1));
    std::fprintf(stderr, "\r[%s%s] %lld/%lld %3d%% %s, ETA %s  %-28.28s",
                 std::string(fill, '#').c_str(), std::string(width - fill, '.').c_str(),
                 static_cast<long long>(done_), static_cast<long long>(total_),
                 static_cast<int>(100 * done_ / std::max<int64_t>(total_, 1)), Clock(el).c_str(),
                 Clock(eta).c_str(), what.c_str());
    if (done_ == total_) std::fprintf(stderr, "\n");
  }

 private:
  static std::string Clock(double s) {
    char b[32];
    const int t = static_cast<int>(s + 0.5);
    std::snprintf(b, sizeof(b), "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    return b;
  }
  int64_t total_, done_ = 0;
  bool quiet_;
  double start_, last_ = 0;
};

json CurveJson(const std::vector<VerifyCostPoint>& curve) {
  json arr = json::array();
  double c1 = 0;
  for (const auto& p : curve) {
    if (p.nodes == 1) c1 = p.seconds;
  }
  for (const auto& p : curve) {
    arr.push_back(
        {{"nodes", p.nodes}, {"seconds", p.seconds}, {"relative", c1 > 0 ? p.seconds / c1 : 0.0}});
  }
  return arr;
}

// Median, min and max of this cell's per-prompt speedups over the baseline's same prompts.
json SpeedupSpread(const Cell& cell, const Cell& base) {
  std::vector<double> sp;
  for (size_t i = 0; i < cell.prompt_tps.size() && i < base.prompt_tps.size(); ++i) {
    if (base.prompt_tps[i] > 0) sp.push_back(cell.prompt_tps[i] / base.prompt_tps[i]);
  }
  if (sp.empty()) return nullptr;
  std::sort(sp.begin(), sp.end());
  const size_t n = sp.size();
  const double median = n % 2 ? sp[n / 2] : 0.5 * (sp[n / 2 - 1] + sp[n / 2]);
  return {{"median", median}, {"min", sp.front()}, {"max", sp.back()}};
}

json CellJson(const BenchConfig& c, const Cell& cell, const Cell& base,
              const std::vector<double>& model_cost, const std::vector<double>& proj_cost) {
  json j;
  j["method"] = c.spec.method;
  j["variant"] = c.variant;
  j["budget"] = c.BudgetLabel();
  j["config"] = c.Label();
  j["prompts"] = cell.prompts;
  j["truncated_prompts"] = cell.truncated;
  j["generated_tokens"] = cell.generated;
  j["decode_seconds"] = cell.decode_seconds;
  j["tokens_per_second"] = cell.Tps();
  j["mean_accepted_tokens"] = cell.Mat();
  j["speedup"] = base.Tps() > 0 ? cell.Tps() / base.Tps() : 0.0;
  j["speedup_per_prompt"] = SpeedupSpread(cell, base);
  j["mismatching_prompts"] = cell.mismatches;
  j["mean_tree_nodes"] = cell.stats.MeanTreeNodes();
  j["relative_cost_model_under_test"] = MeanRelativeCost(cell.stats, model_cost);
  const double rel = MeanRelativeCost(cell.stats, proj_cost);
  j["relative_cost_cost_model"] = proj_cost.empty() ? json(nullptr) : json(rel);
  j["projected_speedup"] = (proj_cost.empty() || rel <= 0 || base.Mat() <= 0)
                               ? json(nullptr)
                               : json(cell.Mat() / rel / base.Mat());
  json chosen = json::object();
  for (size_t b = 1; b < cell.chosen.size(); ++b) {
    if (cell.chosen[b]) chosen[std::to_string(b)] = cell.chosen[b];
  }
  j["auto_budgets"] = chosen;
  j["stats"] = SpecStatsJson(cell.stats, cell.generated);
  return j;
}

}  // namespace

double MeanRelativeCost(const SpecStats& s, const std::vector<double>& cost) {
  if (cost.size() < 2 || !(cost[1] > 0) || s.cycles <= 0) return 0;
  const int max_n = static_cast<int>(cost.size()) - 1;
  double sum = 0;
  for (int n = 1; n <= SpecStats::kMaxTreeNodes; ++n) {
    if (s.tree_nodes[n]) sum += s.tree_nodes[n] * cost[std::min(n, max_n)];
  }
  return sum / cost[1] / static_cast<double>(s.cycles);
}

std::string BenchConfig::BudgetLabel() const {
  if (budget == kAutoBudget) return "auto";
  if (budget == kAutoCostModelBudget) return "auto-cm";
  if (budget <= 0 || !MethodOf(spec).budget_grows_tree()) return "default";
  return std::to_string(budget);
}

std::string BenchConfig::Label() const {
  const std::string b = BudgetLabel();
  return b == "default" ? variant : variant + "@" + b;
}

StatusOr<std::vector<BenchConfig>> MakeConfigs(const std::vector<std::string>& variants,
                                               const std::vector<int>& budgets) {
  std::vector<BenchConfig> out(1);  // none
  auto add = [&](const BenchConfig& c) {
    for (const auto& o : out) {
      if (o.variant == c.variant && o.budget == c.budget) return;
    }
    out.push_back(c);
  };
  for (const std::string& name : variants) {
    BenchConfig c;
    GOOSE_RETURN_IF_ERROR(ParseSpecVariant(name, &c.spec));
    c.variant = name;
    if (c.spec.method == "none") continue;
    if (!MethodOf(c.spec).budget_grows_tree() || budgets.empty()) {
      add(c);
      continue;
    }
    for (int b : budgets) {
      c.budget = b;
      add(c);
    }
  }
  return out;
}

int FirstMismatch(const std::vector<int32_t>& baseline, const std::vector<int32_t>& got) {
  const size_t n = std::min(baseline.size(), got.size());
  for (size_t i = 0; i < n; ++i) {
    if (baseline[i] != got[i]) return static_cast<int>(i);
  }
  return baseline.size() == got.size() ? -1 : static_cast<int>(n);
}

namespace {

// The sets' prompts tokenized once, over-long ones cut to their head.
struct Prompts {
  std::vector<std::vector<std::vector<int32_t>>> ids;          // [set][prompt]
  std::vector<std::vector<std::vector<int32_t>>> predictions;  // [set][prompt], no BOS
  std::vector<int> truncated;                                  // [set]
  int longest = 1;
  int64_t total = 0;
};

StatusOr<Prompts> TokenizePrompts(const Tokenizer& tok, const std::vector<DataSet>& sets,
                                  int max_prompt) {
  Prompts p;
  p.ids.resize(sets.size());
  p.predictions.resize(sets.size());
  p.truncated.assign(sets.size(), 0);
  for (size_t s = 0; s < sets.size(); ++s) {
    for (const BenchPrompt& bp : sets[s].prompts) {
      std::vector<int32_t> ids = bp.tokens.empty() ? tok.Encode(bp.text, true) : bp.tokens;
      if (ids.empty()) return Status::Error(bp.id + ": prompt has no tokens");
      if (static_cast<int>(ids.size()) > max_prompt) {
        ids.resize(max_prompt);
        ++p.truncated[s];
      }
      p.longest = std::max(p.longest, static_cast<int>(ids.size()));
      p.ids[s].push_back(std::move(ids));
      p.predictions[s].push_back(tok.Encode(bp.prediction, false));
      ++p.total;
    }
  }
  return p;
}

// One engine per config (each learning on its own, as a fresh process would), with the
// parameters its requests run.
struct ConfigEngines {
  std::vector<Engine*> engines;
  std::vector<GenerateParams> params;
};

StatusOr<ConfigEngines> MakeEngines(Session& session, const std::vector<BenchConfig>& configs,
                                    const BenchOptions& opt, int n_ctx,
                                    const std::vector<VerifyCostPoint>& model_curve,
                                    const std::vector<VerifyCostPoint>& cost_model_curve) {
  ConfigEngines out;
  for (const BenchConfig& c : configs) {
    if (MethodOf(c.spec).needs_draft_model() && session.draft_model() == nullptr) {
      return Status::Error(c.Label() + " needs a draft model: give one with -md DRAFT.gguf");
    }
    EngineOptions eo;  // every config learns on its own, on the curve the bench gives it
    eo.n_ctx = n_ctx;
    eo.share_learned = false;
    eo.session_curve = false;
    Engine& engine = session.NewEngine(eo);
    GenerateParams gp;
    gp.n_predict = opt.max_tokens;
    gp.ignore_eos = opt.ignore_eos;
    gp.sampling.temp = opt.temp;
    gp.sampling.seed = opt.seed;
    gp.spec = c.spec;
    gp.spec.budget = c.budget > 0 ? c.budget : 0;
    if (c.budget == kAutoBudget || c.budget == kAutoCostModelBudget) {
      const bool on_cost_model = c.budget == kAutoCostModelBudget;
      if (on_cost_model && opt.cost_model_cost.empty()) {
        return Status::Error("budget auto-cm needs --cost-model or --cost-curve");
      }
      if (!on_cost_model && opt.model_cost.empty()) {
        return Status::Error("--budget auto needs a cost curve");
      }
      engine.SetCostCurve(ToCostSamples(on_cost_model ? cost_model_curve : model_curve));
      // This machine's passes correct this machine's curve, not another model's.
      if (!on_cost_model) engine.LearnPassCosts({});
      gp.spec.auto_budget = true;
    }
    out.engines.push_back(&engine);
    out.params.push_back(std::move(gp));
  }
  return out;
}

// What one generation adds to its cell.
void AddToCell(const GenerateResult& r, size_t n_out, const std::vector<int64_t>& chosen_before,
               Engine& engine, const GenerateParams& params, Cell* cell) {
  ++cell->prompts;
  cell->generated += static_cast<int64_t>(n_out);
  const int64_t n_decoded = std::max<int64_t>(0, static_cast<int64_t>(n_out) - 1);
  cell->decode_tokens += n_decoded;
  cell->decode_seconds += r.decode_seconds;
  cell->prompt_tps.push_back(r.decode_seconds > 0 ? n_decoded / r.decode_seconds : 0);
  cell->stats.Merge(r.stats);
  if (!params.spec.auto_budget) return;
  // The budgets the engine chose, or for a method that sizes its own trees the sizes they
  // came out at.
  std::vector<int64_t> after = engine.ChosenBudgets(params.spec);
  std::vector<int64_t> base = chosen_before;
  if (MethodOf(params.spec).SizesOwnTrees(params.spec)) {
    after.assign(r.stats.tree_nodes, r.stats.tree_nodes + SpecStats::kMaxTreeNodes + 1);
    base.clear();
  }
  base.resize(after.size(), 0);
  cell->chosen.resize(std::max(cell->chosen.size(), after.size()), 0);
  for (size_t b = 0; b < after.size(); ++b) cell->chosen[b] += after[b] - base[b];
}

// results.json's "results" (per set and config) and "summary" (per config over all sets).
json CellsJson(const std::vector<BenchConfig>& configs, const std::vector<DataSet>& sets,
               const std::vector<std::vector<Cell>>& cells, const std::vector<double>& model_cost,
               const std::vector<double>& proj_cost) {
  const size_t n_cfg = configs.size();
  json results = json::array(), summary = json::array();
  std::vector<Cell> totals(n_cfg);
  for (size_t s = 0; s < sets.size(); ++s) {
    for (size_t c = 0; c < n_cfg; ++c) {
      json j = CellJson(configs[c], cells[s][c], cells[s][0], model_cost, proj_cost);
      j["dataset"] = sets[s].label;
      results.push_back(j);
      totals[c].Merge(cells[s][c]);
    }
  }
  for (size_t c = 0; c < n_cfg; ++c) {
    json j = CellJson(configs[c], totals[c], totals[0], model_cost, proj_cost);
    j["dataset"] = "all";
    summary.push_back(j);
  }
  return {{"results", results}, {"summary", summary}};
}

}  // namespace

StatusOr<json> RunBench(Session& session, const std::vector<DataSet>& sets,
                        const std::vector<BenchConfig>& configs, const BenchOptions& opt,
                        const ResultHook& hook) {
  const Model& model = session.model();
  if (configs.empty() || configs[0].spec.method != "none") {
    return Status::Error("the first benchmark config must be the 'none' baseline");
  }
  if (opt.max_tokens < 1) return Status::Error("--max-tokens must be at least 1");
  const int model_ctx =
      std::min(model.config().n_ctx_train > 0 ? model.config().n_ctx_train : 4096, 4096);
  const int max_prompt = model_ctx - opt.max_tokens - 1;
  if (max_prompt < 1) {
    return Status::Error(StrFormat("--max-tokens %d does not fit the model's context of %d",
                                   opt.max_tokens, model_ctx));
  }
  GOOSE_ASSIGN_OR_RETURN(const Prompts prompts,
                         TokenizePrompts(model.tokenizer(), sets, max_prompt));
  // Room for the largest draft tree past the last token: a cache cut at exactly prompt +
  // max_tokens would truncate the final cycles' trees and understate MAT.
  constexpr int kTreeHeadroom = 128;
  const int n_ctx = std::min(model_ctx, prompts.longest + opt.max_tokens + 1 + kTreeHeadroom);

  // Both curves monotone (a larger tree never costs less), as reported and as used.
  std::vector<VerifyCostPoint> model_curve = opt.model_cost, cost_model_curve = opt.cost_model_cost;
  MakeMonotone(&model_curve);
  MakeMonotone(&cost_model_curve);
  const std::vector<double> model_cost = ExpandCostCurve(ToCostSamples(model_curve));
  const std::vector<double> proj_cost = ExpandCostCurve(ToCostSamples(cost_model_curve));
  const int n_cfg = static_cast<int>(configs.size());
  GOOSE_ASSIGN_OR_RETURN(ConfigEngines run,
                         MakeEngines(session, configs, opt, n_ctx, model_curve, cost_model_curve));
  const char* inject_env = std::getenv("GOOSE_BENCH_INJECT_MISMATCH");
  const std::string inject = inject_env ? inject_env : "";
  std::vector<std::vector<Cell>> cells(sets.size(), std::vector<Cell>(n_cfg));
  json mismatches = json::array();
  std::set<std::string> mismatching_prompts;
  Progress progress(prompts.total * n_cfg, opt.quiet);
  int64_t prompt_counter = 0;
  for (size_t s = 0; s < sets.size(); ++s) {
    for (size_t i = 0; i < prompts.ids[s].size(); ++i, ++prompt_counter) {
      std::vector<std::vector<int32_t>> outputs(n_cfg);
      for (int k = 0; k < n_cfg; ++k) {
        const int c = static_cast<int>((k + prompt_counter) % n_cfg);  // rotate per prompt
        Engine& engine = *run.engines[c];
        const std::vector<int64_t> before = engine.ChosenBudgets(run.params[c].spec);
        GenerateParams& params = run.params[c];
        params.prediction = prompts.predictions[s][i];
        auto r = engine.Generate(prompts.ids[s][i], params);
        if (!r.ok()) {
          return Status::Error(sets[s].prompts[i].id + " (" + configs[c].Label() +
                               "): " + r.status().message());
        }
        outputs[c] = std::move(r->tokens);
        if (hook) {
          hook(c, sets[s].prompts[i], &outputs[c]);
        } else if (inject == configs[c].Label() && !outputs[c].empty()) {
          outputs[c].back() ^= 1;
        }
        AddToCell(*r, outputs[c].size(), before, engine, run.params[c], &cells[s][c]);
        progress.Step(sets[s].label + " " + configs[c].Label());
      }
      for (int c = 1; c < n_cfg; ++c) {
        const int at = FirstMismatch(outputs[0], outputs[c]);
        if (at < 0) continue;
        ++cells[s][c].mismatches;
        mismatching_prompts.insert(sets[s].prompts[i].id);
        mismatches.push_back({{"dataset", sets[s].label},
                              {"prompt", sets[s].prompts[i].id},
                              {"config", configs[c].Label()},
                              {"first_differing_token", at}});
      }
    }
    for (int c = 0; c < n_cfg; ++c) cells[s][c].truncated = prompts.truncated[s];
  }

  json out = CellsJson(configs, sets, cells, model_cost, proj_cost);
  out["equality"] = {{"mismatching_prompts", mismatching_prompts.size()},
                     {"mismatching_generations", mismatches.size()},
                     {"checked_generations", prompts.total * (n_cfg - 1)},
                     {"mismatches", mismatches}};
  out["verify_cost"] = {
      {"model_under_test", CurveJson(model_curve)},
      {"cost_model", cost_model_curve.empty() ? json(nullptr) : CurveJson(cost_model_curve)}};
  out["n_ctx"] = n_ctx;
  return out;
}

}  // namespace goose
