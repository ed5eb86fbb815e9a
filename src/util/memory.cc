#include "util/memory.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace goose {

uint64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) return kib * 1024;
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

std::string FormatBytes(uint64_t bytes) {
  const double gib = bytes / (1024.0 * 1024.0 * 1024.0);
  if (gib >= 1.0) return StrFormat("%.1f GiB", gib);
  return StrFormat("%.1f MiB", bytes / (1024.0 * 1024.0));
}

Status CheckMemory(uint64_t bytes, const std::string& what, const std::string& advice) {
  const uint64_t available = AvailableMemoryBytes();
  if (available == 0 || bytes <= available) return Status::Ok();
  return Status::Error(StrFormat("%s needs %s of memory but only %s is available; %s", what.c_str(),
                                 FormatBytes(bytes).c_str(), FormatBytes(available).c_str(),
                                 advice.c_str()));
}

}  // namespace goose
