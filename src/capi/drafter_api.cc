// goose_drafter_*: the drafter on its own (include/goose/goose.h; the logic: host_drafter.h).
#include <cstring>

#include "capi/objects.h"

namespace goose::capi {
namespace {

goose_status FromDraftError(const DraftError& e, const char* fn) {
  switch (e.kind) {
    case Misuse::kArgument:
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, e.message);
    case Misuse::kState:
      return Fail(GOOSE_ERROR_STATE, fn, e.message);
    case Misuse::kInternal:
      break;
  }
  return Fail(GOOSE_ERROR_INTERNAL, fn, e.message);
}

// The host's top-k rows, checked.
goose_status ReadRows(const DraftRequest& r, int32_t n_rows, const int32_t* top_ids,
                      const float* top_logits, int32_t k, const char* fn,
                      std::optional<HostRows>* out) {
  if (n_rows < 1) return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, StrFormat("n_rows = %d", n_rows));
  GOOSE_API_REQUIRE(top_ids, fn);
  GOOSE_API_REQUIRE(top_logits, fn);
  auto rows = HostRows::Make(top_ids, top_logits, n_rows, k, r.n_vocab());
  if (!rows.ok()) return FailWith(GOOSE_ERROR_INVALID_ARGUMENT, fn, rows.status());
  out->emplace(std::move(rows).value());
  return GOOSE_OK;
}

goose_status NewDrafter(const goose_drafter_params& p, goose_drafter** out) {
  const char* fn = "goose_drafter_new";
  auto d = HostDrafter::Make(p.n_vocab, p.method ? p.method : "goose", p.model_fingerprint);
  if (!d.ok()) return FailWith(GOOSE_ERROR_INVALID_ARGUMENT, fn, d.status());
  auto handle = std::make_unique<goose_drafter>();
  handle->object = std::move(d).value().release();
  *out = handle.release();
  return GOOSE_OK;
}

}  // namespace
}  // namespace goose::capi

using namespace goose;        // NOLINT: the API's bodies
using namespace goose::capi;  // NOLINT

