#include "engine/learned_cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/files.h"
#include "util/rng.h"

namespace goose {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'G', 'O', 'O', 'S', 'E', 'L', 'R', 'N'};
// 2: the tuned GOOSE extras always end in the per-step value calibration, and the draft-model
// methods' extras are never empty. 3: statistics count a prediction source and tuned GOOSE a
// prediction spine class. Older files are a fresh start, with a warning.
constexpr uint32_t kVersion = 3;

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void PutBytes(std::string* out, const std::string& bytes) {
  Put<uint64_t>(out, bytes.size());
  out->append(bytes);
}

// Bounds-checked reads from a file's bytes; the first failure sticks and names the offset.
struct Reader {
  explicit Reader(std::string_view d) : data(d) {}
  std::string_view data;
  size_t off = 0;
  std::string error;

  template <typename T>
  bool Get(T* v, const char* what) {
    if (!error.empty()) return false;
    if (data.size() - off < sizeof(T)) {
      error = StrFormat("truncated at offset %zu reading %s", off, what);
      return false;
    }
    std::memcpy(v, data.data() + off, sizeof(T));
    off += sizeof(T);
    return true;
  }
  bool GetBytes(std::string_view* v, const char* what) {
    uint64_t n = 0;
    if (!Get(&n, what)) return false;
    if (n > data.size() - off) {
      error = StrFormat("truncated at offset %zu: %s needs %llu bytes", off, what,
                        static_cast<unsigned long long>(n));
      return false;
    }
    *v = data.substr(off, n);
    off += n;
    return true;
  }
};

std::string EncodeBudgets(const BudgetHistory& h) {
  std::string out;
  Put<uint32_t>(&out, static_cast<uint32_t>(h.at.size()));
  for (const auto& [budget, e] : h.at) {
    Put<int32_t>(&out, budget);
    Put<int64_t>(&out, e.cycles);
    Put<double>(&out, e.committed);
    Put<uint32_t>(&out, static_cast<uint32_t>(e.tree_nodes.size()));
    for (int64_t n : e.tree_nodes) Put<int64_t>(&out, n);
  }
  Put<double>(&out, h.calibration_committed);
  Put<double>(&out, h.calibration_predicted);
  Put<int64_t>(&out, h.calibration_cycles);
  return out;
}

Status DecodeBudgets(std::string_view bytes, BudgetHistory* out) {
  Reader r(bytes);
  BudgetHistory h;
  uint32_t n = 0;
  r.Get(&n, "budget count");
  if (r.error.empty() && n > static_cast<uint32_t>(SpecStats::kMaxTreeNodes)) {
    return Status::Error(StrFormat("%u budgets (at most %d)", n, SpecStats::kMaxTreeNodes));
  }
  for (uint32_t i = 0; i < n && r.error.empty(); ++i) {
    int32_t budget = 0;
    uint32_t sizes = 0;
    BudgetHistory::Entry e;
    r.Get(&budget, "budget");
    r.Get(&e.cycles, "cycles");
    r.Get(&e.committed, "committed tokens");
    r.Get(&sizes, "tree sizes");
    if (!r.error.empty()) break;
    if (budget < 1 || budget > SpecStats::kMaxTreeNodes || e.cycles < 0 || !(e.committed >= 0) ||
        !std::isfinite(e.committed) || sizes != SpecStats::kMaxTreeNodes + 1 ||
        h.at.count(budget)) {
      return Status::Error(StrFormat("bad entry for budget %d", budget));
    }
    e.tree_nodes.resize(sizes);
    for (int64_t& c : e.tree_nodes) {
      if (r.Get(&c, "tree size count") && c < 0) return Status::Error("negative tree size count");
    }
    h.at[budget] = std::move(e);
  }
  r.Get(&h.calibration_committed, "calibration");
  r.Get(&h.calibration_predicted, "calibration");
  r.Get(&h.calibration_cycles, "calibration");
  if (!r.error.empty()) return Status::Error(r.error);
  if (r.off != bytes.size()) return Status::Error("trailing bytes");
  if (!(h.calibration_committed >= 0) || !(h.calibration_predicted >= 0) ||
      !std::isfinite(h.calibration_committed) || !std::isfinite(h.calibration_predicted) ||
      h.calibration_cycles < 0) {
    return Status::Error("bad calibration");
  }
  *out = std::move(h);
  return Status::Ok();
}

// A SpecStats is 64-bit counters only; each must be a count.
Status DecodeStats(std::string_view bytes, SpecStats* out) {
  static_assert(sizeof(SpecStats) % sizeof(int64_t) == 0);
  if (bytes.size() != sizeof(SpecStats)) {
    return Status::Error(
        StrFormat("statistics of %zu bytes, expected %zu", bytes.size(), sizeof(SpecStats)));
  }
  std::vector<int64_t> counts(sizeof(SpecStats) / sizeof(int64_t));
  std::memcpy(counts.data(), bytes.data(), bytes.size());
  for (int64_t c : counts) {
    if (c < 0) return Status::Error("a negative count in the statistics");
  }
  std::memcpy(static_cast<void*>(out), counts.data(), bytes.size());
  return Status::Ok();
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::Error("read failed");
  return ss.str();
}

uint64_t DirBytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  }
  return total;
}

}  // namespace

