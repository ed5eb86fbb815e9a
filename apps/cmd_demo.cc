// goose demo: what goose is for, on this machine, with no download. The bundled tiny model is
// inflated once (synth/inflate.h) into a model that writes exactly the tiny model's text (at Q8_0)
// but costs like a 0.44B one, and a few stories are written twice: plain decoding, then
// speculative decoding; it prints both speeds and checks the texts are identical. (On the tiny
// model itself every pass is compute-bound and costs almost nothing, so no tree can win there.)
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "engine/session.h"
#include "method/method.h"
#include "model/model.h"
#include "synth/inflate.h"

namespace goose::cli {
namespace {

// TinyStories openings: what the tiny model writes.
constexpr const char* kPrompts[] = {
    "Once upon a time, there was a little girl named Lily.",
    "Tom and his mom went to the park.",
    "One day, a little bird found a shiny stone.",
    "Sam had a big red ball. He liked to play with it every day.",
    "There was a small dog who lived in a big house.",
    "Anna wanted to bake a cake for her friend.",
};
constexpr int kMaxPrompts = sizeof(kPrompts) / sizeof(kPrompts[0]);

struct DemoFlags {
  std::string model, shape = "small-0.5b", spec = "goose", budget = "auto";
  int n_predict = 256, prompts = 6, threads = 0;
  bool json = false, rebuild = false;
  KvType kv = KvType::kF16;
};

// The inflated model, built once into the cache directory (a temporary file, then a rename, so
// an interrupted build never leaves a half file behind).
StatusOr<std::string> InflatedModel(const std::string& source, const DemoFlags& f) {
  const std::filesystem::path dir = std::filesystem::path(GooseCacheDir()) / "demo";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Error("cannot create " + dir.string() + ": " + ec.message());
  const std::string name =
      std::filesystem::path(source).stem().string() + "-" + f.shape + "-q8_0.gguf";
  const std::string path = (dir / name).string();
  if (!f.rebuild && std::filesystem::is_regular_file(path, ec)) return path;
  std::fprintf(stderr,
               "goose: building the demo model once: %s inflated to the cost of a %s model "
               "(Q8_0) at %s ...\n",
               source.c_str(), f.shape.c_str(), path.c_str());
  InflateParams p;
  p.source = source;
  p.shape = f.shape;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const auto t0 = std::chrono::steady_clock::now();
  if (Status st = InflateModel(p, tmp); !st.ok()) {
    std::filesystem::remove(tmp, ec);
    return st;
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Error("cannot write " + path + ": " + ec.message());
  std::fprintf(stderr, "goose: built in %.1f s (%.0f MB; delete it to free the space)\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               std::filesystem::file_size(path, ec) / 1e6);
  return path;
}

struct Timed {
  GenerateResult result;
  double seconds = 0;  // wall time of Generate (prefill + decode)
};

StatusOr<Timed> TimedGenerate(Engine& engine, const std::vector<int32_t>& prompt,
                              const GenerateParams& params) {
  const auto t0 = std::chrono::steady_clock::now();
  GOOSE_ASSIGN_OR_RETURN(GenerateResult r, engine.Generate(prompt, params));
  return Timed{std::move(r),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

// What the stories took, plain and speculative.
struct DemoTotals {
  nlohmann::json runs = nlohmann::json::array();
  double plain_s = 0, spec_s = 0;
  int64_t tokens = 0, passes = 0;
  bool all_same = true;
};

// Writes story i twice (plain, then speculative), printing a line for it unless --json.
Status WriteStory(const DemoFlags& f, int i, Engine& plain, Engine& spec,
                  const GenerateParams& plain_params, const GenerateParams& spec_params,
                  DemoTotals* t) {
  const Tokenizer& tok = plain.model().tokenizer();
  const std::vector<int32_t> prompt = tok.Encode(kPrompts[i], true);
  GOOSE_ASSIGN_OR_RETURN(const Timed a, TimedGenerate(plain, prompt, plain_params));
  GOOSE_ASSIGN_OR_RETURN(const Timed b, TimedGenerate(spec, prompt, spec_params));
  const bool same = a.result.tokens == b.result.tokens;
  t->all_same = t->all_same && same;
  const double n = static_cast<double>(a.result.tokens.size());
  t->plain_s += a.seconds;
  t->spec_s += b.seconds;
  t->tokens += static_cast<int64_t>(a.result.tokens.size());
  t->passes += b.result.stats.cycles;
  const double mat =
      static_cast<double>(b.result.tokens.size()) / std::max<int64_t>(1, b.result.stats.cycles);
  if (i == 0 && !f.json) std::printf("%s%s\n\n", kPrompts[i], tok.Decode(a.result.tokens).c_str());
  if (!f.json) {
    std::printf(
        "story %d: plain %6.1f tok/s | %s %6.1f tok/s (%.2fx, %.2f tokens per pass) | "
        "text %s\n",
        i + 1, n / a.seconds, f.spec.c_str(), n / b.seconds, a.seconds / b.seconds, mat,
        same ? "identical" : "DIFFERENT");
    std::fflush(stdout);
  }
  t->runs.push_back({{"prompt", kPrompts[i]},
                     {"tokens", a.result.tokens.size()},
                     {"plain_tokens_per_second", n / a.seconds},
                     {"spec_tokens_per_second", n / b.seconds},
                     {"mean_accepted_tokens", mat},
                     {"identical", same}});
  return Status::Ok();
}

void PrintTotals(const DemoFlags& f, const std::string& path, int threads, const DemoTotals& t) {
  const double speedup = t.plain_s / t.spec_s;
  if (f.json) {
    nlohmann::json j = {{"model", path},
                        {"spec", f.spec},
                        {"budget", f.budget},
                        {"threads", threads},
                        {"runs", t.runs},
                        {"plain_tokens_per_second", t.tokens / t.plain_s},
                        {"spec_tokens_per_second", t.tokens / t.spec_s},
                        {"speedup", speedup},
                        {"identical", t.all_same}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("\nall: plain %.1f tok/s, %s %.1f tok/s: %.2fx faster, %.2f tokens per pass, %s\n",
              t.tokens / t.plain_s, f.spec.c_str(), t.tokens / t.spec_s, speedup,
              static_cast<double>(t.tokens) / std::max<int64_t>(1, t.passes),
              t.all_same ? "the same text" : "TEXTS DIFFER (a bug: please report it)");
}

int RunDemo(const DemoFlags& f) {
  GenerateParams spec_params;
  if (Status st = ParseSpecVariant(f.spec, &spec_params.spec); !st.ok()) {
    return Fail("--spec: " + st.message());
  }
  if (Status st = ParseBudgetFlag(f.budget, &spec_params.spec); !st.ok()) {
    return Fail(st.message());
  }
  spec_params.spec.auto_budget = f.budget == "auto";
  const std::string source = ResolveModelPath(f.model);
  if (source.empty()) return 1;
  auto path = InflatedModel(source, f);
  if (!path.ok()) return Fail(path.status().message());
  SessionOptions so;
  so.model_path = *path;
  so.n_threads = f.threads;
  so.kv_type = f.kv;
  so.n_contexts = 2;  // plain and speculative
  so.budget_auto = spec_params.spec.auto_budget;
  so.on_note = [](const std::string& line) { std::fprintf(stderr, "goose: %s\n", line.c_str()); };
  so.check_model = [](const Model& model, SessionOptions* o) {
    o->n_ctx = std::min(model.config().n_ctx_train, 1024);
    return Status::Ok();
  };
  auto session_or = Session::Open(std::move(so));
  if (!session_or.ok()) {
    return Fail(session_or.status().message() + " (rebuild it with --rebuild)");
  }
  Session& session = **session_or;
  EngineOptions plain_options;  // plain decoding learns nothing and needs no curve
  plain_options.share_learned = false;
  plain_options.session_curve = false;
  Engine& plain = session.NewEngine(plain_options);
  Engine& spec = session.NewEngine();
  GenerateParams plain_params;
  plain_params.n_predict = spec_params.n_predict = f.n_predict;
  plain_params.ignore_eos = spec_params.ignore_eos = true;  // the same length for both

  std::fprintf(stderr,
               "goose: %s, %d threads: %d stories of %d tokens, plain then --spec %s "
               "--budget %s\n\n",
               std::filesystem::path(*path).filename().c_str(), session.pool().size(), f.prompts,
               f.n_predict, f.spec.c_str(), f.budget.c_str());
  DemoTotals totals;
  for (int i = 0; i < f.prompts; ++i) {
    Status st = WriteStory(f, i, plain, spec, plain_params, spec_params, &totals);
    if (!st.ok()) return Fail(st.message());
  }
  session.Close();  // the next demo starts from what this one learned
  PrintTotals(f, *path, session.pool().size(), totals);
  return totals.all_same ? 0 : 1;
}

}  // namespace

Runner AddDemoCommand(CLI::App& app) {
  auto f = std::make_shared<DemoFlags>();
  app.add_option("-m,--model", f->model,
                 "small llama GGUF (F32) to inflate (default ../shared/models/stories260K.gguf)");
  app.add_option("--like", f->shape, "the cost to inflate to: " + InflateShapeNames());
  app.add_option("-n,--n-predict", f->n_predict, "tokens per story")->check(IntIn(1, 4096));
  app.add_option("--prompts", f->prompts, "stories to write")->check(IntIn(1, kMaxPrompts));
  app.add_option("--spec", f->spec, "the speculative method: " + MethodNames());
  app.add_option("--budget", f->budget, "tree node budget: 1..128 or auto");
  AddKvTypeFlag(app, &f->kv);
  app.add_option("-t,--threads", f->threads, "threads (0 = all cores)")->check(IntIn(0, 64));
  app.add_flag("--rebuild", f->rebuild, "build the inflated model again");
  app.add_flag("--json", f->json, "print one JSON object");
  return [f] { return RunDemo(*f); };
}

}  // namespace goose::cli
