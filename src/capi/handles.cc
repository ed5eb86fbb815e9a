#include "capi/handles.h"

#include <cstring>
#include <deque>
#include <mutex>
#include <utility>

namespace goose::capi {

namespace {

thread_local std::string g_last_error;

struct QuarantineList {
  std::mutex mu;
  std::deque<std::pair<void*, void (*)(void*)>> shells;
};

// Never destroyed: a shell must stay readable for as long as the process runs (and the list,
// reachable from here, is no leak).
QuarantineList& Shells() {
  static QuarantineList* list = new QuarantineList();
  return *list;
}

}  // namespace

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kModel:
      return "goose_model";
    case Kind::kSession:
      return "goose_session";
    case Kind::kDrafter:
      return "goose_drafter";
    case Kind::kRequest:
      return "goose_drafter_request";
  }
  return "goose handle";
}

goose_status Fail(goose_status status, const char* fn, const std::string& message) {
  g_last_error = std::string(fn) + ": " + message;
  return status;
}

goose_status CheckTag(const void* handle, Kind want, const char* fn, const char* arg) {
  const std::string expected = KindName(want);
  if (handle == nullptr) {
    return Fail(GOOSE_ERROR_INVALID_HANDLE, fn, StrFormat("%s is NULL", arg));
  }
  uint64_t tag = 0;
  std::memcpy(&tag, handle, sizeof(tag));
  const uint64_t kind = tag & ~kTagMask;
  const bool known = kind >= 1 && kind <= 4;
  const char* found = known ? KindName(static_cast<Kind>(kind)) : "";
  if (tag == (kLiveTag | static_cast<uint64_t>(want))) return GOOSE_OK;
  if (tag == (kFreedTag | static_cast<uint64_t>(want))) {
    return Fail(GOOSE_ERROR_INVALID_HANDLE, fn,
                StrFormat("%s is a %s used after it was freed", arg, expected.c_str()));
  }
  if (known && (tag & kTagMask) == kLiveTag) {
    return Fail(GOOSE_ERROR_INVALID_HANDLE, fn,
                StrFormat("%s is a %s, not a %s", arg, found, expected.c_str()));
  }
  if (known && (tag & kTagMask) == kFreedTag) {
    return Fail(GOOSE_ERROR_INVALID_HANDLE, fn,
                StrFormat("%s is a freed %s, not a %s", arg, found, expected.c_str()));
  }
  return Fail(GOOSE_ERROR_INVALID_HANDLE, fn,
              StrFormat("%s is not a goose handle (a foreign or corrupt pointer where a %s "
                        "belongs)",
                        arg, expected.c_str()));
}

void Quarantine(void* shell, void (*release)(void*)) {
  std::pair<void*, void (*)(void*)> out{nullptr, nullptr};
  {
    QuarantineList& q = Shells();
    std::lock_guard<std::mutex> lock(q.mu);
    q.shells.emplace_back(shell, release);
    if (q.shells.size() > kQuarantine) {
      out = q.shells.front();
      q.shells.pop_front();
    }
  }
  if (out.first != nullptr) out.second(out.first);
}

}  // namespace goose::capi

extern "C" {

const char* goose_last_error(void) { return goose::capi::g_last_error.c_str(); }

const char* goose_status_name(goose_status status) {
  switch (status) {
    case GOOSE_OK:
      return "GOOSE_OK";
    case GOOSE_ERROR_INVALID_ARGUMENT:
      return "GOOSE_ERROR_INVALID_ARGUMENT";
    case GOOSE_ERROR_INVALID_HANDLE:
      return "GOOSE_ERROR_INVALID_HANDLE";
    case GOOSE_ERROR_FILE:
      return "GOOSE_ERROR_FILE";
    case GOOSE_ERROR_STATE:
      return "GOOSE_ERROR_STATE";
    case GOOSE_ERROR_OUT_OF_MEMORY:
      return "GOOSE_ERROR_OUT_OF_MEMORY";
    case GOOSE_ERROR_BUFFER_TOO_SMALL:
      return "GOOSE_ERROR_BUFFER_TOO_SMALL";
    case GOOSE_ERROR_INTERNAL:
      return "GOOSE_ERROR_INTERNAL";
  }
  return "unknown";
}

}  // extern "C"
