// goose_session_*: open, generate, cancel, statistics (include/goose/goose.h). Scoring trees:
// score_api.cc.
#include "capi/objects.h"
#include "engine/report.h"
#include "engine/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace goose::capi {

SessionState::~SessionState() {
  // What the requests learned goes to the learned cache, as goose generate's Close does.
  if (engine && model && model->learned_cache) (void)engine->SaveLearned();
}

namespace {

constexpr int kMaxThreads = 256;

goose_status OpenSession(ModelState& m, const std::shared_ptr<ModelState>& ref,
                         const goose_session_params& p, goose_session** out) {
  const char* fn = "goose_session_open";
  if (p.n_ctx < 0 || p.n_ctx > m.session->n_ctx()) {
    return Fail(
        GOOSE_ERROR_INVALID_ARGUMENT, fn,
        StrFormat("n_ctx = %d, expected 0..%d (the model's n_ctx)", p.n_ctx, m.session->n_ctx()));
  }
  if (p.n_threads < 0 || p.n_threads > kMaxThreads) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                StrFormat("n_threads = %d, expected 0..%d", p.n_threads, kMaxThreads));
  }
  const int n_ctx = p.n_ctx > 0 ? p.n_ctx : m.session->n_ctx();
  if (Status st =
          CheckContextMemory(m.model().config(), n_ctx, GenerateParams{}.prefill_chunk, 1, "n_ctx");
      !st.ok()) {
    return FailWith(GOOSE_ERROR_OUT_OF_MEMORY, fn, st);
  }
  auto s = std::make_unique<SessionState>();
  s->model = ref;
  s->pool = std::make_unique<ThreadPool>(p.n_threads > 0 ? p.n_threads : m.n_threads);
  std::shared_ptr<BudgetPolicy> policy;
  if (!m.session->cost_curve().empty()) {
    std::lock_guard<std::mutex> lock(m.mu);
    policy = m.session->NewBudgetPolicy();
  }
  // The model's learned store, shared with its other sessions; the ModelState outlives it.
  std::shared_ptr<LearnedStore> store(ref, &m.session->learned());
  s->engine = std::make_unique<Engine>(m.model(), n_ctx, s->pool.get(), std::move(store),
                                       std::move(policy));
  if (const Model* draft = m.session->draft_model()) {
    if (Status st = s->engine->SetDraftModel(*draft); !st.ok()) {
      return FailWith(GOOSE_ERROR_INVALID_ARGUMENT, fn, st);
    }
  }
  auto handle = std::make_unique<goose_session>();
  handle->object = s.release();
  *out = handle.release();
  return GOOSE_OK;
}

goose_status CheckSampling(const goose_sampling& s, const char* fn) {
  if (!(s.temperature >= 0.0f && s.temperature <= 100.0f)) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                StrFormat("temperature = %g, expected 0..100", s.temperature));
  }
  if (s.top_k < 0) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, StrFormat("top_k = %d, expected >= 0", s.top_k));
  }
  if (!(s.top_p >= 0.0f && s.top_p <= 1.0f)) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, StrFormat("top_p = %g, expected 0..1", s.top_p));
  }
  return GOOSE_OK;
}

