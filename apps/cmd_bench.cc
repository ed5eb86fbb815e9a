// goose bench: Spec-Bench-style evaluation (MAT, speedup, equality with plain decoding, verify
// cost, projected speedup, cost-aware auto budget) over the shared prompt sets; writes
// results.json, results.md and PNG plots into --out.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/bench_report.h"
#include "bench/bench_runner.h"
#include "bench/datasets.h"
#include "budget/cost_cache.h"
#include "commands.h"
#include "engine/session.h"
#include "model/model.h"

namespace goose::cli {

namespace {

struct BenchFlags {
  std::string model, data_dir, out = "bench-out", cost_model, cost_curve;
  std::string model_draft;  // -md: the draft model of the draft-model methods
  std::vector<std::string> data = {"spec_bench", "mt_bench",    "humaneval",
                                   "gsm8k",      "alpaca_eval", "tinystories"};
  std::vector<std::string> methods = {"none", "pld", "tr", "balanced", "sequoia", "goose"};
  std::vector<std::string> budgets = {"16", "32", "60"};
  int n_prompts = 5, max_tokens = 128, threads = 0;
  float temp = 0.0f;
  uint64_t seed = 0;
  bool quiet = false, stop_at_eos = false, recalibrate = false;
  KvType kv = KvType::kF16;
};

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

// --budgets: 1..128, auto, auto-cm.
StatusOr<std::vector<int>> ParseBudgets(const BenchFlags& f) {
  std::vector<int> budgets;
  for (const std::string& b : f.budgets) {
    if (b == "auto" || b == "auto-cm") {
      budgets.push_back(b == "auto" ? kAutoBudget : kAutoCostModelBudget);
      continue;
    }
    char* end = nullptr;
    const long v = std::strtol(b.c_str(), &end, 10);
    if (b.empty() || *end || v < 1 || v > 128) {
      return Status::Error("--budgets: '" + b + "' is neither 1..128 nor 'auto' / 'auto-cm'");
    }
    budgets.push_back(static_cast<int>(v));
  }
  // Checked before any work: a long run must not fail at its end.
  if (std::find(budgets.begin(), budgets.end(), kAutoCostModelBudget) != budgets.end() &&
      f.cost_model.empty() && f.cost_curve.empty()) {
    return Status::Error("--budgets auto-cm needs --cost-model MODEL.gguf or --cost-curve FILE");
  }
  return budgets;
}

StatusOr<std::vector<DataSet>> LoadSets(const BenchFlags& f, const std::vector<DataSpec>& specs,
                                        const Tokenizer& tok) {
  const std::string data_dir = f.data_dir.empty() ? DefaultDataDir() : f.data_dir;
  std::vector<DataSet> sets;
  for (const DataSpec& spec : specs) {
    GOOSE_ASSIGN_OR_RETURN(auto expanded, ExpandDataSpec(spec, data_dir, &tok, f.n_prompts));
    for (auto& s : expanded) sets.push_back(std::move(s));
  }
  return sets;
}

// The curve of --cost-curve FILE or --cost-model MODEL.gguf (measured now), else empty.
StatusOr<std::vector<VerifyCostPoint>> CostModelCurve(const BenchFlags& f, ThreadPool* pool) {
  if (!f.cost_model.empty()) {
    GOOSE_ASSIGN_OR_RETURN(auto cm, Model::Load(f.cost_model));
    if (!f.quiet) std::fprintf(stderr, "measuring verify cost of %s...\n", f.cost_model.c_str());
    return MeasureCostModelCurve(*cm, pool);
  }
  if (!f.cost_curve.empty()) return ReadCostCurve(f.cost_curve);
  return std::vector<VerifyCostPoint>{};
}

// RunBench's results with what they were measured on and how.
void AddRunInfo(const BenchFlags& f, Session& session, const std::vector<DataSet>& sets,
                const BenchOptions& opt, nlohmann::json* j) {
  const Model& model = session.model();
  (*j)["schema"] = "goose-bench/1";
  (*j)["machine"] = MachineJson();
  (*j)["machine"]["threads"] = session.pool().size();
  std::error_code ec;
  const auto file_bytes = std::filesystem::file_size(session.options().model_path, ec);
  (*j)["model"] = {{"path", session.options().model_path},
                   {"file_bytes", ec ? 0 : file_bytes},
                   {"weight_bytes", model.weight_bytes()},
                   {"n_vocab", model.config().n_vocab}};
#ifdef GOOSE_SOURCE_DIR
  (*j)["commit"] = GitCommit(GOOSE_SOURCE_DIR);
#else
  (*j)["commit"] = "unknown";
#endif
  nlohmann::json ds = nlohmann::json::array();
  for (const auto& s : sets) ds.push_back({{"label", s.label}, {"prompts", s.prompts.size()}});
  (*j)["datasets"] = ds;
  auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
  };
  (*j)["settings"] = {{"data", Join(f.data)},
                      {"methods", Join(f.methods)},
                      {"budgets", Join(f.budgets)},
                      {"n_prompts", f.n_prompts},
                      {"max_tokens", f.max_tokens},
                      {"temp", f.temp},
                      {"seed", f.seed},
                      {"ignore_eos", opt.ignore_eos},
                      {"threads", session.pool().size()},
                      {"cost_model", or_null(f.cost_model)},
                      {"draft_model", or_null(f.model_draft)},
                      {"cost_curve", or_null(f.cost_curve)},
                      {"cost_cache", session.calibration().cache_path},
                      {"cost_from_cache", session.calibration().from_cache}};
}

// results.json, results.md and the plots in --out; the exit code (2: outputs differ).
int WriteOutputs(const BenchFlags& f, const nlohmann::json& j) {
  std::error_code ec;
  std::filesystem::create_directories(f.out, ec);
  if (ec) return Fail("cannot create --out '" + f.out + "': " + ec.message());
  const std::string json_path = f.out + "/results.json", md_path = f.out + "/results.md";
  {
    std::ofstream out(json_path);
    out << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out) return Fail("cannot write '" + json_path + "'");
  }
  const std::string md = ResultsMarkdown(j);
  {
    std::ofstream out(md_path);
    out << md;
    if (!out) return Fail("cannot write '" + md_path + "'");
  }
  std::vector<std::string> pngs;
  Status plots = WritePlots(j, f.out, &pngs);
  if (!plots.ok()) std::fprintf(stderr, "goose: %s\n", plots.message().c_str());
  if (!f.quiet) std::printf("%s\n", md.c_str());
  const int bad = j["equality"]["mismatching_prompts"].get<int>();
  std::fprintf(stderr, "%s\nwrote %s, %s and %zu plot(s) in %.1f s\n",
               bad ? "*** EQUALITY CHECK FAILED: outputs differ from plain decoding ***"
                   : "equality check: 0 mismatching prompts",
               json_path.c_str(), md_path.c_str(), pngs.size(), j["wall_seconds"].get<double>());
  if (bad) {
    std::fprintf(stderr, "*** %d prompt(s) mismatch; see \"equality\" in %s ***\n", bad,
                 json_path.c_str());
    return 2;
  }
  return 0;
}