LearnedCache::LearnedCache(std::string dir, uint64_t fingerprint, uint64_t max_bytes)
    : dir_(std::move(dir)),
      model_dir_((fs::path(dir_) /
                  StrFormat("learned-%016llx", static_cast<unsigned long long>(fingerprint)))
                     .string()),
      fingerprint_(fingerprint),
      max_bytes_(max_bytes) {}

void LearnedCache::Warn(const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  warnings_.push_back(message);
}

std::vector<std::string> LearnedCache::TakeWarnings() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(warnings_, {});
}

void LearnedCache::Load(const SpecParams& spec, Learned* learned) {
  const std::string key = LearnedKey(spec);
  const std::string base = (fs::path(model_dir_) / key).string();
  std::error_code ec;
  if (learned->table && MethodOf(spec).KeepsTable(spec) && fs::exists(base + ".table", ec)) {
    // TransitionTable::Load leaves the table unchanged on error.
    if (Status st = learned->table->Load(base + ".table"); !st.ok()) {
      Warn("ignored the table cache (" + st.message() + "); starting with a fresh table");
    }
  }
  const std::string path = base + ".state";
  if (!fs::exists(path, ec)) return;
  auto bytes = ReadFile(path);
  auto fail = [&](const std::string& why) {
    Warn("ignored the learned-state cache " + path + " (" + why + "); starting fresh");
  };
  if (!bytes.ok()) return fail(bytes.status().message());
  Reader r(*bytes);
  char magic[8];
  uint32_t version = 0, key_len = 0;
  uint64_t fingerprint = 0;
  for (char& c : magic) r.Get(&c, "magic");
  if (r.error.empty() && std::memcmp(magic, kMagic, 8) != 0) return fail("not a goose state file");
  r.Get(&version, "version");
  if (r.error.empty() && version != kVersion) {
    return fail(StrFormat("format version %u, expected %u", version, kVersion));
  }
  r.Get(&fingerprint, "model fingerprint");
  if (r.error.empty() && fingerprint != fingerprint_) return fail("saved for another model");
  r.Get(&key_len, "variant length");
  if (r.error.empty() && (key_len != key.size() || r.data.size() - r.off < key_len ||
                          r.data.substr(r.off, key_len) != key)) {
    return fail("saved for another variant");
  }
  r.off += key_len;
  std::string_view stats_bytes, budget_bytes, extra_bytes;
  r.GetBytes(&stats_bytes, "statistics");
  r.GetBytes(&budget_bytes, "budget history");
  r.GetBytes(&extra_bytes, "method state");
  if (!r.error.empty()) return fail(r.error);
  if (r.off != r.data.size()) return fail("trailing bytes");
  SpecStats stats;
  BudgetHistory budgets;
  if (Status st = DecodeStats(stats_bytes, &stats); !st.ok()) return fail(st.message());
  if (Status st = DecodeBudgets(budget_bytes, &budgets); !st.ok()) return fail(st.message());
  if (Status st = learned->LoadExtra(extra_bytes); !st.ok()) return fail(st.message());
  learned->stats = stats;
  learned->budgets = std::move(budgets);
  if (learned->stats.cycles > kRememberCycles) {
    learned->Decay(static_cast<double>(kRememberCycles) /
                   static_cast<double>(learned->stats.cycles));
  }
}

Status LearnedCache::Save(const SpecParams& spec, const Learned& learned) {
  const std::string key = LearnedKey(spec);
  const std::string base = (fs::path(model_dir_) / key).string();
  Status status = Status::Ok();
  if (learned.table && MethodOf(spec).KeepsTable(spec)) {
    // TransitionTable::Save writes a path; it goes to a temporary name and is renamed.
    const std::string tmp = TempPathBeside(base + ".table");
    std::error_code ec;
    fs::create_directories(model_dir_, ec);
    status = learned.table->Save(tmp);
    if (status.ok()) {
      fs::rename(tmp, base + ".table", ec);
      if (ec) status = Status::Error("cannot rename onto '" + base + ".table': " + ec.message());
    }
    if (!status.ok()) fs::remove(tmp, ec);
  }
  std::string out(kMagic, 8);
  Put<uint32_t>(&out, kVersion);
  Put<uint64_t>(&out, fingerprint_);
  Put<uint32_t>(&out, static_cast<uint32_t>(key.size()));
  out += key;
  PutBytes(&out, std::string(reinterpret_cast<const char*>(&learned.stats), sizeof(SpecStats)));
  PutBytes(&out, EncodeBudgets(learned.budgets));
  PutBytes(&out, learned.SaveExtra());
  if (Status st = WriteFileAtomically(base + ".state", out); !st.ok() && status.ok()) status = st;
  if (!status.ok()) {
    Warn("could not save the learned state of " + key + ": " + status.message());
    return status;
  }
  // The size bound: drop the least recently written model directories (never this one).
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> dirs;
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (!e.is_directory(ec) || e.path().filename().string().rfind("learned-", 0) != 0) continue;
    total += DirBytes(e.path());
    if (e.path() != fs::path(model_dir_))
      dirs.emplace_back(fs::last_write_time(e.path(), ec), e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const auto& [when, dir] : dirs) {
    if (total <= max_bytes_) break;
    const uint64_t bytes = DirBytes(dir);
    fs::remove_all(dir, ec);
    if (!ec) total -= std::min(total, bytes);
  }
  return Status::Ok();
}

}  // namespace goose
