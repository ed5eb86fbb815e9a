#include "util/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define GOOSE_PAUSE() _mm_pause()
#else
#define GOOSE_PAUSE() \
  do {                \
  } while (0)
#endif

namespace goose {

namespace {
// About 50-100 microseconds of spinning before a worker sleeps: long enough to bridge the gap
// between two matmuls of a decode step, short enough not to burn a core while idle.
constexpr int kSpinIterations = 20000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::clamp(n_threads, 1, 64)) {
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

int ThreadPool::DefaultThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

void ThreadPool::Run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = &fn;
    pending_.store(n_threads_ - 1);
    claimed_.store(1, std::memory_order_release);  // after task_ and pending_: see WorkerLoop
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  fn(0, n_threads_);
  // Run the shares of workers that have not claimed theirs yet.
  for (int t = 1; t < n_threads_; ++t) {
    const uint64_t bit = uint64_t{1} << t;
    if ((claimed_.fetch_or(bit, std::memory_order_acq_rel) & bit) == 0) {
      fn(t, n_threads_);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
  while (pending_.load(std::memory_order_acquire) != 0) GOOSE_PAUSE();
}

void ThreadPool::WorkerLoop(int thread_idx) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < kSpinIterations; ++i) {
      GOOSE_PAUSE();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load() != seen; });
      gen = generation_.load();
    }
    seen = gen;
    if (stop_.load()) return;
    // Claim this index of the *current* Run (which may be newer than `gen` if this thread
    // slept through one; then the caller ran our share of the older one). A claim that sees
    // the reset also sees the task_ and pending_ written before it.
    const uint64_t bit = uint64_t{1} << thread_idx;
    if ((claimed_.fetch_or(bit, std::memory_order_acq_rel) & bit) != 0) continue;
    const std::function<void(int, int)>* task;
    {
      std::lock_guard<std::mutex> lock(mu_);
      task = task_;
    }
    (*task)(thread_idx, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace goose
