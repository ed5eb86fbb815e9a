// Engine loop conventions (docs/methods.md §7): MAT accounting, n_predict cut, stop tokens,
// context limit, table lifetime, and per-source statistics that add up.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/report.h"
#include "spec_floor.h"
#include "synth/synth.h"
#include "test_temp.h"

namespace goose {
namespace {

std::vector<int32_t> Prompt(const std::string& text) {
  return Tiny().tokenizer().Encode(text, true);
}

SpecParams Spec(const char* variant) {
  SpecParams p;
  EXPECT_TRUE(ParseSpecVariant(variant, &p).ok()) << variant;
  return p;
}
SpecParams Tr() { return Spec("tr"); }

TEST(Engine, PlainGreedyMatIsNOverNMinusOne) {
  ThreadPool pool(1);
  Engine e(Tiny(), 512, &pool);
  GenerateParams p;
  p.n_predict = 128;
  p.ignore_eos = true;
  auto r = e.Generate(Prompt("Once upon a time"), p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens.size(), 128u);
  EXPECT_EQ(r->stats.cycles, 127);  // the first token comes from the prefill pass
  EXPECT_NEAR(MeanAcceptedTokens(128, r->stats.cycles), 128.0 / 127.0, 1e-12);
}

TEST(Engine, SpeculativeCommitsAreCutToNPredictAndStatsAddUp) {
  ThreadPool pool(1);
  Engine e(Tiny(), 512, &pool);
  for (const char* m : {"pld", "tr", "goose"}) {
    GenerateParams p;
    p.n_predict = 37;
    p.ignore_eos = true;
    p.spec.method = m;
    auto r = e.Generate(Prompt("I like cake. I like cake. I like cake. I like"), p);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->tokens.size(), 37u) << m;
    // Every cycle commits accepted + bonus; the last may overshoot n_predict (convention 2).
    int64_t accepted = 0;
    for (int s = 0; s < kNumSources; ++s) accepted += r->stats.accepted[s];
    EXPECT_EQ(r->stats.committed, accepted + r->stats.bonus);
    EXPECT_GE(r->stats.committed + 1, 37);
    EXPECT_LT(r->stats.cycles, 36) << "a repetitive prompt should accept drafts";
  }
}

// --budget auto learning from its own passes (docs/methods.md §5.1): the curve starts from the
// prior of earlier runs, then each size the engine has passed 8 times takes its median, and the
// output is plain decoding's whatever the curve says.
TEST(Engine, AutoCurveFollowsTheTimedPasses) {
  ThreadPool pool(1);
  Engine plain(Tiny(), 512, &pool);
  Engine e(Tiny(), 512, &pool);
  const std::vector<CostSample> cal = {{1, 1e-4}, {2, 1.1e-4}, {4, 1.2e-4}, {8, 2e-4}};
  e.SetCostCurve(cal);
  EXPECT_EQ(e.CostCurve()[2].seconds, 1.2e-4) << "not learning: the curve as set";
  e.LearnPassCosts({{4, 1.8e-4}, {3, 1.0}});
  std::vector<CostSample> c = e.CostCurve();
  ASSERT_EQ(c.size(), 4u);
  EXPECT_NEAR(c[2].seconds, 1.8e-4, 1e-18);  // the prior
  EXPECT_NEAR(c[3].seconds, 3e-4, 1e-18);    // like 4
  EXPECT_NEAR(c[0].seconds, 1.5e-4, 1e-18);  // no size below 4 observed: scaled like 4
  GenerateParams p;
  p.n_predict = 96;
  p.ignore_eos = true;
  const std::vector<int32_t> prompt = Prompt("Once upon a time, there was a little dog.");
  auto want = plain.Generate(prompt, p);
  p.spec = Spec("goose");
  p.spec.auto_budget = true;
  auto r = e.Generate(prompt, p);
  ASSERT_TRUE(want.ok() && r.ok());
  EXPECT_EQ(r->tokens, want->tokens);
  EXPECT_GT(AcceptedDrafts(r->stats), 0) << "trees pay on this curve";
  const std::vector<CostSample> observed = e.ObservedPassCosts();
  ASSERT_FALSE(observed.empty()) << "96 tokens pass some size 8 times";
  c = e.CostCurve();
  int matched = 0;
  for (const CostSample& o : observed) {
    for (const CostSample& k : c) {
      if (k.nodes == o.nodes) {
        EXPECT_EQ(k.seconds, o.seconds) << o.nodes;
        ++matched;
      }
    }
  }
  EXPECT_GE(matched, 1);
}

// A small synthesized llama (64 wide, one layer) with random weights from `seed`, written to
// `path`; null (and a failure) if it cannot be written or loaded.
std::unique_ptr<Model> SmallSynthLlama(uint64_t seed, const std::string& path) {
  SynthParams sp;
  sp.n_embd = 64;
  sp.n_layer = 1;
  sp.n_head = 4;
  sp.n_head_kv = 4;
  sp.n_ff = 128;
  sp.seed = seed;
  EXPECT_TRUE(SynthesizeModel(sp, path).ok());
  auto m = Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Seed 4's greedy text ends with its end-of-sequence token after 62 tokens: the tiny model
// never emits one (not in 400 tokens of any prompt tried), so it cannot show a stop.
std::unique_ptr<Model> ModelThatStops() {
  return SmallSynthLlama(4, ProcessTempPath("engine_eos.gguf"));
}

TEST(Engine, StopsAtEndOfSequenceUnlessIgnored) {
  const std::unique_ptr<Model> model = ModelThatStops();
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> prompt = model->tokenizer().Encode("Once upon a time", true);
  ThreadPool pool(1);
  Engine e(*model, 512, &pool);
  GenerateParams p;
  p.n_predict = 400;
  auto plain = e.Generate(prompt, p);
  ASSERT_TRUE(plain.ok());
  ASSERT_LT(plain->tokens.size(), 400u);
  ASSERT_TRUE(model->tokenizer().IsEog(plain->tokens.back()));
  // Every method stops at the same place, with draft tokens accepted on the way.
  for (const char* m : {"pld", "tr", "balanced", "sequoia", "goose"}) {
    GenerateParams q = p;
    ASSERT_TRUE(ParseSpecVariant(m, &q.spec).ok());
    auto r = e.Generate(prompt, q);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->tokens, plain->tokens) << m;
    EXPECT_GT(AcceptedDrafts(r->stats), 0) << m << ": " << AcceptedBySource(r->stats);
  }
  p.ignore_eos = true;
  auto r = e.Generate(prompt, p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens.size(), 400u);
  EXPECT_TRUE(std::equal(plain->tokens.begin(), plain->tokens.end(), r->tokens.begin()));
}

// Speculative methods stop where plain decoding does, with its tokens: their trees are cut to
// the context's room near the end. Greedy and sampled.
TEST(Engine, ContextLimitStopsCleanly) {
  ThreadPool pool(1);
  Engine e(Tiny(), 64, &pool);
  for (float temp : {0.0f, 0.8f}) {
    std::vector<int32_t> plain;
    for (const char* m : {"none", "pld", "tr", "goose", "goose+paper"}) {
      SCOPED_TRACE(std::string(m) + (temp > 0 ? " sampled" : " greedy"));
      GenerateParams p;
      p.n_predict = 500;
      p.ignore_eos = true;
      p.sampling.temp = temp;
      p.sampling.seed = 1;  // (a sampled text that repeats itself: pld accepts 13 tokens)
      p.spec = Spec(m);
      auto r = e.Generate(Prompt("Once upon a time"), p);
      ASSERT_TRUE(r.ok());
      EXPECT_TRUE(r->hit_context_limit);
      // Positions 0..63 hold the prompt and the generated tokens whose KV was written, plus the
      // last generated token (the anchor, never written).
      EXPECT_EQ(static_cast<int>(Prompt("Once upon a time").size() + r->tokens.size()), 65);
      if (plain.empty()) {
        plain = r->tokens;
        EXPECT_EQ(AcceptedDrafts(r->stats), 0);
      } else {
        EXPECT_EQ(r->tokens, plain);
        EXPECT_GT(AcceptedDrafts(r->stats), 0) << AcceptedBySource(r->stats);
      }
    }
  }
}

// A prompt scored in passes of any size gives the tokens and the cycles of one pass: greedy and
// sampled, for plain decoding, TR (harvests the last prompt row) and GOOSE (harvests every
// prompt row).
TEST(Engine, PrefillChunksChangeNothing) {
  ThreadPool pool(2);
  // A fresh engine per run: TR keeps its table across requests.
  auto run = [&](const GenerateParams& p, const std::vector<int32_t>& prompt) {
    Engine e(Tiny(), 512, &pool);
    return e.Generate(prompt, p);
  };
  std::string text;
  for (int i = 0; i < 16; ++i) text += "Tom had a red ball. He liked to play with it every day. ";
  const std::vector<int32_t> prompt = Prompt(text);
  ASSERT_GT(prompt.size(), 260u);  // more than one default chunk
  for (const char* m : {"none", "tr", "goose"}) {
    for (float temp : {0.0f, 0.8f}) {
      GenerateParams p;
      p.n_predict = 40;
      p.ignore_eos = true;
      p.spec.method = m;
      p.sampling.temp = temp;
      p.sampling.seed = 5;
      p.prefill_chunk = 0;
      auto whole = run(p, prompt);
      ASSERT_TRUE(whole.ok());
      for (int chunk : {1, 7, 256}) {
        p.prefill_chunk = chunk;
        auto r = run(p, prompt);
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(r->tokens, whole->tokens) << m << " temp " << temp << " chunk " << chunk;
        EXPECT_EQ(r->stats.cycles, whole->stats.cycles) << m << " " << chunk;
      }
    }
  }
}

TEST(Engine, RejectsBadPrompts) {
  ThreadPool pool(1);
  Engine e(Tiny(), 16, &pool);
  GenerateParams p;
  EXPECT_FALSE(e.Generate({}, p).ok());
  EXPECT_FALSE(e.Generate(std::vector<int32_t>{1, 99999}, p).ok());
  std::vector<int32_t> long_prompt(16, 300);
  auto r = e.Generate(long_prompt, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("context"), std::string::npos);
}

TEST(Engine, TrTableIsKeptAcrossRequestsAndPaperGooseIsNot) {
  ThreadPool pool(1);
  Engine e(Tiny(), 512, &pool);
  GenerateParams p;
  p.n_predict = 48;
  p.ignore_eos = true;
  p.spec.method = "tr";
  ASSERT_TRUE(e.Generate(Prompt("Once upon a time"), p).ok());
  const size_t after_one = e.table(Tr())->memory_bytes();
  EXPECT_GT(after_one, 0u);
  int observed = 0;
  for (int t = 0; t < Tiny().config().n_vocab; ++t) observed += e.table(Tr())->Observed(t);
  EXPECT_GT(observed, 20);
  // A second request starts warm: its first cycle already drafts from harvested rows.
  auto second = e.Generate(Prompt("Once upon a time"), p);
  ASSERT_TRUE(second.ok());
  EXPECT_GT(second->stats.accepted[static_cast<int>(NodeSource::kBranch)], 0);

  ASSERT_TRUE(ParseSpecVariant("goose+paper", &p.spec).ok());
  ASSERT_TRUE(e.Generate(Prompt("Once upon a time"), p).ok());
  auto cold = e.Generate(Prompt("Zara saw a star"), p);
  ASSERT_TRUE(cold.ok());
  // Per-request table: the first cycle of a new request cannot take the tree route.
  EXPECT_GE(cold->stats.route_cycles[static_cast<int>(Route::kAr)] +
                cold->stats.route_cycles[static_cast<int>(Route::kChain)],
            1);
}

TEST(Engine, TableSavedAndLoadedGivesSameDrafts) {
  ThreadPool pool(1);
  Engine a(Tiny(), 512, &pool);
  GenerateParams p;
  p.n_predict = 64;
  p.ignore_eos = true;
  p.spec.method = "tr";
  ASSERT_TRUE(a.Generate(Prompt("Tom had a big red ball."), p).ok());
  const std::string path = ProcessTempPath("engine_tr.bin");
  ASSERT_TRUE(a.table(Tr())->Save(path).ok());
  Engine b(Tiny(), 512, &pool);
  ASSERT_TRUE(b.table(Tr())->Load(path).ok());
  std::filesystem::remove(path);
  auto ra = a.Generate(Prompt("Lily went to the park."), p);
  auto rb = b.Generate(Prompt("Lily went to the park."), p);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->tokens, rb->tokens);
  EXPECT_EQ(ra->stats.cycles, rb->stats.cycles);
  EXPECT_EQ(ra->stats.accepted[static_cast<int>(NodeSource::kBranch)],
            rb->stats.accepted[static_cast<int>(NodeSource::kBranch)]);
}

