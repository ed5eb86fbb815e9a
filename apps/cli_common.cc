#include <cstdio>
#include <filesystem>

#include "commands.h"

namespace goose::cli {

std::string DefaultModelPath() {
#ifdef GOOSE_SOURCE_DIR
  const std::filesystem::path p =
      std::filesystem::path(GOOSE_SOURCE_DIR) / ".." / "shared" / "models" / "stories260K.gguf";
  std::error_code ec;
  if (std::filesystem::exists(p, ec)) return std::filesystem::weakly_canonical(p, ec).string();
#endif
  return "";
}

std::string ResolveModelPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  const std::string def = DefaultModelPath();
  if (def.empty()) {
    std::fprintf(stderr,
                 "goose: no model given and the default ../shared/models/stories260K.gguf was not "
                 "found; pass one with -m MODEL.gguf (or make one: goose synth --like "
                 "qwen2.5-0.5b -o model.gguf)\n");
  }
  return def;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "goose: %s\n", message.c_str());
  return 1;
}

}  // namespace goose::cli
