#include "budget/cost_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ops/cpu_features.h"
#include "util/escape.h"
#include "util/files.h"

namespace goose {

namespace {

namespace fs = std::filesystem;

uint64_t Fnv1a(const char* data, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

// "<hash>-<bytes>": FNV-1a over the model file's size and its first and last 64 KiB (hex), and
// the size. Names the cache file and is the key's "model".
StatusOr<std::string> ModelId(const std::string& model_path) {
  std::ifstream in(model_path, std::ios::binary);
  if (!in) return Status::Error("cannot read model '" + model_path + "' to key the cost cache");
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  constexpr uint64_t kChunk = 64 * 1024;
  std::string buf(std::min(size, kChunk), '\0');
  uint64_t h = Fnv1a(reinterpret_cast<const char*>(&size), sizeof(size), 14695981039346656037ull);
  in.seekg(0);
  in.read(buf.data(), buf.size());
  h = Fnv1a(buf.data(), buf.size(), h);
  in.seekg(static_cast<std::streamoff>(size - buf.size()));
  in.read(buf.data(), buf.size());
  h = Fnv1a(buf.data(), buf.size(), h);
  if (!in) return Status::Error("cannot read model '" + model_path + "' to key the cost cache");
  char id[64];
  std::snprintf(id, sizeof(id), "%016llx-%llu", static_cast<unsigned long long>(h),
                static_cast<unsigned long long>(size));
  return std::string(id);
}

// The running binary's size and modification time: a rebuilt goose (other kernels, other
// flags) re-measures. "unknown" where /proc/self/exe cannot be read.
std::string BuildId() {
  struct stat st {};
  if (::stat("/proc/self/exe", &st) != 0) return "unknown";
  char b[64];
  std::snprintf(b, sizeof(b), "%lld-%lld.%09ld", static_cast<long long>(st.st_size),
                static_cast<long long>(st.st_mtim.tv_sec), static_cast<long>(st.st_mtim.tv_nsec));
  return b;
}

std::string IsaLevel() {
  std::string isa = CpuLevelName(ActiveCpuLevel());
  if (ActiveCpuLevel() == CpuLevel::kAvx512 && HasAvx512Vnni()) isa += "+vnni";
  return isa;
}

// Where `cached` differs from `want`, by field name ("cpu, build"); empty if equal.
std::string KeyDifference(const nlohmann::json& cached, const nlohmann::json& want) {
  std::string diff;
  for (const auto& [field, value] : want.items()) {
    if (!cached.is_object() || !cached.contains(field) || cached.at(field) != value) {
      diff += (diff.empty() ? "" : ", ") + field;
    }
  }
  return diff;
}

std::string CachePathFor(const std::string& model_id, int threads, KvType kv) {
  const std::string name = "cost-" + model_id + "-t" + std::to_string(threads) +
                           (kv == KvType::kF16 ? "" : std::string("-kv") + KvTypeName(kv));
  return (fs::path(GooseCacheDir()) / (name + ".json")).string();
}

nlohmann::json CacheKeyFor(const std::string& model_id, int threads, KvType kv) {
  return nlohmann::json{{"model", model_id},     {"threads", threads}, {"kv", KvTypeName(kv)},
                        {"cpu", CpuModelName()}, {"isa", IsaLevel()},  {"build", BuildId()}};
}

}  // namespace

StatusOr<std::string> CostCachePath(const std::string& model_path, int threads, KvType kv) {
  GOOSE_ASSIGN_OR_RETURN(const std::string id, ModelId(model_path));
  return CachePathFor(id, threads, kv);
}

StatusOr<nlohmann::json> CostCacheKey(const std::string& model_path, int threads, KvType kv) {
  GOOSE_ASSIGN_OR_RETURN(const std::string id, ModelId(model_path));
  return CacheKeyFor(id, threads, kv);
}

VerifyCostOptions CalibrationOptions(const Model& model, KvType kv) {
  VerifyCostOptions opt;
  opt.kv_type = kv;
  opt.nodes = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128};
  opt.reps = 7;
  // Leave room for 128 nodes in small-context models.
  const int ctx = model.config().n_ctx_train > 0 ? model.config().n_ctx_train : 4096;
  opt.prefix = std::max(1, std::min(256, std::min(4096, ctx) - 130));
  const int deep = std::min(1024, ctx - 130);
  opt.deep_prefix = deep >= opt.prefix + 256 ? deep : 0;
  return opt;
}

StatusOr<std::vector<VerifyCostPoint>> MeasureCostModelCurve(const Model& model, ThreadPool* pool) {
  GOOSE_ASSIGN_OR_RETURN(std::vector<VerifyCostPoint> curve,
                         MeasureVerifyCost(model, pool, CalibrationOptions(model)));
  MakeMonotone(&curve);  // the medians: see verify_cost.h
  return curve;
}

std::vector<CostSample> ToCostSamples(const std::vector<VerifyCostPoint>& curve) {
  std::vector<CostSample> out;
  for (const auto& p : curve) out.push_back({p.nodes, p.seconds});
  return out;
}

namespace {

// Points as the cache file's {"nodes", "seconds"} array.
nlohmann::json SamplesJson(const std::vector<CostSample>& samples) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& p : samples) arr.push_back({{"nodes", p.nodes}, {"seconds", p.seconds}});
  return arr;
}

