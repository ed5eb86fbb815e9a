// `goose serve` as a process: flags, the port it prints, SIGTERM/SIGINT ending it with exit
// status 0 after it answered, and a second signal cancelling what the first let finish.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "raw_http.h"
#include "server_test_util.h"

namespace goose::server {
namespace {

using nlohmann::json;

std::string GooseBinary() { return std::string(GOOSE_BINARY_DIR) + "/goose"; }

// A graceful stop saves what the method learned to the table cache, as `goose generate` does.
bool HasLearnedState(const std::string& dir) {
  if (!std::filesystem::exists(dir)) return false;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().filename() == "goose+keep.state") return true;
  }
  return false;
}

TEST(ServeCli, AnswersAndStopsOnSignalsWithExitZero) {
  const std::string cache =
      std::filesystem::temp_directory_path() / ("goose_serve_cli_test_" + std::to_string(getpid()));
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);  // the child's environment
  for (int sig : {SIGTERM, SIGINT}) {
    std::filesystem::remove_all(cache);
    ServeProcess p(GooseBinary(),
                   {"-m", TinyModelPath(), "--port", "0", "--parallel", "2", "-t", "1"});
    ASSERT_GT(p.pid(), 0);
    const int port = p.WaitReady();
    ASSERT_GT(port, 0) << p.output();
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    auto r = c.Post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 24})",
                    "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], ReferenceText("Once upon a time", 24));
    ASSERT_EQ(p.Signal(sig), 0);
    EXPECT_EQ(p.Wait(), 0) << p.output();
    EXPECT_NE(p.output().find("goose: stopped"), std::string::npos) << p.output();
    EXPECT_TRUE(HasLearnedState(cache)) << "nothing saved under " << cache;
  }
  std::filesystem::remove_all(cache);
  unsetenv("XDG_CACHE_HOME");
}

// The first signal (SIGINT) lets the generation in flight go on (the grace is an hour); the
// second (SIGTERM: either counts) cancels it: its client gets 503 "shutting_down" and the server
// exits 0 without waiting the generation out (8000 tokens of a context of 8192 take ~10 s on the
// tiny model).
TEST(ServeCli, ASecondSignalCancelsWhatTheFirstLetFinish) {
  const std::string cache = std::filesystem::temp_directory_path() /
                            ("goose_serve_cli_test_signal_" + std::to_string(getpid()));
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);  // the child's environment
  ServeProcess p(GooseBinary(),
                 {"-m", TinyModelPath(), "--port", "0", "--parallel", "1", "-t", "1", "-c", "8192",
                  "--spec", "none", "--no-table-cache", "--shutdown-grace", "3600"});
  ASSERT_GT(p.pid(), 0);
  const int port = p.WaitReady();
  ASSERT_GT(port, 0) << p.output();
  std::atomic<bool> answered{false};
  int status = 0;
  std::string body;
  std::thread client([&] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(600, 0);
    auto r = c.Post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 8000})",
                    "application/json");
    if (r) {
      status = r->status;
      body = r->body;
    }
    answered = true;
  });
  // The generation is running once /metrics says its slot is busy.
  httplib::Client m("127.0.0.1", port);
  bool busy = false;
  for (int i = 0; i < 3000 && !busy; ++i) {
    auto r = m.Get("/metrics");
    busy = r && r->body.find("goose_slots_busy 1\n") != std::string::npos;
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(busy);
  ASSERT_EQ(p.Signal(SIGINT), 0);
  EXPECT_TRUE(p.WaitFor("SIGINT: finishing requests (up to 3600 s; again to cancel them)"))
      << p.output();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(answered.load()) << "the first signal ended the generation: " << body;
  ASSERT_EQ(p.Signal(SIGTERM), 0);
  EXPECT_TRUE(p.WaitFor("cancelling the requests in flight")) << p.output();
  EXPECT_EQ(p.Wait(), 0) << p.output();
  client.join();
  EXPECT_EQ(status, 503) << body;
  EXPECT_NE(body.find("shutting_down"), std::string::npos) << body;
  EXPECT_NE(p.output().find("goose: stopped"), std::string::npos) << p.output();
  std::filesystem::remove_all(cache);
  unsetenv("XDG_CACHE_HOME");
}

TEST(ServeCli, BadFlagsAreOneLineErrors) {
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{"--chat-template", "jinja2"}, "goose: unknown --chat-template 'jinja2'"},
      {{"--spec", "warp"}, "goose: --spec: unknown method 'warp'"},
      {{"--budget", "lots"}, "goose: --budget 'lots' is neither"},
      {{"--spec", "graft"}, "goose: --spec graft needs a draft model: give one with -md"},
      {{"-md", "/nonexistent-draft.gguf", "--port", "0"}, "draft model (-md): "},
      {{"-m", "/nonexistent.gguf", "--port", "0"}, "/nonexistent.gguf"},
      {{"--host", "256.1.1.1", "--port", "0"}, "cannot listen on 256.1.1.1"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    if (std::find(args.begin(), args.end(), "-m") == args.end()) {
      args.insert(args.end(), {"-m", TinyModelPath()});
    }
    ServeProcess p(GooseBinary(), args);
    ASSERT_GT(p.pid(), 0);
    EXPECT_EQ(p.Wait(), 1) << p.output();
    EXPECT_NE(p.output().find(c.says), std::string::npos) << p.output();
  }
}

}  // namespace
}  // namespace goose::server
