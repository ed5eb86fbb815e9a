#include "util/large_buffer.h"

#include <sys/mman.h>

namespace goose {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
size_t Mapped(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }
}  // namespace

void* AllocateHugePages(size_t bytes) {
  if (bytes == 0) return nullptr;
  // Over-map by a huge page and trim, so that the memory starts on a 2 MiB boundary (the
  // kernel backs only aligned 2 MiB ranges with huge pages).
  const size_t body = Mapped(bytes), mapped = body + kHugePage;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
  const size_t head = start - base;
  if (head > 0) munmap(p, head);
  if (mapped - head - body > 0) munmap(reinterpret_cast<void*>(start + body), mapped - head - body);
  madvise(reinterpret_cast<void*>(start), body, MADV_HUGEPAGE);  // advice: a kernel may ignore it
  return reinterpret_cast<void*>(start);
}

void FreeHugePages(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, Mapped(bytes));
}

LargeBuffer::LargeBuffer(size_t bytes)
    : data_(static_cast<uint8_t*>(AllocateHugePages(bytes))), bytes_(bytes) {}

LargeBuffer::~LargeBuffer() { FreeHugePages(data_, bytes_); }

}  // namespace goose
