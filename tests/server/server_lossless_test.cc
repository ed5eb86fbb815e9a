// Lossless through the server, where speculation really happens: --budget auto (the server's
// default for goose serve) for every variant, greedy and sampled, on a made-up gentle and steep
// cost curve; sampled requests of mixed methods decoded in both slots at once; and speculative
// against plain tokens at the context limit. Every answer is plain decoding's text, and the
// "goose" object of every speculative answer shows accepted draft tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../method/weak_drafter.h"
#include "cost_curves.h"
#include "engine/engine.h"
#include "server/utf8.h"
#include "server_test_util.h"
#include "spec_floor.h"
#include "test_temp.h"

namespace goose::server {
namespace {

using nlohmann::json;

constexpr const char* kPrompt = "Once upon a time";

httplib::Result PostJson(httplib::Client& c, const json& body) {
  return c.Post("/v1/completions", body.dump(), "application/json");
}

SamplingParams Sampled(uint64_t seed) {
  SamplingParams s;
  s.temp = 0.8f;
  s.top_k = 0;
  s.top_p = 0.95f;
  s.seed = seed;
  return s;
}

json SamplingFields(const SamplingParams& s) {
  if (s.temp <= 0) return json::object();
  return {{"temperature", s.temp}, {"top_k", s.top_k}, {"top_p", s.top_p}, {"seed", s.seed}};
}

// --budget auto on a made-up curve (ServerOptions::cost_curve), every request leaving the budget
// to the server's default. Gentle: every variant drafts and has tokens accepted; steep: the
// chooser answers with plain steps and own-sized trees are cut to the root.
class ServerBudgetAutoSweep : public testing::TestWithParam<bool> {};  // steep

TEST_P(ServerBudgetAutoSweep, EveryVariantAnswersPlainDecodingsText) {
  const bool steep = GetParam();
  ServerOptions o;
  o.n_parallel = 2;
  o.n_threads = 2;
  o.budget = "auto";
  o.cost_curve = steep ? SteepCostCurve() : GentleCostCurve();
  std::string why;
  const std::string draft = ProcessTempPath("weak.gguf");
  const bool with_draft = MakeWeakDrafterFile(draft, &why);
  if (with_draft) {
    o.draft_model_path = draft;
  } else {
    std::printf("*** the draft-model variants are left out: %s\n", why.c_str());
  }
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->server->WaitUntilLoaded().ok());
  auto c = s->Client();
  const int n = 48;
  // Two texts that repeat, so that every drafter has something to draft from its first cycles
  // (the chooser probes a fresh variant at once, then ever more rarely while its probes find
  // nothing: by design, a plain prompt leaves most variants on plain steps for a 48-token
  // answer), and a plain one.
  struct Request {
    std::string prompt;
    uint64_t seed;  // 0: greedy
  };
  const Request requests[] = {{"I like cake. I like cake. I like cake. I like cake.", 0},
                              {"Tom had a big red ball. Tom had a big red ball. Tom had a", 11},
                              {kPrompt, 0}};
  for (const std::string& variant : SweepVariants(with_draft)) {
    SpecParams parsed;
    ASSERT_TRUE(ParseSpecVariant(variant, &parsed).ok());
    const bool own_sizes = MethodOf(parsed).SizesOwnTrees(parsed);
    int64_t accepted = 0, passes = 0, plain_passes = 0, nodes = 0;
    for (const Request& req : requests) {
      const SamplingParams sampling = req.seed == 0 ? SamplingParams{} : Sampled(req.seed);
      SCOPED_TRACE(variant + ": " + req.prompt);
      const std::string& prompt = req.prompt;
      json body = {{"prompt", prompt}, {"max_tokens", n}, {"goose", {{"spec", variant}}}};
      body.update(SamplingFields(sampling));
      auto r = PostJson(c, body);
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      const json j = json::parse(r->body);
      EXPECT_EQ(j["choices"][0]["text"], ReferenceText(prompt, n, sampling));
      const json& g = j["goose"];
      EXPECT_EQ(g["budget"], "auto");
      accepted += AcceptedDrafts(g);
      passes += g["forward_passes"].get<int64_t>();
      nodes += std::llround(g["mean_tree_nodes"].get<double>() * g["forward_passes"].get<double>());
      const json chosen = g.value("budgets_chosen", json::object());
      plain_passes += chosen.value("1", int64_t{0});
      if (own_sizes) {
        EXPECT_TRUE(chosen.empty()) << g;  // the drafter sized its trees itself
      }
    }
    std::printf("%s on the %s curve: %lld passes, %lld nodes, %lld accepted\n", variant.c_str(),
                steep ? "steep" : "gentle", static_cast<long long>(passes),
                static_cast<long long>(nodes), static_cast<long long>(accepted));
    if (!steep) {
      EXPECT_GE(accepted, 4) << variant << ": trees pay on the gentle curve";
    } else if (own_sizes) {
      EXPECT_LT(nodes, passes * 3 / 2) << variant << ": trees cut to the root";
    } else {
      EXPECT_GT(plain_passes, passes * 3 / 4) << variant << ": plain steps pay best";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Curves, ServerBudgetAutoSweep, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& i) {
                           return i.param ? "steep" : "gentle";
                         });

// Sampled requests of mixed methods, two at a time on two slots. The first of each pair is held
// at its first cycle until the second has been queued, so both slots are busy at once whatever
// the timing: the cycles the slots ran interleave, and each text is plain sampling's of its
// request alone.
TEST(ServerConcurrency, SampledMixedMethodsRunInBothSlotsAtOnce) {
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false, held = false;
  std::vector<int> cycle_slots;  // the slot of every verified cycle, in order
  ServerOptions o;
  o.n_parallel = 2;
  o.n_threads = 2;
  o.on_cycle = [&](int slot) {
    std::unique_lock<std::mutex> lock(mu);
    cycle_slots.push_back(slot);
    if (!hold) return;
    held = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::minutes(1), [&] { return !hold; });
  };
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->server->WaitUntilLoaded().ok());
  const std::vector<std::pair<const char*, const char*>> pairs = {
      {"goose", "pld"}, {"tr", "balanced"}, {"sequoia", "goose+paper"}};
  const std::vector<std::string> prompts = {
      "I like cake. I like cake. I like cake.",
      "Tom had a big red ball. Tom had a big red ball. Tom had a",
      "one, two, three, four, one, two, three, four, one, two,"};
  const int n = 48;
  for (size_t k = 0; k < pairs.size(); ++k) {
    SCOPED_TRACE(std::string(pairs[k].first) + " beside " + pairs[k].second);
    {
      std::lock_guard<std::mutex> lock(mu);
      hold = true;
      held = false;
      cycle_slots.clear();
    }
    json answers[2];
    auto request = [&](int i) {
      const SamplingParams sampling = Sampled(100 + 2 * k + i);
      json body = {{"prompt", prompts[(k + i) % prompts.size()]},
                   {"max_tokens", n},
                   {"goose", {{"spec", i == 0 ? pairs[k].first : pairs[k].second}}}};
      body.update(SamplingFields(sampling));
      auto c = s->Client();
      auto r = PostJson(c, body);
      answers[i] = r && r->status == 200 ? json::parse(r->body) : json();
    };
    std::thread first(request, 0);
    bool first_held = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      first_held = cv.wait_for(lock, std::chrono::minutes(1), [&] { return held; });
    }
    std::thread second(request, 1);
    const bool queued = first_held && WaitForMetric(*s, "goose_queue_length 1");
    {
      std::lock_guard<std::mutex> lock(mu);
      hold = false;
    }
    cv.notify_all();
    first.join();
    second.join();
    ASSERT_TRUE(first_held) << "the first request ran no cycle";
    ASSERT_TRUE(queued) << "the second request never reached the queue";
    int slots[2] = {-1, -1};
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(answers[i].is_object()) << "request " << i << " failed";
      const SamplingParams sampling = Sampled(100 + 2 * k + i);
      EXPECT_EQ(answers[i]["choices"][0]["text"],
                ReferenceText(prompts[(k + i) % prompts.size()], n, sampling))
          << "request " << i;
      EXPECT_GT(AcceptedDrafts(answers[i]["goose"]), 0) << answers[i]["goose"];
      slots[i] = answers[i]["goose"]["slot"].get<int>();
    }
    ASSERT_NE(slots[0], slots[1]);
    // Both slots were busy at once: the second slot ran cycles between the first one's.
    std::lock_guard<std::mutex> lock(mu);
    const auto first_of_second = std::find(cycle_slots.begin(), cycle_slots.end(), slots[1]);
    const auto last_of_first = std::find(cycle_slots.rbegin(), cycle_slots.rend(), slots[0]).base();
    EXPECT_TRUE(first_of_second != cycle_slots.end() && first_of_second < last_of_first)
        << "the requests ran one after the other";
  }
}

