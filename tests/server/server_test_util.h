// Shared by the server tests: a Server on a free loopback port with the tiny model, an HTTP
// client, SSE parsing, and the reference text plain decoding gives (what `goose generate`
// prints; the CLI tests compare against the binary itself).
#pragma once

#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sample/sampler.h"
#include "server/server.h"

namespace goose::server {

std::string TinyModelPath();

// A started, loaded server on 127.0.0.1:<free port>; Shutdown() on destruction.
struct TestServer {
  std::unique_ptr<Server> server;
  int port = 0;
  httplib::Client Client(int read_timeout_s = 120) const;
};
// Polls GET /metrics until `line` (a whole line) appears; false after ~30 s.
bool WaitForMetric(const TestServer& s, const std::string& line);

// Fills model_path and port, turns the table cache off unless opts.cache_dir names one; fails the
// calling test (ADD_FAILURE) if it does not start.
std::unique_ptr<TestServer> StartServer(ServerOptions opts);

// Plain decoding (spec none) of `prompt` encoded with BOS: the text `goose generate` prints
// (made valid UTF-8), cut before the first-ending stop string.
std::string ReferenceText(const std::string& prompt, int n_predict, const SamplingParams& s = {},
                          const std::vector<std::string>& stop = {});

// The JSON payloads of "data: " events, in order ("[DONE]" as the string "[DONE]").
std::vector<nlohmann::json> ParseSse(const std::string& body);
// Concatenated choices[0].text / delta.content of completion or chat chunks.
std::string StreamedText(const std::vector<nlohmann::json>& events, bool chat);
// The "goose" object of a streamed answer (its last chunk's; null if none).
nlohmann::json StreamedGoose(const std::vector<nlohmann::json>& events);

// Draft tokens a response's "goose" object says were accepted, over every source (-1 if it has
// no "accepted" object): equal text alone does not show that speculation happened.
int64_t AcceptedDrafts(const nlohmann::json& goose);

}  // namespace goose::server
