// AlignedVector<T>: a std::vector whose storage starts on a 64-byte boundary (a cache line and
// an AVX-512 vector). Kernels load 64 bytes at a time; from malloc's 16-byte alignment every
// such load of a row spans two cache lines (measured: attention's key and value loops 1.4-1.7x
// slower, 4.8 against 2.8 cycles per key).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace goose {

template <class T>
struct AlignedAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const {
    return true;
  }
};

template <class T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace goose
