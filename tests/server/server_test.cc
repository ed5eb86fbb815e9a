// The HTTP server in process, on a free loopback port, with the tiny model: answers equal plain
// decoding (streamed or not, greedy or sampled, whichever method, concurrently), bad requests
// get a clear 4xx and the server keeps serving, and the slots, queue, cancellation, shutdown and
// authentication behave as server.h says.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "../method/weak_drafter.h"
#include "e2e/e2e_util.h"
#include "server_test_util.h"

namespace goose::server {
namespace {

using nlohmann::json;

constexpr const char* kPrompt = "Once upon a time";
// Two slots on a pool of two threads: their forward passes must take turns on it.
const ServerOptions kTwoSlots = [] {
  ServerOptions o;
  o.n_parallel = 2;
  o.n_threads = 2;
  return o;
}();

httplib::Result PostJson(httplib::Client& c, const std::string& path, const std::string& body) {
  return c.Post(path.c_str(), body, "application/json");
}

// POST a streaming request; returns the raw SSE body.
std::string PostStream(httplib::Client& c, const std::string& path, const std::string& body,
                       int* status = nullptr) {
  std::string out;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    out.append(d, n);
    return true;
  };
  auto res = c.send(req);
  if (status) *status = res ? res->status : -1;
  return out;
}

json CompletionRequestBody(int max_tokens, json extra = json::object()) {
  json j = {{"prompt", kPrompt}, {"max_tokens", max_tokens}};
  j.update(extra);
  return j;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = StartServer(kTwoSlots).release();
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->server->WaitUntilLoaded().ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static TestServer* server_;
};
TestServer* ServerTest::server_ = nullptr;

TEST_F(ServerTest, HealthModelsMetrics) {
  auto c = server_->Client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body), json({{"status", "ok"}}));
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  const json models = json::parse(m->body);
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "stories260K.gguf");
  EXPECT_EQ(models["data"][0]["object"], "model");
  // A response is counted once it has been sent (the HTTP library's logger runs after the
  // write), so the client may ask for /metrics a moment before /health's count lands: poll.
  const std::string health = "goose_requests_total{endpoint=\"/health\",status=\"200\"}";
  std::string body;
  for (int i = 0; i < 200 && body.find(health) == std::string::npos; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto metrics = c.Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200);
    body = metrics->body;
  }
  EXPECT_NE(body.find("goose_slots_total 2\n"), std::string::npos) << body;
  EXPECT_NE(body.find(health), std::string::npos) << body;
}

TEST_F(ServerTest, CompletionIsPlainDecodingStreamedOrNot) {
  auto c = server_->Client();
  const std::string want = ReferenceText(kPrompt, 48);
  for (const char* spec : {"goose", "none", "pld", "tr", "balanced+k5", "goose+paper"}) {
    SCOPED_TRACE(spec);
    const json body = CompletionRequestBody(48, {{"goose", {{"spec", spec}}}});
    auto res = PostJson(c, "/v1/completions", body.dump());
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json j = json::parse(res->body);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["choices"][0]["text"], want);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["usage"]["completion_tokens"], 48);
    EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
    EXPECT_EQ(j["usage"]["total_tokens"], 53);
    EXPECT_TRUE(j["goose"]["spec"].get<std::string>().rfind(std::string(spec).substr(0, 4), 0) == 0)
        << j["goose"];
    EXPECT_GT(j["goose"]["forward_passes"].get<int>(), 0);
    // Speculation happened (the text alone would not show it): the draft methods' trees had
    // tokens accepted; plain decoding drafts nothing.
    const bool plain = std::string(spec) == "none";
    if (plain) {
      EXPECT_EQ(AcceptedDrafts(j["goose"]), 0) << j["goose"];
    } else {
      EXPECT_GT(AcceptedDrafts(j["goose"]), 0) << j["goose"];
    }

    json sbody = body;
    sbody["stream"] = true;
    sbody["stream_options"] = {{"include_usage", true}};
    int status = 0;
    const std::vector<json> events =
        ParseSse(PostStream(c, "/v1/completions", sbody.dump(), &status));
    EXPECT_EQ(status, 200);
    ASSERT_GE(events.size(), 3u);
    EXPECT_EQ(StreamedText(events, false), want);
    EXPECT_EQ(events.back(), "[DONE]");
    const json& usage_chunk = events[events.size() - 2];
    EXPECT_TRUE(usage_chunk["choices"].empty());
    EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 48);
    const json& last = events[events.size() - 3];
    EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
    ASSERT_TRUE(last.contains("goose"));
    if (!plain) {
      EXPECT_GT(AcceptedDrafts(last["goose"]), 0) << last["goose"];
    }
  }
}

