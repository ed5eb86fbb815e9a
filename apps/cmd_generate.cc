// goose generate: plain or speculative generation, text streamed to stdout, speed to stderr.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "engine/report.h"
#include "engine/session.h"
#include "method/draft_model.h"
#include "method/method.h"
#include "model/model.h"
#include "model/top_logits.h"
#include "tokenizer/tokenizer.h"

namespace goose::cli {

namespace {

struct GenerateFlags {
  // Speculation is on unless told otherwise: goose at --budget auto falls back to plain steps
  // where a tree cannot pay (a tiny model), so it never costs more than a few percent.
  std::string model, prompt, prompt_file, spec = "goose", preset, tr_cache, budget;
  std::string prediction_file;  // --prediction: the expected output (- = stdin)
  std::string model_draft;      // -md: the draft model of the draft-model methods
  int n_predict = 128, n_ctx = 0, threads = 0, top_k = 40, branch_k = 0;
  int batch = GenerateParams{}.prefill_chunk;
  std::vector<int32_t> stop_tokens;
  float temp = 0.0f, top_p = 0.95f;
  uint64_t seed = 0;
  bool json = false, ignore_eos = false, no_bos = false, has_prompt = false, recalibrate = false,
       no_table_cache = false;
  std::string prompt_ids;  // --prompt-ids: the prompt as token ids
  int top_logits = 0;      // --top-logits K
  KvType kv = KvType::kF16;
};

// --prompt-ids "1,403,407": comma-separated ids in [0, n_vocab), taken as they are (no BOS).
Status ParsePromptIds(const std::string& text, int n_vocab, std::vector<int32_t>* out) {
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    errno = 0;
    const long id = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || id < 0 || id >= n_vocab) {
      return Status::Error(
          StrFormat("--prompt-ids: '%s' is not a token id in [0, %d)", item.c_str(), n_vocab));
    }
    out->push_back(static_cast<int32_t>(id));
  }
  if (out->empty() || text.back() == ',') {
    return Status::Error("--prompt-ids: expected ids separated by commas, e.g. 1,403,407");
  }
  return Status::Ok();
}

// --top-logits K: for every prompt position, in order, its K highest logits as [id, logit]
// (model/top_logits.h: its own prefill, in passes of -b tokens).
StatusOr<nlohmann::json> PromptTopLogitsJson(const Model& model, std::span<const int32_t> prompt,
                                             int k, int chunk, int n_ctx, ThreadPool* pool) {
  GOOSE_ASSIGN_OR_RETURN(auto rows, PromptTopLogits(model, prompt, k, chunk, n_ctx, pool));
  nlohmann::json out = nlohmann::json::array();
  for (const std::vector<TokenLogit>& row : rows) {
    nlohmann::json r = nlohmann::json::array();
    for (const TokenLogit& e : row) r.push_back({e.id, e.logit});
    out.push_back(std::move(r));
  }
  return out;
}

