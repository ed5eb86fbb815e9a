#include "server_test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "server/utf8.h"

namespace goose::server {

std::string TinyModelPath() {
  const char* env = std::getenv("GOOSE_SHARED");
  return std::string(env && *env ? env : GOOSE_SHARED_DIR) + "/models/stories260K.gguf";
}

httplib::Client TestServer::Client(int read_timeout_s) const {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(read_timeout_s, 0);
  c.set_write_timeout(60, 0);
  return c;
}

bool WaitForMetric(const TestServer& s, const std::string& line) {
  auto c = s.Client();
  for (int i = 0; i < 3000; ++i) {
    auto m = c.Get("/metrics");
    if (m && m->body.find(line + "\n") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::unique_ptr<TestServer> StartServer(ServerOptions opts) {
  auto ts = std::make_unique<TestServer>();
  if (opts.model_path.empty()) opts.model_path = TinyModelPath();
  opts.host = "127.0.0.1";
  opts.port = 0;
  // Tests leave the user's table cache alone: one that wants a cache names its folder.
  if (opts.cache_dir.empty()) opts.table_cache = false;
  auto s = Server::Create(std::move(opts));
  if (!s.ok()) {
    ADD_FAILURE() << s.status().message();
    return nullptr;
  }
  ts->server = std::move(s).value();
  auto port = ts->server->Start();
  if (!port.ok()) {
    ADD_FAILURE() << port.status().message();
    return nullptr;
  }
  ts->port = *port;
  return ts;
}

std::string ReferenceText(const std::string& prompt, int n_predict, const SamplingParams& s,
                          const std::vector<std::string>& stop) {
  const Model& model = Tiny();
  ThreadPool pool(1);
  Engine engine(model, 0, &pool);
  GenerateParams p;
  p.n_predict = n_predict;
  p.sampling = s;
  EXPECT_TRUE(ParseSpecVariant("none", &p.spec).ok());
  auto r = engine.Generate(model.tokenizer().Encode(prompt, true), p);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return "";
  std::string text = model.tokenizer().Decode(r->tokens);
  size_t best_end = std::string::npos, best_start = 0;
  for (const std::string& st : stop) {
    const size_t at = text.find(st);
    if (at != std::string::npos && at + st.size() < best_end) {
      best_end = at + st.size();
      best_start = at;
    }
  }
  if (best_end != std::string::npos) text.resize(best_start);
  return ToValidUtf8(text);
}

std::vector<nlohmann::json> ParseSse(const std::string& body) {
  std::vector<nlohmann::json> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (event.rfind("data: ", 0) != 0) continue;  // comments (": waiting")
    const std::string data = event.substr(6);
    out.push_back(data == "[DONE]" ? nlohmann::json("[DONE]") : nlohmann::json::parse(data));
  }
  return out;
}

std::string StreamedText(const std::vector<nlohmann::json>& events, bool chat) {
  std::string text;
  for (const nlohmann::json& e : events) {
    if (!e.is_object() || !e.contains("choices") || e["choices"].empty()) continue;
    const nlohmann::json& c = e["choices"][0];
    if (chat) {
      if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
    } else {
      text += c["text"].get<std::string>();
    }
  }
  return text;
}

nlohmann::json StreamedGoose(const std::vector<nlohmann::json>& events) {
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (it->is_object() && it->contains("goose")) return (*it)["goose"];
  }
  return nullptr;
}

int64_t AcceptedDrafts(const nlohmann::json& goose) {
  if (!goose.is_object() || !goose.contains("accepted")) return -1;
  int64_t n = 0;
  for (const auto& [source, count] : goose["accepted"].items()) n += count.get<int64_t>();
  return n;
}

}  // namespace goose::server
