// The objects behind the C handles of include/goose/goose.h (capi/handles.h: how they are
// checked and freed), and the conversions the API files share.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "capi/handles.h"
#include "capi/host_drafter.h"
#include "engine/engine.h"
#include "engine/session.h"
#include "util/thread_pool.h"

namespace goose::capi {

// A loaded model: the engine's Session (model, draft model, learned state and its cache, cost
// curve). Shared by the caller's handle and every session opened on it.
struct ModelState {
  std::unique_ptr<Session> session;
  int n_threads = 1;  // a session's default
  bool learned_cache = false;
  uint64_t fingerprint = 0;
  std::mutex mu;  // the Session calls that are not thread-safe (NewBudgetPolicy)
  const Model& model() const { return session->model(); }
};

struct ModelRef {
  std::shared_ptr<ModelState> state;
};

// A session: an Engine (its KV cache, the model's learned state) on threads of its own.
struct SessionState {
  std::shared_ptr<ModelState> model;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Engine> engine;
  std::atomic<bool> cancel{false};
  std::atomic<bool> running{false};
  std::vector<int32_t> tokens;  // the last generation's
  SpecStats total;              // every generation's
  // Scoring: the last score call's rows (their parents) while they are pending or readable.
  std::vector<int32_t> parents;
  bool scored = false;   // logits of the last score call are readable
  bool pending = false;  // its rows await goose_session_keep
  ~SessionState();
};

}  // namespace goose::capi

struct goose_model : goose::capi::Handle<goose::capi::ModelRef, goose::capi::Kind::kModel> {};
struct goose_session : goose::capi::Handle<goose::capi::SessionState, goose::capi::Kind::kSession> {
};
struct goose_drafter : goose::capi::Handle<goose::capi::HostDrafter, goose::capi::Kind::kDrafter> {
};
struct goose_drafter_request
    : goose::capi::Handle<goose::capi::DraftRequest, goose::capi::Kind::kRequest> {};

namespace goose::capi {

// SpecStats as the C struct.
void ToSpecStats(const SpecStats& s, goose_spec_stats* out);
// A Status from the engine as an API error of `status`.
inline goose_status FailWith(goose_status status, const char* fn, const Status& st) {
  return Fail(status, fn, st.message());
}

}  // namespace goose::capi
