// capi: goose's C API (include/goose/goose.h) over the engine, and the drafter on its own
// (host_drafter.h). This header: how every goose_* function reports errors and checks handles.
//
// Contract of this folder
// - Every goose_* function runs its body in Call(): a returned error, or a C++ exception, is a
//   goose_status plus the thread's last error message (goose_last_error). Nothing aborts on
//   what a caller passes: arguments are checked here before the engine sees them, and the
//   engine's GOOSE_CHECKs stay what they are, checks of the engine's own invariants.
// - A handle is a Handle<Object, kind>: a tag (its kind, live or freed) and the object. Resolve
//   reads the tag before anything else and names what it found (NULL, another kind, a freed
//   handle, a foreign pointer). Retire frees the object and keeps the tagged shell in a bounded
//   quarantine (kQuarantine shells, oldest released first), so that a use after free reads a
//   "freed" tag rather than freed memory.
// - Thread-safe: the last error is per thread; the quarantine has a mutex (taken by frees only).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "goose/goose.h"
#include "util/status.h"

namespace goose::capi {

enum class Kind : uint32_t { kModel = 1, kSession = 2, kDrafter = 3, kRequest = 4 };
const char* KindName(Kind kind);  // "goose_model", ...

constexpr uint64_t kLiveTag = 0x676f6f73654c0000ull;   // "gooseL" + kind
constexpr uint64_t kFreedTag = 0x676f6f7365460000ull;  // "gooseF" + kind
constexpr uint64_t kTagMask = 0xffffffffffff0000ull;
constexpr size_t kQuarantine = 1024;

template <typename O, Kind K>
struct Handle {
  using Object = O;
  static constexpr Kind kKind = K;
  uint64_t tag = kLiveTag | static_cast<uint64_t>(K);
  O* object = nullptr;
};

// Sets the thread's last error to "<fn>: <message>" and returns `status`.
goose_status Fail(goose_status status, const char* fn, const std::string& message);
// The tag check of any handle; on success the caller may read the object.
goose_status CheckTag(const void* handle, Kind want, const char* fn, const char* arg);
// Moves a retired shell to the quarantine; `release` deletes it once it leaves.
void Quarantine(void* shell, void (*release)(void*));

// The object of a live handle of the right kind, else an error naming what `arg` was.
template <typename H>
goose_status Resolve(const H* h, const char* fn, const char* arg, typename H::Object** out) {
  static_assert(std::is_standard_layout_v<H>, "the tag must be the first thing in a handle");
  if (goose_status st = CheckTag(h, H::kKind, fn, arg); st != GOOSE_OK) return st;
  *out = h->object;
  return GOOSE_OK;
}

// Frees the handle's object and retires the shell (tag: freed).
template <typename H>
void Retire(H* h) {
  delete h->object;
  h->object = nullptr;
  h->tag = kFreedTag | static_cast<uint64_t>(H::kKind);
  Quarantine(h, [](void* p) { delete static_cast<H*>(p); });
}

// Runs an API body: exceptions become GOOSE_ERROR_OUT_OF_MEMORY (std::bad_alloc) or
// GOOSE_ERROR_INTERNAL, with a message naming `fn`.
template <typename F>
goose_status Call(const char* fn, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(GOOSE_ERROR_OUT_OF_MEMORY, fn, "out of memory");
  } catch (const std::exception& e) {
    return Fail(GOOSE_ERROR_INTERNAL, fn, std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail(GOOSE_ERROR_INTERNAL, fn, "internal error: an unknown exception");
  }
}

// A required pointer argument.
#define GOOSE_API_REQUIRE(ptr, fn)                                                   \
  do {                                                                               \
    if ((ptr) == nullptr) {                                                          \
      return ::goose::capi::Fail(GOOSE_ERROR_INVALID_ARGUMENT, fn, #ptr " is NULL"); \
    }                                                                                \
  } while (0)

}  // namespace goose::capi
