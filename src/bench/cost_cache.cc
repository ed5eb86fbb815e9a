#include "bench/cost_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/bench_report.h"
#include "ops/cpu_features.h"
#include "util/escape.h"

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

fs::path CacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "goose";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "goose";
  return fs::path("/tmp") / "goose-cache";
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

std::string CachePathFor(const std::string& model_id, int threads) {
  return (CacheDir() / ("cost-" + model_id + "-t" + std::to_string(threads) + ".json")).string();
}

nlohmann::json CacheKeyFor(const std::string& model_id, int threads) {
  return nlohmann::json{{"model", model_id},
                        {"threads", threads},
                        {"cpu", MachineJson().value("cpu", "unknown")},
                        {"isa", IsaLevel()},
                        {"build", BuildId()}};
}

}  // namespace

StatusOr<std::string> CostCachePath(const std::string& model_path, int threads) {
  GOOSE_ASSIGN_OR_RETURN(const std::string id, ModelId(model_path));
  return CachePathFor(id, threads);
}

StatusOr<nlohmann::json> CostCacheKey(const std::string& model_path, int threads) {
  GOOSE_ASSIGN_OR_RETURN(const std::string id, ModelId(model_path));
  return CacheKeyFor(id, threads);
}

VerifyCostOptions CalibrationOptions(const Model& model) {
  VerifyCostOptions opt;
  opt.nodes = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128};
  opt.reps = 7;
  // Leave room for 128 nodes in small-context models.
  const int ctx = model.config().n_ctx_train > 0 ? model.config().n_ctx_train : 4096;
  opt.prefix = std::max(1, std::min(256, std::min(4096, ctx) - 130));
  return opt;
}

StatusOr<std::vector<VerifyCostPoint>> MeasureCostModelCurve(const Model& model, ThreadPool* pool) {
  GOOSE_ASSIGN_OR_RETURN(std::vector<VerifyCostPoint> curve,
                         MeasureVerifyCost(model, pool, CalibrationOptions(model)));
  MakeMonotone(&curve);
  return curve;
}

std::vector<CostSample> ToCostSamples(const std::vector<VerifyCostPoint>& curve) {
  std::vector<CostSample> out;
  for (const auto& p : curve) out.push_back({p.nodes, p.seconds});
  return out;
}

StatusOr<std::vector<VerifyCostPoint>> ParseCostCache(std::string_view text,
                                                      const nlohmann::json& key) {
  std::vector<VerifyCostPoint> curve;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    const std::string why = KeyDifference(j.contains("key") ? j.at("key") : nlohmann::json(), key);
    if (!why.empty()) return Status::Error("measured for another " + why);
    for (const auto& p : j.at("curve")) {
      // nodes: an integer (get<int> of 1e10 is UB) no larger than a tree goose builds
      // (BudgetChooser allocates [max nodes]^2 counters, the context holds 128-node trees).
      const nlohmann::json& nodes = p.at("nodes");
      const double s = p.at("seconds").get<double>();
      const bool n_ok = nodes.is_number_unsigned()
                            ? nodes.get<uint64_t>() >= 1 &&
                                  nodes.get<uint64_t>() <= SpecStats::kMaxTreeNodes
                            : nodes.is_number_integer() && nodes.get<int64_t>() >= 1 &&
                                  nodes.get<int64_t>() <= SpecStats::kMaxTreeNodes;
      if (!n_ok || !(s > 0) || !std::isfinite(s)) {
        return Status::Error(StrFormat("unreadable: point %s is not {nodes: 1..%d, seconds > 0}",
                                       EscapeForMessage(p.dump(), 80).c_str(),
                                       SpecStats::kMaxTreeNodes));
      }
      curve.push_back({static_cast<int>(nodes.get<int64_t>()), s});
    }
  } catch (const std::exception& e) {
    return Status::Error("unreadable: " + EscapeForMessage(e.what(), 200));
  }
  MakeMonotone(&curve);
  if (curve.empty() || curve.front().nodes != 1) {
    return Status::Error("unreadable: the curve does not start at 1 node");
  }
  return curve;
}

StatusOr<CostCalibration> LoadOrMeasureCost(const Model& model, const std::string& model_path,
                                            ThreadPool* pool, bool recalibrate,
                                            const VerifyCostOptions* measure) {
  CostCalibration cal;
  GOOSE_ASSIGN_OR_RETURN(const std::string model_id, ModelId(model_path));  // read once
  cal.cache_path = CachePathFor(model_id, pool->size());
  const nlohmann::json key = CacheKeyFor(model_id, pool->size());
  if (!recalibrate) {
    std::ifstream in(cal.cache_path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      auto curve = ParseCostCache(text.str(), key);
      if (curve.ok()) {
        cal.curve = std::move(curve).value();
        cal.from_cache = true;
        return cal;
      }
      cal.note = "cost cache " + cal.cache_path + " was " + curve.status().message() +
                 "; re-measuring";
    }
  }
  const VerifyCostOptions options = measure ? *measure : CalibrationOptions(model);
  GOOSE_ASSIGN_OR_RETURN(cal.curve, MeasureVerifyCost(model, pool, options));
  MakeMonotone(&cal.curve);
  nlohmann::json j;
  j["key"] = key;
  j["threads"] = pool->size();
  j["model_bytes"] = model.weight_bytes();
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& p : cal.curve) arr.push_back({{"nodes", p.nodes}, {"seconds", p.seconds}});
  j["curve"] = arr;
  std::error_code ec;
  fs::create_directories(fs::path(cal.cache_path).parent_path(), ec);
  std::ofstream out(cal.cache_path);
  if (out) out << j.dump(1) << "\n";
  if (!out) {
    cal.note += (cal.note.empty() ? "" : "; ") + std::string("could not write cost cache ") +
                cal.cache_path;
  }
  return cal;
}

}  // namespace goose