// The C parameters as the engine's request.
goose_status ToGenerateParams(const goose_generate_params& p, const ModelState& m,
                              GenerateParams* out) {
  const char* fn = "goose_session_generate";
  if (p.max_tokens < 0) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, StrFormat("max_tokens = %d", p.max_tokens));
  }
  if (goose_status st = CheckSampling(p.sampling, fn); st != GOOSE_OK) return st;
  if (Status st = ParseSpecVariant(p.method ? p.method : "none", &out->spec); !st.ok()) {
    return FailWith(GOOSE_ERROR_INVALID_ARGUMENT, fn, st);
  }
  if (p.budget < -1 || p.budget > 128) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                StrFormat("budget = %d, expected 1..128, 0 (the method's) or -1 (auto)", p.budget));
  }
  const bool plain = out->spec.method == "none";
  if (p.budget == -1 && !plain && m.session->cost_curve().empty()) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                "budget -1 (auto) needs a model loaded with budget_auto = 1");
  }
  out->spec.auto_budget = p.budget == -1 && !plain;
  out->spec.budget = p.budget > 0 ? p.budget : 0;
  if (p.n_stop_tokens < 0 || (p.n_stop_tokens > 0 && p.stop_tokens == nullptr)) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                StrFormat("n_stop_tokens = %d with stop_tokens %s", p.n_stop_tokens,
                          p.stop_tokens ? "set" : "NULL"));
  }
  if (p.n_prediction < 0 || (p.n_prediction > 0 && p.prediction == nullptr)) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                StrFormat("n_prediction = %d with prediction %s", p.n_prediction,
                          p.prediction ? "set" : "NULL"));
  }
  if (p.prefill_chunk < 0) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                StrFormat("prefill_chunk = %d, expected >= 0", p.prefill_chunk));
  }
  out->n_predict = p.max_tokens;
  out->prefill_chunk = p.prefill_chunk;
  out->ignore_eos = p.ignore_eos != 0;
  out->stop_tokens.assign(p.stop_tokens, p.stop_tokens + p.n_stop_tokens);
  out->prediction.assign(p.prediction, p.prediction + p.n_prediction);
  out->sampling.temp = p.sampling.temperature;
  out->sampling.top_k = p.sampling.top_k;
  out->sampling.top_p = p.sampling.top_p;
  out->sampling.seed = p.sampling.seed;
  return GOOSE_OK;
}

void FillStats(const GenerateResult& r, int n_prompt, bool cancelled, goose_generate_stats* out) {
  *out = goose_generate_stats{};
  out->prompt_tokens = n_prompt;
  out->generated_tokens = static_cast<int64_t>(r.tokens.size());
  out->forward_passes = r.stats.cycles;
  out->mean_accepted_tokens = MeanAcceptedTokens(out->generated_tokens, r.stats.cycles);
  out->prompt_seconds = r.prefill_seconds;
  out->generation_seconds = r.decode_seconds;
  out->hit_context_limit = r.hit_context_limit ? 1 : 0;
  out->cancelled = cancelled ? 1 : 0;
  ToSpecStats(r.stats, &out->spec);
}

// One request, stepped here rather than by Engine::Generate so that a cancel is seen between
// passes (a long prefill included).
goose_status RunGeneration(SessionState& s, std::span<const int32_t> prompt,
                           const GenerateParams& params, goose_token_callback callback,
                           void* user_data, goose_generate_stats* stats) {
  const char* fn = "goose_session_generate";
  Engine& engine = *s.engine;
  if (Status st = engine.CheckRequest(prompt, params); !st.ok()) {
    return FailWith(GOOSE_ERROR_INVALID_ARGUMENT, fn, st);
  }
  StreamDecoder decoder(engine.model().tokenizer());
  bool cancelled = false;
  TokenCallback on_tokens = [&](std::span<const int32_t> toks) {
    std::string text;
    for (int32_t t : toks) text += decoder.Push(t);
    if (callback != nullptr && callback(user_data, toks.data(), static_cast<int32_t>(toks.size()),
                                        text.data(), text.size()) == 0) {
      cancelled = true;
    }
    cancelled = cancelled || s.cancel.load();
    return !cancelled;
  };
  s.scored = s.pending = false;  // the request empties the context
  s.cancel = false;
  auto seq = engine.Start(prompt, params, on_tokens);
  if (!seq.ok()) return FailWith(GOOSE_ERROR_INVALID_ARGUMENT, fn, seq.status());
  Scheduler scheduler(engine.budget_policy());
  if (!(*seq)->done()) scheduler.Add(seq->get());
  while (!scheduler.idle()) {
    if (s.cancel.exchange(false)) {
      (*seq)->Cancel();
      cancelled = true;
      break;
    }
    if (Status st = scheduler.Step(); !st.ok()) return FailWith(GOOSE_ERROR_INTERNAL, fn, st);
  }
  GenerateResult r = (*seq)->TakeResult();
  const std::string tail = decoder.Flush();
  if (callback != nullptr && !tail.empty())
    callback(user_data, nullptr, 0, tail.data(), tail.size());
  s.total.Merge(r.stats);
  s.tokens = std::move(r.tokens);
  if (stats != nullptr) {
    r.tokens = s.tokens;
    FillStats(r, static_cast<int>(prompt.size()), cancelled, stats);
  }
  return GOOSE_OK;
}

}  // namespace

}  // namespace goose::capi