// OpenAI's Predicted Outputs: the answer is plain decoding's whatever the prediction, and usage
// counts the prediction's tokens the answer reproduced (accepted) and the rest (rejected), in
// the answer and in the streamed usage chunk; without a prediction there are no such details.
TEST_F(ServerTest, PredictionCountsAcceptedAndRejectedTokens) {
  auto c = server_->Client();
  const std::string want = ReferenceText(kPrompt, 40);
  const std::string edited =
      want.substr(0, want.size() / 2) + " purple " + want.substr(want.size() / 2);
  auto usage_of = [&](const json& body, bool stream) {
    json b = body;
    if (!stream) {
      auto res = PostJson(c, "/v1/completions", b.dump());
      EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
      if (!res || res->status != 200) return json();
      const json j = json::parse(res->body);
      EXPECT_EQ(j["choices"][0]["text"], want);
      return j["usage"];
    }
    b["stream"] = true;
    b["stream_options"] = {{"include_usage", true}};
    const std::vector<json> events = ParseSse(PostStream(c, "/v1/completions", b.dump()));
    EXPECT_GE(events.size(), 3u);
    if (events.size() < 3) return json();
    EXPECT_EQ(StreamedText(events, false), want);
    return events[events.size() - 2]["usage"];
  };
  for (const char* spec : {"goose", "pld", "none"}) {
    for (bool stream : {false, true}) {
      SCOPED_TRACE(std::string(spec) + (stream ? " streamed" : ""));
      const json base = CompletionRequestBody(40, {{"goose", {{"spec", spec}}}});
      EXPECT_FALSE(usage_of(base, stream).contains("completion_tokens_details"));
      json right = base, part = base, other = base;
      right["prediction"] = {{"type", "content"}, {"content", want}};
      part["prediction"] = {{"type", "content"}, {"content", edited}};
      other["prediction"] = {{"type", "content"}, {"content", "3.14159 2.71828 1.41421"}};
      const json r = usage_of(right, stream)["completion_tokens_details"];
      EXPECT_GT(r["accepted_prediction_tokens"].get<int>(), 30) << r;
      EXPECT_LE(r["rejected_prediction_tokens"].get<int>(), 2) << r;
      const json p = usage_of(part, stream)["completion_tokens_details"];
      EXPECT_GT(p["accepted_prediction_tokens"].get<int>(), 30) << p;
      EXPECT_GE(p["rejected_prediction_tokens"].get<int>(), 1) << p;
      const json o = usage_of(other, stream)["completion_tokens_details"];
      EXPECT_LE(o["accepted_prediction_tokens"].get<int>(), 1) << o;  // (its leading space)
      EXPECT_GT(o["rejected_prediction_tokens"].get<int>(), 5) << o;
    }
  }
  json too_long = CompletionRequestBody(4);
  too_long["prediction"] = {{"type", "content"}, {"content", std::string(40000, 'x')}};
  auto res = PostJson(c, "/v1/completions", too_long.dump());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "prediction") << res->body;
}

TEST_F(ServerTest, SeededSamplingIsPlainSampling) {
  auto c = server_->Client();
  SamplingParams s;
  s.temp = 0.9f;
  s.top_k = 20;
  s.top_p = 0.9f;
  for (uint64_t seed : {1u, 7u, 12345u}) {
    s.seed = seed;
    const std::string want = ReferenceText(kPrompt, 40, s);
    const json body = CompletionRequestBody(
        40, {{"temperature", 0.9}, {"top_k", 20}, {"top_p", 0.9}, {"seed", seed}});
    auto res = PostJson(c, "/v1/completions", body.dump());
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json j = json::parse(res->body);
    EXPECT_EQ(j["choices"][0]["text"], want) << "seed " << seed;
    EXPECT_GT(AcceptedDrafts(j["goose"]), 0) << "seed " << seed << ": " << j["goose"];
    json sbody = body;
    sbody["stream"] = true;
    const std::vector<json> events = ParseSse(PostStream(c, "/v1/completions", sbody.dump()));
    EXPECT_EQ(StreamedText(events, false), want);
    EXPECT_GT(AcceptedDrafts(StreamedGoose(events)), 0) << "seed " << seed;
  }
}