// Reads the whole file (- = stdin), which must be a regular, readable file; `what` names it in
// errors ("prompt file").
Status ReadTextFile(const std::string& path, const std::string& what, std::string* out) {
  if (path == "-") {
    *out = ReadStdin();
    return Status::Ok();
  }
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::not_found) {
    return Status::Error("cannot read " + what + " '" + path + "': no such file");
  }
  if (ec) return Status::Error("cannot read " + what + " '" + path + "': " + ec.message());
  if (std::filesystem::is_directory(st)) {
    return Status::Error(what + " '" + path + "' is a directory, not a regular file");
  }
  if (!std::filesystem::is_regular_file(st)) {
    return Status::Error(what + " '" + path + "' is not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::Error("cannot read " + what + " '" + path + "': " + std::strerror(errno));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::Error("cannot read " + what + " '" + path + "': read failed");
  *out = ss.str();
  return Status::Ok();
}

// "pld 11, tr 81, ...": each method's default budget, for --help.
std::string DefaultBudgets() {
  std::string out;
  for (const Method* m : Methods()) {
    SpecParams spec;
    if (std::string(m->name()) == "none" || !ParseSpecVariant(m->name(), &spec).ok()) continue;
    out += (out.empty() ? "" : ", ") + std::string(m->name()) + " " +
           std::to_string(ResolvedBudget(spec));
  }
  return out;
}

// --spec with --goose-preset and --branch-k, which are the +paper and +kN modifiers of the
// methods that take them.
StatusOr<std::string> VariantName(const GenerateFlags& f) {
  std::string variant = f.spec;
  const Method* method = FindMethod(f.spec.substr(0, f.spec.find('+')));
  auto accepts = [&](const std::string& mod) {
    if (method == nullptr) return true;  // ParseSpecVariant names the unknown method
    const std::vector<std::string> mods = method->modifiers();
    return std::find(mods.begin(), mods.end(), mod) != mods.end();
  };
  if (!f.preset.empty() && f.preset != "paper") {
    return Status::Error("unknown --goose-preset '" + f.preset + "' (the only preset is 'paper')");
  }
  if (!f.preset.empty()) {
    if (!accepts("paper")) {
      return Status::Error("--goose-preset applies to --spec goose, not '" + f.spec + "'");
    }
    variant += "+paper";
  }
  if (f.branch_k > 0) {
    const std::string mod = "k" + std::to_string(f.branch_k);
    if (!accepts(mod)) {
      return Status::Error("--branch-k applies to --spec balanced, not '" + f.spec + "'");
    }
    variant += "+" + mod;
  }
  return variant;
}

// The flags as a request (the prompt aside), with every combination a method would ignore
// refused. budget_auto: --budget auto, the default of the speculative methods.
Status ParseRequestFlags(const GenerateFlags& f, GenerateParams* params, bool* budget_auto) {
  GOOSE_ASSIGN_OR_RETURN(const std::string variant, VariantName(f));
  if (Status st = ParseSpecVariant(variant, &params->spec); !st.ok()) {
    return Status::Error("--spec: " + st.message());
  }
  const Method& chosen = MethodOf(params->spec);
  const bool plain = std::string(chosen.name()) == "none";
  if (plain) {
    for (const auto& [given, flag] : {std::pair{!f.budget.empty() && f.budget != "0", "--budget"},
                                      std::pair{!f.tr_cache.empty(), "--tr-cache"},
                                      std::pair{f.recalibrate, "--recalibrate"}}) {
      if (given) {
        return Status::Error(std::string(flag) +
                             " applies to speculative methods, and --spec none decodes plainly "
                             "(choose one with --spec, e.g. --spec goose)");
      }
    }
  }
  if (!f.tr_cache.empty() && !chosen.uses_table()) {
    return Status::Error(
        "--tr-cache applies to the methods with a transition table (tr, "
        "balanced, sequoia, goose), not '" +
        f.spec + "'");
  }
  // Not given: auto, sized by what a pass costs here. The methods' own defaults are the papers'
  // budgets, which on a CPU cost about what they gain or more (0.44B-cost model: goose at 32
  // nodes 0.85x plain decoding, graft at 32 0.96x, tr's 81 ~0.3x; auto 1.85x, 2.06x, 1.3-1.8x).
  const std::string budget = f.budget.empty() ? "auto" : f.budget;
  if (f.recalibrate && budget != "auto") {
    return Status::Error("--recalibrate applies to --budget auto");
  }
  if (!f.tr_cache.empty()) GOOSE_RETURN_IF_ERROR(CheckWritableFile(f.tr_cache, "--tr-cache"));
  if (chosen.needs_draft_model() && f.model_draft.empty()) {
    return Status::Error("--spec " + f.spec + " needs a draft model: give one with -md DRAFT.gguf");
  }
  *budget_auto = budget == "auto" && !plain;
  params->spec.auto_budget = *budget_auto;
  GOOSE_RETURN_IF_ERROR(ParseBudgetFlag(budget, &params->spec));
  // A table file given by --tr-cache is meant to be used (and saved back): this request keeps
  // its table, and the file wins over the table cache.
  if (!f.tr_cache.empty()) params->spec.keep_table = 1;
  if (f.top_logits > 0 && !f.json) return Status::Error("--top-logits prints with --json only");
  params->n_predict = f.n_predict;
  params->prefill_chunk = f.batch;
  params->ignore_eos = f.ignore_eos;
  params->stop_tokens = f.stop_tokens;
  params->sampling.temp = f.temp;
  params->sampling.top_k = f.top_k;
  params->sampling.top_p = f.top_p;
  params->sampling.seed = f.seed;
  return Status::Ok();
}

// The prompt text from -p, -f FILE or -f - (stdin), and the --prediction text; --prompt-ids
// is read once the model is.
Status ReadPromptText(const GenerateFlags& f, std::string* prompt, std::string* prediction) {
  *prompt = f.prompt;
  if (!f.prompt_ids.empty() && (f.has_prompt || !f.prompt_file.empty())) {
    return Status::Error("give -p/-f or --prompt-ids, not both");
  }
  if (f.prompt_file == "-" && f.prediction_file == "-") {
    return Status::Error("-f - and --prediction - both read stdin: give one of them a file");
  }
  if (!f.prediction_file.empty()) {
    GOOSE_RETURN_IF_ERROR(ReadTextFile(f.prediction_file, "prediction file", prediction));
  }
  if (f.prompt_file.empty()) return Status::Ok();
  if (f.has_prompt) return Status::Error("give the prompt with -p or -f, not both");
  return ReadTextFile(f.prompt_file, "prompt file", prompt);
}

// The prediction's tokens (no BOS: it is text the output is expected to hold), at most the
// context.
Status TokenizePrediction(const Model& model, int n_ctx, const std::string& text,
                          std::vector<int32_t>* tokens) {
  std::optional<std::vector<int32_t>> ids =
      model.tokenizer().EncodeAtMost(text, /*add_bos=*/false, n_ctx);
  if (!ids) {
    return Status::Error(
        StrFormat("--prediction: the text is longer than the context of %d "
                  "tokens (raise -c)",
                  n_ctx));
  }
  *tokens = std::move(*ids);
  return Status::Ok();
}

// The prompt's tokens (and, for --prompt-ids, its text), checked against the context.
Status TokenizePrompt(const GenerateFlags& f, const Model& model, std::string* text,
                      std::vector<int32_t>* tokens) {
  const Tokenizer& tok = model.tokenizer();
  if (!f.prompt_ids.empty()) {
    GOOSE_RETURN_IF_ERROR(ParsePromptIds(f.prompt_ids, model.config().n_vocab, tokens));
    *text = tok.Decode(*tokens);
  } else {
    *tokens = tok.Encode(*text, !f.no_bos);
  }
  const int n_ctx = ContextSize(model.config(), f.n_ctx);
  if (static_cast<int>(tokens->size()) >= n_ctx) {
    return Status::Error("prompt is " + std::to_string(tokens->size()) +
                         " tokens long but the context holds " + std::to_string(n_ctx) +
                         " (raise -c)");
  }
  return Status::Ok();
}

// Notes about the model the user may not expect: random weights, a context past its training.
void NoteModel(const Model& model, const std::string& path, int n_ctx) {
  if (model.gguf().GetString("general.name").value_or("").rfind("goose-synth-", 0) == 0) {
    std::fprintf(stderr,
                 "goose: note: %s has random weights (goose synth), so its text is "
                 "noise; it is for measuring speed\n",
                 path.c_str());
  }
  if (n_ctx > model.config().n_ctx_train) {
    std::fprintf(stderr,
                 "goose: warning: -c %d is beyond the %d tokens the model was trained on; its "
                 "text past %d tokens may degrade\n",
                 n_ctx, model.config().n_ctx_train, model.config().n_ctx_train);
  }
}

// --json's object: the prompt, the tokens, the text and the statistics.
StatusOr<nlohmann::json> ResultJson(const GenerateFlags& f, Session& session,
                                    const std::vector<int32_t>& prompt, const GenerateResult& r,
                                    nlohmann::json stats) {
  nlohmann::json j;
  j["prompt_tokens"] = prompt;
  j["tokens"] = r.tokens;
  j["text"] = session.model().tokenizer().Decode(r.tokens);
  j["stats"] = std::move(stats);
  if (f.top_logits > 0) {
    GOOSE_ASSIGN_OR_RETURN(j["top_logits"],
                           PromptTopLogitsJson(session.model(), prompt, f.top_logits, f.batch,
                                               session.n_ctx(), &session.pool()));
  }
  return j;
}

// The line on stderr after the streamed text.
void PrintSummary(const GenerateFlags& f, size_t n_prompt, const GenerateResult& r,
                  const nlohmann::json& stats, int n_ctx) {
  std::fprintf(stderr,
               "prompt: %zu tokens, %.1f tok/s | generated: %zu tokens, %.1f tok/s | "
               "spec %s: %lld passes, MAT %.3f\n",
               n_prompt, stats["prompt_tokens_per_second"].get<double>(), r.tokens.size(),
               stats["tokens_per_second"].get<double>(), f.spec.c_str(),
               static_cast<long long>(r.stats.cycles), stats["mean_accepted_tokens"].get<double>());
  if (r.stats.draft_cycles > 0) {
    const double n = static_cast<double>(r.stats.draft_cycles);
    std::fprintf(stderr, "draft model: %.2f passes/cycle, %.2f ms/cycle, %.1f%% of decode time\n",
                 r.stats.draft_passes / n, 1e3 * r.stats.draft_seconds / n,
                 r.decode_seconds > 0 ? 100 * r.stats.draft_seconds / r.decode_seconds : 0.0);
  } else if (!f.model_draft.empty()) {
    // Said, so that a user who gave -md does not wonder where its figures went.
    std::fprintf(stderr, "draft model: not run (%s)\n",
                 f.budget.empty() || f.budget == "auto" ? "--budget auto found no tree it pays for"
                                                        : "no cycle drafted");
  }
  if (r.hit_context_limit) {
    std::fprintf(stderr, "goose: note: stopped at the context limit of %d tokens (raise -c)\n",
                 n_ctx);
  }
}

SessionOptions SessionFor(const GenerateFlags& f, const std::string& path, bool budget_auto) {
  SessionOptions so;
  so.model_path = path;
  so.draft_model_path = f.model_draft;
  so.n_threads = f.threads;
  so.n_ctx = f.n_ctx;
  so.kv_type = f.kv;
  so.n_contexts = f.top_logits > 0 ? 2 : 1;  // --top-logits scores the prompt again
  so.table_cache = !f.no_table_cache;
  so.budget_auto = budget_auto;
  so.recalibrate = f.recalibrate;
  so.on_note = [](const std::string& line) { std::fprintf(stderr, "goose: %s\n", line.c_str()); };
  return so;
}

int RunGenerate(const GenerateFlags& f) {
  GenerateParams params;
  bool budget_auto = false;
  if (Status st = ParseRequestFlags(f, &params, &budget_auto); !st.ok()) return Fail(st.message());
  std::string prompt, prediction;
  if (Status st = ReadPromptText(f, &prompt, &prediction); !st.ok()) return Fail(st.message());
  const std::string path = ResolveModelPath(f.model);
  if (path.empty()) return 1;
  std::vector<int32_t> prompt_tokens;
  SessionOptions so = SessionFor(f, path, budget_auto);
  so.check_model = [&](const Model& model, SessionOptions* o) {
    GOOSE_RETURN_IF_ERROR(TokenizePrompt(f, model, &prompt, &prompt_tokens));
    GOOSE_RETURN_IF_ERROR(TokenizePrediction(model, ContextSize(model.config(), f.n_ctx),
                                             prediction, &params.prediction));
    // The largest batch is a prefill pass or a tree of at most 128 nodes.
    o->n_batch = std::max(PrefillPassTokens(params, static_cast<int>(prompt_tokens.size())), 128);
    return Status::Ok();
  };
  auto session_or = Session::Open(std::move(so));
  if (!session_or.ok()) return Fail(session_or.status().message());
  Session& session = **session_or;
  Engine& engine = session.NewEngine();
  // (After the KV cache was allocated: a context too big for memory is one error line.)
  NoteModel(session.model(), path, session.n_ctx());
  TransitionTable* table = engine.table(params.spec);  // (loads the table cache)
  session.NoteCacheWarnings();
  if (!f.tr_cache.empty() && table && std::filesystem::exists(f.tr_cache)) {
    if (Status st = table->Load(f.tr_cache); !st.ok()) return Fail(st.message());
  }

  StreamDecoder decoder(session.model().tokenizer());
  TokenCallback stream;
  if (!f.json) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
    stream = [&](std::span<const int32_t> toks) {
      std::string text;
      for (int32_t t : toks) text += decoder.Push(t);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  }
  auto result_or = engine.Generate(prompt_tokens, params, stream);
  if (!result_or.ok()) return Fail(result_or.status().message());
  const GenerateResult& r = *result_or;
  if (!f.tr_cache.empty() && table) {
    if (Status st = table->Save(f.tr_cache); !st.ok()) return Fail(st.message());
  }
  session.Close();

  nlohmann::json stats = GenerateStatsJson(r, static_cast<int>(prompt_tokens.size()));
  stats["method"] = f.spec;
  // "auto" or the node budget every tree had
  stats["budget"] =
      budget_auto ? nlohmann::json("auto") : nlohmann::json(ResolvedBudget(params.spec));
  stats["seed"] = f.seed;
  stats["context_size"] = session.n_ctx();
  if (session.draft_model()) stats["draft_model_file"] = f.model_draft;
  if (table) stats["table_bytes"] = table->memory_bytes();
  if (!f.prediction_file.empty()) stats["prediction"] = PredictionJson(params.prediction, r.tokens);
  if (f.json) {
    auto j = ResultJson(f, session, prompt_tokens, r, std::move(stats));
    if (!j.ok()) return Fail(j.status().message());
    std::printf("%s\n", j->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  const std::string tail = decoder.Flush();
  std::fwrite(tail.data(), 1, tail.size(), stdout);
  std::printf("\n");
  std::fflush(stdout);
  PrintSummary(f, prompt_tokens.size(), r, stats, session.n_ctx());
  return 0;
}

}  // namespace

Runner AddGenerateCommand(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  app.add_option("-m,--model", f->model, "GGUF model (default ../shared/models/stories260K.gguf)");
  app.add_option("--model-draft", f->model_draft,
                 "(-md) draft model of the same family (same vocabulary), for --spec draft, "
                 "draft-tree, graft");
  app.add_option("-p,--prompt", f->prompt, "prompt text")->each([f](const std::string&) {
    f->has_prompt = true;
  });
  app.add_option("-f,--file", f->prompt_file, "read the prompt from a file (- = stdin)");
  app.add_option("-n,--n-predict", f->n_predict, "tokens to generate")->check(IntIn(0, 1 << 24));
  app.add_option("-c,--ctx-size", f->n_ctx, "context length (0 = min(model, 4096))")
      ->check(IntIn(0, 1 << 20));
  AddKvTypeFlag(app, &f->kv);
  app.add_option("-b,--batch-size", f->batch,
                 "prompt tokens per prefill pass (0 = the whole prompt in one)")
      ->check(IntIn(0, 1 << 24));
  app.add_option("-t,--threads", f->threads, "threads, at most 64 (0 = all cores)")
      ->check(IntIn(0, 64));
  app.add_option("--temp", f->temp, "temperature (0 = greedy)")->check(NumberIn(0.0, 100.0));
  app.add_option("--top-k", f->top_k, "top-k (0 = off)")->check(IntIn(0, 1 << 24));
  app.add_option("--top-p", f->top_p, "top-p")->check(NumberIn(0.0, 1.0));
  app.add_option("--seed", f->seed,
                 "sampling seed; fixed unless given, so a sampled run repeats exactly (--json "
                 "prints it)");
  app.add_option("--spec", f->spec,
                 MethodNames() +
                     ", optionally +paper +keep +cold +k5 ... (default goose; none "
                     "= plain decoding)");
  app.add_option("--prediction", f->prediction_file,
                 "a file (- = stdin) holding the text the output is expected to reproduce, e.g. "
                 "the file being edited: drafted from, never changes the output");
  app.add_option("--goose-preset", f->preset,
                 "paper: the reference GOOSE defaults (--spec goose only)");
  app.add_option("--budget", f->budget,
                 "tree nodes incl. the root, 1..128; auto (the default) = sized from the "
                 "measured cost of a pass on this machine and the measured acceptance; 0 = the "
                 "method's own default (" +
                     DefaultBudgets() + ")");
  app.add_flag("--recalibrate", f->recalibrate, "--budget auto: re-measure the cached cost curve");
  app.add_option("--branch-k", f->branch_k, "children per node (--spec balanced only)")
      ->check(IntIn(1, 10));
  app.add_option("--tr-cache", f->tr_cache, "load/save the transition table from/to this file");
  app.add_flag("--no-table-cache", f->no_table_cache,
               "neither load nor save what the method learned in earlier runs (tables, "
               "acceptance, budgets; kept per model under ~/.cache/goose)");
  app.add_flag("--ignore-eos", f->ignore_eos, "keep generating past end-of-sequence tokens");
  app.add_option("--stop-token", f->stop_tokens,
                 "also stop after this token id (repeatable, or comma-separated)")
      ->delimiter(',')
      ->check(IntIn(0, INT32_MAX));
  app.add_flag("--no-bos", f->no_bos, "do not prepend BOS to the prompt");
  app.add_flag("--json", f->json, "print one JSON object instead of streaming text");
  app.add_option("--prompt-ids", f->prompt_ids, "the prompt as token ids, e.g. 1,403,407");
  app.add_option("--top-logits", f->top_logits,
                 "with --json: top_logits, every prompt position's K highest logits [id, logit]")
      ->check(IntIn(1, 1 << 20));
  return [f] { return RunGenerate(*f); };
}

}  // namespace goose::cli
