// The drafter on its own, driven by a host loop written against the C API alone (host_loop.h):
// lossless (plain decoding's tokens) and as good as goose's own engine (`goose generate --spec
// goose` at the same fixed budget: the same MAT, within 2%; in fact the same trees).
#include <string>
#include <vector>

#include "host_loop.h"

namespace goose_test {
namespace {

constexpr int kPredict = 96;

// A TinyStories opening, and a text that repeats itself (the context matcher's spine fires).
const std::vector<std::string>& Prompts() {
  static const std::vector<std::string> p = {
      "Once upon a time",
      "Tom had a red ball. Tom had a red ball. Tom had a red ball. Tom had a",
  };
  return p;
}

DrafterPtr NewDrafter(goose_model* m, const char* method) {
  goose_model_info mi;
  EXPECT_EQ(goose_model_info_get(m, &mi), GOOSE_OK);
  goose_drafter_params p;
  goose_drafter_default_params(&p);
  p.n_vocab = mi.n_vocab;
  p.method = method;
  p.model_fingerprint = mi.fingerprint;
  goose_drafter* d = nullptr;
  EXPECT_EQ(goose_drafter_new(&p, &d), GOOSE_OK) << goose_last_error();
  return DrafterPtr(d);
}

std::vector<int32_t> PlainTokens(goose_session* s, const std::vector<int32_t>& prompt) {
  goose_generate_params p;
  goose_generate_default_params(&p);
  p.max_tokens = kPredict;
  EXPECT_EQ(goose_session_generate(s, prompt.data(), int32_t(prompt.size()), &p, nullptr, nullptr,
                                   nullptr),
            GOOSE_OK);
  const int32_t* t = nullptr;
  int32_t n = 0;
  EXPECT_EQ(goose_session_tokens(s, &t, &n), GOOSE_OK);
  return std::vector<int32_t>(t, t + n);
}

// Against the goose binary: each prompt from a fresh drafter and a fresh `goose generate`.
TEST(HostLoop, MatchesGooseGenerateAtFixedBudgets) {
  ModelPtr m = LoadTiny();
  SessionPtr s = OpenSession(m.get());
  for (int budget : {8, 32}) {
    for (const std::string& text : Prompts()) {
      SCOPED_TRACE("budget " + std::to_string(budget) + ", prompt '" + text + "'");
      const std::vector<int32_t> prompt = Tokenize(m.get(), text);
      DrafterPtr d = NewDrafter(m.get(), "goose");
      const HostLoopResult host = RunHostLoop(m.get(), s.get(), d.get(), prompt, kPredict, budget);
      EXPECT_EQ(host.tokens, PlainTokens(s.get(), prompt));  // lossless
      const nlohmann::json j =
          GenerateJson(text, "-n " + std::to_string(kPredict) + " --spec goose --budget " +
                                 std::to_string(budget));
      ASSERT_TRUE(j.is_object());
      EXPECT_EQ(host.tokens, j["tokens"].get<std::vector<int32_t>>());
      const double mat = j["stats"]["mean_accepted_tokens"].get<double>();
      EXPECT_NEAR(host.Mat(), mat, 0.02 * mat);
      EXPECT_EQ(host.passes, j["stats"]["forward_passes"].get<int64_t>());
      std::printf("budget %d, '%s': host loop MAT %.4f (%lld passes), goose generate %.4f\n",
                  budget, text.c_str(), host.Mat(), static_cast<long long>(host.passes), mat);
    }
  }
}

// With a predicted output (goose generate --prediction FILE): the same trees again, its spine
// the prediction's.
TEST(HostLoop, WithAPredictionMatchesGooseGenerate) {
  ModelPtr m = LoadTiny();
  SessionPtr s = OpenSession(m.get());
  const std::string text = Prompts()[0];
  const std::vector<int32_t> prompt = Tokenize(m.get(), text);
  // The expected output: plain decoding's text with one sentence changed.
  const std::vector<int32_t> plain = PlainTokens(s.get(), prompt);
  size_t len = 0;
  goose_detokenize(m.get(), plain.data(), int32_t(plain.size()), nullptr, 0, &len);
  std::string expected(len + 1, '\0');
  ASSERT_OK(goose_detokenize(m.get(), plain.data(), int32_t(plain.size()), expected.data(),
                             expected.size(), &len));
  expected.resize(len);
  expected.replace(expected.size() / 2, 6, " blue ");
  const std::string file = CacheHome() + ".prediction";
  std::FILE* f = std::fopen(file.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(expected.data(), 1, expected.size(), f);
  std::fclose(f);
  int32_t n = 0;
  goose_tokenize(m.get(), expected.data(), expected.size(), 0, nullptr, 0, &n);
  std::vector<int32_t> prediction(n);
  ASSERT_OK(goose_tokenize(m.get(), expected.data(), expected.size(), 0, prediction.data(), n, &n));
  DrafterPtr d = NewDrafter(m.get(), "goose");
  const HostLoopResult host =
      RunHostLoop(m.get(), s.get(), d.get(), prompt, kPredict, 32, prediction);
  EXPECT_EQ(host.tokens, plain);
  const nlohmann::json j = GenerateJson(
      text, "-n " + std::to_string(kPredict) + " --spec goose --budget 32 --prediction " + file);
  std::remove(file.c_str());
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(host.tokens, j["tokens"].get<std::vector<int32_t>>());
  EXPECT_EQ(host.passes, j["stats"]["forward_passes"].get<int64_t>());
  EXPECT_GT(host.Mat(), 3.0) << "the prediction's spine is accepted";
  goose_spec_stats st;
  ASSERT_OK(goose_drafter_stats(d.get(), &st));
  EXPECT_GT(st.accepted[GOOSE_SOURCE_PREDICTION], 0);
  std::printf("with a prediction: host loop MAT %.4f (%lld passes), goose generate %.4f\n",
              host.Mat(), static_cast<long long>(host.passes),
              j["stats"]["mean_accepted_tokens"].get<double>());
}

// One drafter across requests, as a model's learned state is across goose_session_generate
// calls: the same tokens and passes request by request (what the table kept included), and the
// statistics per source add up.
TEST(HostLoop, OneDrafterAcrossRequestsMatchesTheEngine) {
  ModelPtr m = LoadTiny();
  SessionPtr host_session = OpenSession(m.get());
  DrafterPtr d = NewDrafter(m.get(), "goose");
  ModelPtr engine_model = LoadTiny();  // a learned state of its own
  SessionPtr engine = OpenSession(engine_model.get());
  goose_generate_params p;
  goose_generate_default_params(&p);
  p.max_tokens = kPredict;
  p.method = "goose";
  p.budget = 24;
  int64_t passes = 0, generated = 0;
  for (int round = 0; round < 2; ++round) {
    for (const std::string& text : Prompts()) {
      const std::vector<int32_t> prompt = Tokenize(m.get(), text);
      const HostLoopResult host =
          RunHostLoop(m.get(), host_session.get(), d.get(), prompt, kPredict, p.budget);
      goose_generate_stats st;
      ASSERT_OK(goose_session_generate(engine.get(), prompt.data(), int32_t(prompt.size()), &p,
                                       nullptr, nullptr, &st));
      const int32_t* t = nullptr;
      int32_t n = 0;
      ASSERT_OK(goose_session_tokens(engine.get(), &t, &n));
      EXPECT_EQ(host.tokens, std::vector<int32_t>(t, t + n));
      EXPECT_EQ(host.passes, st.forward_passes) << "round " << round << ", '" << text << "'";
      passes += host.passes;
      generated += int64_t(host.tokens.size());
    }
  }
  goose_spec_stats stats;
  ASSERT_OK(goose_drafter_stats(d.get(), &stats));
  EXPECT_EQ(stats.cycles, passes);
  int64_t accepted = 0;
  for (int src = 0; src < GOOSE_SOURCE_COUNT; ++src) {
    EXPECT_LE(stats.accepted[src], stats.reached[src]);
    EXPECT_LE(stats.reached[src], stats.drafted[src]);
    accepted += stats.accepted[src];
  }
  EXPECT_EQ(stats.committed, accepted + stats.bonus);
  EXPECT_GT(stats.accepted[GOOSE_SOURCE_SPINE], 0);  // the repetitive prompt's matches
  // Every generated token but each request's first came from a cycle (none hit the limit).
  EXPECT_GE(stats.committed, generated - 2 * int64_t(Prompts().size()));
}

// Other methods through the same loop stay lossless.
TEST(HostLoop, EveryModelFreeMethodIsLossless) {
  ModelPtr m = LoadTiny();
  SessionPtr s = OpenSession(m.get());
  const std::vector<int32_t> prompt = Tokenize(m.get(), Prompts()[1]);
  const std::vector<int32_t> plain = PlainTokens(s.get(), prompt);
  for (const char* method :
       {"goose+paper", "goose+cold", "tr", "pld", "balanced", "sequoia", "none"}) {
    DrafterPtr d = NewDrafter(m.get(), method);
    const HostLoopResult host = RunHostLoop(m.get(), s.get(), d.get(), prompt, kPredict, 16);
    EXPECT_EQ(host.tokens, plain) << method;
  }
}

}  // namespace
}  // namespace goose_test
