// ObservedCosts: what decode cycles of each tree size take on this machine now, for --budget
// auto's curve (budget/budget_chooser.h CorrectCostCurve, docs/methods.md §5.1).
//
// Contract
// - Built on the calibrated curve. Record() takes one cycle's seconds (its pass and the
//   drafter's work around it) and its tree size; sizes the curve does not cover are ignored.
// - Medians(): per size recorded at least kMinCycles times, the median of its last kKept cycles.
// - Curve(): the calibrated curve corrected by Medians(), and for sizes not timed often enough in
//   this run by `prior` (medians of earlier runs, budget/cost_cache.h).
// - Why recent cycles only: on a shared machine small passes (memory-bound) flip between two
//   speeds within seconds while 8-node and larger ones barely move (1.5B-cost model: 4-node
//   cycles 35 or 47 ms, 8-node ones 48-52 ms), so whether 4 or 8 nodes pay depends on the
//   moment. A median of 64 cycles took ~2 runs to follow a flip; 16 cycles take half a second.
//   (Times relative to the machine's recent speed were tried: they assume every size slows
//   alike, and here made 8-node cycles look 1.3x dearer than they were.)
// - ExploreCurve(): for the drafters that cut their own trees on the curve (tuned GOOSE, graft),
//   which never try a size the curve prices out: a curve that makes them build the calibrated
//   size next above (up) or below the last cycle's, so that a figure taken in a slow moment
//   cannot keep a size out for good (graft on the 0.44B-cost pair: 8-node cycles timed at 26 ms
//   once, 20 ms now, and every later run cut its trees to 4 nodes at 0.95x goose's speed).
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
  // The prior (medians of earlier runs) counts as one cycle of each of its sizes, so that a size
  // run now and then (explored) has its kMinCycles sooner.
  void Seed(const std::vector<CostSample>& prior);
  std::vector<CostSample> Medians() const;
  std::vector<CostSample> Curve(const std::vector<CostSample>& prior) const;
  size_t cycles() const { return cycles_; }

  // `curve` (sorted, as Curve gives it) cut at the explored size e: up, e = the first size above
  // `last_size`, priced as the largest size up to last_size; down, e = the last size below it
  // (at least 2). `curve` itself when there is no such size.
  static std::vector<CostSample> ExploreCurve(const std::vector<CostSample>& curve, int last_size,
                                              bool up);

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