using namespace goose;        // NOLINT: the API's bodies
using namespace goose::capi;  // NOLINT

extern "C" {

void goose_session_default_params(goose_session_params* params) {
  if (params != nullptr) *params = goose_session_params{};
}

goose_status goose_session_open(goose_model* model, const goose_session_params* params,
                                goose_session** out) {
  constexpr const char* fn = "goose_session_open";
  return Call(fn, [&] {
    ModelRef* ref = nullptr;
    if (goose_status st = Resolve(model, fn, "model", &ref); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(out, fn);
    goose_session_params p{};
    if (params != nullptr) p = *params;
    return OpenSession(*ref->state, ref->state, p, out);
  });
}

goose_status goose_session_free(goose_session* session) {
  constexpr const char* fn = "goose_session_free";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    Retire(session);
    return GOOSE_OK;
  });
}

void goose_generate_default_params(goose_generate_params* params) {
  if (params == nullptr) return;
  const GenerateParams d;
  *params = goose_generate_params{};
  params->max_tokens = d.n_predict;
  params->sampling.temperature = d.sampling.temp;
  params->sampling.top_k = d.sampling.top_k;
  params->sampling.top_p = d.sampling.top_p;
  params->sampling.seed = d.sampling.seed;
  params->method = "none";
  params->prefill_chunk = d.prefill_chunk;
}

goose_status goose_session_generate(goose_session* session, const int32_t* prompt, int32_t n_prompt,
                                    const goose_generate_params* params,
                                    goose_token_callback callback, void* user_data,
                                    goose_generate_stats* stats) {
  constexpr const char* fn = "goose_session_generate";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    if (n_prompt <= 0) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                  StrFormat("n_prompt = %d: the prompt needs at least one token", n_prompt));
    }
    GOOSE_API_REQUIRE(prompt, fn);
    goose_generate_params p;
    goose_generate_default_params(&p);
    if (params != nullptr) p = *params;
    GenerateParams gp;
    if (goose_status st = ToGenerateParams(p, *s->model, &gp); st != GOOSE_OK) return st;
    if (s->running.exchange(true)) {
      return Fail(GOOSE_ERROR_STATE, fn, "the session is already generating (on another thread)");
    }
    struct Done {
      std::atomic<bool>& running;
      ~Done() { running = false; }
    } done{s->running};
    return RunGeneration(*s, std::span<const int32_t>(prompt, n_prompt), gp, callback, user_data,
                         stats);
  });
}

goose_status goose_session_tokens(const goose_session* session, const int32_t** tokens,
                                  int32_t* n_tokens) {
  constexpr const char* fn = "goose_session_tokens";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(tokens, fn);
    GOOSE_API_REQUIRE(n_tokens, fn);
    *tokens = s->tokens.data();
    *n_tokens = static_cast<int32_t>(s->tokens.size());
    return GOOSE_OK;
  });
}

goose_status goose_session_cancel(goose_session* session) {
  constexpr const char* fn = "goose_session_cancel";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    if (s->running.load()) s->cancel = true;
    return GOOSE_OK;
  });
}

goose_status goose_session_stats(const goose_session* session, goose_spec_stats* out) {
  constexpr const char* fn = "goose_session_stats";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(out, fn);
    ToSpecStats(s->total, out);
    return GOOSE_OK;
  });
}

}  // extern "C"
