// The learned-state cache: a saved variant starts the next engine warm with exactly the table,
// statistics and budget history it saved; a corrupt, truncated or foreign file is a warning and
// a fresh start (and the output stays plain decoding's); concurrent writers never leave a broken
// file; the cache stays under its size bound.
#include "engine/learned_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace goose {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("goose_learned_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::vector<int32_t> Prompt(const std::string& text) {
  return Tiny().tokenizer().Encode(text, true);
}

GenerateParams Goose(int n = 48) {
  GenerateParams p;
  p.n_predict = n;
  p.ignore_eos = true;
  EXPECT_TRUE(ParseSpecVariant("goose", &p.spec).ok());
  return p;
}

struct RunResult {
  std::vector<int32_t> tokens;
  SpecStats stats;
  std::vector<std::string> warnings;
};

// One "process": a fresh engine on the cache in `dir`, one request, then a save.
RunResult RunOnce(const std::string& dir, const std::string& text, const GenerateParams& p) {
  ThreadPool pool(1);
  auto cache = std::make_shared<LearnedCache>(dir, ModelFingerprint(Tiny()));
  Engine e(Tiny(), 256, &pool, std::make_shared<LearnedStore>(cache));
  auto r = e.Generate(Prompt(text), p);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(e.SaveLearned().ok());
  return {r.ok() ? r->tokens : std::vector<int32_t>{}, r.ok() ? r->stats : SpecStats{},
          cache->TakeWarnings()};
}

TEST(LearnedCache, ASavedVariantStartsTheNextEngineWarm) {
  const std::string dir = TempDir("warm");
  const GenerateParams p = Goose();
  const RunResult first = RunOnce(dir, "Tom had a big red ball. He liked to play with it.", p);
  EXPECT_TRUE(first.warnings.empty());
  // The second "process" drafts from the first one's table from its first cycle on.
  const RunResult warm = RunOnce(dir, "Lily went to the park. She saw a big red ball.", p);
  ThreadPool pool(1);
  Engine cold(Tiny(), 256, &pool);
  auto c = cold.Generate(Prompt("Lily went to the park. She saw a big red ball."), p);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(warm.tokens, c->tokens);  // the same text, whatever was learned
  EXPECT_TRUE(warm.warnings.empty());
  EXPECT_LT(warm.stats.cycles, c->stats.cycles) << "the warm engine accepts more per pass";

  // What was saved is what is loaded: table rows, statistics and budget history.
  auto cache = std::make_shared<LearnedCache>(dir, ModelFingerprint(Tiny()));
  Engine saved(Tiny(), 256, &pool, std::make_shared<LearnedStore>(cache));
  Learned& l = saved.learned(p.spec);
  EXPECT_EQ(l.stats.cycles, first.stats.cycles + warm.stats.cycles);
  ASSERT_NE(l.table, nullptr);
  int observed = 0;
  for (int t = 0; t < Tiny().config().n_vocab; ++t) observed += l.table->Observed(t);
  EXPECT_GT(observed, 20);
  fs::remove_all(dir);
}

// Each broken file: a one-line warning naming the file, a fresh start, the same output.
TEST(LearnedCache, CorruptTruncatedOrForeignFilesAreAWarningAndAFreshStart) {
  const GenerateParams p = Goose(24);
  const std::string text = "Once upon a time there was a cat. The cat";
  ThreadPool pool(1);
  Engine plain(Tiny(), 256, &pool);
  GenerateParams none = p;
  none.spec = SpecParams{};
  auto ref = plain.Generate(Prompt(text), none);
  ASSERT_TRUE(ref.ok());

  struct Damage {
    const char* name;
    void (*apply)(const std::string& base);
    const char* expect;  // in the warning
  };
  const Damage damages[] = {
      {"truncated table", [](const std::string& b) { fs::resize_file(b + ".table", 1000); },
       "truncated"},
      {"flipped table byte",
       [](const std::string& b) {
         std::fstream f(b + ".table", std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(9);
         f.put('\x7f');
       },
       "version"},
      {"truncated state", [](const std::string& b) { fs::resize_file(b + ".state", 40); },
       "truncated"},
      {"garbage state", [](const std::string& b) { std::ofstream(b + ".state") << "garbage!"; },
       "not a goose state file"},
      {"state of another variant",
       [](const std::string& b) {
         fs::copy_file(fs::path(b).parent_path() / "goose+cold.state", b + ".state",
                       fs::copy_options::overwrite_existing);
       },
       "another variant"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.name);
    const std::string dir = TempDir("damage");
    RunOnce(dir, "Tom had a big red ball.", p);
    GenerateParams cold = p;
    cold.spec.keep_table = 0;
    RunOnce(dir, "Tom had a big red ball.", cold);  // a goose+cold.state beside it
    auto cache = std::make_shared<LearnedCache>(dir, ModelFingerprint(Tiny()));
    d.apply(cache->model_dir() + "/goose+keep");
    const RunResult r = RunOnce(dir, text, p);
    EXPECT_EQ(r.tokens, ref->tokens);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find(d.expect), std::string::npos) << r.warnings[0];
    EXPECT_EQ(r.warnings[0].find('\n'), std::string::npos);
    // The run saved a good file again: the next one is quiet.
    EXPECT_TRUE(RunOnce(dir, text, p).warnings.empty());
    fs::remove_all(dir);
  }
}

