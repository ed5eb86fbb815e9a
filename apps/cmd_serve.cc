// goose serve: the OpenAI-compatible HTTP server (src/server/server.h). Flags follow
// llama-server's names where one exists. SIGINT/SIGTERM stop it gracefully (a second one cancels
// what is still running); it then exits 0.
#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <thread>

#include "commands.h"
#include "engine/engine.h"
#include "method/method.h"
#include "server/chat_template.h"
#include "server/server.h"

namespace goose::cli {

namespace {

struct ServeFlags {
  server::ServerOptions opts;
  std::string model;
  int max_body_mib = 4;
  bool no_table_cache = false;
};

int RunServe(ServeFlags& f) {
  server::ServerOptions& o = f.opts;
  o.model_path = ResolveModelPath(f.model);
  if (o.model_path.empty()) return 1;
  o.max_body_bytes = static_cast<size_t>(f.max_body_mib) << 20;
  o.table_cache = !f.no_table_cache;
  auto server_or = server::Server::Create(o);
  if (!server_or.ok()) return Fail(server_or.status().message());
  server::Server& srv = **server_or;

  // SIGINT/SIGTERM go to one thread (sigwait), blocked everywhere else: every thread the server
  // starts inherits this mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto port_or = srv.Start();
  if (!port_or.ok()) return Fail(port_or.status().message());
  std::fprintf(stderr, "goose: listening on http://%s:%d, loading %s\n", o.host.c_str(), *port_or,
               o.model_path.c_str());

  std::mutex mu;
  std::condition_variable cv;
  bool stop_requested = false, quitting = false;
  std::thread signal_thread([&] {
    int n = 0;
    while (true) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      std::unique_lock<std::mutex> lock(mu);
      if (quitting) return;
      if (n++ == 0) {
        std::fprintf(stderr, "goose: %s: finishing requests (up to %.0f s; again to cancel them)\n",
                     sig == SIGINT ? "SIGINT" : "SIGTERM", o.shutdown_grace_seconds);
        stop_requested = true;
        cv.notify_all();
      } else {
        std::fprintf(stderr, "goose: cancelling the requests in flight\n");
        srv.CancelAll();
      }
    }
  });
  auto stop_signal_thread = [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      quitting = true;
    }
    pthread_kill(signal_thread.native_handle(), SIGTERM);  // wakes its sigwait
    signal_thread.join();
  };

  const Status loaded = srv.WaitUntilLoaded();
  if (!loaded.ok()) {
    srv.Shutdown();
    stop_signal_thread();
    return Fail(loaded.message());
  }
  std::fprintf(stderr, "goose: ready: %d slot%s, --spec %s, budget %s\n", o.n_parallel,
               o.n_parallel == 1 ? "" : "s", o.spec.c_str(), o.budget.c_str());
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return stop_requested; });
  }
  srv.Shutdown();
  stop_signal_thread();
  std::fprintf(stderr, "goose: stopped\n");
  return 0;
}

}  // namespace

Runner AddServeCommand(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  server::ServerOptions& o = f->opts;
  app.add_option("-m,--model", f->model, "GGUF model (default ../shared/models/stories260K.gguf)");
  app.add_option("--model-draft", o.draft_model_path,
                 "(-md) draft model of the same family (same vocabulary), for requests with "
                 "goose.spec draft, draft-tree or graft");
  app.add_option("--host", o.host, "address to listen on (default 127.0.0.1: this machine only)");
  app.add_option("--port", o.port, "port (default 8080; 0 = any free port, printed at start)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--parallel", o.n_parallel, "slots: requests generated at once (default 1)")
      ->check(CLI::Range(1, 256));
  app.add_option("--max-queue", o.max_queue,
                 "requests that may wait for a slot; beyond, 503 (default 16)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--spec", o.spec,
                 "default method: " + MethodNames() +
                     ", with +modifiers (default goose); a "
                     "request may choose another with \"goose\": {\"spec\": ...}");
  o.budget = "auto";  // as generate's: the methods' own budgets are the papers', dear on a CPU
  app.add_option("--budget", o.budget,
                 "tree node budget incl. root (default auto: cost-aware; 0 = the method's own)");
  app.add_flag("--recalibrate", o.recalibrate, "--budget auto: re-measure the cached cost curve");
  app.add_flag("--no-table-cache", f->no_table_cache,
               "neither load nor save what the methods learned (tables, acceptance, budgets; "
               "kept per model under ~/.cache/goose and shared with goose generate)");
  app.add_option("-c,--ctx-size", o.n_ctx, "context length per slot (0 = min(model, 4096))")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("-b,--batch-size", o.prefill_chunk,
                 "prompt tokens per prefill pass (0 = the whole prompt in one)")
      ->check(CLI::Range(0, 1 << 24));
  AddKvTypeFlag(app, &o.kv_type);
  app.add_option("-t,--threads", o.n_threads, "threads, at most 64 (0 = all cores)")
      ->check(CLI::Range(0, 64));
  app.add_option("--threads-http", o.n_http_threads,
                 "request handler threads; connections cost none (0 = parallel + max-queue + 4)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--max-connections", o.max_connections,
                 "open connections at most; beyond, 503 (default 1024)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-client-connections", o.max_connections_per_client,
                 "open connections from one address at most; beyond, 503 (default 256)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--keep-alive", o.keep_alive_seconds,
                 "seconds an idle connection is kept open for its next request (default 30)")
      ->check(CLI::Range(1, 3600));
  app.add_option("--api-key", o.api_key, "require 'Authorization: Bearer KEY' (all but /health)");
  app.add_option("--chat-template", o.chat_template,
                 "chat prompt format: " + server::ChatFamilyNames() +
                     " (default: recognised from the model's tokenizer.chat_template)");
  app.add_option("-a,--alias", o.alias, "model id in the API (default: the model file's name)");
  app.add_option("--timeout", o.timeout_seconds,
                 "seconds a whole request head may take to arrive, then its whole body, then "
                 "each write, before the connection is cut (default 30)")
      ->check(CLI::Range(1, 3600));
  app.add_option("--max-body-mb", f->max_body_mib, "largest request body in MiB (default 4)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--shutdown-grace", o.shutdown_grace_seconds,
                 "seconds in-flight requests get to finish on SIGINT/SIGTERM (default 10)")
      ->check(CLI::Range(0.0, 3600.0));
  return [f] { return RunServe(*f); };
}

}  // namespace goose::cli
