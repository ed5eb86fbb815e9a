// goose_model_*, tokenization and the shared conversions (include/goose/goose.h).
#include <cstring>

#include "capi/objects.h"

namespace goose::capi {

static_assert(GOOSE_SOURCE_COUNT == kNumSources, "goose_source mirrors NodeSource");

void ToSpecStats(const SpecStats& s, goose_spec_stats* out) {
  *out = goose_spec_stats{};
  out->cycles = s.cycles;
  out->committed = s.committed;
  out->bonus = s.bonus;
  out->tree_nodes = s.tree_nodes_total;
  for (int i = 0; i < kNumSources; ++i) {
    out->drafted[i] = s.drafted[i];
    out->reached[i] = s.reached[i];
    out->accepted[i] = s.accepted[i];
  }
}

namespace {

constexpr int kMaxThreads = 256;
constexpr int kMaxContext = 1 << 22;

goose_status CheckModelParams(const goose_model_params& p, const char* fn) {
  if (p.n_threads < 0 || p.n_threads > kMaxThreads) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                StrFormat("n_threads = %d, expected 0..%d", p.n_threads, kMaxThreads));
  }
  if (p.n_ctx < 0 || p.n_ctx > kMaxContext) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                StrFormat("n_ctx = %d, expected 0..%d", p.n_ctx, kMaxContext));
  }
  return GOOSE_OK;
}

SessionOptions OptionsFor(const char* path, const goose_model_params& p) {
  SessionOptions so;
  so.model_path = path;
  so.draft_model_path = p.draft_model_path ? p.draft_model_path : "";
  so.n_threads = p.n_threads;
  so.n_ctx = p.n_ctx;
  so.n_contexts = 1;  // one session's context; each session checks its own (goose_session_open)
  so.n_batch = GenerateParams{}.prefill_chunk;
  so.memory_flags = "n_ctx";
  so.table_cache = p.learned_cache != 0;
  so.cache_dir = p.cache_dir ? p.cache_dir : "";
  so.budget_auto = p.budget_auto != 0;
  return so;
}

goose_status LoadModel(const char* path, const goose_model_params& p, goose_model** out) {
  const char* fn = "goose_model_load";
  if (goose_status st = CheckModelParams(p, fn); st != GOOSE_OK) return st;
  SessionOptions so = OptionsFor(path, p);
  // The memory check runs here first, so that its error is told apart from a bad file.
  bool out_of_memory = false;
  so.check_model = [&](const Model& model, SessionOptions* o) {
    Status st = CheckContextMemory(model.config(), o->n_ctx, o->n_batch, 1, "n_ctx");
    out_of_memory = !st.ok();
    return st;
  };
  auto session = Session::Open(std::move(so));
  if (!session.ok()) {
    return FailWith(out_of_memory ? GOOSE_ERROR_OUT_OF_MEMORY : GOOSE_ERROR_FILE, fn,
                    session.status());
  }
  auto state = std::make_shared<ModelState>();
  state->session = std::move(session).value();
  state->n_threads = state->session->pool().size();
  state->learned_cache = p.learned_cache != 0;
  state->fingerprint = ModelFingerprint(state->model());
  auto handle = std::make_unique<goose_model>();
  handle->object = new ModelRef{std::move(state)};
  *out = handle.release();
  return GOOSE_OK;
}

}  // namespace

}  // namespace goose::capi

using namespace goose;        // NOLINT: the API's bodies
using namespace goose::capi;  // NOLINT

