// LargeBuffer: a zero-filled, page-aligned buffer of memory mapped on its own and advised for
// transparent huge pages (2 MiB), for weights repacked at load time: a few hundred page faults
// instead of one per 4 KiB, and fewer TLB misses while matmuls stream them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace goose {

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
  size_t bytes_ = 0;  // mapped
};

}  // namespace goose
