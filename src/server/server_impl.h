// Server::Impl: the state behind Server (internal header, shared by server.cc and
// completion_routes.cc).
//
// Lifecycle: Create() -> Start() binds (HttpServer: its I/O thread and handler threads) and
// starts the loader thread -> Load() fills `loaded` and sets phase kReady (or kFailed) ->
// Shutdown(). `loaded` is written only by the loader before phase becomes kReady (release) and
// read by handlers after they saw kReady (acquire); after that only the serving loop changes,
// each on its own slot thread. Handlers run on HttpServer's handler threads and may block there
// (a completion waits for its generation).
#pragma once

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
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/server.h"
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
  // The slots: every request runs there, in passes shared with the others.
  std::unique_ptr<ServingLoop> loop;
};

struct Server::Impl {
  enum Phase : int { kLoading = 0, kReady = 1, kFailed = 2 };

  ServerOptions opts;
  SpecParams default_spec;  // parsed --spec, with the --budget number
  bool default_budget_auto = false;
  std::string model_name;  // id in the API

  std::unique_ptr<HttpServer> http;
  std::thread load_thread;
  std::atomic<int> phase{kLoading};
  Status load_status;  // valid once phase != kLoading
  std::mutex load_mu;
  std::condition_variable load_cv;
  LoadedModel loaded;

  std::atomic<bool> draining{false};    // shutdown begun: no new generations
  std::atomic<bool> cancel_all{false};  // in-flight generations stop at the next cycle
  std::once_flag shutdown_once;
  std::atomic<uint64_t> next_id{0};
  int64_t start_time = 0;
  Metrics metrics;

  // The routes: method and path -> handler.
  struct Route {
    const char* method;
    const char* path;
    void (Impl::*handle)(HttpExchange& ex);
  };
  static const std::vector<Route>& Routes();
  HttpServerOptions HttpOptions();
  // Before the body is read (I/O thread): unknown route 404, wrong method 405, missing or
  // wrong API key 401; else nullopt.
  std::optional<HttpResponse> CheckHead(const HttpRequest& head) const;
  void Handle(HttpExchange& ex);
  SessionOptions SessionFor() const;
  void LoadChatTemplate();
  void Load();
  void SetPhase(Phase p, Status st);
  void DoShutdown();

  // Answers 503 and returns false unless the model is ready and the server not draining.
  bool CheckReady(HttpExchange& ex, bool generation);
  void SendError(HttpExchange& ex, const ApiError& e, HttpResponse res = {});
  void SendJson(HttpExchange& ex, const nlohmann::json& j);

  void HandleHealth(HttpExchange& ex);
  void HandleModels(HttpExchange& ex);
  void HandleMetrics(HttpExchange& ex);
  void HandleCompletion(HttpExchange& ex) { HandleCompletion(ex, ApiKind::kCompletion); }
  void HandleChat(HttpExchange& ex) { HandleCompletion(ex, ApiKind::kChat); }
  void HandleCompletion(HttpExchange& ex, ApiKind kind);
  void HandleTokenize(HttpExchange& ex);
  void HandleDetokenize(HttpExchange& ex);
};

// The Status's message as a 500 error body.
ApiError ServerError(const std::string& message);

}  // namespace goose::server
