// Helpers shared by the fuzz targets (fuzz/<name>_fuzz.cc).
//
// Contract
// - FUZZ_CHECK(cond, fmt, ...): a property the code under test must keep; prints the message and
//   aborts, which libFuzzer (and the regression replay) reports as a crash with its input.
// - SharedDir(): ../shared beside the checkout ($GOOSE_SHARED overrides), for targets that load
//   the shared vocabularies.
// - MemFile: an anonymous in-memory file (memfd) reachable by path, for loaders that only take a
//   path (TransitionTable::Load): Write() replaces its contents, path() opens it afresh.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#define FUZZ_CHECK(cond, ...)                                                            \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                 \
      std::fprintf(stderr, "\n");                                                        \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace goose::fuzz {

inline std::string SharedDir() {
  if (const char* env = std::getenv("GOOSE_SHARED"); env && *env) return env;
  return GOOSE_SHARED_DIR;
}

class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  const std::string& path() const { return path_; }

  void Write(std::string_view bytes) {
    if (ftruncate(fd_, 0) != 0 ||
        pwrite(fd_, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
      std::perror("memfd write");
      std::abort();
    }
  }

  std::string Read() const {
    std::string out;
    char buf[1 << 16];
    for (off_t at = 0;;) {
      const ssize_t n = pread(fd_, buf, sizeof(buf), at);
      if (n < 0) {
        std::perror("memfd read");
        std::abort();
      }
      if (n == 0) return out;
      out.append(buf, static_cast<size_t>(n));
      at += n;
    }
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace goose::fuzz

namespace goose::fuzz {

// A message that is safe to print as one line: valid UTF-8, no control characters (what
// EscapeForMessage guarantees for quoted file content).
inline bool IsOneCleanLine(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = c >= 0xC2 && c <= 0xDF   ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    if (len == 0 || i + len > s.size()) return false;
    const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
        (c == 0xF4 && c1 > 0x8F)) {
      return false;
    }
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

// True if `s` is well-formed UTF-8 (control characters allowed).
inline bool IsValidUtf8(std::string_view s) {
  std::string masked(s);
  for (char& c : masked) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = ' ';
  }
  return IsOneCleanLine(masked);
}

}  // namespace goose::fuzz
