// Helpers of the C API tests. They use goose only through include/goose/goose.h (the test binary
// links libgoose.so, which exports nothing else) and the goose binary, as a program would.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "goose/goose.h"

namespace goose_test {

inline std::string TinyModelPath() {
  return std::string(GOOSE_SHARED_DIR) + "/models/stories260K.gguf";
}
inline std::string GooseBinary() { return std::string(GOOSE_BINARY_DIR) + "/goose"; }

// ASSERT_OK(goose_call(...)): the status, and the last error if it failed.
#define ASSERT_OK(call)                                                               \
  do {                                                                                \
    const goose_status st_ = (call);                                                  \
    ASSERT_EQ(st_, GOOSE_OK) << goose_status_name(st_) << ": " << goose_last_error(); \
  } while (0)
#define EXPECT_STATUS(call, want)                                               \
  do {                                                                          \
    const goose_status st_ = (call);                                            \
    EXPECT_EQ(st_, want) << #call << " gave " << goose_status_name(st_) << ": " \
                         << goose_last_error();                                 \
  } while (0)

struct ModelDeleter {
  void operator()(goose_model* m) const { goose_model_free(m); }
};
struct SessionDeleter {
  void operator()(goose_session* s) const { goose_session_free(s); }
};
struct DrafterDeleter {
  void operator()(goose_drafter* d) const { goose_drafter_free(d); }
};
struct RequestDeleter {
  void operator()(goose_drafter_request* r) const { goose_drafter_end(r); }
};
using ModelPtr = std::unique_ptr<goose_model, ModelDeleter>;
using SessionPtr = std::unique_ptr<goose_session, SessionDeleter>;
using DrafterPtr = std::unique_ptr<goose_drafter, DrafterDeleter>;
using RequestPtr = std::unique_ptr<goose_drafter_request, RequestDeleter>;

// The tiny model with one thread per session (the numbers then do not depend on the machine).
inline ModelPtr LoadTiny() {
  goose_model_params p;
  goose_model_default_params(&p);
  p.n_threads = 1;
  p.n_ctx = 512;
  goose_model* m = nullptr;
  const goose_status st = goose_model_load(TinyModelPath().c_str(), &p, &m);
  EXPECT_EQ(st, GOOSE_OK) << goose_last_error();
  return ModelPtr(m);
}

inline SessionPtr OpenSession(goose_model* m, int n_ctx = 0) {
  goose_session_params p;
  goose_session_default_params(&p);
  p.n_ctx = n_ctx;
  goose_session* s = nullptr;
  const goose_status st = goose_session_open(m, &p, &s);
  EXPECT_EQ(st, GOOSE_OK) << goose_last_error();
  return SessionPtr(s);
}

inline std::vector<int32_t> Tokenize(goose_model* m, const std::string& text) {
  int32_t n = 0;
  goose_tokenize(m, text.data(), text.size(), 1, nullptr, 0, &n);
  std::vector<int32_t> ids(n);
  EXPECT_EQ(goose_tokenize(m, text.data(), text.size(), 1, ids.data(), n, &n), GOOSE_OK);
  return ids;
}

// A cache directory of this process for the goose binary's runs (never the user's), removed
// at exit.
inline const std::string& CacheHome() {
  struct Dir {
    std::string path = (std::filesystem::temp_directory_path() /
                        ("goose_capi_cache_" + std::to_string(::getpid())))
                           .string();
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

// Runs the goose binary with `args`; its stdout.
inline std::string RunGoose(const std::string& args, int* exit_code = nullptr) {
  const std::string cmd =
      "XDG_CACHE_HOME='" + CacheHome() + "' " + GooseBinary() + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (p == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  if (exit_code) *exit_code = rc;
  return out;
}

// The shell-quoted form of s.
inline std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `goose generate --json` on the tiny model, one thread, no table cache: its JSON.
inline nlohmann::json GenerateJson(const std::string& prompt, const std::string& extra) {
  int rc = -1;
  const std::string out = RunGoose("generate -m " + Quote(TinyModelPath()) + " -p " +
                                       Quote(prompt) + " -t 1 --no-table-cache --json " + extra,
                                   &rc);
  EXPECT_EQ(rc, 0) << out;
  return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
}

}  // namespace goose_test
