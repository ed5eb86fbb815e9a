#include "engine/serving_loop.h"

#include <exception>
#include <new>

namespace goose {

ServingLoop::ServingLoop(Session& session, int n_slots, int max_queue)
    : max_queue_(max_queue),
      policy_(session.NewBudgetPolicy()),
      batch_(session.model(), &session.pool()),
      scheduler_(*policy_, &batch_),
      slots_(n_slots) {
  EngineOptions eo;
  eo.policy = policy_;
  for (Slot& slot : slots_) slot.engine = &session.NewEngine(eo);
  thread_ = std::thread([this] { Run(); });
}

ServingLoop::~ServingLoop() { Stop(); }

ServingLoop::Admit ServingLoop::Submit(ServingRequest request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Admit::kClosed;
    const int idle = size() - busy_;
    // Requests beyond the idle slots wait; at most max_queue_ of them.
    if (static_cast<int>(queue_.size()) - idle >= max_queue_) return Admit::kQueueFull;
    queue_.push_back(std::move(request));
  }
  work_cv_.notify_one();
  return Admit::kQueued;
}

void ServingLoop::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  work_cv_.notify_all();
}

bool ServingLoop::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_until(lock, deadline, [&] { return queue_.empty() && busy_ == 0; });
}

void ServingLoop::Stop() {
  Close();
  if (thread_.joinable()) thread_.join();
}

int ServingLoop::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

int ServingLoop::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

PassCounters ServingLoop::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void ServingLoop::AdmitLocked(std::vector<std::pair<ServingRequest, Status>>* refused) {
  for (Slot& slot : slots_) {
    if (queue_.empty()) return;
    if (slot.seq) continue;
    ServingRequest r = std::move(queue_.front());
    queue_.pop_front();
    auto seq = slot.engine->Start(r.prompt, r.params, r.on_tokens);
    if (!seq.ok()) {
      refused->emplace_back(std::move(r), seq.status());
      continue;
    }
    slot.seq = std::move(seq).value();
    if (r.on_start) r.on_start(static_cast<int>(&slot - slots_.data()));
    slot.request = std::move(r);
    ++busy_;
    if (!slot.seq->done()) scheduler_.Add(slot.seq.get());
  }
}

void ServingLoop::FinishDone() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (!slot.seq || !slot.seq->done()) continue;
    const bool cancelled = slot.request.cancelled && slot.request.cancelled();
    if (slot.request.on_done) {
      slot.request.on_done(static_cast<int>(i), slot.seq->TakeResult(), cancelled);
    }
    slot.seq.reset();
    slot.request = ServingRequest();
    {
      std::lock_guard<std::mutex> lock(mu_);
      --busy_;
    }
    idle_cv_.notify_all();
  }
}

void ServingLoop::FailAll(const Status& error) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (!slot.seq || slot.seq->done()) continue;
    scheduler_.Remove(slot.seq.get());
    slot.seq->Cancel();
    if (slot.request.on_done) slot.request.on_done(static_cast<int>(i), error, false);
    slot.request.on_done = nullptr;
  }
  FinishDone();
}

void ServingLoop::Run() {
  while (true) {
    std::vector<std::pair<ServingRequest, Status>> refused;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock,
                    [&] { return (!queue_.empty() && busy_ < size()) || busy_ > 0 || closed_; });
      if (closed_ && queue_.empty() && busy_ == 0) return;
      AdmitLocked(&refused);
    }
    for (auto& [r, st] : refused) {
      if (r.on_done) r.on_done(-1, st, false);
    }
    // A request whose client left (or that the server cancels) ends between passes.
    for (Slot& slot : slots_) {
      if (slot.seq && !slot.seq->done() && slot.request.cancelled && slot.request.cancelled()) {
        slot.seq->Cancel();
      }
    }
    Status st = Status::Ok();
    try {
      st = scheduler_.Step();
    } catch (const std::bad_alloc&) {
      st = Status::Error("out of memory while generating");
    } catch (const std::exception& e) {
      st = Status::Error(std::string("generation failed: ") + e.what());
    }
    if (!st.ok()) FailAll(st);
    {
      std::lock_guard<std::mutex> lock(mu_);
      counters_ = scheduler_.counters();
    }
    FinishDone();
  }
}

}  // namespace goose
