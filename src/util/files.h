// Files goose keeps between runs: where its cache lives, and writes that a reader or a second
// writer never sees half done.
#pragma once

#include <string>

#include "util/status.h"

namespace goose {

// $XDG_CACHE_HOME/goose, else ~/.cache/goose, else /tmp/goose-cache: the learned tables and
// states (engine/learned_cache.h) and the verify-cost curves (budget/cost_cache.h).
std::string GooseCacheDir();

// A temporary name beside `path` (a hidden file in its directory), unique per process and call:
// concurrent writers (other processes, other threads) never share one.
std::string TempPathBeside(const std::string& path);

// Writes `bytes` to `path` through a temporary file in the same directory (unique per process
// and call) and a rename, creating the directory if needed: a reader sees the old or the new
// file, and two writers at once leave one complete file.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace goose
