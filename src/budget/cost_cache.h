// Verify-cost calibration cached per model, machine and build, for `--budget auto`.
//
// Contract
// - CostCachePath(model_path, threads, kv): $XDG_CACHE_HOME/goose (else ~/.cache/goose, else
//   /tmp/goose-cache) / cost-<hash>-<bytes>-t<threads>[-kvf32].json, where hash is FNV-1a over
//   the file's size and its first and last 64 KiB (cheap, and changes when the model does).
// - CostCacheKey(model_path, threads, kv): what a cached curve is valid for: the model (that
//   hash and size), the thread count, the KV cache's type, the CPU model name, the kernels' ISA
//   level (ops/cpu_features.h) and the goose build (size and modification time of the running
//   binary). Stored in the file.
// - LoadOrMeasureCost(): uses the cache if it parses, its key equals the current key and
//   !recalibrate; otherwise measures (MeasureVerifyCost with CalibrationOptions: nodes 1..128,
//   7 interleaved rounds, the median pass per size, prefix min(256, context - 130); then 1 and
//   16 nodes at min(1024, context - 130) tokens, for how passes grow dearer with depth,
//   DepthCost, when that is at least 256 tokens deeper) and rewrites the cache. A corrupt or
//   mismatching cache is re-measured, never trusted, with the reason in `note` (a warning for the
//   user, as is a failed write). Stored and returned curves are monotone (MakeMonotone).
// - A busy machine must not fix a wrong curve forever. A calibration whose passes varied a lot
//   (median / fastest > 1.25 at a third of the sizes or more) is "noisy" (so is a cache marked
//   "stale" by an older goose) and measured again at the next --budget auto run, up to
//   kMaxCalibrations times in a row, each time keeping per size the faster of the old and the
//   new curve. What real runs' passes took (median per size) is kept beside the curve
//   ("observed", RecordObservedCosts) and corrects it in the next run
//   (Engine::LearnPassCosts); an unreadable "observed" array is dropped alone.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "budget/budget_chooser.h"
#include "budget/verify_cost.h"
#include "model/model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace goose {

StatusOr<std::string> CostCachePath(const std::string& model_path, int threads,
                                    KvType kv = KvType::kF16);
StatusOr<nlohmann::json> CostCacheKey(const std::string& model_path, int threads,
                                      KvType kv = KvType::kF16);

struct CostCalibration {
  std::vector<VerifyCostPoint> curve;
  std::string cache_path;
  bool from_cache = false;
  std::string note;  // why the cache was not used or not written (a warning), else empty
  // Median pass seconds per tree size in earlier runs on this curve (RecordObservedCosts), for
  // Engine::LearnPassCosts; empty if none.
  std::vector<CostSample> observed;
  DepthCost depth;  // how the curve grows with the tokens in the cache (unknown: flat)
};

constexpr int kMaxCalibrations = 3;

// A cost cache file's content once checked.
struct CachedCurve {
  std::vector<VerifyCostPoint> curve;  // monotone, from 1 node
  int calibrations = 1;                // how many measurements it merges (0..kMaxCalibrations)
  bool measure_again = false;          // noisy or stale, and kMaxCalibrations not reached
  std::vector<CostSample> observed;    // the "observed" array; empty if absent or unreadable
  DepthCost depth;                     // the "depth" object; unknown if absent or unreadable
};

// Reads a cost cache file's text against the current `key` (LoadOrMeasureCost's check, pure, so
// that it can be fuzzed): the curve when the file can be trusted (every point {nodes: an integer
// in 1..SpecStats::kMaxTreeNodes, seconds: finite and > 0}, one at 1 node); otherwise why not
// ("measured for another cpu, build" or "unreadable: ..."), for LoadOrMeasureCost's note.
StatusOr<CachedCurve> ParseCostCache(std::string_view text, const nlohmann::json& key);

// `measure`: the measurement options when the cache cannot be used (tests pass tiny ones);
// nullptr = CalibrationOptions(model, kv). kv: the KV cache the engines run with.
StatusOr<CostCalibration> LoadOrMeasureCost(const Model& model, const std::string& model_path,
                                            ThreadPool* pool, bool recalibrate,
                                            const VerifyCostOptions* measure = nullptr,
                                            KvType kv = KvType::kF16);

// After a run on `cal`'s curve: `observed` holds the median pass seconds per tree size seen at
// least a few times in the run (Engine::ObservedPassCosts). They are kept in the cache file's
// "observed" array, each size the mean of its old and new figure (so the latest runs count
// most), for the next run's Engine::LearnPassCosts; a recalibration keeps them. Ok if nothing
// needed writing. (Passes far below the curve do not mark it "stale", to be measured again:
// one 10-25 s pause in a run on a 1.5B model would then cost every later run a calibration; the
// observed times correct the curve instead.)
Status RecordObservedCosts(const CostCalibration& cal, const std::vector<CostSample>& observed);

// The options used for a calibration of `model` (shared with the benchmark's curves).
VerifyCostOptions CalibrationOptions(const Model& model, KvType kv = KvType::kF16);

// The curve of a model used only as a cost model (`goose bench --cost-model`): the calibration
// options (7 reps), made monotone.
StatusOr<std::vector<VerifyCostPoint>> MeasureCostModelCurve(const Model& model, ThreadPool* pool);

std::vector<CostSample> ToCostSamples(const std::vector<VerifyCostPoint>& curve);

// A curve saved as JSON with a "curve" array of {"nodes", "seconds"} (a cost cache file, or
// `goose bench-verify --json`'s output), made monotone; for `goose bench --cost-curve`, which
// projects onto a curve measured elsewhere (another machine, a quiet moment).
StatusOr<std::vector<VerifyCostPoint>> ReadCostCurve(const std::string& path);

}  // namespace goose
