#include "ops/cpu_features.h"

#include <algorithm>
#include <atomic>

namespace goose {

namespace {
std::atomic<int> g_cap{static_cast<int>(CpuLevel::kAvx512)};
}  // namespace

CpuLevel DetectCpuLevel() {
  static const CpuLevel level = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return CpuLevel::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
        __builtin_cpu_supports("fma")) {
      return CpuLevel::kAvx2;
    }
#endif
    return CpuLevel::kBaseline;
  }();
  return level;
}

CpuLevel ActiveCpuLevel() {
  return static_cast<CpuLevel>(
      std::min(static_cast<int>(DetectCpuLevel()), g_cap.load(std::memory_order_relaxed)));
}

bool HasAvx512Vnni() {
  static const bool has = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
  }();
  return has;
}

void SetCpuLevelCap(CpuLevel cap) { g_cap.store(static_cast<int>(cap)); }

const char* CpuLevelName(CpuLevel level) {
  switch (level) {
    case CpuLevel::kBaseline:
      return "x86-64-v2";
    case CpuLevel::kAvx2:
      return "avx2";
    case CpuLevel::kAvx512:
      return "avx512";
  }
  return "?";
}

}  // namespace goose
