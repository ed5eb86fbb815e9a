// The draft-model methods in the engine: a draft model is checked when it is attached (another
// vocabulary, a longer vocabulary, a short context: one clear error each), a method that needs
// one refuses to run without it, the engine's plain steps (--budget auto choosing 1) and
// changing budgets leave the draft cache in step (the output stays plain decoding's, and with
// the target as its own draft every top-1 draft token is accepted), and the statistics and
// JSON report the draft work.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cost_curves.h"
#include "e2e_util.h"
#include "engine/engine.h"
#include "engine/learned_cache.h"
#include "engine/report.h"
#include "method/weak_drafter.h"
#include "spec_floor.h"
#include "synth/synth.h"

namespace goose {
namespace {

// A small random-weight model: `vocab_from` (default the tiny model's), `ctx` trained context.
std::unique_ptr<Model> Synth(const std::string& name, const std::string& vocab_from, int ctx,
                             int n_vocab = 0) {
  SynthParams p;
  p.n_embd = 32, p.n_layer = 1, p.n_head = 2, p.n_head_kv = 2, p.n_ff = 64;
  p.vocab_from = vocab_from.empty() ? SharedPath("models/stories260K.gguf") : vocab_from;
  p.context_length = ctx;
  p.n_vocab = n_vocab;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("goose_draft_" + name + "_" + std::to_string(getpid()) + ".gguf"))
                               .string();
  EXPECT_TRUE(SynthesizeModel(p, path).ok());
  auto m = Model::Load(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(m).value() : nullptr;
}

std::vector<std::string> DraftVariants() {
  std::vector<std::string> out;
  for (const std::string& v : AllVariants()) {
    SpecParams s;
    if (ParseSpecVariant(v, &s).ok() && MethodOf(s).needs_draft_model()) out.push_back(v);
  }
  return out;
}

TEST(DraftModel, EveryDraftVariantIsFoundAndNeedsTheFlag) {
  const std::vector<std::string> variants = DraftVariants();
  for (const char* v : {"draft", "draft-tree", "draft-tree+prune", "graft", "graft+paper"}) {
    EXPECT_NE(std::find(variants.begin(), variants.end(), v), variants.end()) << v;
  }
  ThreadPool pool(1);
  Engine engine(TinyModel(), 256, &pool);
  const std::vector<int32_t> prompt = {1, 403, 407};
  for (const std::string& v : variants) {
    GenerateParams p;
    ASSERT_TRUE(ParseSpecVariant(v, &p.spec).ok());
    p.n_predict = 4;
    auto r = engine.Generate(prompt, p);
    ASSERT_FALSE(r.ok()) << v;
    EXPECT_NE(r.status().message().find("needs a draft model"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("-md"), std::string::npos);
  }
}

TEST(DraftModel, AnotherVocabularyIsOneClearError) {
  auto other = Synth("spm", SharedPath("vocab/ggml-vocab-llama-spm.gguf"), 512);
  ASSERT_TRUE(other);
  ThreadPool pool(1);
  Engine engine(TinyModel(), 256, &pool);
  const Status st = engine.SetDraftModel(*other);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("vocabulary differs from the target's at token"), std::string::npos)
      << st.message();
  EXPECT_EQ(engine.draft_model(), nullptr);
}

TEST(DraftModel, ALongerVocabularyIsAnErrorNamingTheExtraToken) {
  const int n = TinyModel().config().n_vocab;
  auto longer = Synth("long", "", 512, n + 32);
  ASSERT_TRUE(longer);
  ThreadPool pool(1);
  Engine engine(TinyModel(), 256, &pool);
  const Status st = engine.SetDraftModel(*longer);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("draft token " + std::to_string(n)), std::string::npos)
      << st.message();
}

TEST(DraftModel, AShorterContextIsAnError) {
  auto short_ctx = Synth("short", "", 64);
  ASSERT_TRUE(short_ctx);
  ThreadPool pool(1);
  Engine engine(TinyModel(), 256, &pool);
  const Status st = engine.SetDraftModel(*short_ctx);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("context length is 64 tokens, shorter than the request's 256"),
            std::string::npos)
      << st.message();
  Engine small(TinyModel(), 64, &pool);
  EXPECT_TRUE(small.SetDraftModel(*short_ctx).ok());
}