// A saved table names its model: another model of the same shape and vocabulary (two
// synthesized llamas that differ only in their weights) refuses it.
TEST(Engine, SavedTableLoadsOnlyIntoTheSameModel) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("goose_engine_fp_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<std::unique_ptr<Model>> models;
  for (uint64_t seed : {1, 2}) {
    models.push_back(SmallSynthLlama(seed, dir + "/m" + std::to_string(seed) + ".gguf"));
    ASSERT_NE(models.back(), nullptr);
  }
  ThreadPool pool(1);
  Engine a(*models[0], 256, &pool), b(*models[1], 256, &pool), a2(*models[0], 256, &pool);
  EXPECT_NE(a.model_fingerprint(), b.model_fingerprint());
  EXPECT_EQ(a.model_fingerprint(), a2.model_fingerprint());
  EXPECT_NE(a.model_fingerprint(), Engine(Tiny(), 64, &pool).model_fingerprint());
  GenerateParams p;
  p.n_predict = 16;
  p.ignore_eos = true;
  p.spec.method = "tr";
  ASSERT_TRUE(a.Generate(models[0]->tokenizer().Encode("Tom had a ball.", true), p).ok());
  const std::string table = dir + "/tr.bin";
  ASSERT_TRUE(a.table(Tr())->Save(table).ok());
  const Status st = b.table(Tr())->Load(table);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("model mismatch"), std::string::npos) << st.message();
  EXPECT_TRUE(a2.table(Tr())->Load(table).ok());
  // A TR (unigram-only) table does not load into GOOSE's bigram table of the same model.
  EXPECT_FALSE(a2.table(Spec("goose"))->Load(table).ok());
  std::filesystem::remove_all(dir);
}