extern "C" {

void goose_drafter_default_params(goose_drafter_params* params) {
  if (params == nullptr) return;
  *params = goose_drafter_params{};
  params->method = "goose";
}

goose_status goose_drafter_new(const goose_drafter_params* params, goose_drafter** out) {
  constexpr const char* fn = "goose_drafter_new";
  return Call(fn, [&] {
    GOOSE_API_REQUIRE(params, fn);
    GOOSE_API_REQUIRE(out, fn);
    return NewDrafter(*params, out);
  });
}

goose_status goose_drafter_free(goose_drafter* drafter) {
  constexpr const char* fn = "goose_drafter_free";
  return Call(fn, [&] {
    HostDrafter* d = nullptr;
    if (goose_status st = Resolve(drafter, fn, "drafter", &d); st != GOOSE_OK) return st;
    if (d->open_requests() > 0) {
      return Fail(
          GOOSE_ERROR_STATE, fn,
          StrFormat("%d requests of this drafter are open: end them first", d->open_requests()));
    }
    Retire(drafter);
    return GOOSE_OK;
  });
}

goose_status goose_drafter_info_get(const goose_drafter* drafter, goose_drafter_info* out) {
  constexpr const char* fn = "goose_drafter_info_get";
  return Call(fn, [&] {
    HostDrafter* d = nullptr;
    if (goose_status st = Resolve(drafter, fn, "drafter", &d); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(out, fn);
    *out = goose_drafter_info{};
    out->n_vocab = d->n_vocab();
    out->top_k = d->top_k();
    out->open_requests = d->open_requests();
    const std::string variant = d->variant();
    std::strncpy(out->method, variant.c_str(), sizeof(out->method) - 1);
    return GOOSE_OK;
  });
}

goose_status goose_drafter_begin(goose_drafter* drafter, const int32_t* prompt, int32_t n_prompt,
                                 goose_drafter_request** out) {
  constexpr const char* fn = "goose_drafter_begin";
  return Call(fn, [&] {
    HostDrafter* d = nullptr;
    if (goose_status st = Resolve(drafter, fn, "drafter", &d); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(out, fn);
    if (n_prompt < 1) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, StrFormat("n_prompt = %d", n_prompt));
    }
    GOOSE_API_REQUIRE(prompt, fn);
    DraftError error;
    std::unique_ptr<DraftRequest> r = d->Begin({prompt, static_cast<size_t>(n_prompt)}, &error);
    if (!r) return FromDraftError(error, fn);
    auto handle = std::make_unique<goose_drafter_request>();
    handle->object = r.release();
    *out = handle.release();
    return GOOSE_OK;
  });
}

goose_status goose_drafter_end(goose_drafter_request* request) {
  constexpr const char* fn = "goose_drafter_end";
  return Call(fn, [&] {
    DraftRequest* r = nullptr;
    if (goose_status st = Resolve(request, fn, "request", &r); st != GOOSE_OK) return st;
    Retire(request);
    return GOOSE_OK;
  });
}

goose_status goose_drafter_observe_prompt(goose_drafter_request* request, int32_t first_row,
                                          int32_t n_rows, const int32_t* top_ids,
                                          const float* top_logits, int32_t k) {
  constexpr const char* fn = "goose_drafter_observe_prompt";
  return Call(fn, [&] {
    DraftRequest* r = nullptr;
    if (goose_status st = Resolve(request, fn, "request", &r); st != GOOSE_OK) return st;
    std::optional<HostRows> rows;
    if (goose_status st = ReadRows(*r, n_rows, top_ids, top_logits, k, fn, &rows); st != GOOSE_OK) {
      return st;
    }
    if (auto e = r->ObservePrompt(first_row, *rows)) return FromDraftError(*e, fn);
    return GOOSE_OK;
  });
}

goose_status goose_drafter_set_prediction(goose_drafter_request* request, const int32_t* tokens,
                                          int32_t n_tokens) {
  constexpr const char* fn = "goose_drafter_set_prediction";
  return Call(fn, [&] {
    DraftRequest* r = nullptr;
    if (goose_status st = Resolve(request, fn, "request", &r); st != GOOSE_OK) return st;
    if (n_tokens < 1) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, StrFormat("n_tokens = %d", n_tokens));
    }
    GOOSE_API_REQUIRE(tokens, fn);
    if (auto e = r->SetPrediction({tokens, static_cast<size_t>(n_tokens)})) {
      return FromDraftError(*e, fn);
    }
    return GOOSE_OK;
  });
}

goose_status goose_drafter_propose(goose_drafter_request* request, int32_t budget,
                                   goose_draft_tree* out) {
  constexpr const char* fn = "goose_drafter_propose";
  return Call(fn, [&] {
    DraftRequest* r = nullptr;
    if (goose_status st = Resolve(request, fn, "request", &r); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(out, fn);
    const DraftTree* tree = nullptr;
    if (auto e = r->Propose(budget, &tree)) return FromDraftError(*e, fn);
    static_assert(sizeof(NodeSource) == sizeof(uint8_t));
    out->n_nodes = tree->size();
    out->tokens = tree->tokens.data();
    out->parents = tree->parents.data();
    out->depth = tree->depth.data();
    out->source = reinterpret_cast<const uint8_t*>(tree->source.data());
    return GOOSE_OK;
  });
}

goose_status goose_drafter_observe(goose_drafter_request* request, int32_t n_rows,
                                   const int32_t* top_ids, const float* top_logits, int32_t k) {
  constexpr const char* fn = "goose_drafter_observe";
  return Call(fn, [&] {
    DraftRequest* r = nullptr;
    if (goose_status st = Resolve(request, fn, "request", &r); st != GOOSE_OK) return st;
    std::optional<HostRows> rows;
    if (goose_status st = ReadRows(*r, n_rows, top_ids, top_logits, k, fn, &rows); st != GOOSE_OK) {
      return st;
    }
    if (auto e = r->Observe(std::move(*rows))) return FromDraftError(*e, fn);
    return GOOSE_OK;
  });
}

goose_status goose_drafter_commit(goose_drafter_request* request, const int32_t* accepted,
                                  int32_t n_accepted, int32_t bonus) {
  constexpr const char* fn = "goose_drafter_commit";
  return Call(fn, [&] {
    DraftRequest* r = nullptr;
    if (goose_status st = Resolve(request, fn, "request", &r); st != GOOSE_OK) return st;
    if (n_accepted < 0) {
      return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, StrFormat("n_accepted = %d", n_accepted));
    }
    if (n_accepted > 0) GOOSE_API_REQUIRE(accepted, fn);
    const std::span<const int32_t> path(accepted, n_accepted > 0 ? n_accepted : 0);
    if (auto e = r->Commit(path, bonus)) return FromDraftError(*e, fn);
    return GOOSE_OK;
  });
}