TEST_F(ServerTest, StopStringsEndTheTextBeforeThem) {
  auto c = server_->Client();
  const std::vector<std::string> stop = {"girl", "park"};
  const std::string want = ReferenceText(kPrompt, 100, {}, stop);
  ASSERT_LT(want.size(), ReferenceText(kPrompt, 100).size());  // the stop is reached
  const json body = CompletionRequestBody(100, {{"stop", stop}});
  auto res = PostJson(c, "/v1/completions", body.dump());
  ASSERT_TRUE(res);
  const json j = json::parse(res->body);
  EXPECT_EQ(j["choices"][0]["text"], want);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(j["usage"]["completion_tokens"].get<int>(), 100);
  json sbody = body;
  sbody["stream"] = true;
  EXPECT_EQ(StreamedText(ParseSse(PostStream(c, "/v1/completions", sbody.dump())), false), want);
}

TEST_F(ServerTest, TokenIdPromptAndTokenizeRoundTrip) {
  auto c = server_->Client();
  auto tk = PostJson(c, "/tokenize", json({{"content", kPrompt}, {"add_special", true}}).dump());
  ASSERT_TRUE(tk);
  ASSERT_EQ(tk->status, 200);
  const json ids = json::parse(tk->body)["tokens"];
  EXPECT_EQ(ids.size(), 5u);  // BOS + 4
  auto res = PostJson(c, "/v1/completions", json({{"prompt", ids}, {"max_tokens", 24}}).dump());
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["choices"][0]["text"], ReferenceText(kPrompt, 24));
  auto pieces = PostJson(c, "/tokenize", json({{"content", "Once"}, {"with_pieces", true}}).dump());
  ASSERT_TRUE(pieces);
  const json p = json::parse(pieces->body)["tokens"];
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0]["piece"], " Once");
  json no_bos = ids;
  no_bos.erase(no_bos.begin());
  auto de = PostJson(c, "/detokenize", json({{"tokens", no_bos}}).dump());
  ASSERT_TRUE(de);
  EXPECT_EQ(json::parse(de->body)["content"], std::string(" ") + kPrompt);
}

// Each bad request gets its status and a message saying what is wrong, and the next valid
// request is still answered with plain decoding's text.
TEST_F(ServerTest, BadRequestsAreAnsweredAndServingGoesOn) {
  struct Bad {
    const char* path;
    std::string body;
    int status;
    const char* says;
  };
  const std::string long_prompt = [] {
    std::string s;
    for (int i = 0; i < 700; ++i) s += " once";
    return s;
  }();
  const std::vector<Bad> bad = {
      {"/v1/completions", "{not json", 400, "not valid JSON"},
      {"/v1/completions", "[1,2]", 400, "must be a JSON object"},
      {"/v1/completions", R"({"prompt": 42})", 400, "'prompt' must be a string"},
      {"/v1/completions", R"({"max_tokens": 5})", 400, "'prompt' is required"},
      {"/v1/chat/completions", R"({"prompt": "hi"})", 400, "'messages' is required"},
      {"/v1/chat/completions", R"({"messages": []})", 400, "'messages' is empty"},
      {"/v1/chat/completions", R"({"messages": [{"role": "robot", "content": "hi"}]})", 400,
       "the roles are system, user, assistant"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})", 400,
       "--chat-template"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": -5})", 400, "'max_tokens' must be"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 99999999999})", 400,
       "'max_tokens' must be"},
      {"/v1/completions", R"({"prompt": "x", "temperature": 1e9})", 400, "'temperature' must be"},
      {"/v1/completions", R"({"prompt": "x", "top_p": -1})", 400, "'top_p' must be"},
      {"/v1/completions", R"({"prompt": "x", "n": 3})", 400, "'n' must be 1"},
      {"/v1/completions", json({{"prompt", long_prompt}}).dump(), 400,
       "tokens long but the context"},
      {"/v1/completions", "{\"prompt\": \"caf\xc3\"}", 400, "not valid UTF-8"},
      {"/v1/completions", R"({"prompt": "x", "goose": {"spec": "teleport"}})", 400,
       "unknown method"},
      {"/v1/completions", R"({"prompt": "x", "goose": {"budget": "auto"}})", 400, "--budget auto"},
      {"/v1/completions", R"({"prompt": "x", "goose": {"spec": "graft"}})", 400,
       "needs a draft model, and this server has none (start goose serve with -md"},
      {"/v1/completions", R"({"prompt": [1, 999999]})", 400, "outside the vocabulary"},
      {"/v1/completions", R"({"prompt": "x", "logit_bias": {"3": 5}})", 400, "not supported"},
      {"/v1/completions", std::string(10 << 20, ' '), 413, "larger than the server's limit"},
      {"/v1/nonsense", "{}", 404, "no such endpoint"},
      {"/detokenize", R"({"tokens": [1, 100000]})", 400, "outside the vocabulary"},
  };
  auto c = server_->Client();
  const std::string want = ReferenceText(kPrompt, 16);
  for (const Bad& b : bad) {
    SCOPED_TRACE(std::string(b.path) + " " + b.body.substr(0, 80));
    auto res = PostJson(c, b.path, b.body);
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, b.status) << res->body;
    const json err = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(err.is_object() && err.contains("error")) << res->body;
    EXPECT_NE(err["error"]["message"].get<std::string>().find(b.says), std::string::npos)
        << res->body;
    EXPECT_TRUE(err["error"].contains("type") && err["error"].contains("param") &&
                err["error"].contains("code"));
    auto ok = PostJson(c, "/v1/completions", CompletionRequestBody(16).dump());
    ASSERT_TRUE(ok);
    ASSERT_EQ(ok->status, 200) << ok->body;
    EXPECT_EQ(json::parse(ok->body)["choices"][0]["text"], want);
  }
}

