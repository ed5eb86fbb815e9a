// goose_session_score and friends: a host loop scoring token trees on a goose context, as an
// outside engine does with its own model (include/goose/goose.h). Every argument is checked
// against the context's state here, before Context's own GOOSE_CHECKs could see it.
#include "capi/objects.h"
#include "model/top_logits.h"
#include "sample/sampler.h"

namespace goose::capi {
namespace {

// The readable row `row` of the last score call.
goose_status ScoredRow(const SessionState& s, int32_t row, const char* fn, const float** logits) {
  if (!s.scored) {
    return Fail(GOOSE_ERROR_STATE, fn, "no rows: score some first (a generation clears them)");
  }
  const Context& ctx = s.engine->context();
  if (row < 0 || row >= ctx.n_batch()) {
    return Fail(
        GOOSE_ERROR_INVALID_ARGUMENT, fn,
        StrFormat("row %d, expected 0..%d (the last score call's rows)", row, ctx.n_batch() - 1));
  }
  *logits = ctx.logits(row);
  return GOOSE_OK;
}

// `path` is a chain of pending rows from a root (what Context::KeepPath requires).
goose_status CheckPath(const SessionState& s, const int32_t* path, int32_t n, const char* fn) {
  const int n_rows = static_cast<int>(s.parents.size());
  if (n > n_rows) {
    return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                StrFormat("a path of %d rows, but %d are pending", n, n_rows));
  }
  for (int32_t j = 0; j < n; ++j) {
    if (path[j] < 0 || path[j] >= n_rows) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                  StrFormat("path[%d] = %d is not a pending row (0..%d)", j, path[j], n_rows - 1));
    }
    const int32_t want = j == 0 ? -1 : path[j - 1];
    if (s.parents[path[j]] != want) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                  StrFormat("path[%d] = %d has parent %d, expected %d (a root-to-row chain)", j,
                            path[j], s.parents[path[j]], want));
    }
  }
  return GOOSE_OK;
}

}  // namespace
}  // namespace goose::capi

using namespace goose;        // NOLINT: the API's bodies
using namespace goose::capi;  // NOLINT

extern "C" {

goose_status goose_session_score(goose_session* session, const int32_t* tokens,
                                 const int32_t* parents, int32_t n) {
  constexpr const char* fn = "goose_session_score";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    if (n < 1) return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, StrFormat("n = %d rows", n));
    GOOSE_API_REQUIRE(tokens, fn);
    GOOSE_API_REQUIRE(parents, fn);
    s->scored = s->pending = false;  // a failed pass leaves nothing readable either
    Context& ctx = s->engine->context();
    if (Status st =
            ctx.Forward({tokens, static_cast<size_t>(n)}, {parents, static_cast<size_t>(n)});
        !st.ok()) {
      return FailWith(GOOSE_ERROR_INVALID_ARGUMENT, fn, st);
    }
    s->parents.assign(parents, parents + n);
    s->scored = s->pending = true;
    return GOOSE_OK;
  });
}

goose_status goose_session_logits(const goose_session* session, int32_t row, const float** logits) {
  constexpr const char* fn = "goose_session_logits";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(logits, fn);
    return ScoredRow(*s, row, fn, logits);
  });
}

goose_status goose_session_top_k(const goose_session* session, int32_t row, int32_t k, int32_t* ids,
                                 float* logits) {
  constexpr const char* fn = "goose_session_top_k";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(ids, fn);
    const int n_vocab = s->engine->model().config().n_vocab;
    if (k < 1 || k > n_vocab) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                  StrFormat("k = %d, expected 1..%d (the vocabulary)", k, n_vocab));
    }
    const float* row_logits = nullptr;
    if (goose_status st = ScoredRow(*s, row, fn, &row_logits); st != GOOSE_OK) return st;
    const std::vector<TokenLogit> top = TopLogits(row_logits, n_vocab, k);
    for (int32_t j = 0; j < k; ++j) {
      ids[j] = top[j].id;
      if (logits != nullptr) logits[j] = top[j].logit;
    }
    return GOOSE_OK;
  });
}

goose_status goose_session_argmax(const goose_session* session, int32_t row, int32_t* token) {
  constexpr const char* fn = "goose_session_argmax";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(token, fn);
    const float* row_logits = nullptr;
    if (goose_status st = ScoredRow(*s, row, fn, &row_logits); st != GOOSE_OK) return st;
    *token = Argmax(row_logits, s->engine->model().config().n_vocab);
    return GOOSE_OK;
  });
}

goose_status goose_session_sample(const goose_session* session, int32_t row,
                                  const goose_sampling* sampling, int64_t pos, int32_t* token) {
  constexpr const char* fn = "goose_session_sample";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(sampling, fn);
    GOOSE_API_REQUIRE(token, fn);
    if (!(sampling->temperature >= 0.0f && sampling->temperature <= 100.0f) ||
        sampling->top_k < 0 || !(sampling->top_p >= 0.0f && sampling->top_p <= 1.0f) || pos < 0) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                  StrFormat("temperature %g (0..100), top_k %d (>= 0), top_p %g (0..1), pos %lld "
                            "(>= 0)",
                            sampling->temperature, sampling->top_k, sampling->top_p,
                            static_cast<long long>(pos)));
    }
    const float* row_logits = nullptr;
    if (goose_status st = ScoredRow(*s, row, fn, &row_logits); st != GOOSE_OK) return st;
    SamplingParams p;
    p.temp = sampling->temperature;
    p.top_k = sampling->top_k;
    p.top_p = sampling->top_p;
    p.seed = sampling->seed;
    *token = Sampler(p).Sample(row_logits, s->engine->model().config().n_vocab, pos);
    return GOOSE_OK;
  });
}

goose_status goose_session_keep(goose_session* session, const int32_t* path, int32_t n) {
  constexpr const char* fn = "goose_session_keep";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    if (!s->pending) return Fail(GOOSE_ERROR_STATE, fn, "no rows are pending");
    if (n < 0) return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, StrFormat("n = %d", n));
    if (n > 0) GOOSE_API_REQUIRE(path, fn);
    if (goose_status st = CheckPath(*s, path, n, fn); st != GOOSE_OK) return st;
    Context& ctx = s->engine->context();
    if (n == 0) {
      ctx.Truncate(ctx.n_past());  // drops the pending rows
    } else {
      ctx.KeepPath({path, static_cast<size_t>(n)});
    }
    s->pending = false;
    return GOOSE_OK;
  });
}

goose_status goose_session_truncate(goose_session* session, int32_t n_past) {
  constexpr const char* fn = "goose_session_truncate";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    Context& ctx = s->engine->context();
    if (n_past < 0 || n_past > ctx.n_past()) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                  StrFormat("n_past = %d, expected 0..%d", n_past, ctx.n_past()));
    }
    ctx.Truncate(n_past);
    s->pending = false;
    return GOOSE_OK;
  });
}

goose_status goose_session_n_past(const goose_session* session, int32_t* n_past) {
  constexpr const char* fn = "goose_session_n_past";
  return Call(fn, [&] {
    SessionState* s = nullptr;
    if (goose_status st = Resolve(session, fn, "session", &s); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(n_past, fn);
    *n_past = s->engine->context().n_past();
    return GOOSE_OK;
  });
}

}  // extern "C"