goose_status goose_drafter_request_stats(const goose_drafter_request* request,
                                         goose_spec_stats* out) {
  constexpr const char* fn = "goose_drafter_request_stats";
  return Call(fn, [&] {
    DraftRequest* r = nullptr;
    if (goose_status st = Resolve(request, fn, "request", &r); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(out, fn);
    ToSpecStats(r->stats(), out);
    return GOOSE_OK;
  });
}

goose_status goose_drafter_stats(const goose_drafter* drafter, goose_spec_stats* out) {
  constexpr const char* fn = "goose_drafter_stats";
  return Call(fn, [&] {
    HostDrafter* d = nullptr;
    if (goose_status st = Resolve(drafter, fn, "drafter", &d); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(out, fn);
    ToSpecStats(d->stats(), out);
    return GOOSE_OK;
  });
}

goose_status goose_drafter_save(goose_drafter* drafter, const char* dir) {
  constexpr const char* fn = "goose_drafter_save";
  return Call(fn, [&] {
    HostDrafter* d = nullptr;
    if (goose_status st = Resolve(drafter, fn, "drafter", &d); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(dir, fn);
    if (Status st = d->Save(dir); !st.ok()) return FailWith(GOOSE_ERROR_FILE, fn, st);
    return GOOSE_OK;
  });
}

goose_status goose_drafter_load(goose_drafter* drafter, const char* dir) {
  constexpr const char* fn = "goose_drafter_load";
  return Call(fn, [&] {
    HostDrafter* d = nullptr;
    if (goose_status st = Resolve(drafter, fn, "drafter", &d); st != GOOSE_OK) return st;
    GOOSE_API_REQUIRE(dir, fn);
    bool requests_open = false;
    if (Status st = d->Load(dir, &requests_open); !st.ok()) {
      return FailWith(requests_open ? GOOSE_ERROR_STATE : GOOSE_ERROR_FILE, fn, st);
    }
    return GOOSE_OK;
  });
}

goose_status goose_tree_ancestor_mask(const int32_t* parents, int32_t n, uint8_t* mask) {
  constexpr const char* fn = "goose_tree_ancestor_mask";
  return Call(fn, [&] {
    if (n < 1) return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, StrFormat("n = %d nodes", n));
    GOOSE_API_REQUIRE(parents, fn);
    GOOSE_API_REQUIRE(mask, fn);
    for (int32_t i = 0; i < n; ++i) {
      if (parents[i] < -1 || parents[i] >= i) {
        return Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn,
                    StrFormat("parents[%d] = %d, expected -1 or an earlier node", i, parents[i]));
      }
    }
    // Row i is its parent's row plus itself: parents come first.
    const size_t w = static_cast<size_t>(n);
    std::memset(mask, 0, w * w);
    for (int32_t i = 0; i < n; ++i) {
      if (parents[i] >= 0) std::memcpy(mask + i * w, mask + parents[i] * w, w);
      mask[i * w + i] = 1;
    }
    return GOOSE_OK;
  });
}

}  // extern "C"