TEST_F(ServerTest, ConcurrentMixedRequestsAllGetPlainDecoding) {
  const int n_clients = kSanitized ? 3 : 6, n_requests = kSanitized ? 3 : 6;
  std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily and Tom went",
                                      "One day, a bird"};
  std::vector<std::string> want;
  for (const std::string& p : prompts) want.push_back(ReferenceText(p, 40));
  std::atomic<int> failures{0};
  std::atomic<int64_t> accepted{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < n_clients; ++t) {
    clients.emplace_back([&, t] {
      auto c = server_->Client();
      for (int i = 0; i < n_requests; ++i) {
        const size_t k = (t + i) % prompts.size();
        const char* spec = (i % 3 == 0) ? "goose" : (i % 3 == 1) ? "pld" : "none";
        json body = {{"prompt", prompts[k]}, {"max_tokens", 40}, {"goose", {{"spec", spec}}}};
        std::string text;
        json goose;
        if ((t + i) % 2 == 0) {
          body["stream"] = true;
          const std::vector<json> events = ParseSse(PostStream(c, "/v1/completions", body.dump()));
          text = StreamedText(events, false);
          goose = StreamedGoose(events);
        } else {
          auto res = PostJson(c, "/v1/completions", body.dump());
          if (res && res->status == 200) {
            const json j = json::parse(res->body);
            text = j["choices"][0]["text"];
            goose = j["goose"];
          }
        }
        if (text != want[k]) ++failures;
        accepted += std::max<int64_t>(0, AcceptedDrafts(goose));
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(accepted.load(), n_clients * n_requests) << "speculation happened";
}

TEST(ServerChat, ChatMlPromptGetsPlainDecodingOfTheRenderedPrompt) {
  ServerOptions o = kTwoSlots;
  o.chat_template = "chatml";
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->server->WaitUntilLoaded().ok());
  auto c = s->Client();
  const json body = {{"messages",
                      {{{"role", "system"}, {"content", "Be kind."}},
                       {{"role", "user"}, {"content", "Tell a story."}}}},
                     {"max_tokens", 32}};
  const std::string rendered =
      "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nTell a story.<|im_end|>\n"
      "<|im_start|>assistant\n";
  const std::string want = ReferenceText(rendered, 32);
  auto res = PostJson(c, "/v1/chat/completions", body.dump());
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json j = json::parse(res->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], want);
  json sbody = body;
  sbody["stream"] = true;
  const std::vector<json> events = ParseSse(PostStream(c, "/v1/chat/completions", sbody.dump()));
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(StreamedText(events, true), want);
}

TEST(ServerAuth, ApiKeyIsRequiredExceptForHealth) {
  ServerOptions o = kTwoSlots;
  o.api_key = "s3cret-key";
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->server->WaitUntilLoaded().ok());
  auto c = s->Client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  for (const char* auth : {"", "Bearer wrong", "Bearer s3cret-ke", "Bearer s3cret-keyy",
                           "s3cret-key", "Basic s3cret-key"}) {
    httplib::Headers headers;
    if (*auth) headers.emplace("Authorization", auth);
    auto r =
        c.Post("/v1/completions", headers, CompletionRequestBody(4).dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << auth;
    EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
    auto m = c.Get("/metrics", headers);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->status, 401);
  }
  c.set_bearer_token_auth("s3cret-key");
  auto r = PostJson(c, "/v1/completions", CompletionRequestBody(8).dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], ReferenceText(kPrompt, 8));
}

