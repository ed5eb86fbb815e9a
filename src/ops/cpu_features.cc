#include "ops/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace goose {

namespace {

// GOOSE_CPU=x86-64-v2|avx2|avx512|avx512+amx caps the level (A/B benchmarks of kernel paths).
int InitialCap() {
  const char* env = std::getenv("GOOSE_CPU");
  if (env == nullptr) return static_cast<int>(kMaxCpuLevel);
  for (int l = 0; l <= static_cast<int>(kMaxCpuLevel); ++l) {
    if (std::strcmp(env, CpuLevelName(static_cast<CpuLevel>(l))) == 0) return l;
  }
  std::fprintf(stderr, "goose: ignoring GOOSE_CPU=%s (x86-64-v2, avx2, avx512, avx512+amx)\n", env);
  return static_cast<int>(kMaxCpuLevel);
}

std::atomic<int> g_cap{InitialCap()};

}  // namespace

bool HasAmxInt8() {
  static const bool has = [] {
#if defined(__x86_64__) && defined(__linux__)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = (d >> 24) & 1, int8 = (d >> 25) & 1;
    if (!tile || !int8) return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return false;  // OSXSAVE
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (((lo >> 17) & 3) != 3) return false;  // XTILECFG and XTILEDATA state enabled
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return has;
}

CpuLevel DetectCpuLevel() {
  static const CpuLevel level = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
      return HasAvx512Vnni() && HasAmxInt8() ? CpuLevel::kAmx : CpuLevel::kAvx512;
    }
    // F16C from CPUID leaf 1, ECX bit 29: clang 14's __builtin_cpu_supports has no "f16c".
    unsigned a, b, c, d;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && ((c >> 29) & 1);
    if (__builtin_cpu_supports("avx2") && f16c && __builtin_cpu_supports("fma")) {
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

bool IsAmdCpu() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_is("amd");
#else
  return false;
#endif
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
    case CpuLevel::kAmx:
      return "avx512+amx";
  }
  return "?";
}

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

}  // namespace goose