// --budget auto on two made-up cost curves, one engine per curve (its chooser and the drafters'
// learned state carry across the prompts): a gentle one, on which budgets and own-sized trees
// keep changing, and a steep one, on which a plain step pays best, so the engine's chooser takes
// plain steps the drafter never sees (draft, draft-tree) with probes in between, and the
// variants that size their own trees cut most of them to the root. Output equals plain
// decoding, the draft statistics add up, and on the gentle curve the drafts are accepted (at
// least the method's floor, tests/spec_floor.h).
TEST(DraftModel, AutoBudgetsAndPlainStepsStayLossless) {
  std::string why;
  const Model* weak = WeakDrafter(&why);
  if (weak == nullptr) GTEST_SKIP() << why;
  const Model& m = TinyModel();
  ThreadPool pool(1);
  Engine plain(m, 512, &pool);
  const auto prompts = LosslessPrompts(m, 96);
  const std::vector<CostSample> gentle = GentleCostCurve(), steep = SteepCostCurve();
  for (const std::string& v : DraftVariants()) {
    for (bool is_steep : {false, true}) {
      Engine spec(m, 512, &pool);
      ASSERT_TRUE(spec.SetDraftModel(*weak).ok());
      spec.SetCostCurve(is_steep ? steep : gentle);
      for (float temp : {0.0f, 0.9f}) {
        SCOPED_TRACE(v + (is_steep ? " steep" : " gentle") + (temp > 0 ? " sampled" : " greedy"));
        SpecStats total;
        int64_t generated = 0;
        for (size_t pi = 0; pi < 6; ++pi) {
          GenerateParams p;
          p.n_predict = 40;
          p.ignore_eos = true;
          p.sampling.temp = temp;
          p.sampling.seed = 99;
          auto want = plain.Generate(prompts[pi], p);
          ASSERT_TRUE(want.ok());
          ASSERT_TRUE(ParseSpecVariant(v, &p.spec).ok());
          p.spec.auto_budget = true;
          auto got = spec.Generate(prompts[pi], p);
          ASSERT_TRUE(got.ok()) << got.status().message();
          ASSERT_EQ(got->tokens, want->tokens) << "prompt " << pi;
          total.Merge(got->stats);
          generated += static_cast<int64_t>(got->tokens.size());
        }
        std::printf("%s%s%s: %lld tokens; accepted / drafted: %s\n", v.c_str(),
                    is_steep ? " steep" : " gentle", temp > 0 ? " sampled" : " greedy",
                    static_cast<long long>(generated), AcceptedBySource(total).c_str());
        EXPECT_GT(total.draft_cycles, 0);
        EXPECT_GE(total.draft_passes, total.draft_cycles);
        EXPECT_GT(total.draft_seconds, 0.0);
        SpecParams sp;
        ASSERT_TRUE(ParseSpecVariant(v, &sp).ok());
        if (!is_steep) {  // trees pay: the drafts are accepted
          const std::vector<SourceFloor>* floors = MethodFloors(MethodOf(sp).name(), temp > 0);
          ASSERT_NE(floors, nullptr) << v << " has no floor in tests/spec_floor.h";
          EXPECT_TRUE(MeetsFloors(total, generated, *floors));
        }
        if (is_steep && !MethodOf(sp).SizesOwnTrees(sp)) {
          EXPECT_LT(total.draft_cycles, total.cycles / 2)
              << "the chooser's plain steps draft nothing";
        }
        if (is_steep && MethodOf(sp).SizesOwnTrees(sp)) {
          EXPECT_LT(total.tree_nodes_total, 2 * total.cycles) << "trees cut to (nearly) the root";
        }
      }
    }
  }
}

