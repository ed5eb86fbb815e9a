// Verify-cost calibration cached per model and machine, for `--budget auto`.
//
// Contract
// - CostCachePath(model_path, threads): $XDG_CACHE_HOME/goose (else ~/.cache/goose, else
//   /tmp/goose-cache) / cost-<hash>-<bytes>-t<threads>.json, where hash is FNV-1a over the
//   file's size and its first and last 64 KiB (cheap, and changes when the model does).
// - LoadOrMeasureCost(): reads the cache if it is valid and !recalibrate; otherwise runs
//   MeasureVerifyCost (nodes 1..128, prefix min(256, context/2)) and writes the cache
//   (a failed write is reported through `note`, not an error). A corrupt cache file is
//   re-measured, never trusted.
#pragma once

#include <string>
#include <vector>

#include "bench/verify_cost.h"
#include "engine/budget_chooser.h"
#include "model/model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace goose {

StatusOr<std::string> CostCachePath(const std::string& model_path, int threads);

struct CostCalibration {
  std::vector<VerifyCostPoint> curve;
  std::string cache_path;
  bool from_cache = false;
  std::string note;  // e.g. why the cache was not written
};

StatusOr<CostCalibration> LoadOrMeasureCost(const Model& model, const std::string& model_path,
                                            ThreadPool* pool, bool recalibrate);

// The options used for a calibration of `model` (shared with the benchmark's curves).
VerifyCostOptions CalibrationOptions(const Model& model);

std::vector<CostSample> ToCostSamples(const std::vector<VerifyCostPoint>& curve);

}  // namespace goose
