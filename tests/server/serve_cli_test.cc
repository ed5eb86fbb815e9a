// `goose serve` as a process: flags, the port it prints, and SIGTERM/SIGINT ending it with exit
// status 0 after it answered.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

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
  const std::string cache = std::filesystem::temp_directory_path() /
                            ("goose_serve_cli_test_" + std::to_string(getpid()));
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);  // the child's environment
  for (int sig : {SIGTERM, SIGINT}) {
    std::filesystem::remove_all(cache);
    ServeProcess p(GooseBinary(),
                   {"-m", TinyModelPath(), "--port", "0", "--parallel", "2", "-t", "1"});
    ASSERT_GT(p.pid(), 0);
    std::string line;
    ASSERT_TRUE(p.WaitFor("listening on", &line)) << p.output();
    const int port = PortFrom(line);
    ASSERT_GT(port, 0) << line;
    ASSERT_TRUE(p.WaitFor("ready")) << p.output();
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
