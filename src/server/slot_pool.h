// SlotPool: N worker threads ("slots") that run generation jobs, and a bounded queue in front
// of them.
//
// Contract
// - Submit(job) queues `job`; the next free slot runs job(slot_index) on its own thread, in
//   arrival order. A job is refused (kQueueFull) when every slot is busy and max_queue jobs
//   already wait, and (kClosed) after Close(). Refused jobs never run.
// - One thread per slot for the pool's lifetime: whatever a job leaves in thread-local scratch
//   (the kernels keep some) is bounded by the number of slots, not by the number of clients.
// - Close() refuses new jobs; queued ones still run. WaitIdle(deadline) waits until nothing is
//   queued or running (true) or the deadline passes (false). Stop() closes, lets the queue
//   drain and joins the threads (the destructor calls it).
// - Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace goose::server {

class SlotPool {
 public:
  using Job = std::function<void(int slot)>;
  enum class Admit { kQueued, kQueueFull, kClosed };

  SlotPool(int n_slots, int max_queue);
  ~SlotPool();
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  Admit Submit(Job job);
  void Close();
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);
  void Stop();

  int size() const { return static_cast<int>(threads_.size()); }
  int queued() const;  // jobs waiting for a slot
  int busy() const;    // slots running a job

 private:
  void WorkerLoop(int slot);
  const int max_queue_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a job arrived, or closing
  std::condition_variable idle_cv_;  // a job finished
  std::deque<Job> queue_;
  int busy_ = 0;
  bool closed_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace goose::server
