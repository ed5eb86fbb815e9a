// Server::Impl: the state behind Server (internal header, shared by server.cc and
// completion_routes.cc).
//
// Lifecycle: Create() -> Start() binds, starts the listener thread and the loader thread ->
// Load() fills `loaded` and sets phase kReady (or kFailed) -> Shutdown(). `loaded` is written
// only by the loader before phase becomes kReady (release) and read by handlers after they saw
// kReady (acquire); after that only the slots' engines change, each on its own slot thread.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/session.h"
#include "method/method.h"
#include "server/api_request.h"
#include "server/api_response.h"
#include "server/chat_template.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/slot_pool.h"
#include "server/special_tokens.h"

namespace goose::server {

struct LoadedModel {
  // The model, the draft model (-md), the pool, the learned state and the cost curve; it owns
  // the slots' engines.
  std::unique_ptr<Session> session;
  const Model* model = nullptr;
  const Model* draft = nullptr;  // -md, or null
  SpecialTokens specials;
  std::optional<ChatTemplate> chat;
  std::string chat_missing;      // why `chat` is empty, for the error a chat request gets
  std::vector<CostSample> cost;  // the verify-cost curve (--budget auto), else empty
  int n_ctx = 0;
  int64_t created = 0;  // Unix seconds at load
  std::mutex pool_mu;   // forward passes take turns on the session's pool (Engine::set_pool_mutex)
  std::vector<Engine*> engines;  // [slot]
  std::unique_ptr<SlotPool> slots;
};

struct Server::Impl {
  enum Phase : int { kLoading = 0, kReady = 1, kFailed = 2 };

  ServerOptions opts;
  SpecParams default_spec;  // parsed --spec, with the --budget number
  bool default_budget_auto = false;
  std::string model_name;  // id in the API

  httplib::Server http;
  std::thread listen_thread, load_thread;
  std::atomic<int> phase{kLoading};
  Status load_status;  // valid once phase != kLoading
  std::mutex load_mu;
  std::condition_variable load_cv;
  LoadedModel loaded;

  std::atomic<bool> listen_done{false};  // listen_after_bind() returned
  std::atomic<bool> draining{false};     // shutdown begun: no new generations
  std::atomic<bool> cancel_all{false};   // in-flight generations stop at the next cycle
  std::once_flag shutdown_once;
  std::atomic<uint64_t> next_id{0};
  int64_t start_time = 0;
  Metrics metrics;

  void SetUpRoutes();
  SessionOptions SessionFor() const;
  void LoadChatTemplate();
  void Load();
  void SetPhase(Phase p, Status st);
  void DoShutdown();

  // Answers 503 and returns false unless the model is ready and the server not draining.
  bool CheckReady(httplib::Response& res, bool generation);
  void SendError(httplib::Response& res, const ApiError& e);
  void SendJson(httplib::Response& res, const nlohmann::json& j);

  void HandleCompletion(const httplib::Request& req, httplib::Response& res, ApiKind kind);
  void HandleTokenize(const httplib::Request& req, httplib::Response& res);
  void HandleDetokenize(const httplib::Request& req, httplib::Response& res);
};

// The Status's message as a 500 error body.
ApiError ServerError(const std::string& message);

}  // namespace goose::server
