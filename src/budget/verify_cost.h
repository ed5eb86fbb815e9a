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
  double seconds = 0;       // median seconds of one pass
  double min_seconds = 0;   // fastest pass
  double matmul_share = 0;  // of the timed passes' time, the share spent in MatMul (0: unknown)
};

struct VerifyCostOptions {
  std::vector<int> nodes = {1, 2, 4, 8, 16, 32, 64, 128};
  int prefix = 256;
  int reps = 5;
  uint64_t seed = 1;
  KvType kv_type = KvType::kF16;  // the timed context's KV cache
  // > prefix: LoadOrMeasureCost also times 1 and kDepthProbeNodes nodes after this many tokens,
  // for the DepthCost; 0: not.
  int deep_prefix = 0;
};
constexpr int kDepthProbeNodes = 16;

StatusOr<std::vector<VerifyCostPoint>> MeasureVerifyCost(const Model& model, ThreadPool* pool,
                                                         const VerifyCostOptions& opt);

// How a pass grows dearer with the tokens already in the KV cache: attention reads every cached
// key and value once per pass (per_key) and scores every row of the pass against each
// (per_row_key), so a pass of N rows at depth d costs c(N, d) = c(N, depth) + (per_key +
// per_row_key * N) * (d - depth), where c(., depth) is the curve measured at `depth`. Unknown
// (known() false): no change with depth.
struct DepthCost {
  int depth = 0;
  double per_key = 0, per_row_key = 0;
  bool known() const { return per_key > 0 || per_row_key > 0; }
  // c(N, d) - c(N, depth) for a pass of `rows` rows at depth d (at least 0 deeper, and no
  // cheaper than at depth 0 shallower).
  double Extra(int rows, int d) const {
    return (per_key + per_row_key * rows) * (std::max(d, 0) - depth);
  }
};

// From the same sizes timed at two depths: c1 (1 row) and cn (n rows) at `shallow` and `deep`
// tokens. Slopes that timing noise made negative are 0.
DepthCost DepthCostFrom(int shallow, int deep, double c1_shallow, double c1_deep, int n,
                        double cn_shallow, double cn_deep);

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
