#include "util/files.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "util/rng.h"

namespace goose {

namespace fs = std::filesystem;

std::string TempPathBeside(const std::string& path) {
  const fs::path target(path);
  static std::atomic<uint64_t> counter{0};
  const uint64_t nonce =
      Mix64(static_cast<uint64_t>(::getpid()) * 0x9e3779b97f4a7c15ull + counter.fetch_add(1));
  const std::string name = "." + target.filename().string() +
                           StrFormat(".%016llx.tmp", static_cast<unsigned long long>(nonce));
  return (target.parent_path() / name).string();
}

std::string GooseCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "goose");
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "goose";
  return fs::path("/tmp") / "goose-cache";
}

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const fs::path target(path);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  const fs::path tmp = TempPathBeside(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return Status::Error("cannot write '" + tmp.string() + "'");
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::Error("cannot rename onto '" + path + "': " + ec.message());
  }
  return Status::Ok();
}

}  // namespace goose