// A context of 64 tokens that every request outgrows: each method stops where plain decoding
// does, with plain decoding's text, greedy and sampled, its trees cut to the context's room on
// the way.
TEST(ServerContextLimit, SpeculativeTextEqualsPlainAtTheLimit) {
  const int n_ctx = 64;
  ServerOptions o;
  o.n_parallel = 2;
  o.n_threads = 2;
  o.n_ctx = n_ctx;
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->server->WaitUntilLoaded().ok());
  const Model& model = Tiny();
  const std::vector<int32_t> prompt = model.tokenizer().Encode(kPrompt, true);
  ThreadPool pool(1);
  Engine plain(model, n_ctx, &pool);
  auto c = s->Client();
  for (uint64_t seed : {0u, 5u}) {  // 0: greedy
    const SamplingParams sampling = seed == 0 ? SamplingParams{} : Sampled(seed);
    GenerateParams p;
    p.n_predict = 200;
    p.ignore_eos = false;
    p.sampling = sampling;
    auto want = plain.Generate(prompt, p);
    ASSERT_TRUE(want.ok());
    ASSERT_TRUE(want->hit_context_limit) << "the text ended before the context did";
    const std::string want_text = ToValidUtf8(model.tokenizer().Decode(want->tokens));
    for (const char* spec : {"none", "goose", "pld", "tr", "goose+paper"}) {
      SCOPED_TRACE(std::string(spec) + (seed == 0 ? " greedy" : " sampled"));
      json body = {{"prompt", kPrompt}, {"max_tokens", 200}, {"goose", {{"spec", spec}}}};
      body.update(SamplingFields(sampling));
      auto r = PostJson(c, body);
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      const json j = json::parse(r->body);
      EXPECT_EQ(j["choices"][0]["text"], want_text);
      EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
      EXPECT_EQ(j["usage"]["completion_tokens"].get<size_t>(), want->tokens.size());
      if (std::string(spec) != "none") {
        EXPECT_GT(AcceptedDrafts(j["goose"]), 0) << j["goose"];
      }
    }
  }
}

}  // namespace
}  // namespace goose::server