// One slot and no queue: while the slot runs, another request is turned away with 503; a
// streaming client that hangs up cancels its generation and frees the slot.
TEST(ServerSlots, FullQueueIs503AndAHangUpFreesTheSlot) {
  std::atomic<bool> hold{true};
  // Held until the test lets go, or for a minute at most: a failed assertion before the release
  // must not leave the server's shutdown waiting on a held cycle.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  ServerOptions o;
  o.n_parallel = 1;
  o.max_queue = 0;
  o.n_threads = 1;
  o.on_cycle = [&](int) {
    while (hold.load() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->server->WaitUntilLoaded().ok());
  std::atomic<int> chunks{0};
  std::thread holder([&] {
    auto c = s->Client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = json({{"prompt", kPrompt}, {"stream", true}}).dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      ++chunks;
      return false;  // hang up at the first chunk
    };
    c.send(req);
  });
  ASSERT_TRUE(WaitForMetric(*s, "goose_slots_busy 1"));
  auto c = s->Client();
  auto r = PostJson(c, "/v1/completions", CompletionRequestBody(4).dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "queue_full");
  holder.join();
  EXPECT_EQ(chunks.load(), 1);
  hold = false;  // the generation goes on, notices the hang-up at its next write, and stops
  EXPECT_TRUE(WaitForMetric(*s, "goose_requests_cancelled_total 1"));
  EXPECT_TRUE(WaitForMetric(*s, "goose_slots_busy 0"));
  EXPECT_TRUE(WaitForMetric(*s, "goose_generations_total 0"));
  EXPECT_TRUE(WaitForMetric(*s, "goose_requests_rejected_total{reason=\"queue_full\"} 1"));
  auto ok = PostJson(c, "/v1/completions", CompletionRequestBody(8).dump());
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body)["choices"][0]["text"], ReferenceText(kPrompt, 8));
}

TEST(ServerLifecycle, HealthIs503UntilTheModelHasLoaded) {
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  ServerOptions o = kTwoSlots;
  o.check_model = [&](const Model&) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return go; });
    return Status::Ok();
  };
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  auto c = s->Client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  EXPECT_EQ(json::parse(h->body)["status"], "loading model");
  auto r = PostJson(c, "/v1/completions", CompletionRequestBody(4).dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_loading");
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
  }
  cv.notify_all();
  ASSERT_TRUE(s->server->WaitUntilLoaded().ok());
  h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

// A missing model, or a missing draft model (-md): the load fails naming the file, and /health
// says 503.
TEST(ServerLifecycle, AFailedLoadIsReportedAndHealthSays503) {
  ServerOptions missing_model = kTwoSlots, missing_draft = kTwoSlots;
  missing_model.model_path = "/nonexistent/model.gguf";
  missing_draft.draft_model_path = "/nonexistent/draft.gguf";
  for (const auto& [o, says] :
       {std::pair{missing_model, "/nonexistent/model.gguf"},
        std::pair{missing_draft, "draft model (-md): /nonexistent/draft"}}) {
    SCOPED_TRACE(says);
    auto s = StartServer(o);
    ASSERT_NE(s, nullptr);
    const Status st = s->server->WaitUntilLoaded();
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
    auto c = s->Client();
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 503);
    EXPECT_EQ(json::parse(h->body)["status"], "error");
  }
}

