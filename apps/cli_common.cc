#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "commands.h"
#include "model/model.h"

namespace goose::cli {

namespace {

constexpr const char* kDefaultModel = "shared/models/stories260K.gguf";

// Where the default model may be, first found wins: beside the checkout the binary sits in now
// (<exe dir> is build/, so <exe dir>/../.. holds shared/), which keeps working after the checkout
// moved, then beside the source tree the binary was built from (a binary copied elsewhere).
std::vector<std::filesystem::path> DefaultModelCandidates() {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back(exe.parent_path() / ".." / ".." / kDefaultModel);
#ifdef GOOSE_SOURCE_DIR
  out.push_back(std::filesystem::path(GOOSE_SOURCE_DIR) / ".." / kDefaultModel);
#endif
  return out;
}

std::string FormatBytes(uint64_t bytes) {
  const double gib = bytes / (1024.0 * 1024.0 * 1024.0);
  if (gib >= 1.0) return StrFormat("%.1f GiB", gib);
  return StrFormat("%.1f MiB", bytes / (1024.0 * 1024.0));
}

}  // namespace

std::string DefaultModelPath() {
  for (const std::filesystem::path& p : DefaultModelCandidates()) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) {
      return std::filesystem::weakly_canonical(p, ec).string();
    }
  }
  return "";
}

std::string ResolveModelPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  const std::string def = DefaultModelPath();
  if (def.empty()) {
    std::fprintf(stderr,
                 "goose: no model given and the default ../shared/models/stories260K.gguf was not "
                 "found beside the source tree or the executable; pass one with -m MODEL.gguf (or "
                 "make one: goose synth --like qwen2.5-0.5b -o model.gguf)\n");
  }
  return def;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "goose: %s\n", message.c_str());
  return 1;
}

uint64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) return kib * 1024;
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

Status CheckMemory(uint64_t bytes, const std::string& what, const std::string& advice) {
  const uint64_t available = AvailableMemoryBytes();
  if (available == 0 || bytes <= available) return Status::Ok();
  return Status::Error(StrFormat("%s needs %s of memory but only %s is available; %s",
                                 what.c_str(), FormatBytes(bytes).c_str(),
                                 FormatBytes(available).c_str(), advice.c_str()));
}

Status CheckContextMemory(const LlamaConfig& config, int n_ctx, int n_batch, int n_contexts,
                          const std::string& flag) {
  const uint64_t kv = KvCacheBytes(config, n_ctx);
  const uint64_t per_context = kv + ForwardScratchBytes(config, n_batch);
  const int n = ContextSize(config, n_ctx);
  const std::string what =
      n_contexts == 1
          ? StrFormat("a context of %d tokens (%s KV cache)", n, FormatBytes(kv).c_str())
          : StrFormat("%d contexts of %d tokens (%s KV cache each)", n_contexts, n,
                      FormatBytes(kv).c_str());
  return CheckMemory(per_context * static_cast<uint64_t>(n_contexts), what,
                     "use a smaller " + flag);
}

}  // namespace goose::cli
