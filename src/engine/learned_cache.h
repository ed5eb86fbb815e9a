// LearnedCache: what each method variant learned (its transition table, its cycle statistics,
// its budget history and its method's extras) kept per model across runs, so that every
// `goose generate` after the first starts warm: hot tables, measured acceptance, a measured
// budget. Nothing here can change an output: every method emits plain decoding's tokens whatever
// its tables hold.
//
// Contract
// - Files: <dir>/learned-<model fingerprint>/<variant key>.table (TransitionTable's format, only
//   for variants that keep their table) and <variant key>.state: "GOOSELRN", a version, the
//   fingerprint and the key, then the SpecStats, the BudgetHistory and the method's
//   SaveExtra() bytes, each after its length.
// - The variant key is LearnedKey (method/method.h): for a draft-model method it names the draft
//   model too, so what graft learned with one draft is never loaded for another.
// - Load: no file is a fresh start. An unreadable, truncated, corrupt or foreign file (another
//   model, variant or format version) is a one-line warning (warnings()) and leaves that part
//   fresh; nothing is adopted from a file that fails a check.
// - History decays: a loaded state remembers at most kRememberCycles cycles (counts are scaled
//   down), so recent runs weigh as much as everything before them.
// - Save: each file is written to a temporary file in its directory and renamed over the old
//   one, so a reader sees the old or the new file and two writers at once leave one complete
//   file. Afterwards the least recently written model directories are removed until the cache
//   holds at most max_bytes.
// - Thread-safe (a server's slots share one).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "method/method.h"
#include "util/files.h"
#include "util/status.h"

namespace goose {

class LearnedCache {
 public:
  static constexpr int64_t kRememberCycles = 20000;
  static constexpr uint64_t kDefaultMaxBytes = uint64_t{512} << 20;

  // dir: the cache root (LearnedCacheDir()); fingerprint: ModelFingerprint of the model.
  LearnedCache(std::string dir, uint64_t fingerprint, uint64_t max_bytes = kDefaultMaxBytes);

  // Fills `learned` (fresh, of the variant of `spec`) from the files of its variant.
  void Load(const SpecParams& spec, Learned* learned);
  // Writes the variant's files (the table only if the variant keeps it).
  Status Save(const SpecParams& spec, const Learned& learned);
  // The warnings of failed loads and saves so far, each once; clears them.
  std::vector<std::string> TakeWarnings();
  // <dir>/learned-<fingerprint>
  const std::string& model_dir() const { return model_dir_; }

 private:
  void Warn(const std::string& message);
  std::string dir_, model_dir_;
  uint64_t fingerprint_;
  uint64_t max_bytes_;
  std::mutex mu_;
  std::vector<std::string> warnings_;
};

}  // namespace goose
