// ServingLoop: many requests decoded together, as a server runs them. One thread of its own
// admits requests into free slots (an Engine each: its KV cache, its draft model's) and steps
// every slot's sequence in shared forward passes (engine/scheduler.h): one pass scores the next
// tokens, or draft trees, of every active request, and a new request's prompt is prefilled in
// chunks that share passes with the others' decoding. Every request's tokens are those of
// plain decoding of it alone (the scheduler's contract), whatever runs beside it.
//
// Contract
// - Submit() queues a request; the loop starts it in the next free slot, in arrival order. It is
//   refused (kQueueFull) when every slot is busy and max_queue requests already wait, and
//   (kClosed) after Close(). A refused request's callbacks never run.
// - Callbacks run on the loop's thread: on_tokens after every cycle that committed tokens
//   (false ends the request); `cancelled` is polled before every pass (true ends it, its result
//   as far as it got); on_done exactly once per admitted request, with its result or the error
//   that ended it (an invalid request: Engine::CheckRequest's message), and whether it was
//   cancelled. A callback must not block for long: every slot waits for it.
// - The slots share the session's learned state and one budget policy (a pass's budget is split
//   among the requests in it, budget/pass_split.h).
// - Close() refuses new requests; queued and running ones go on. WaitIdle(deadline): true once
//   nothing is queued or running. Stop() closes, lets everything finish and joins the thread
//   (the destructor calls it). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/scheduler.h"
#include "engine/session.h"

namespace goose {

struct ServingRequest {
  std::vector<int32_t> prompt;
  GenerateParams params;
  TokenCallback on_tokens;
  std::function<bool()> cancelled;         // null: never
  std::function<void(int slot)> on_start;  // when it gets its slot; null: none
  // slot: the slot it ran in (-1: it never started).
  std::function<void(int slot, StatusOr<GenerateResult> result, bool cancelled)> on_done;
};

class ServingLoop {
 public:
  enum class Admit { kQueued, kQueueFull, kClosed };

  // n_slots engines from `session`, which must outlive the loop.
  ServingLoop(Session& session, int n_slots, int max_queue);
  ~ServingLoop();
  ServingLoop(const ServingLoop&) = delete;
  ServingLoop& operator=(const ServingLoop&) = delete;

  Admit Submit(ServingRequest request);
  void Close();
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);
  void Stop();

  int size() const { return static_cast<int>(slots_.size()); }
  int queued() const;  // requests waiting for a slot
  int busy() const;    // slots running a request
  PassCounters counters() const;
  // The slots' engines (for what they learned; not while the loop runs requests).
  Engine& engine(int slot) { return *slots_[slot].engine; }

 private:
  struct Slot {
    Engine* engine = nullptr;
    std::unique_ptr<Sequence> seq;
    ServingRequest request;
  };
  void Run();
  // Starts queued requests in free slots (mu_ held).
  void AdmitLocked(std::vector<std::pair<ServingRequest, Status>>* refused);
  // Ends the slots whose sequence is done (their on_done), freeing them.
  void FinishDone();
  // Ends every running request with `error` (a failed pass).
  void FailAll(const Status& error);

  const int max_queue_;
  std::shared_ptr<BudgetPolicy> policy_;
  BatchPass batch_;
  Scheduler scheduler_;
  std::vector<Slot> slots_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a request arrived, or closing
  std::condition_variable idle_cv_;  // a request finished
  std::deque<ServingRequest> queue_;
  int busy_ = 0;
  bool closed_ = false;
  PassCounters counters_;  // a copy of the scheduler's, under mu_
  std::thread thread_;
};

}  // namespace goose