// Tuned and paper GOOSE (and their keep / cold variants) learn separately: interleaving them
// must leave the tuned GOOSE exactly as it is when it runs alone.
TEST(Engine, InterleavedVariantsNeverFeedEachOther) {
  ThreadPool pool(1);
  const std::vector<std::string> prompts = {"Tom had a big red ball.", "Lily went to the park.",
                                            "Once upon a time there was a cat. The cat"};
  GenerateParams goose;
  goose.n_predict = 48;
  goose.ignore_eos = true;
  ASSERT_TRUE(ParseSpecVariant("goose", &goose.spec).ok());
  Engine alone(Tiny(), 512, &pool), mixed(Tiny(), 512, &pool);
  for (const std::string& text : prompts) {
    for (const char* other : {"goose+paper", "goose+paper+keep", "goose+cold", "goose+noextras"}) {
      GenerateParams p = goose;
      ASSERT_TRUE(ParseSpecVariant(other, &p.spec).ok());
      ASSERT_TRUE(mixed.Generate(Prompt(text), p).ok()) << other;
    }
    auto a = alone.Generate(Prompt(text), goose);
    auto m = mixed.Generate(Prompt(text), goose);
    ASSERT_TRUE(a.ok() && m.ok());
    EXPECT_EQ(a->tokens, m->tokens);
    EXPECT_EQ(a->stats.cycles, m->stats.cycles) << text;
    for (int s = 0; s < kNumSources; ++s) {
      EXPECT_EQ(a->stats.drafted[s], m->stats.drafted[s]) << text << " source " << s;
      EXPECT_EQ(a->stats.accepted[s], m->stats.accepted[s]) << text << " source " << s;
    }
  }
  EXPECT_EQ(alone.variant_stats(goose.spec).cycles, mixed.variant_stats(goose.spec).cycles);
  // The paper preset keeps its own (per-request) table: not the tuned GOOSE's.
  SpecParams paper;
  ASSERT_TRUE(ParseSpecVariant("goose+paper", &paper).ok());
  EXPECT_NE(mixed.table(paper), mixed.table(goose.spec));
  EXPECT_EQ(mixed.table(Spec("goose")), mixed.table(goose.spec));
}

}  // namespace
}  // namespace goose

