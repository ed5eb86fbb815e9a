// goose bench-serve: concurrent clients against the in-process serving loop (bench/serve_bench.h),
// speculation off and on; writes results.json, results.md and a plot into --out.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/bench_report.h"
#include "bench/datasets.h"
#include "bench/serve_bench.h"
#include "commands.h"
#include "engine/session.h"

namespace goose::cli {

namespace {

struct ServeBenchFlags {
  std::string model, data = "tinystories:8", data_dir, out = "bench-serve-out", budget = "auto";
  ServeBenchOptions opt;
  int threads = 0, n_ctx = 0;
  KvType kv = KvType::kF16;
  bool table_cache = false;
};

// The prompt set's requests: text prompts tokenized as goose generate -p does (BOS added).
StatusOr<std::vector<std::vector<int32_t>>> Prompts(const ServeBenchFlags& f,
                                                    const Tokenizer& tok) {
  GOOSE_ASSIGN_OR_RETURN(const std::vector<DataSpec> specs, ParseDataSpecs(f.data));
  const std::string dir = f.data_dir.empty() ? DefaultDataDir() : f.data_dir;
  std::vector<std::vector<int32_t>> out;
  for (const DataSpec& spec : specs) {
    GOOSE_ASSIGN_OR_RETURN(auto sets, ExpandDataSpec(spec, dir, &tok, 8));
    for (const DataSet& set : sets) {
      for (const BenchPrompt& p : set.prompts) {
        out.push_back(p.tokens.empty() ? tok.Encode(p.text, true) : p.tokens);
      }
    }
  }
  return out;
}

int WriteServeOutputs(const ServeBenchFlags& f, const nlohmann::json& j) {
  if (Status st = CheckWritableDir(f.out, "--out"); !st.ok()) return Fail(st.message());
  std::ofstream(f.out + "/results.json") << j.dump(1) << "\n";
  const std::string md = ServeBenchMarkdown(j);
  std::ofstream(f.out + "/results.md") << md;
  std::vector<std::string> pngs;
  if (Status st = WriteServePlot(j, f.out, &pngs); !st.ok()) {
    std::fprintf(stderr, "goose: %s\n", st.message().c_str());
  }
  std::printf("%s", md.c_str());
  std::fprintf(stderr, "wrote %s/results.json, results.md and %zu plot(s)\n", f.out.c_str(),
               pngs.size());
  return j["equality"]["mismatching_requests"].get<int>() == 0 ? 0 : 2;
}

int RunServeBenchCommand(ServeBenchFlags& f) {
  if (f.budget != "auto") {
    SpecParams spec;
    if (Status st = ParseBudgetFlag(f.budget, &spec); !st.ok()) return Fail(st.message());
    f.opt.budget_auto = false;
    f.opt.budget = spec.budget;
  }
  int max_clients = 1;
  for (int n : f.opt.clients) max_clients = std::max(max_clients, n);
  SessionOptions so;
  so.model_path = ResolveModelPath(f.model);
  if (so.model_path.empty()) return 1;
  so.n_threads = f.threads;
  so.n_ctx = f.n_ctx;
  so.kv_type = f.kv;
  so.n_contexts = 2 * max_clients;  // a loop's slots at a time (and the one before it)
  so.n_batch = 256;
  so.memory_flags = "-c or --clients";
  so.table_cache = f.table_cache;
  so.budget_auto = f.opt.budget_auto;
  so.on_note = [](const std::string& line) { std::fprintf(stderr, "goose: %s\n", line.c_str()); };
  auto session = Session::Open(std::move(so));
  if (!session.ok()) return Fail(session.status().message());
  auto prompts = Prompts(f, (*session)->model().tokenizer());
  if (!prompts.ok()) return Fail(prompts.status().message());
  auto res = RunServeBench(**session, *prompts, f.opt);
  if (!res.ok()) return Fail(res.status().message());
  nlohmann::json j = *res;
  j["machine"] = MachineJson();
  j["model"] = (*session)->options().model_path;
  j["settings"] = {{"data", f.data},
                   {"spec", f.opt.spec},
                   {"budget", f.budget},
                   {"max_tokens", f.opt.max_tokens},
                   {"temp", f.opt.temp},
                   {"threads", (*session)->pool().size()},
                   {"prompts", prompts->size()}};
  (*session)->Close();
  return WriteServeOutputs(f, j);
}

}  // namespace

Runner AddBenchServeCommand(CLI::App& app) {
  auto f = std::make_shared<ServeBenchFlags>();
  app.add_option("-m,--model", f->model, "GGUF model (default ../shared/models/stories260K.gguf)");
  app.add_option("--data", f->data, "prompt sets, as goose bench's --data");
  app.add_option("--data-dir", f->data_dir, "folder of the prompt sets (default ../shared/data)");
  app.add_option("--clients", f->opt.clients, "concurrent clients, comma-separated")
      ->delimiter(',')
      ->check(IntIn(1, 256));
  app.add_option("--spec", f->opt.spec, "the speculative configuration (" + MethodNames() + ")");
  app.add_option("--budget", f->budget, "its node budget: 1..128, 0 = the method's, or auto");
  app.add_option("--max-tokens", f->opt.max_tokens, "tokens per request")->check(IntIn(1, 1 << 20));
  app.add_option("--temp", f->opt.temp, "temperature (0 = greedy)")->check(NumberIn(0.0, 100.0));
  app.add_option("--seed", f->opt.seed, "sampling seed");
  app.add_option("-c,--ctx-size", f->n_ctx, "context per slot (0 = min(model, 4096))")
      ->check(IntIn(0, 1 << 20));
  AddKvTypeFlag(app, &f->kv);
  app.add_option("-t,--threads", f->threads, "threads, at most 64 (0 = all cores)")
      ->check(IntIn(0, 64));
  app.add_option("--out", f->out, "output folder");
  app.add_flag("--table-cache", f->table_cache,
               "start from (and save) what the methods learned in earlier runs (default: cold)");
  app.add_flag("--quiet", f->opt.quiet, "no progress lines");
  return [f] { return RunServeBenchCommand(*f); };
}

}  // namespace goose::cli
