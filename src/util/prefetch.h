// Software prefetch of one cache line, for streams the hardware prefetchers lose (rows far
// apart, a new page every few rows).
#pragma once

namespace goose {

// Prefetches the cache line at p into L2 (and L1 with kToL1). An asm statement, not
// _mm_prefetch or __builtin_prefetch: GCC 12 deleted whole prefetch loops as dead code (the
// AMX path's object file, and attention's, had no prefetch instruction at all), which an asm
// volatile cannot be.
template <bool kToL1>
inline void PrefetchLine(const void* p) {
  if constexpr (kToL1) {
    __asm__ volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
  } else {
    __asm__ volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
  }
}

}  // namespace goose
