// What the server keeps across runs and chooses by cost: the table cache `goose generate` uses
// (loaded at start, saved at Shutdown) and `--budget auto` on the cached cost curve; neither
// changes a text.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "engine/engine.h"
#include "engine/learned_cache.h"
#include "method/method.h"
#include "server_test_util.h"

namespace goose::server {
namespace {

using nlohmann::json;

constexpr const char* kPrompt = "Once upon a time";

std::string FreshDir(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("goose_server_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

// The cycles the cache under `dir` holds for the variant of `spec` of the tiny model.
int64_t CachedCycles(const std::string& dir, const std::string& spec) {
  auto model = Model::Load(TinyModelPath());
  EXPECT_TRUE(model.ok());
  if (!model.ok()) return -1;
  auto cache = std::make_shared<LearnedCache>(dir, ModelFingerprint(**model));
  ThreadPool pool(1);
  Engine engine(**model, 0, &pool, std::make_shared<LearnedStore>(cache));
  SpecParams p;
  EXPECT_TRUE(ParseSpecVariant(spec, &p).ok());
  const int64_t cycles = engine.variant_stats(p).cycles;
  EXPECT_TRUE(cache->TakeWarnings().empty());
  return cycles;
}

// One greedy completion of `n` tokens; returns the response JSON (null on failure).
json Complete(const TestServer& s, int n, json extra = json::object()) {
  auto c = s.Client();
  json body = {{"prompt", kPrompt}, {"max_tokens", n}};
  body.update(extra);
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return nullptr;
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body);
}

TEST(ServerTableCache, SavedAtShutdownAndLoadedByTheNextServer) {
  const std::string dir = FreshDir("table_cache");
  ServerOptions o;
  o.spec = "goose";  // keeps its table: the shared, persisted variant
  o.cache_dir = dir;
  const std::string want = ReferenceText(kPrompt, 40);

  auto first = StartServer(o);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->server->WaitUntilLoaded().ok());
  const json a = Complete(*first, 40);
  EXPECT_EQ(a["choices"][0]["text"], want);
  const int64_t passes_a = a["goose"]["forward_passes"];
  EXPECT_EQ(CachedCycles(dir, "goose"), 0) << "saved before Shutdown";
  first->server->Shutdown();
  EXPECT_EQ(CachedCycles(dir, "goose"), passes_a);

  auto second = StartServer(o);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(second->server->WaitUntilLoaded().ok());
  const json b = Complete(*second, 40);
  EXPECT_EQ(b["choices"][0]["text"], want);
  const int64_t passes_b = b["goose"]["forward_passes"];
  second->server->Shutdown();
  // The second server started from the first one's state and added its own cycles.
  EXPECT_EQ(CachedCycles(dir, "goose"), passes_a + passes_b);

  // Without the cache nothing is read or written.
  o.table_cache = false;
  auto off = StartServer(o);
  ASSERT_NE(off, nullptr);
  ASSERT_TRUE(off->server->WaitUntilLoaded().ok());
  EXPECT_EQ(Complete(*off, 40)["choices"][0]["text"], want);
  off->server->Shutdown();
  EXPECT_EQ(CachedCycles(dir, "goose"), passes_a + passes_b);
  std::filesystem::remove_all(dir);
}

TEST(ServerBudgetAuto, ChoosesOnTheCostCurveAndKeepsTheText) {
  // The cost curve is measured once and cached under $XDG_CACHE_HOME, like generate's.
  const std::string dir = FreshDir("budget_auto");
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  ServerOptions o;
  o.budget = "auto";
  o.n_parallel = 2;
  o.n_threads = 2;
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->server->WaitUntilLoaded().ok());
  const std::string want = ReferenceText(kPrompt, 64);
  for (const char* spec : {"goose", "tr", "pld", "goose+paper"}) {
    SCOPED_TRACE(spec);
    const json j = Complete(*s, 64, {{"goose", {{"spec", spec}}}});
    EXPECT_EQ(j["choices"][0]["text"], want);
    EXPECT_EQ(j["goose"]["budget"], "auto");
    const int64_t passes = j["goose"]["forward_passes"];
    EXPECT_GT(passes, 0);
    // The chooser picked every cycle's budget, except for the tuned GOOSE, which sizes its own
    // trees on the cost curve.
    int64_t chosen = 0;
    const json budgets = j["goose"].value("budgets_chosen", json::object());
    for (const auto& [b, n] : budgets.items()) chosen += n.get<int64_t>();
    EXPECT_EQ(chosen, std::string(spec) == "goose" ? 0 : passes) << j["goose"];
  }
  // A number in the request overrides the server's auto.
  const json fixed = Complete(*s, 16, {{"goose", {{"budget", 8}}}});
  EXPECT_EQ(fixed["goose"]["budget"], 8);
  EXPECT_FALSE(fixed["goose"].contains("budgets_chosen"));
  s->server->Shutdown();
  bool cached = false;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    cached |= e.path().filename().string().rfind("cost-", 0) == 0;
  }
  EXPECT_TRUE(cached) << "no cost cache under " << dir;
  if (old) {
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  } else {
    unsetenv("XDG_CACHE_HOME");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace goose::server