// What a draft-model variant learned persists with its draft model's fingerprint in the key:
// the same draft loads it, another draft starts fresh.
TEST(DraftModel, LearnedStatePersistsPerDraftModel) {
  std::string why;
  const Model* weak = WeakDrafter(&why);
  if (weak == nullptr) GTEST_SKIP() << why;
  const Model& m = TinyModel();
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("goose_draft_learned_" + std::to_string(getpid())))
          .string();
  auto store = [&] {
    return std::make_shared<LearnedStore>(std::make_shared<LearnedCache>(dir, ModelFingerprint(m)));
  };
  ThreadPool pool(1);
  for (const char* v : {"graft", "draft-tree+prune"}) {
    SCOPED_TRACE(v);
    GenerateParams p;
    ASSERT_TRUE(ParseSpecVariant(v, &p.spec).ok());
    p.n_predict = 24;
    p.ignore_eos = true;
    {
      Engine e(m, 256, &pool, store());
      ASSERT_TRUE(e.SetDraftModel(*weak).ok());
      ASSERT_TRUE(e.Generate(LosslessPrompts(m, 32)[0], p).ok());
      ASSERT_TRUE(e.SaveLearned().ok());
    }
    Engine same(m, 256, &pool, store()), other(m, 256, &pool, store());
    ASSERT_TRUE(same.SetDraftModel(*weak).ok());
    ASSERT_TRUE(other.SetDraftModel(m).ok());  // the target as its own draft
    EXPECT_GT(same.variant_stats(p.spec).cycles, 0) << "the same draft loads what it learned";
    EXPECT_EQ(other.variant_stats(p.spec).cycles, 0) << "another draft starts fresh";
  }
  std::filesystem::remove_all(dir);
}

TEST(DraftModel, JsonReportsDraftWorkAndGraftedSlots) {
  std::string why;
  const Model* weak = WeakDrafter(&why);
  if (weak == nullptr) GTEST_SKIP() << why;
  const Model& m = TinyModel();
  ThreadPool pool(1);
  Engine engine(m, 512, &pool);
  ASSERT_TRUE(engine.SetDraftModel(*weak).ok());
  GenerateParams p;
  ASSERT_TRUE(ParseSpecVariant("graft", &p.spec).ok());
  p.n_predict = 64;
  p.ignore_eos = true;
  const auto prompt = m.tokenizer().Encode(
      "Tom has a red ball and a blue car. Tom has a red ball and a blue car. Tom has a", true);
  auto r = engine.Generate(prompt, p);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const nlohmann::json j = GenerateStatsJson(*r, static_cast<int>(prompt.size()));
  ASSERT_TRUE(j.contains("draft_model")) << j.dump();
  const nlohmann::json& d = j["draft_model"];
  EXPECT_GT(d["passes_per_cycle"].get<double>(), 0.0);
  EXPECT_GT(d["seconds_per_cycle"].get<double>(), 0.0);
  // Grafted slots: retrieved tokens in the draft model's trees, per cycle it drafted.
  const double grafted =
      j["drafted"]["graft_context"].get<double>() + j["drafted"]["graft_table"].get<double>();
  EXPECT_GT(grafted, 0);
  double per_cycle = 0;
  for (const char* src : {"graft_context", "graft_table"}) {
    if (d["slots_per_cycle"].contains(src)) per_cycle += d["slots_per_cycle"][src].get<double>();
  }
  EXPECT_NEAR(per_cycle, grafted / d["cycles"].get<double>(), 1e-9);
  EXPECT_TRUE(j["acceptance_by_depth"].contains("draft"));
  EXPECT_GT(j["routes"]["draft_tree"].get<int64_t>(), 0);
  // Plain decoding reports no draft work.
  GenerateParams none;
  none.n_predict = 8;
  auto plain = engine.Generate(prompt, none);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(GenerateStatsJson(*plain, 1).contains("draft_model"));
}

}  // namespace
}  // namespace goose