int RunBenchCommand(const BenchFlags& f) {
  const auto t_start = std::chrono::steady_clock::now();
  auto budgets = ParseBudgets(f);
  if (!budgets.ok()) return Fail(budgets.status().message());
  auto specs = ParseDataSpecs(Join(f.data));
  if (!specs.ok()) return Fail(specs.status().message());
  if (Status st = CheckWritableDir(f.out, "--out"); !st.ok()) return Fail(st.message());
  auto configs = MakeConfigs(f.methods, *budgets);
  if (!configs.ok()) return Fail("--methods: " + configs.status().message());
  for (const BenchConfig& c : *configs) {
    if (MethodOf(c.spec).needs_draft_model() && f.model_draft.empty()) {
      return Fail("--methods " + c.variant + " needs a draft model: give one with -md DRAFT.gguf");
    }
  }
  SessionOptions so;
  so.model_path = ResolveModelPath(f.model);
  if (so.model_path.empty()) return 1;
  so.draft_model_path = f.model_draft;
  so.n_threads = f.threads;
  so.kv_type = f.kv;
  // One engine per config, each with a context of at most the default size; their batches are
  // trees of at most 128 nodes and prefill passes of prefill_chunk tokens.
  so.n_contexts = static_cast<int>(configs->size());
  so.n_batch = std::max(128, GenerateParams{}.prefill_chunk);
  so.memory_flags = "--methods/--budgets list";
  so.table_cache = false;  // every config learns on its own
  so.budget_auto = true;   // the model's curve: auto's, and what c(B)/c(1) reports
  so.recalibrate = f.recalibrate;
  so.on_note = [](const std::string& line) { std::fprintf(stderr, "goose: %s\n", line.c_str()); };
  auto session = Session::Open(std::move(so));
  if (!session.ok()) return Fail(session.status().message());
  auto sets = LoadSets(f, *specs, (*session)->model().tokenizer());
  if (!sets.ok()) return Fail(sets.status().message());
  BenchOptions opt;
  opt.max_tokens = f.max_tokens;
  opt.temp = f.temp;
  opt.seed = f.seed;
  opt.ignore_eos = !f.stop_at_eos;
  opt.quiet = f.quiet;
  opt.model_cost = (*session)->calibration().curve;
  auto cost_model = CostModelCurve(f, &(*session)->pool());
  if (!cost_model.ok()) return Fail(cost_model.status().message());
  opt.cost_model_cost = *cost_model;

  auto res = RunBench(**session, *sets, *configs, opt);
  if (!res.ok()) return Fail(res.status().message());
  nlohmann::json j = *res;
  AddRunInfo(f, **session, *sets, opt, &j);
  j["wall_seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return WriteOutputs(f, j);
}

}  // namespace

