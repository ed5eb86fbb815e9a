#include "server/slot_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace goose::server {
namespace {

// A gate jobs wait at until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return open; });
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

void WaitBusy(const SlotPool& pool, int n) {
  while (pool.busy() != n) std::this_thread::yield();
}

TEST(SlotPool, QueueIsBoundedBeyondTheSlots) {
  SlotPool pool(2, 1);
  Gate gate;
  std::atomic<int> ran{0};
  auto job = [&](int) {
    gate.Wait();
    ++ran;
  };
  EXPECT_EQ(pool.Submit(job), SlotPool::Admit::kQueued);
  EXPECT_EQ(pool.Submit(job), SlotPool::Admit::kQueued);
  WaitBusy(pool, 2);
  EXPECT_EQ(pool.Submit(job), SlotPool::Admit::kQueued);  // waits
  EXPECT_EQ(pool.queued(), 1);
  EXPECT_EQ(pool.Submit(job), SlotPool::Admit::kQueueFull);
  gate.Open();
  EXPECT_TRUE(pool.WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(ran.load(), 3);  // the refused job never ran
}

TEST(SlotPool, RunsInArrivalOrderOnDistinctSlots) {
  SlotPool pool(1, 10);
  Gate gate;
  std::mutex mu;
  std::vector<int> order;
  std::vector<int> slots;
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(pool.Submit([&, i](int slot) {
      if (i == 0) gate.Wait();
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
      slots.push_back(slot);
    }),
              SlotPool::Admit::kQueued);
  }
  gate.Open();
  ASSERT_TRUE(pool.WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(slots, (std::vector<int>(5, 0)));
}

TEST(SlotPool, CloseRefusesButQueuedJobsStillRun) {
  SlotPool pool(1, 4);
  Gate gate;
  std::atomic<int> ran{0};
  ASSERT_EQ(pool.Submit([&](int) {
    gate.Wait();
    ++ran;
  }),
            SlotPool::Admit::kQueued);
  ASSERT_EQ(pool.Submit([&](int) { ++ran; }), SlotPool::Admit::kQueued);
  pool.Close();
  EXPECT_EQ(pool.Submit([&](int) { ++ran; }), SlotPool::Admit::kClosed);
  EXPECT_FALSE(pool.WaitIdle(std::chrono::steady_clock::now() + std::chrono::milliseconds(20)));
  gate.Open();
  pool.Stop();
  EXPECT_EQ(ran.load(), 2);
}

TEST(SlotPool, AThrowingJobDoesNotTakeItsSlot) {
  SlotPool pool(1, 4);
  ASSERT_EQ(pool.Submit([](int) { throw std::runtime_error("boom"); }), SlotPool::Admit::kQueued);
  std::atomic<bool> ran{false};
  ASSERT_EQ(pool.Submit([&](int) { ran = true; }), SlotPool::Admit::kQueued);
  ASSERT_TRUE(pool.WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  EXPECT_TRUE(ran.load());
}

}  // namespace
}  // namespace goose::server
