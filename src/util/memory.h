// How much memory the machine can give, and the check that turns an allocation too large for
// it into a clear error before any work (instead of std::bad_alloc or the OOM killer).
#pragma once

#include <cstdint>
#include <string>

#include "util/status.h"

namespace goose {

// Memory the system can give now (MemAvailable, else free physical pages); 0 if unknown.
uint64_t AvailableMemoryBytes();
// "1.5 GiB", "20.3 MiB".
std::string FormatBytes(uint64_t bytes);
// An error naming `what`, the size and `advice` when `bytes` exceed the available memory.
Status CheckMemory(uint64_t bytes, const std::string& what, const std::string& advice);

}  // namespace goose