Runner AddBenchCommand(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  app.add_option("-m,--model", f->model, "GGUF model (default ../shared/models/stories260K.gguf)");
  app.add_option("--model-draft", f->model_draft,
                 "(-md) draft model of the same family, for the methods draft, draft-tree, graft");
  app.add_option(
         "--data", f->data,
         "data sets, comma-separated, each name[:category][:count] (e.g. "
         "spec_bench:coding:5, tinystories:10); names: " +
             [] {
               std::string s;
               for (const std::string& n : KnownDataSets()) s += (s.empty() ? "" : ", ") + n;
               return s;
             }())
      ->delimiter(',');
  app.add_option("--data-dir", f->data_dir, "folder of the prompt sets (default ../shared/data)");
  app.add_option("--methods", f->methods, "methods, comma-separated (none always runs)")
      ->delimiter(',');
  app.add_option("--budgets", f->budgets,
                 "node budgets incl. root, comma-separated; auto (cost-aware on this model) or "
                 "auto-cm (cost-aware on --cost-model's curve)")
      ->delimiter(',');
  app.add_option("--n-prompts", f->n_prompts, "prompts per data set")->check(IntIn(1, 100000));
  app.add_option("--max-tokens", f->max_tokens, "tokens per prompt")->check(IntIn(1, 1 << 20));
  app.add_option("--temp", f->temp, "temperature (0 = greedy)")->check(NumberIn(0.0, 100.0));
  app.add_option("--seed", f->seed, "sampling seed");
  app.add_option("--out", f->out, "output folder");
  auto* cm = app.add_option("--cost-model", f->cost_model,
                            "GGUF whose verify cost gives the projection (and auto-cm's curve)");
  app.add_option("--cost-curve", f->cost_curve,
                 "a verify-cost curve saved as JSON (bench-verify --json, a cost cache file) to "
                 "project onto instead of --cost-model")
      ->excludes(cm);
  AddKvTypeFlag(app, &f->kv);
  app.add_option("-t,--threads", f->threads, "threads, at most 64 (0 = all cores)")
      ->check(IntIn(0, 64));
  app.add_flag("--quiet", f->quiet, "no progress bar or table on the terminal");
  app.add_flag("--stop-at-eos", f->stop_at_eos,
               "stop at end-of-sequence (default: exactly --max-tokens)");
  app.add_flag("--recalibrate", f->recalibrate, "re-measure the cached verify-cost curve");
  return [f] { return RunBenchCommand(*f); };
}

}  // namespace goose::cli
