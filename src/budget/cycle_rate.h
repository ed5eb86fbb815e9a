// CycleRate: the tokens per second a drafter's cycles achieve (Propose to Observe: drafting, the
// target pass, the walk), from exponential moving averages (weight 1/16, the first cycle as is)
// of a cycle's seconds and committed tokens; 0 before the first cycle.
// Why: under --budget auto a drafter cuts each tree at the size s maximising
// E(s) - rate * c(s) (tree/size_cut.h SizeScore), the renewal-reward optimum
// (Dinkelbach) for the tokens per second of the whole run, which is this rate.
#pragma once

#include <cstdint>

namespace goose {

struct CycleRate {
  static constexpr double kEma = 1.0 / 16;
  double seconds = 0, tokens = 0;
  int64_t cycles = 0;

  void Add(double cycle_seconds, int committed) {
    if (cycles++ == 0) {
      seconds = cycle_seconds;
      tokens = committed;
      return;
    }
    seconds += kEma * (cycle_seconds - seconds);
    tokens += kEma * (committed - tokens);
  }
  double TokensPerSecond() const { return cycles > 0 && seconds > 0 ? tokens / seconds : 0.0; }
};

}  // namespace goose
