// Server: `goose serve`, an OpenAI-compatible HTTP server whose answers are exactly what
// `goose generate` prints for the same prompt and parameters, sooner by speculative decoding.
//
// Routes: GET /health, GET /v1/models, POST /v1/completions, POST /v1/chat/completions
// (stream: server-sent events), GET /metrics (Prometheus), POST /tokenize, POST /detokenize.
// Request shapes and checks: api_request.h; response shapes: api_response.h; chat prompts:
// chat_template.h.
//
// Contract
// - Start() binds host:port (127.0.0.1 unless told otherwise) and answers at once; the model
//   loads in the background, and until it has, /health and every model route answer 503.
// - One Session (engine/session.h) and a ServingLoop (engine/serving_loop.h) of `n_parallel`
//   slots, each an Engine with its own KV cache; one thread steps every slot's request in
//   shared forward passes (their trees split one budget by value, a new prompt prefilled in
//   chunks beside the others' decoding). Requests beyond the slots wait in a queue of at most
//   `max_queue`, and beyond that get 503 with Retry-After. The slots share one LearnedStore, so
//   what TR/GOOSE learn from any request drafts for all. Output never depends on any of it:
//   every request's text is plain decoding's of it alone, its sampling keyed by (seed,
//   position).
// - HTTP (http_server.h): one I/O thread serves every connection without blocking, so idle
//   keep-alive connections and slow clients cost no thread; handlers run on n_http_threads
//   threads. Per-phase deadlines (timeout_seconds for a whole request head, then its whole
//   body), body limits in every framing, at most max_connections connections and
//   max_connections_per_client per address; pipelined requests are answered in order.
// - A client that disconnects (closes its socket, or its sending side), streaming or not,
//   cancels its generation before the next pass and frees its slot.
// - Prompts are checked against the context while they are tokenized: a prompt (or a /tokenize
//   text) that cannot fit is refused (400) as soon as that is certain, so a refused prompt
//   costs what the context allows, not what the body holds.
// - Shutdown(): new generation requests get 503, the listener and the idle connections close
//   (the others after their current response), in-flight and queued
//   requests get shutdown_grace_seconds to finish and are then cancelled (each within one
//   forward pass), responses are written, what the slots learned is saved to the table cache
//   (the one `goose generate` uses, loaded at start), and it returns. Idempotent.
// - Security: with api_key, every route but /health needs "Authorization: Bearer KEY"
//   (compared in constant time), else 401, answered before the body is read. Bodies over
//   max_body_bytes get 413 (http_server.h lists the other refusals: duplicate Content-Length,
//   Content-Encoding, ...); request JSON nesting is bounded (api_request.h). No request field
//   names a file.
// - Errors are OpenAI-style JSON with a 4xx/5xx status; the server keeps serving after any of
//   them. A process serving must not die of SIGPIPE: Start() ignores it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "tree/draft_tree.h"
#include "util/status.h"

namespace goose::server {

struct ServerOptions {
  std::string model_path;
  // The draft model of the draft-model methods (-md; empty: none). Loaded beside the target;
  // every slot's Engine gets it (with a draft context of its own). Without one, a request for
  // draft, draft-tree or graft is a 400 that says so.
  std::string draft_model_path;
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port (tests)
  int n_parallel = 1;             // slots
  int max_queue = 16;             // requests waiting beyond the slots
  int n_ctx = 0;                  // context per slot; 0 = min(model's, 4096)
  int n_threads = 0;              // forward-pass threads; 0 = all cores
  KvType kv_type = KvType::kF16;  // the slots' KV caches
  int prefill_chunk = 256;        // prompt tokens per prefill pass (-b)
  int n_http_threads = 0;         // handler threads; 0 = n_parallel + max_queue + 4
  std::string spec = "goose";     // default method (ParseSpecVariant); requests may choose another
  std::string budget = "0";       // default node budget 0..128 (0 = the method's) or "auto"
  bool recalibrate = false;       // --budget auto: measure the cost curve again, not the cache's
  // --budget auto: this verify-cost curve instead of the machine's (SessionOptions::cost_curve:
  // neither measured nor cached; tests). Empty: the machine's.
  std::vector<CostSample> cost_curve;
  // What TR/GOOSE learn is loaded from and saved to the table cache (engine/learned_cache.h),
  // as `goose generate` does: loaded at start, saved at Shutdown(). cache_dir: its root (empty:
  // GooseCacheDir()).
  bool table_cache = true;
  std::string cache_dir;
  std::string api_key;        // empty: no authentication
  std::string chat_template;  // a ChatFamilyName; empty: read tokenizer.chat_template
  std::string alias;          // model id in the API; empty: the model file's name
  size_t max_body_bytes = 4u << 20;
  int timeout_seconds = 30;     // a request head, then its body, then each write
  int keep_alive_seconds = 30;  // an idle connection waits this long for its next request
  int max_connections = 1024;
  int max_connections_per_client = 256;
  double shutdown_grace_seconds = 10;
  // Runs once the model has loaded, before anything else is made (tests hold the load here); an
  // error fails the load. (The slots' contexts are checked against the memory anyway.) Null:
  // none.
  std::function<Status(const Model&)> check_model;
  // Called on the serving loop's thread after every verified cycle of a generation, with its
  // slot (tracing; tests use it to slow or hold generations: holding one holds every slot).
  // Null: none.
  std::function<void(int slot)> on_cycle;
};

class Server {
 public:
  // Checks the options (method, budget, chat template name, sizes); no I/O.
  static StatusOr<std::unique_ptr<Server>> Create(ServerOptions options);
  ~Server();  // Shutdown()

  // Binds and starts answering; returns the bound port.
  StatusOr<int> Start();
  // After Start(): blocks until the model has loaded (Ok) or failed to (why).
  Status WaitUntilLoaded();
  void Shutdown();
  // Cancels every generation now instead of waiting for the grace period (a second Ctrl-C).
  void CancelAll();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace goose::server
