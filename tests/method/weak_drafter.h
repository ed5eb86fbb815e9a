// The weak tiny drafter for the draft-model methods' tests: the real tiny model without its 4th
// layer (it agrees with the tiny model on ~60% of greedy next tokens), written once per test
// process by ../shared/tools/inflate_gguf.py (Debian python3 + python3-numpy) into a temp dir.
// When the script cannot run, WeakDrafter() returns null and `why` says so: callers skip loudly
// (GTEST_SKIP with the reason), never silently.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "model/model.h"

namespace goose {

inline std::string WeakDrafterSharedDir() {
  const char* env = std::getenv("GOOSE_SHARED");
  return env != nullptr && *env != '\0' ? env : GOOSE_SHARED_DIR;
}

// The tiny model itself: the target the weak drafter drafts for.
inline const Model& Tiny() {
  static const std::unique_ptr<Model> m = [] {
    auto r = Model::Load(WeakDrafterSharedDir() + "/models/stories260K.gguf");
    if (!r.ok()) std::abort();
    return std::move(r).value();
  }();
  return *m;
}

// Writes the weak drafter to `out` (f32). False, with the reason in *why, if it cannot be made
// here.
inline bool MakeWeakDrafterFile(const std::string& out, std::string* why) {
  const std::string shared = WeakDrafterSharedDir();
  const std::string log = out + ".log";
  const std::string cmd = "'" + shared + "/tools/inflate_gguf.py' '" + shared +
                          "/models/stories260K.gguf' '" + out +
                          "' --shape keep --drop-layers 3 --dtype f32 >'" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  std::filesystem::remove(log);
  if (rc == 0) return true;
  *why =
      "cannot make the weak tiny drafter with ../shared/tools/inflate_gguf.py (it needs "
      "/usr/bin/python3 with numpy: tools/install-deps.sh installs python3-numpy): " +
      ss.str();
  return false;
}

// Null (and `why`) when the drafter cannot be made here.
inline const Model* WeakDrafter(std::string* why = nullptr) {
  static std::string error;
  static const std::unique_ptr<Model> model = []() -> std::unique_ptr<Model> {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                      ("goose_weak_drafter_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string out = (dir / "weak.gguf").string();
    std::unique_ptr<Model> m;
    if (MakeWeakDrafterFile(out, &error)) {
      auto loaded = Model::Load(out);
      if (loaded.ok()) {
        m = std::move(loaded).value();
      } else {
        error = "inflate_gguf.py wrote a drafter goose cannot load: " + loaded.status().message();
      }
    }
    std::filesystem::remove_all(dir);  // a loaded model's mapping outlives the file
    if (!m) std::fprintf(stderr, "*** %s\n", error.c_str());
    return m;
  }();
  if (why != nullptr) *why = error;
  return model.get();
}

}  // namespace goose
