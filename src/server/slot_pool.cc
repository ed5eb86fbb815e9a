#include "server/slot_pool.h"

namespace goose::server {

SlotPool::SlotPool(int n_slots, int max_queue) : max_queue_(max_queue) {
  threads_.reserve(n_slots);
  for (int i = 0; i < n_slots; ++i) threads_.emplace_back([this, i] { WorkerLoop(i); });
}

SlotPool::~SlotPool() { Stop(); }

SlotPool::Admit SlotPool::Submit(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Admit::kClosed;
    const int idle = size() - busy_;
    // Jobs beyond the idle slots wait; at most max_queue_ of them.
    if (static_cast<int>(queue_.size()) - idle >= max_queue_) return Admit::kQueueFull;
    queue_.push_back(std::move(job));
  }
  work_cv_.notify_one();
  return Admit::kQueued;
}

void SlotPool::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  work_cv_.notify_all();
}

bool SlotPool::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_until(lock, deadline, [&] { return queue_.empty() && busy_ == 0; });
}

void SlotPool::Stop() {
  Close();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

int SlotPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

int SlotPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

void SlotPool::WorkerLoop(int slot) {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return !queue_.empty() || closed_; });
      if (queue_.empty()) return;  // closed and drained
      job = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
    }
    try {
      job(slot);
    } catch (...) {
      // Jobs report their own failures (RunGeneration catches and answers); this only keeps a
      // throwing job from taking the slot's thread, and so the slot, with it.
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --busy_;
    }
    idle_cv_.notify_all();
  }
}

}  // namespace goose::server