// The cache file's JSON for `curve`.
nlohmann::json CacheJson(const nlohmann::json& key, int threads, uint64_t model_bytes,
                         const std::vector<VerifyCostPoint>& curve, bool noisy, int calibrations,
                         const std::vector<CostSample>& observed, const DepthCost& depth) {
  nlohmann::json j;
  j["key"] = key;
  j["threads"] = threads;
  j["model_bytes"] = model_bytes;
  j["noisy"] = noisy;
  j["calibrations"] = calibrations;
  j["curve"] = SamplesJson(ToCostSamples(curve));
  if (!observed.empty()) j["observed"] = SamplesJson(observed);
  if (depth.known()) {
    j["depth"] = {
        {"depth", depth.depth}, {"per_key", depth.per_key}, {"per_row_key", depth.per_row_key}};
  }
  return j;
}

// The curve's sizes 1 and kDepthProbeNodes timed again opt.deep_prefix tokens deep (a context of
// that depth, rounds as the curve's).
StatusOr<DepthCost> MeasureDepthCost(const Model& model, ThreadPool* pool,
                                     const VerifyCostOptions& opt,
                                     const std::vector<VerifyCostPoint>& curve) {
  auto at = [](const std::vector<VerifyCostPoint>& c, int nodes) {
    for (const VerifyCostPoint& p : c) {
      if (p.nodes == nodes) return p.seconds;
    }
    return 0.0;
  };
  if (opt.deep_prefix <= opt.prefix || at(curve, 1) <= 0 || at(curve, kDepthProbeNodes) <= 0) {
    return DepthCost{};
  }
  VerifyCostOptions deep = opt;
  deep.prefix = opt.deep_prefix;
  deep.nodes = {1, kDepthProbeNodes};
  GOOSE_ASSIGN_OR_RETURN(const std::vector<VerifyCostPoint> d,
                         MeasureVerifyCost(model, pool, deep));
  return DepthCostFrom(opt.prefix, opt.deep_prefix, at(curve, 1), at(d, 1), kDepthProbeNodes,
                       at(curve, kDepthProbeNodes), at(d, kDepthProbeNodes));
}

// A measured curve varied a lot between passes: median / fastest > 1.25 at a third of the sizes.
bool Noisy(const std::vector<VerifyCostPoint>& curve) {
  int spread = 0;
  for (const auto& p : curve) spread += p.min_seconds > 0 && p.seconds > 1.25 * p.min_seconds;
  return 3 * spread >= static_cast<int>(curve.size());
}

}  // namespace

