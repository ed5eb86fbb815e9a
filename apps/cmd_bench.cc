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
#include "engine/cost_cache.h"
#include "bench/datasets.h"
#include "commands.h"
#include "engine/engine.h"
#include "model/model.h"

namespace goose::cli {

namespace {

struct BenchFlags {
  std::string model, data_dir, out = "bench-out", cost_model, cost_curve;
  std::vector<std::string> data = {"spec_bench", "mt_bench", "humaneval", "gsm8k", "alpaca_eval",
                                   "tinystories"};
  std::vector<std::string> methods = {"none", "pld", "tr", "balanced", "sequoia", "goose"};
  std::vector<std::string> budgets = {"16", "32", "60"};
  int n_prompts = 5, max_tokens = 128, threads = 0;
  float temp = 0.0f;
  uint64_t seed = 0;
  bool quiet = false, stop_at_eos = false, recalibrate = false;
};

std::string DefaultDataDir() {
  if (const char* s = std::getenv("GOOSE_SHARED"); s && *s) return std::string(s) + "/data";
#ifdef GOOSE_SOURCE_DIR
  return std::string(GOOSE_SOURCE_DIR) + "/../shared/data";
#else
  return "../shared/data";
#endif
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

int RunBenchCommand(const BenchFlags& f) {
  const auto t_start = std::chrono::steady_clock::now();
  const std::vector<std::string>& methods = f.methods;
  std::vector<int> budgets;
  for (const std::string& b : f.budgets) {
    if (b == "auto" || b == "auto-cm") {
      budgets.push_back(b == "auto" ? kAutoBudget : kAutoCostModelBudget);
      continue;
    }
    char* end = nullptr;
    const long v = std::strtol(b.c_str(), &end, 10);
    if (b.empty() || *end || v < 1 || v > 128) {
      return Fail("--budgets: '" + b + "' is neither 1..128 nor 'auto' / 'auto-cm'");
    }
    budgets.push_back(static_cast<int>(v));
  }
  auto specs = ParseDataSpecs(Join(f.data));
  if (!specs.ok()) return Fail(specs.status().message());
  auto configs_or = MakeConfigs(methods, budgets);
  if (!configs_or.ok()) return Fail("--methods: " + configs_or.status().message());
  const std::vector<BenchConfig>& configs = *configs_or;

  const std::string path = ResolveModelPath(f.model);
  if (path.empty()) return 1;
  auto model_or = Model::Load(path);
  if (!model_or.ok()) return Fail(model_or.status().message());
  const Model& model = **model_or;
  // RunBench keeps one engine per config, each with a context of at most the default size;
  // their batches are trees of at most 128 nodes and prefill passes of prefill_chunk tokens.
  const int n_batch = std::max(128, GenerateParams{}.prefill_chunk);
  if (Status st = CheckContextMemory(model.config(), 0, n_batch, static_cast<int>(configs.size()),
                                     "--methods/--budgets list");
      !st.ok()) {
    return Fail(st.message());
  }
  const std::string data_dir = f.data_dir.empty() ? DefaultDataDir() : f.data_dir;
  std::vector<DataSet> sets;
  for (const DataSpec& spec : *specs) {
    auto expanded = ExpandDataSpec(spec, data_dir, &model.tokenizer(), f.n_prompts);
    if (!expanded.ok()) return Fail(expanded.status().message());
    for (auto& s : *expanded) sets.push_back(std::move(s));
  }

  ThreadPool pool(f.threads > 0 ? f.threads : ThreadPool::DefaultThreads());
  BenchOptions opt;
  opt.max_tokens = f.max_tokens;
  opt.temp = f.temp;
  opt.seed = f.seed;
  opt.ignore_eos = !f.stop_at_eos;
  opt.quiet = f.quiet;
  if (!f.quiet) std::fprintf(stderr, "calibrating verify cost of %s...\n", path.c_str());
  auto cal = LoadOrMeasureCost(model, path, &pool, f.recalibrate);
  if (!cal.ok()) return Fail(cal.status().message());
  if (!cal->note.empty()) std::fprintf(stderr, "goose: %s\n", cal->note.c_str());
  opt.model_cost = cal->curve;
  if (!f.cost_curve.empty()) {
    auto curve = ReadCostCurve(f.cost_curve);
    if (!curve.ok()) return Fail(curve.status().message());
    opt.cost_model_cost = *curve;
  }
  if (!f.cost_model.empty()) {
    auto cm = Model::Load(f.cost_model);
    if (!cm.ok()) return Fail(cm.status().message());
    if (!f.quiet) std::fprintf(stderr, "measuring verify cost of %s...\n", f.cost_model.c_str());
    auto curve = MeasureCostModelCurve(**cm, &pool);
    if (!curve.ok()) return Fail(curve.status().message());
    opt.cost_model_cost = *curve;
  }

  auto res = RunBench(model, &pool, sets, configs, opt);
  if (!res.ok()) return Fail(res.status().message());
  nlohmann::json j = *res;
  j["schema"] = "goose-bench/1";
  j["machine"] = MachineJson();
  j["machine"]["threads"] = pool.size();
  std::error_code ec;
  const auto file_bytes = std::filesystem::file_size(path, ec);
  j["model"] = {{"path", path},
                {"file_bytes", ec ? 0 : file_bytes},
                {"weight_bytes", model.weight_bytes()},
                {"n_vocab", model.config().n_vocab}};
#ifdef GOOSE_SOURCE_DIR
  j["commit"] = GitCommit(GOOSE_SOURCE_DIR);
#else
  j["commit"] = "unknown";
#endif
  nlohmann::json ds = nlohmann::json::array();
  for (const auto& s : sets) ds.push_back({{"label", s.label}, {"prompts", s.prompts.size()}});
  j["datasets"] = ds;
  j["settings"] = {{"data", Join(f.data)},
                   {"methods", Join(f.methods)},
                   {"budgets", Join(f.budgets)},
                   {"n_prompts", f.n_prompts},
                   {"max_tokens", f.max_tokens},
                   {"temp", f.temp},
                   {"seed", f.seed},
                   {"ignore_eos", opt.ignore_eos},
                   {"threads", pool.size()},
                   {"cost_model", f.cost_model.empty() ? nlohmann::json(nullptr)
                                                       : nlohmann::json(f.cost_model)},
                   {"cost_curve", f.cost_curve.empty() ? nlohmann::json(nullptr)
                                                       : nlohmann::json(f.cost_curve)},
                   {"cost_cache", cal->cache_path},
                   {"cost_from_cache", cal->from_cache}};
  j["wall_seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();

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

}  // namespace

Runner AddBenchCommand(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  app.add_option("-m,--model", f->model, "GGUF model (default ../shared/models/stories260K.gguf)");
  app.add_option("--data", f->data, "data sets: name[:category][:count],...")->delimiter(',');
  app.add_option("--data-dir", f->data_dir, "folder of the prompt sets (default ../shared/data)");
  app.add_option("--methods", f->methods, "methods, comma-separated (none always runs)")
      ->delimiter(',');
  app.add_option("--budgets", f->budgets,
                 "node budgets incl. root, comma-separated; auto (cost-aware on this model) or "
                 "auto-cm (cost-aware on --cost-model's curve)")
      ->delimiter(',');
  app.add_option("--n-prompts", f->n_prompts, "prompts per data set")->check(CLI::Range(1, 100000));
  app.add_option("--max-tokens", f->max_tokens, "tokens per prompt")->check(CLI::Range(1, 1 << 20));
  app.add_option("--temp", f->temp, "temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0));
  app.add_option("--seed", f->seed, "sampling seed");
  app.add_option("--out", f->out, "output folder");
  auto* cm = app.add_option("--cost-model", f->cost_model,
                            "GGUF whose verify cost gives the projection (and auto-cm's curve)");
  app.add_option("--cost-curve", f->cost_curve,
                 "a verify-cost curve saved as JSON (bench-verify --json, a cost cache file) to "
                 "project onto instead of --cost-model")
      ->excludes(cm);
  app.add_option("-t,--threads", f->threads, "threads, at most 64 (0 = all cores)")
      ->check(CLI::Range(0, 64));
  app.add_flag("--quiet", f->quiet, "no progress bar or table on the terminal");
  app.add_flag("--stop-at-eos", f->stop_at_eos, "stop at end-of-sequence (default: exactly --max-tokens)");
  app.add_flag("--recalibrate", f->recalibrate, "re-measure the cached verify-cost curve");
  return [f] { return RunBenchCommand(*f); };
}

}  // namespace goose::cli
