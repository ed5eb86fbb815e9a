// ThreadPool: a persistent pool of worker threads for the forward pass.
// The calling thread takes part as thread 0, so ThreadPool(1) runs everything inline.
// Run() blocks until every thread index has run. Workers spin briefly between passes (a decode
// step of a small model is microseconds long) and then sleep on a condition variable.
// Each index runs exactly once, on whichever thread claims it first: the caller, after its own
// share, runs the shares of workers that have not woken up yet. On a busy machine (another
// process on the other core) a descheduled worker then costs nothing instead of a time slice.
// Not reentrant: call Run() from one thread at a time, never from inside a task.
// Determinism: callers split *independent outputs* (matrix rows, heads) across threads, never
// a reduction, so results do not depend on the thread count.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace goose {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_idx, n_threads) once on every thread and waits for all of them.
  void Run(const std::function<void(int thread_idx, int n_threads)>& fn);

  // Splits [0, n) into size() contiguous chunks and calls fn(begin, end) for each non-empty one.
  template <typename F>
  void ParallelFor(int64_t n, F&& fn) {
    if (n_threads_ == 1 || n <= 1) {
      if (n > 0) fn(int64_t{0}, n);
      return;
    }
    Run([&](int t, int nt) {
      const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
      if (begin < end) fn(begin, end);
    });
  }

  // Number of hardware threads (at least 1).
  static int DefaultThreads();

 private:
  void WorkerLoop(int thread_idx);

  const int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> claimed_{0};  // bit t: index t of the current Run has been taken
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace goose
