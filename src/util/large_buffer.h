// Memory mapped on its own, 2 MiB-aligned and advised for transparent huge pages: a few page
// faults per 2 MiB instead of one per 4 KiB (in this project's VMs a 4 KiB fault costs ~20 us),
// and fewer TLB misses while kernels stream it.
// - LargeBuffer: a zero-filled buffer, for weights repacked at load time and KV caches.
// - HugePageAllocator: a std::allocator for large, long-lived arrays (the transition table's
//   5.8 MB, whose 1,400 faults cost ~28 ms of every goose generate process); below 1 MiB it
//   is operator new. Stateless: all instances are equal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace goose {

void* AllocateHugePages(size_t bytes);  // zero-filled; throws std::bad_alloc
void FreeHugePages(void* p, size_t bytes);

class LargeBuffer {
 public:
  explicit LargeBuffer(size_t bytes);  // throws std::bad_alloc if the mapping fails
  ~LargeBuffer();
  LargeBuffer(LargeBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_) {
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;
  LargeBuffer& operator=(LargeBuffer&&) = delete;

  uint8_t* data() const { return data_; }

 private:
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

template <class T>
struct HugePageAllocator {
  static constexpr size_t kMinBytes = size_t{1} << 20;
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kMinBytes) return static_cast<T*>(::operator new(bytes));
    return static_cast<T*>(AllocateHugePages(bytes));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kMinBytes) return ::operator delete(p);
    FreeHugePages(p, bytes);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

}  // namespace goose