extern "C" {

const char* goose_version(void) { return GOOSE_LIB_VERSION; }

void goose_model_default_params(goose_model_params* params) {
  if (params != nullptr) *params = goose_model_params{};
}

goose_status goose_model_load(const char* path, const goose_model_params* params,
                              goose_model** out) {
  constexpr const char* fn = "goose_model_load";
  return Call(fn, [&] {
    GOOSE_API_REQUIRE(path, fn);
    GOOSE_API_REQUIRE(out, fn);
    goose_model_params p;
    goose_model_default_params(&p);
    if (params != nullptr) p = *params;
    return LoadModel(path, p, out);
  });
}

goose_status goose_model_free(goose_model* model) {
  constexpr const char* fn = "goose_model_free";
  return Call(fn, [&] {
    ModelRef* ref = nullptr;
    if (goose_status st = Resolve(model, fn, "model", &ref); st != GOOSE_OK) return st;
    Retire(model);  // the sessions' references keep the model itself alive
    return GOOSE_OK;
  });
}

goose_status goose_model_info_get(const goose_model* model, goose_model_info* out) {
  constexpr const char* fn = "goose_model_info_get";
  return Call(fn, [&] {
    ModelRef* ref = nullptr;
    if (goose_status st = Resolve(model, fn, "model", &ref); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(out, fn);
    const ModelState& m = *ref->state;
    const LlamaConfig& c = m.model().config();
    *out = goose_model_info{};
    out->n_vocab = c.n_vocab;
    out->n_ctx_train = c.n_ctx_train;
    out->n_ctx = m.session->n_ctx();
    out->n_layer = c.n_layer;
    out->n_embd = c.n_embd;
    out->bos = m.model().tokenizer().bos();
    out->eos = m.model().tokenizer().eos();
    out->n_threads = m.n_threads;
    out->fingerprint = m.fingerprint;
    return GOOSE_OK;
  });
}

goose_status goose_token_is_eog(const goose_model* model, int32_t token, int32_t* is_eog) {
  constexpr const char* fn = "goose_token_is_eog";
  return Call(fn, [&] {
    ModelRef* ref = nullptr;
    if (goose_status st = Resolve(model, fn, "model", &ref); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(is_eog, fn);
    const Tokenizer& tok = ref->state->model().tokenizer();
    if (token < 0 || token >= tok.n_vocab()) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                  StrFormat("token %d is outside the vocabulary [0, %d)", token, tok.n_vocab()));
    }
    *is_eog = tok.IsEog(token) ? 1 : 0;
    return GOOSE_OK;
  });
}

goose_status goose_tokenize(const goose_model* model, const char* text, size_t text_len,
                            int32_t add_bos, int32_t* tokens, int32_t capacity, int32_t* n_tokens) {
  constexpr const char* fn = "goose_tokenize";
  return Call(fn, [&] {
    ModelRef* ref = nullptr;
    if (goose_status st = Resolve(model, fn, "model", &ref); st != GOOSE_OK) return st;
    if (text_len > 0) GOOSE_API_REQUIRE(text, fn);
    GOOSE_API_REQUIRE(n_tokens, fn);
    if (capacity < 0 || (capacity > 0 && tokens == nullptr)) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                  StrFormat("capacity = %d with tokens %s", capacity, tokens ? "set" : "NULL"));
    }
    const std::vector<int32_t> ids = ref->state->model().tokenizer().Encode(
        std::string_view(text_len > 0 ? text : "", text_len), add_bos != 0);
    if (ids.size() > static_cast<size_t>(INT32_MAX)) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, "more than 2^31 tokens");
    }
    *n_tokens = static_cast<int32_t>(ids.size());
    if (ids.size() > static_cast<size_t>(capacity)) {
      return Fail(GOOSE_ERROR_BUFFER_TOO_SMALL, fn,
                  StrFormat("%zu tokens do not fit a buffer of %d", ids.size(), capacity));
    }
    std::copy(ids.begin(), ids.end(), tokens);
    return GOOSE_OK;
  });
}

goose_status goose_detokenize(const goose_model* model, const int32_t* tokens, int32_t n_tokens,
                              char* buf, size_t capacity, size_t* text_len) {
  constexpr const char* fn = "goose_detokenize";
  return Call(fn, [&] {
    ModelRef* ref = nullptr;
    if (goose_status st = Resolve(model, fn, "model", &ref); st != GOOSE_OK) return st;
    if (n_tokens < 0) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, StrFormat("n_tokens = %d", n_tokens));
    }
    if (n_tokens > 0) GOOSE_API_REQUIRE(tokens, fn);
    GOOSE_API_REQUIRE(text_len, fn);
    if (capacity > 0) GOOSE_API_REQUIRE(buf, fn);
    const Tokenizer& tok = ref->state->model().tokenizer();
    for (int32_t i = 0; i < n_tokens; ++i) {
      if (tokens[i] < 0 || tokens[i] >= tok.n_vocab()) {
        return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                    StrFormat("tokens[%d] = %d is outside the vocabulary [0, %d)", i, tokens[i],
                              tok.n_vocab()));
      }
    }
    const std::string text = tok.Decode(std::vector<int32_t>(tokens, tokens + n_tokens));
    *text_len = text.size();
    if (capacity < text.size() + 1) {
      return Fail(
          GOOSE_ERROR_BUFFER_TOO_SMALL, fn,
          StrFormat("%zu bytes and a NUL do not fit a buffer of %zu", text.size(), capacity));
    }
    std::memcpy(buf, text.data(), text.size());
    buf[text.size()] = '\0';
    return GOOSE_OK;
  });
}

}  // extern "C"
