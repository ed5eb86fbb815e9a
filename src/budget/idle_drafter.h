// IdleDrafter: under --budget auto, plain steps at the price of plain decoding.
//
// A cycle whose tree is the root alone drafted nothing, so the drafter's work in it (proposing,
// harvesting the row) was pure overhead. Once kMinStreak cycles in a row drafted nothing (the
// text or the model is where nothing pays, not one unlucky cycle), and where that overhead is a
// noticeable share of a plain pass (a small model's pass takes tens of microseconds: on the tiny
// model ~10% per cycle, and auto ran at 0.88x plain decoding), the engine runs the next cycles as
// plain steps the drafter does not see (it still gets every committed token), as many as keep
// the drafter's share of those passes under kShare. A model whose pass takes milliseconds never
// skips a cycle; nor does a draft model's method whose empty cycles are sporadic.
// Output never depends on it: only what the drafter learns and proposes does.
#pragma once

#include <algorithm>

namespace goose {

class IdleDrafter {
 public:
  static constexpr double kShare = 0.004;  // the tiny model: 1 cycle in ~25 asks
  static constexpr int kMaxSkip = 32;
  // 4, not 8: on the tiny model each drafted tree restarts the streak, and 8 asked cycles after
  // each kept 11-15% of its cycles asking (0.975x against 0.987x plain decoding, six runs each).
  static constexpr int kMinStreak = 4;

  // True when this cycle is to be a plain step without the drafter.
  bool Skip() {
    if (skip_ == 0) return false;
    --skip_;
    return true;
  }
  // A cycle that asked the drafter and scored the root alone: the drafter's and the pass's time.
  void RootOnly(double drafter_seconds, double pass_seconds) {
    if (pass_seconds <= 0) return;
    const double r = drafter_seconds / pass_seconds;
    ratio_ = ratio_ == 0 ? r : 0.75 * ratio_ + 0.25 * r;  // (timer noise: one slow cycle)
    if (++streak_ >= kMinStreak) skip_ = std::min(kMaxSkip, static_cast<int>(ratio_ / kShare));
  }
  // A cycle that drafted: the next one asks the drafter.
  void Drafted() { skip_ = streak_ = 0; }

 private:
  double ratio_ = 0;  // drafter seconds / pass seconds of the root-only cycles (moving average)
  int skip_ = 0;
  int streak_ = 0;  // asked cycles in a row that drafted nothing
};

}  // namespace goose
