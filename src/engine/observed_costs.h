// ObservedCosts: what decode cycles of each tree size take on this machine now, for --budget
// auto's curve (engine/budget_chooser.h CorrectCostCurve, docs/methods.md §5.1).
//
// Contract
// - Built on the calibrated curve. Record() takes one cycle's seconds (its pass and the
//   drafter's work around it) and its tree size; sizes the curve does not cover are ignored.
// - Medians(): per size recorded at least kMinCycles times, the median of its last kKept cycles.
// - Curve(): the calibrated curve corrected by Medians(), and for sizes not timed often enough in
//   this run by `prior` (medians of earlier runs, engine/cost_cache.h).
// - Why recent cycles only: on a shared machine small passes (memory-bound) flip between two
//   speeds within seconds while 8-node and larger ones barely move (1.5B-cost model: 4-node
//   cycles 35 or 47 ms, 8-node ones 48-52 ms), so whether 4 or 8 nodes pay depends on the
//   moment. A median of 64 cycles took ~2 runs to follow a flip; 16 cycles take half a second.
//   (Times relative to the machine's recent speed were tried: they assume every size slows
//   alike, and here made 8-node cycles look 1.3x dearer than they were.)
#pragma once

#include <cstddef>
#include <vector>

#include "verify/spec_stats.h"

namespace goose {

class ObservedCosts {
 public:
  static constexpr size_t kKept = 16;
  static constexpr size_t kMinCycles = 4;

  ObservedCosts() = default;
  explicit ObservedCosts(const std::vector<CostSample>& calibrated);
  void Record(int nodes, double seconds);
  std::vector<CostSample> Medians() const;
  std::vector<CostSample> Curve(const std::vector<CostSample>& prior) const;
  size_t cycles() const { return cycles_; }

 private:
  std::vector<CostSample> calibrated_;
  int max_nodes_ = 0;
  struct Ring {
    std::vector<float> t;  // the last kKept cycles
    size_t next = 0;       // where the next one goes
  };
  std::vector<Ring> seconds_;  // [size]
  size_t cycles_ = 0;
};

}  // namespace goose
