// Scratch files of one test process: every path lies in one directory under the system's temp
// dir, named after the process, and removed with everything in it when the process exits (ctest
// runs each case in a process of its own, so leftovers would pile up run after run).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace goose {

inline std::string ProcessTempPath(const std::string& name) {
  struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("goose_test_" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return (dir.path / name).string();
}

}  // namespace goose
