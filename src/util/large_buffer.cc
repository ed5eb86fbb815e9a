#include "util/large_buffer.h"

#include <sys/mman.h>

#include <new>

namespace goose {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

LargeBuffer::LargeBuffer(size_t bytes) {
  if (bytes == 0) return;
  // Over-map by a huge page and trim, so that the buffer starts on a 2 MiB boundary (the
  // kernel backs only aligned 2 MiB ranges with huge pages).
  const size_t mapped = (bytes + kHugePage - 1) / kHugePage * kHugePage + kHugePage;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
  const size_t head = start - base, body = mapped - kHugePage;
  if (head > 0) munmap(p, head);
  if (mapped - head - body > 0) munmap(reinterpret_cast<void*>(start + body), mapped - head - body);
  data_ = reinterpret_cast<uint8_t*>(start);
  bytes_ = body;
  madvise(data_, bytes_, MADV_HUGEPAGE);  // advice only: a kernel without THP ignores it
}

LargeBuffer::~LargeBuffer() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

}  // namespace goose