namespace goose {
namespace {

TEST(SpecVariant, KeysResolveTheTableLifetime) {
  auto key = [](const char* name) {
    SpecParams p;
    EXPECT_TRUE(ParseSpecVariant(name, &p).ok()) << name;
    return SpecVariantKey(p);
  };
  EXPECT_EQ(key("none"), "none");
  EXPECT_EQ(key("pld"), "pld");
  EXPECT_EQ(key("tr"), "tr+keep");
  EXPECT_EQ(key("tr+cold"), "tr+cold");
  EXPECT_EQ(key("balanced"), "balanced+k3+cold");
  EXPECT_EQ(key("balanced+k5+keep"), "balanced+k5+keep");
  EXPECT_EQ(key("sequoia"), "sequoia+cold");
  EXPECT_EQ(key("goose"), "goose+keep");
  EXPECT_EQ(key("goose+keep"), "goose+keep");
  EXPECT_EQ(key("goose+noextras"), "goose+noextras+keep");
  EXPECT_EQ(key("goose+paper"), "goose+paper+cold");
  EXPECT_EQ(key("goose+paper+keep"), "goose+paper+keep");
  // A key parses back to itself.
  for (const char* k : {"tr+keep", "balanced+k5+cold", "goose+paper+cold", "goose+noextras+keep"}) {
    EXPECT_EQ(key(k), k);
  }
}

TEST(SpecVariant, ParsesMethodsAndModifiers) {
  SpecParams p;
  ASSERT_TRUE(ParseSpecVariant("goose+paper+keep", &p).ok());
  EXPECT_EQ(p.method, "goose");
  EXPECT_TRUE(p.Has("paper"));
  EXPECT_EQ(p.keep_table, 1);
  ASSERT_TRUE(ParseSpecVariant("balanced+k5+cold", &p).ok());
  EXPECT_EQ(p.method, "balanced");
  EXPECT_TRUE(p.Has("k5"));
  EXPECT_FALSE(p.Has("k3"));
  EXPECT_EQ(p.keep_table, 0);
  EXPECT_FALSE(p.Has("paper"));
  ASSERT_TRUE(ParseSpecVariant("balanced", &p).ok());
  EXPECT_TRUE(p.Has("k3"));  // the default branching, filled in
  ASSERT_TRUE(ParseSpecVariant("goose+noextras", &p).ok());
  EXPECT_TRUE(p.Has("noextras"));
  EXPECT_FALSE(ParseSpecVariant("nope", &p).ok());
  EXPECT_FALSE(ParseSpecVariant("tr+paper", &p).ok());  // paper applies to goose only
  EXPECT_FALSE(ParseSpecVariant("pld+keep", &p).ok());  // pld has no table
  EXPECT_FALSE(ParseSpecVariant("balanced+k3+k5", &p).ok());
  EXPECT_FALSE(ParseSpecVariant("goose+paper+noextras", &p).ok());
  EXPECT_FALSE(ParseSpecVariant("goose+", &p).ok());
  const Status st = ParseSpecVariant("goose+fast", &p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("fast"), std::string::npos);
}

}  // namespace
}  // namespace goose
