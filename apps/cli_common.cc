#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
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

}  // namespace

std::string DefaultModelPath() {
  if (const char* env = std::getenv("GOOSE_MODEL"); env != nullptr && *env != '\0') return env;
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
                 "found beside the source tree or the executable; pass one with -m MODEL.gguf "
                 "or set GOOSE_MODEL (or make one: goose synth --like qwen2.5-0.5b -o "
                 "model.gguf)\n");
  }
  return def;
}

std::string DefaultDataDir() {
  if (const char* s = std::getenv("GOOSE_SHARED"); s && *s) return std::string(s) + "/data";
#ifdef GOOSE_SOURCE_DIR
  return std::string(GOOSE_SOURCE_DIR) + "/../shared/data";
#else
  return "../shared/data";
#endif
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "goose: %s\n", message.c_str());
  return 1;
}

Status CheckWritableFile(const std::string& path, const std::string& flag) {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (std::filesystem::exists(p, ec)) {
    if (!std::filesystem::is_regular_file(p, ec)) {
      return Status::Error(flag + " '" + path + "' is not a regular file");
    }
    if (::access(path.c_str(), W_OK) != 0) {
      return Status::Error(flag + " '" + path + "' is not writable: " + std::strerror(errno));
    }
    return Status::Ok();
  }
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
  if (!std::filesystem::is_directory(dir, ec)) {
    return Status::Error(flag + " '" + path + "': folder '" + dir.string() + "' does not exist");
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return Status::Error(flag + " '" + path + "': folder '" + dir.string() +
                         "' is not writable: " + std::strerror(errno));
  }
  return Status::Ok();
}

Status CheckWritableDir(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Error("cannot create " + flag + " '" + dir + "': " + ec.message());
  if (!std::filesystem::is_directory(dir, ec)) {
    return Status::Error(flag + " '" + dir + "' is not a folder");
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return Status::Error(flag + " '" + dir + "' is not writable: " + std::strerror(errno));
  }
  return Status::Ok();
}

CLI::Validator IntIn(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
          return "'" + s + "' is not an integer in " + std::to_string(lo) + ".." +
                 std::to_string(hi);
        }
        return "";
      },
      "INT in " + std::to_string(lo) + ".." + std::to_string(hi));
}

CLI::Validator NumberIn(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !(v >= lo && v <= hi)) {
          return "'" + s + "' is not a number in " + StrFormat("%g..%g", lo, hi);
        }
        return "";
      },
      StrFormat("NUMBER in %g..%g", lo, hi));
}

Status ParseBudgetFlag(const std::string& text, SpecParams* spec) {
  if (text == "auto") return Status::Ok();  // the caller loads the cost curve first
  char* end = nullptr;
  const long b = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || b < 0 || b > 128) {
    return Status::Error("--budget '" + text + "' is neither 0..128 nor 'auto'");
  }
  spec->budget = static_cast<int>(b);
  return Status::Ok();
}

std::string ReadStdin() {
  std::stringstream ss;
  ss << std::cin.rdbuf();
  return ss.str();
}

void AddKvTypeFlag(CLI::App& app, KvType* kv) {
  app.add_option_function<std::string>(
         "--kv-type", [kv](const std::string& name) { ParseKvType(name, kv); },
         "KV cache elements: f16 (half the memory and, deep in a prompt, faster) or f32; "
         "the output is plain decoding's with either")
      ->check(CLI::IsMember({"f16", "f32"}))
      ->default_str(KvTypeName(*kv));
}

}  // namespace goose::cli
