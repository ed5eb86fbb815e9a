// Session: what a front end opens once and closes once (goose generate, demo, bench, serve):
// the model and the draft model (-md), the thread pool, what the methods learn with the table
// cache it is kept in (engine/learned_cache.h), and for --budget auto the verify-cost curve,
// read from the cost cache or measured now (budget/cost_cache.h). Requests run on Engines it
// makes (NewEngine): each has a context of its own and shares the session's model, pool and
// learned state. Close() saves what the engines' variants learned and what their passes took,
// for the next run.
//
// Contract
// - Open() checks everything before the expensive work it can: the files load as models
//   (errors name the file), the draft model fits the target (CheckDraftModel), and n_contexts
//   contexts of n_ctx tokens with passes of n_batch tokens fit in memory (an error naming the
//   size and the flag to change). Warnings and progress notes ("timing tree passes...", a
//   damaged cache) go to on_note, never to stdout; none of them fails the open.
// - The session owns the engines it makes; Close() (also run by the destructor) must come
//   after their last request. Not thread-safe itself; engines run on their own threads as
//   Engine's contract says.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "budget/cost_cache.h"
#include "engine/engine.h"
#include "engine/learned_cache.h"
#include "engine/learned_store.h"
#include "model/model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace goose {

struct SessionOptions {
  std::string model_path;
  std::string draft_model_path;   // -md; empty: none
  int n_threads = 0;              // 0: ThreadPool::DefaultThreads()
  int n_ctx = 0;                  // tokens per context; 0: min(the model's, 4096)
  KvType kv_type = KvType::kF16;  // the contexts' KV cache (-ctk / --kv-type)
  // The memory check: how many engines the front end makes, and its largest pass.
  int n_contexts = 1;
  int n_batch = 128;
  std::string memory_flags = "-c";  // what to make smaller when they do not fit
  bool table_cache = true;          // load and save what the methods learn
  std::string cache_dir;            // the caches' root; empty: GooseCacheDir()
  bool budget_auto = false;         // load (or measure) the cost curve
  bool recalibrate = false;         // ... measuring it again
  // A curve to use instead of this machine's (tests, another model's curve): not measured, not
  // cached, not corrected by the passes. Needs budget_auto.
  std::vector<CostSample> cost_curve;
  std::function<void(const std::string&)> on_note;  // warnings and progress lines; null: none
  // Runs right after the model loaded, before anything else is made or measured: a front end's
  // checks that need the model (say, that the prompt fits the context), which may also set the
  // options that depend on it (n_batch, once the prompt's length is known); an error fails Open.
  std::function<Status(const Model&, SessionOptions*)> check_model;
};

// Memory n_contexts Contexts of n_ctx tokens with passes of n_batch tokens take, checked
// against what the machine has (util/memory.h); the advice names `flags`.
Status CheckContextMemory(const LlamaConfig& config, int n_ctx, int n_batch, int n_contexts,
                          const std::string& flags, KvType kv = KvType::kF16);

struct EngineOptions {
  int n_ctx = 0;              // 0: the session's
  bool share_learned = true;  // false: a store of its own, without the cache (benchmarks)
  bool session_curve = true;  // --budget auto on the session's curve, learning from its passes
  // The budget policy of engines whose sequences share passes (Session::NewBudgetPolicy); null:
  // the engine's own (on the session's curve if session_curve).
  std::shared_ptr<BudgetPolicy> policy;
};

class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> Open(SessionOptions options);
  ~Session();

  // A new engine, owned by the session: its context, the draft model attached, and under
  // --budget auto (session_curve) the session's cost curve, corrected by its own passes.
  // n_ctx is at most the session's (the draft model was checked for that size).
  Engine& NewEngine(const EngineOptions& options = {});
  // A budget policy on the session's curve, corrected by the passes of the engines that share
  // it (EngineOptions::policy); what they took is saved at Close.
  std::shared_ptr<BudgetPolicy> NewBudgetPolicy();
  // The table cache's warnings so far (a damaged file, a failed save), to on_note.
  void NoteCacheWarnings() const;
  // Saves what the engines learned (the table cache) and what their passes took (the cost
  // cache), reporting failures to on_note; once.
  void Close();

  const Model& model() const { return *model_; }
  const Model* draft_model() const { return draft_.get(); }
  ThreadPool& pool() { return *pool_; }
  int n_ctx() const { return n_ctx_; }
  // The cost curve (empty without budget_auto) and where it came from.
  const CostCalibration& calibration() const { return calibration_; }
  std::vector<CostSample> cost_curve() const { return cost_; }
  LearnedStore& learned() { return *learned_; }
  const SessionOptions& options() const { return opts_; }

 private:
  Session() = default;
  Status Load();
  void Note(const std::string& line) const;

  SessionOptions opts_;
  std::unique_ptr<Model> model_, draft_;
  std::unique_ptr<ThreadPool> pool_;
  int n_ctx_ = 0;
  CostCalibration calibration_;
  std::vector<CostSample> cost_;
  std::shared_ptr<LearnedCache> cache_;
  std::shared_ptr<LearnedStore> learned_;
  std::vector<std::unique_ptr<Engine>> engines_;
  // The policies on the session's curve (their engines' or shared ones), saved at Close.
  std::vector<std::shared_ptr<BudgetPolicy>> policies_;
  bool closed_ = false;
};

}  // namespace goose