// With -md, every slot drafts with the draft model: the draft-model methods answer plain
// decoding's text, greedy and sampled, on two slots at once; without a draft they are refused
// at Create (as the default method) or with a 400 (per request, above); a missing draft fails
// the load (ServerLifecycle above).
TEST(ServerDraftModel, DraftModelMethodsAnswerPlainDecoding) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) /
                                    ("goose_serve_draft_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string draft = (dir / "weak.gguf").string();
  std::string why;
  if (!MakeWeakDrafterFile(draft, &why)) GTEST_SKIP() << why;
  ServerOptions o = kTwoSlots;
  o.spec = "graft";
  EXPECT_FALSE(Server::Create(o).ok());  // no -md
  o.draft_model_path = draft;
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->server->WaitUntilLoaded().ok());
  SamplingParams sampled;
  sampled.temp = 0.9f;
  sampled.seed = 7;
  const std::string greedy_want = ReferenceText(kPrompt, 40);
  const std::string sampled_want = ReferenceText(kPrompt, 40, sampled);
  std::vector<std::thread> clients;
  std::mutex mu;
  std::vector<std::string> failures;
  for (const char* spec : {"graft", "draft", "draft-tree+prune", "graft+paper"}) {
    clients.emplace_back([&, spec] {
      auto c = s->Client();
      for (bool sample : {false, true}) {
        json extra = {{"goose", {{"spec", spec}, {"budget", 16}}}};
        if (sample) extra.update({{"temperature", 0.9}, {"seed", 7}});
        auto res = PostJson(c, "/v1/completions", CompletionRequestBody(40, extra).dump());
        const std::string want = sample ? sampled_want : greedy_want;
        std::lock_guard<std::mutex> lock(mu);
        if (!res || res->status != 200) {
          failures.push_back(std::string(spec) + ": " + (res ? res->body : "no answer"));
          continue;
        }
        const json j = json::parse(res->body);
        if (j["choices"][0]["text"] != want) {
          failures.push_back(std::string(spec) + (sample ? " sampled" : " greedy") +
                             ": not plain decoding's text");
        } else if (AcceptedDrafts(j["goose"]) <= 0) {
          failures.push_back(std::string(spec) + (sample ? " sampled" : " greedy") +
                             ": no draft token accepted: " + j["goose"].dump());
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_TRUE(failures.empty()) << failures.front();
  s.reset();
  std::filesystem::remove_all(dir);
}

// Cycles slowed to 2 ms: a 400-token generation takes about a second, long after Shutdown().
void SlowCycles(ServerOptions* o) {
  o->spec = "none";
  o->on_cycle = [](int) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
}

TEST(ServerLifecycle, ShutdownLetsInFlightRequestsFinish) {
  ServerOptions o = kTwoSlots;
  o.spec = "none";
  o.shutdown_grace_seconds = 60;
  // The generation is held at its fifth cycle until Shutdown() is called (a minute at most), so
  // that it is in flight then whatever the machine's speed; its cycles are slowed to 2 ms so
  // that it is still running when Shutdown() waits for it.
  std::mutex mu;
  std::condition_variable cv;
  bool shutting_down = false;
  std::atomic<int> cycles{0};
  o.on_cycle = [&](int) {
    if (++cycles == 5) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::minutes(1), [&] { return shutting_down; });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->server->WaitUntilLoaded().ok());
  const int n = 400;
  std::string text;
  int status = 0;
  std::thread client([&] {
    auto c = s->Client();
    auto r = PostJson(c, "/v1/completions", CompletionRequestBody(n).dump());
    if (r) {
      status = r->status;
      text = json::parse(r->body)["choices"][0]["text"];
    }
  });
  ASSERT_TRUE(WaitForMetric(*s, "goose_slots_busy 1"));
  {
    std::lock_guard<std::mutex> lock(mu);
    shutting_down = true;
  }
  cv.notify_all();
  s->server->Shutdown();
  client.join();
  // The grace period was used: the generation had hundreds of cycles to go when the shutdown
  // began, and it ran them all (a shutdown that cancelled it would answer 503).
  EXPECT_EQ(cycles.load(), n - 1);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(text, ReferenceText(kPrompt, n));
  // The listener is closed now.
  auto c = s->Client();
  EXPECT_FALSE(c.Get("/health"));
}

TEST(ServerLifecycle, ShutdownCancelsWhatOutlivesTheGrace) {
  ServerOptions o = kTwoSlots;
  SlowCycles(&o);
  o.shutdown_grace_seconds = 0;
  auto s = StartServer(o);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->server->WaitUntilLoaded().ok());
  int status = 0;
  std::string code;
  std::thread client([&] {
    auto c = s->Client();
    auto r = PostJson(c, "/v1/completions", json({{"prompt", kPrompt}}).dump());  // 507 tokens
    if (r) {
      status = r->status;
      code = json::parse(r->body)["error"]["code"];
    }
  });
  ASSERT_TRUE(WaitForMetric(*s, "goose_slots_busy 1"));
  s->server->Shutdown();
  client.join();
  // Unless cancelled, the generation would have run to the context's end and answered 200.
  EXPECT_EQ(status, 503);
  EXPECT_EQ(code, "shutting_down");
}

}  // namespace
}  // namespace goose::server