namespace {

// An array of points of a cost file, each {nodes: an integer in 1..kMaxTreeNodes (get<int> of
// 1e10 is UB; BudgetChooser allocates [max nodes]^2 counters), seconds: finite and > 0}, as
// they are. Throws nlohmann's exceptions on a wrong shape.
StatusOr<std::vector<VerifyCostPoint>> Points(const nlohmann::json& arr) {
  std::vector<VerifyCostPoint> curve;
  if (!arr.is_array()) return Status::Error("unreadable: not an array of points");
  for (const auto& p : arr) {
    const nlohmann::json& nodes = p.at("nodes");
    const double s = p.at("seconds").get<double>();
    const bool n_ok =
        nodes.is_number_unsigned()
            ? nodes.get<uint64_t>() >= 1 && nodes.get<uint64_t>() <= SpecStats::kMaxTreeNodes
            : nodes.is_number_integer() && nodes.get<int64_t>() >= 1 &&
                  nodes.get<int64_t>() <= SpecStats::kMaxTreeNodes;
    if (!n_ok || !(s > 0) || !std::isfinite(s)) {
      return Status::Error(StrFormat("unreadable: point %s is not {nodes: 1..%d, seconds > 0}",
                                     EscapeForMessage(p.dump(), 80).c_str(),
                                     SpecStats::kMaxTreeNodes));
    }
    curve.push_back({static_cast<int>(nodes.get<int64_t>()), s});
  }
  return curve;
}

// The "curve" array of a cost file: Points, one at 1 node; made monotone.
StatusOr<std::vector<VerifyCostPoint>> CurvePoints(const nlohmann::json& arr) {
  GOOSE_ASSIGN_OR_RETURN(std::vector<VerifyCostPoint> curve, Points(arr));
  MakeMonotone(&curve);
  if (curve.empty() || curve.front().nodes != 1) {
    return Status::Error("unreadable: the curve does not start at 1 node");
  }
  return curve;
}

// The "depth" object of a cost file's JSON `j`: unknown if absent or unreadable (finite slopes
// >= 0, a depth in 0..2^24), which only costs the depth correction.
DepthCost DepthPoint(const nlohmann::json& j) {
  const auto it = j.find("depth");
  if (it == j.end() || !it->is_object()) return {};
  try {
    if (!it->at("depth").is_number_integer()) return {};  // (get<int64_t> of 1e30 is UB)
    const int64_t depth = it->at("depth").get<int64_t>();
    DepthCost d{static_cast<int>(depth), it->at("per_key").get<double>(),
                it->at("per_row_key").get<double>()};
    const bool ok = depth >= 0 && depth <= (1 << 24) && std::isfinite(d.per_key) &&
                    std::isfinite(d.per_row_key) && d.per_key >= 0 && d.per_row_key >= 0;
    return ok ? d : DepthCost{};
  } catch (const std::exception&) {
    return {};
  }
}

// The "observed" array of a cost file's JSON `j`; empty if absent or if any point is unreadable
// (the curve still serves).
std::vector<CostSample> ObservedPoints(const nlohmann::json& j) {
  if (!j.contains("observed")) return {};
  try {
    auto points = Points(j.at("observed"));
    if (points.ok()) return ToCostSamples(*points);
  } catch (const std::exception&) {
  }
  return {};
}

}  // namespace

StatusOr<CachedCurve> ParseCostCache(std::string_view text, const nlohmann::json& key) {
  CachedCurve cached;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    const std::string why = KeyDifference(j.contains("key") ? j.at("key") : nlohmann::json(), key);
    if (!why.empty()) return Status::Error("measured for another " + why);
    GOOSE_ASSIGN_OR_RETURN(cached.curve, CurvePoints(j.at("curve")));
    const nlohmann::json& n = j.contains("calibrations") ? j.at("calibrations") : nlohmann::json(1);
    cached.calibrations =
        n.is_number_integer()
            ? static_cast<int>(std::clamp<int64_t>(n.get<int64_t>(), 0, kMaxCalibrations))
            : 1;
    auto flag = [&j](const char* name) {
      return j.contains(name) && j.at(name).is_boolean() && j.at(name).get<bool>();
    };
    cached.measure_again =
        (flag("noisy") || flag("stale")) && cached.calibrations < kMaxCalibrations;
    // Pass times of real runs: any unreadable point drops them all (the curve still serves).
    cached.observed = ObservedPoints(j);
    cached.depth = DepthPoint(j);
  } catch (const std::exception& e) {
    return Status::Error("unreadable: " + EscapeForMessage(e.what(), 200));
  }
  return cached;
}

