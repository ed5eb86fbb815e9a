// Verify-cost measurement: how long one forward pass over a tree of N nodes takes after a
// prefix already in the KV cache. The curve `--budget auto` chooses budgets on (cost_cache.h),
// and what `goose bench-verify` and the benchmark's cost model report.
// Every size is timed once per round over `reps` rounds (after a warm-up round), sizes
// interleaved so that load from other processes hits them alike; each point keeps the median
// and the minimum. The calibration for --budget auto uses the median: the minimum is biased by
// size on a machine whose memory bandwidth is shared, since a small (memory-bound) pass gains
// far more from a quiet moment than a big (compute-bound) one (1.5B-cost model: fastest passes
// c(8)/c(4) = 1.36, medians 1.06, real runs' medians 0.9-1.1).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace goose {

struct VerifyCostPoint {
  int nodes = 0;
  double seconds = 0;      // median seconds of one pass
  double min_seconds = 0;  // fastest pass
  double matmul_share = 0;  // of the timed passes' time, the share spent in MatMul (0: unknown)
};

struct VerifyCostOptions {
  std::vector<int> nodes = {1, 2, 4, 8, 16, 32, 64, 128};
  int prefix = 256;
  int reps = 5;
  uint64_t seed = 1;
};

StatusOr<std::vector<VerifyCostPoint>> MeasureVerifyCost(const Model& model, ThreadPool* pool,
                                                         const VerifyCostOptions& opt);

// Makes a measured curve non-decreasing in place (sorted by nodes; every point lowered to the
// cheapest time of any point at or above its node count, the suffix minimum): a larger tree never
// costs less, since a smaller one could be padded, so timing noise cannot make c(12) > c(16).
// For any point with `nodes` and `seconds` (VerifyCostPoint, CostSample).
template <class Point>
void MakeMonotone(std::vector<Point>* curve) {
  std::stable_sort(curve->begin(), curve->end(),
                   [](const Point& a, const Point& b) { return a.nodes < b.nodes; });
  for (size_t i = curve->size(); i-- > 1;) {
    (*curve)[i - 1].seconds = std::min((*curve)[i - 1].seconds, (*curve)[i].seconds);
  }
}

}  // namespace goose
