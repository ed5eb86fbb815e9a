// Verify-cost measurement: how long one forward pass over a tree of N nodes takes after a
// prefix already in the KV cache, plus the machine's memory read bandwidth. Used by
// `goose bench-verify` and by the benchmark's cost model and budget chooser.
// Timings are medians over `reps` passes on random tree shapes (fixed seed), after one warm-up.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace goose {

struct VerifyCostPoint {
  int nodes = 0;
  double seconds = 0;  // median seconds of one pass
};

struct VerifyCostOptions {
  std::vector<int> nodes = {1, 2, 4, 8, 16, 32, 64, 128};
  int prefix = 256;
  int reps = 5;
  uint64_t seed = 1;
};

StatusOr<std::vector<VerifyCostPoint>> MeasureVerifyCost(const Model& model, ThreadPool* pool,
                                                         const VerifyCostOptions& opt);

// Read bandwidth in GB/s (1e9 bytes/s): best of a few passes summing a buffer much larger than
// the caches, split across the pool's threads.
double MeasureReadBandwidth(ThreadPool* pool, size_t bytes = size_t{1} << 30);

}  // namespace goose