TEST(LearnedCache, AnotherModelsFilesAreNotRead) {
  const std::string dir = TempDir("foreign");
  RunOnce(dir, "Tom had a big red ball.", Goose(24));
  // The same files presented as another model's: renamed into its directory.
  const uint64_t other = ModelFingerprint(Tiny()) ^ 1;
  LearnedCache mine(dir, ModelFingerprint(Tiny())), theirs(dir, other);
  fs::create_directories(theirs.model_dir());
  for (const char* ext : {".table", ".state"}) {
    fs::copy_file(mine.model_dir() + "/goose+keep" + ext, theirs.model_dir() + "/goose+keep" + ext);
  }
  ThreadPool pool(1);
  GenerateParams p = Goose(24);
  auto learned = MethodOf(p.spec).NewLearned(p.spec, DrafterEnv{&Tiny(), other, &pool});
  theirs.Load(p.spec, learned.get());
  const std::vector<std::string> w = theirs.TakeWarnings();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("model mismatch"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("another model"), std::string::npos) << w[1];
  EXPECT_EQ(learned->stats.cycles, 0);
  fs::remove_all(dir);
}

// Writers racing on one variant's files (threads here; the CLI test runs processes): every
// load in between and after finds a complete file.
TEST(LearnedCache, ConcurrentWritersNeverLeaveABrokenFile) {
  const std::string dir = TempDir("race");
  RunOnce(dir, "Tom had a big red ball.", Goose(24));
  ThreadPool pool(1);
  GenerateParams p = Goose(24);
  auto source = std::make_shared<LearnedCache>(dir, ModelFingerprint(Tiny()));
  Engine e(Tiny(), 256, &pool, std::make_shared<LearnedStore>(source));
  Learned& l = e.learned(p.spec);
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w) {
    writers.emplace_back([&] {
      LearnedCache c(dir, ModelFingerprint(Tiny()));
      for (int i = 0; i < 10; ++i) EXPECT_TRUE(c.Save(p.spec, l).ok());
    });
  }
  int loads = 0;
  while (loads < 20) {
    LearnedCache c(dir, ModelFingerprint(Tiny()));
    auto fresh =
        MethodOf(p.spec).NewLearned(p.spec, DrafterEnv{&Tiny(), ModelFingerprint(Tiny()), &pool});
    c.Load(p.spec, fresh.get());
    const auto w = c.TakeWarnings();
    EXPECT_TRUE(w.empty()) << w[0];
    EXPECT_EQ(fresh->stats.cycles, l.stats.cycles);
    ++loads;
  }
  for (auto& t : writers) t.join();
  size_t leftovers = 0;
  for (const auto& f : fs::directory_iterator(source->model_dir())) {
    leftovers += f.path().filename().string().find(".tmp") != std::string::npos;
  }
  EXPECT_EQ(leftovers, 0u) << "temporary files left behind";
  fs::remove_all(dir);
}

TEST(LearnedCache, OldModelDirectoriesGoWhenTheBoundIsExceeded) {
  const std::string dir = TempDir("bound");
  ThreadPool pool(1);
  GenerateParams p = Goose(8);
  auto learned = MethodOf(p.spec).NewLearned(p.spec, DrafterEnv{&Tiny(), 1, &pool});
  learned->stats.cycles = 1;
  const uint64_t one = 6u << 20;  // a tiny-model goose table is ~5.8 MB
  for (uint64_t fp = 1; fp <= 3; ++fp) {
    LearnedCache c(dir, fp, 2 * one + (1u << 20));
    ASSERT_TRUE(c.Save(p.spec, *learned).ok());
    fs::last_write_time(c.model_dir(), fs::file_time_type::clock::now() +
                                           std::chrono::seconds(static_cast<int>(fp)));
  }
  EXPECT_FALSE(fs::exists(LearnedCache(dir, 1).model_dir())) << "the oldest model went";
  EXPECT_TRUE(fs::exists(LearnedCache(dir, 2).model_dir()));
  EXPECT_TRUE(fs::exists(LearnedCache(dir, 3).model_dir()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace goose
