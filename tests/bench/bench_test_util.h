// Shared helpers for the bench tests: where the shared data lives, temp files.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace goose::testing {

inline std::string SharedDir() {
  if (const char* s = std::getenv("GOOSE_SHARED"); s && *s) return s;
#ifdef GOOSE_SHARED_DIR
  return GOOSE_SHARED_DIR;
#else
  return "../shared";
#endif
}

inline std::string DataDir() { return SharedDir() + "/data"; }
inline std::string TinyModel() { return SharedDir() + "/models/stories260K.gguf"; }

// A fresh folder under the system temp dir, unique per test.
inline std::string TempDir(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("goose_bench_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

inline std::string WriteFile(const std::string& dir, const std::string& name,
                             const std::string& content) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

}  // namespace goose::testing