StatusOr<CostCalibration> LoadOrMeasureCost(const Model& model, const std::string& model_path,
                                            ThreadPool* pool, bool recalibrate,
                                            const VerifyCostOptions* measure, KvType kv) {
  CostCalibration cal;
  GOOSE_ASSIGN_OR_RETURN(const std::string model_id, ModelId(model_path));  // read once
  cal.cache_path = CachePathFor(model_id, pool->size(), kv);
  const nlohmann::json key = CacheKeyFor(model_id, pool->size(), kv);
  std::vector<VerifyCostPoint> previous;  // a noisy or stale cache's curve, merged below
  int calibrations = 0;
  if (!recalibrate) {
    std::ifstream in(cal.cache_path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      auto cached = ParseCostCache(text.str(), key);
      if (cached.ok()) cal.observed = std::move(cached->observed);
      if (cached.ok() && !cached->measure_again) {
        cal.depth = cached->depth;
        cal.curve = std::move(cached->curve);
        cal.from_cache = true;
        return cal;
      }
      if (cached.ok()) {
        previous = std::move(cached->curve);
        calibrations = cached->calibrations;
        cal.note = "the cached cost curve was measured on a busy machine; measuring again";
      } else {
        cal.note =
            "cost cache " + cal.cache_path + " was " + cached.status().message() + "; re-measuring";
      }
    }
  }
  const VerifyCostOptions options = measure ? *measure : CalibrationOptions(model, kv);
  GOOSE_ASSIGN_OR_RETURN(cal.curve, MeasureVerifyCost(model, pool, options));
  const bool noisy = Noisy(cal.curve);
  for (VerifyCostPoint& p : cal.curve) {  // the medians: see verify_cost.h
    for (const VerifyCostPoint& q : previous) {
      if (q.nodes == p.nodes) p.seconds = std::min(p.seconds, q.seconds);
    }
  }
  MakeMonotone(&cal.curve);
  GOOSE_ASSIGN_OR_RETURN(cal.depth, MeasureDepthCost(model, pool, options, cal.curve));
  const nlohmann::json j = CacheJson(key, pool->size(), model.weight_bytes(), cal.curve, noisy,
                                     calibrations + 1, cal.observed, cal.depth);
  if (!WriteFileAtomically(cal.cache_path, j.dump(1) + "\n").ok()) {
    cal.note += (cal.note.empty() ? "" : "; ") + std::string("could not write cost cache ") +
                cal.cache_path;
  }
  return cal;
}

Status RecordObservedCosts(const CostCalibration& cal, const std::vector<CostSample>& observed) {
  // (The curve is sorted by nodes: MakeMonotone.)
  const int max_nodes = cal.curve.empty() ? 0 : cal.curve.back().nodes;
  std::vector<CostSample> seen;  // sizes the curve has, with a usable time
  for (const CostSample& o : observed) {
    if (o.nodes < 1 || o.nodes > max_nodes || !(o.seconds > 0) || !std::isfinite(o.seconds)) {
      continue;
    }
    seen.push_back(o);
  }
  if (seen.empty()) return Status::Ok();
  // The file as it is now (another process may have written it since this one read it).
  std::ifstream in(cal.cache_path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception&) {
    return Status::Ok();  // gone or replaced meanwhile: nothing to add to
  }
  if (!j.is_object()) return Status::Ok();
  std::vector<CostSample> kept = ObservedPoints(j);
  for (const CostSample& o : seen) {
    auto it = std::find_if(kept.begin(), kept.end(),
                           [&](const CostSample& k) { return k.nodes == o.nodes; });
    if (it == kept.end()) {
      kept.push_back(o);
    } else {
      it->seconds = 0.5 * (it->seconds + o.seconds);
    }
  }
  std::sort(kept.begin(), kept.end(),
            [](const CostSample& a, const CostSample& b) { return a.nodes < b.nodes; });
  j["observed"] = SamplesJson(kept);
  return WriteFileAtomically(cal.cache_path, j.dump(1) + "\n");
}

StatusOr<std::vector<VerifyCostPoint>> ReadCostCurve(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read cost curve '" + path + "'");
  try {
    auto curve = CurvePoints(nlohmann::json::parse(in).at("curve"));
    if (!curve.ok())
      return Status::Error("cost curve '" + path + "' is " + curve.status().message());
    return curve;
  } catch (const std::exception& e) {
    return Status::Error("cost curve '" + path +
                         "' is not a JSON object with a \"curve\" array "
                         "of {\"nodes\", \"seconds\"}: " +
                         EscapeForMessage(e.what(), 200));
  }
}

}  // namespace goose
